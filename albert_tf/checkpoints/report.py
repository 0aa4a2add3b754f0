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

import dataclasses
from typing import Iterable


class CheckpointMismatchError(ValueError):
    """A checkpoint does not fit the model: a shape differs or variables are missing."""


@dataclasses.dataclass
class LoadReport:
    """What a warm start loaded. Model variables are named by their reference (TF1) names."""

    checkpoint: str
    loaded: dict[str, str]  # model name -> checkpoint name it was read from
    missing: list[str]  # model variables the checkpoint lacks (left as they were)
    unused: list[str]  # checkpoint variables no model variable took
    ignored: int  # optimizer slots and global_step skipped
    kind: str = "reference"  # the checkpoint's format: "reference" (TF1 names) or "albert_tf"

    def missing_encoder(self) -> list[str]:
        """Missing ``bert/...`` variables: an encoder that did not load."""
        return [name for name in self.missing if name.startswith("bert/")]

    def missing_heads(self) -> list[str]:
        """Missing head variables: they keep their random initial values."""
        return [name for name in self.missing if not name.startswith("bert/")]

    def require_complete_encoder(self) -> None:
        """Raises if any encoder variable was not in the checkpoint (never a silent random init)."""
        missing = self.missing_encoder()
        if missing:
            raise CheckpointMismatchError(
                f"Checkpoint {self.checkpoint} lacks {len(missing)} encoder variable(s) of the model, "
                f"e.g. {missing[:3]}; check that --albert_config_file matches the checkpoint "
                "(num_hidden_groups, inner_group_num, embedding_size) or use --init_from_group0.")

    def format(self) -> str:
        """A human-readable summary, printed by the scripts; missing heads get a WARNING line."""
        lines = [f"Loaded {len(self.loaded)} variable(s) from {self.kind} checkpoint "
                 f"{self.checkpoint} ({self.ignored} optimizer slot(s)/global_step ignored)."]
        grown = {k: v for k, v in self.loaded.items() if k != v}
        if grown:
            lines.append(f"  {len(grown)} variable(s) initialised from another group "
                         f"(e.g. {next(iter(grown))} <- {grown[next(iter(grown))]}).")
        lines.append(f"  missing from the checkpoint ({len(self.missing)}): "
                     + (", ".join(self.missing) if self.missing else "none"))
        lines.append(f"  unused checkpoint variables ({len(self.unused)}): "
                     + (", ".join(self.unused) if self.unused else "none"))
        heads = self.missing_heads()
        if heads:
            lines.append(f"WARNING: {len(heads)} head variable(s) are not in {self.checkpoint} and "
                         f"keep their random initial values: {', '.join(heads)}.")
        return "\n".join(lines)


def model_description(config_file: str | None) -> str:
    return f"the model of {config_file}" if config_file else "the model's config"


def shape_mismatch_error(name: str, checkpoint: str, stored: Iterable[int], expected: Iterable[int],
                    config_file: str | None) -> CheckpointMismatchError:
    return CheckpointMismatchError(
        f"Checkpoint {checkpoint} does not fit {model_description(config_file)}: {name} has shape "
        f"{tuple(stored)} in the checkpoint, the model expects {tuple(expected)}. Use the config "
        "the checkpoint was written with.")
