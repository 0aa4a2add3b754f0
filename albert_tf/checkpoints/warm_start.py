"""The warm start every script uses: ``load_checkpoint(model, path)`` from any checkpoint format.

The path may be a prefix, a directory (its latest checkpoint), a SavedModel or a Hugging Face format
directory; the format decides the loader: a reference TF1 checkpoint goes through
albert_tf/checkpoints/tf1_format.py, an albert_tf (object-based) one through
albert_tf/checkpoints/object_format.py, a Hugging Face directory (config.json + model.safetensors)
through albert_tf/checkpoints/hf_format.py. Returns a ``LoadReport`` of
loaded / missing / unused variables (reference names), which the scripts print. A shape mismatch is
a ``CheckpointMismatchError`` raised before any variable changes.
"""

from __future__ import annotations

import keras

from albert_tf.checkpoints.files import is_object_based_checkpoint, resolve_checkpoint_path
from albert_tf.checkpoints.hf_format import is_hf_directory, load_hf_checkpoint
from albert_tf.checkpoints.object_format import load_object_checkpoint
from albert_tf.checkpoints.report import LoadReport
from albert_tf.checkpoints.tf1_format import load_tf1_checkpoint


def load_checkpoint(model: keras.Model, path: str, init_from_group0: bool = False,
                    config_file: str | None = None) -> LoadReport:
    """The warm start: loads a reference TF1 or an albert_tf checkpoint (prefix or directory) or a
    Hugging Face directory into ``model`` and returns the report. Callers print ``report.format()`` and call
    ``report.require_complete_encoder()``: heads may be missing (fine-tuning from pretraining), the
    encoder may not."""
    if is_hf_directory(path):
        return load_hf_checkpoint(model, path, init_from_group0=init_from_group0,
                                  config_file=config_file)
    path = resolve_checkpoint_path(path)
    loader = load_object_checkpoint if is_object_based_checkpoint(path) else load_tf1_checkpoint
    return loader(model, path, init_from_group0=init_from_group0, config_file=config_file)
