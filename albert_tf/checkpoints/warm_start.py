"""TODO(split) Checkpoints: the reference TF1 format (its names <-> Keras variables) and albert_tf's own.

- ``tf1_variable_map(model)``: {reference name: variable} for an encoder or any task model that
  keeps its encoder in ``.albert`` (task heads add their names through ``tf1_head_variables()``).
- ``load_checkpoint(model, path)``: the warm start from either format; returns a ``LoadReport`` of
  loaded / missing / unused variables (reference names), which the scripts print.
  ``load_tf1_checkpoint`` reads a checkpoint written by the reference (or by
  ``export_tf1_checkpoint``): optimizer slots and ``global_step`` are ignored,
  ``layer_normalization`` / ``layer_norm`` spellings of ``LayerNorm`` are accepted.
  ``load_object_checkpoint`` reads one written by ``tf.train.Checkpoint(model=<task model>)``
  (albert_tf's runs, conversions, exports), matching variables through the object graph, so a
  checkpoint of one task warm-starts another.
  Either way a shape mismatch is a ``CheckpointMismatchError`` naming the variable, both shapes, the
  checkpoint and (when given) the config file, raised before any variable changes.
- ``require_same_model(model, path)``: a run's own checkpoint (resume, evaluation) must hold exactly
  the model's variables, with its shapes: a config edited between runs is one clear error;
  ``require_same_optimizer`` checks the same of the optimizer's state before a resume.
- ``export_tf1_checkpoint(model, prefix)``: writes the reference names (no optimizer slots).

The command line that converts a reference checkpoint to an albert_tf checkpoint and back is
``python -m albert_tf.convert_checkpoint`` (see the README).
"""

from __future__ import annotations

import keras

from albert_tf.checkpoints.files import is_object_based_checkpoint, resolve_checkpoint_path
from albert_tf.checkpoints.object_format import load_object_checkpoint
from albert_tf.checkpoints.report import LoadReport
from albert_tf.checkpoints.tf1_format import load_tf1_checkpoint


def load_checkpoint(model: keras.Model, path: str, init_from_group0: bool = False,
                    config_file: str | None = None) -> LoadReport:
    """The warm start: loads a reference TF1 or an albert_tf checkpoint (prefix or directory) into
    ``model`` and returns the report. Callers print ``report.format()`` and call
    ``report.require_complete_encoder()``: heads may be missing (fine-tuning from pretraining), the
    encoder may not."""
    path = resolve_checkpoint_path(path)
    loader = load_object_checkpoint if is_object_based_checkpoint(path) else load_tf1_checkpoint
    return loader(model, path, init_from_group0=init_from_group0, config_file=config_file)
