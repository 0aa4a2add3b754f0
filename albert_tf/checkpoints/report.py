"""What a checkpoint load did, and the error when a checkpoint does not fit the model.

``LoadReport`` lists the variables a warm start loaded, missed and left unused (by their reference
names); the scripts print ``format()``, and ``require_complete_encoder()`` makes a missing encoder
an error (missing heads only warn: fine-tuning starts from a pretraining checkpoint).
``CheckpointMismatchError`` is raised by every loader of albert_tf/checkpoints/ for a shape mismatch
or missing variables, naming the checkpoint and (when known) the config file.
"""

from __future__ import annotations

import dataclasses
from typing import Iterable

from albert_tf.errors.user_error import UserError


# How the encoder's variables begin in each format's names (reference, albert_tf, Hugging Face).
_ENCODER_SCOPES = ("bert/", "model/albert/", "albert.")


class CheckpointMismatchError(UserError, ValueError):
    """A checkpoint does not fit the model: a shape differs or variables are missing."""


@dataclasses.dataclass
class LoadReport:
    """What a warm start loaded. Model variables are named by their reference (TF1) names."""

    checkpoint: str
    loaded: dict[str, str]  # model name -> checkpoint name it was read from
    missing: list[str]  # model variables the checkpoint lacks (left as they were)
    unused: list[str]  # checkpoint variables no model variable took
    ignored: int  # training state skipped: optimizer slots, global_step, the dropout seed
    kind: str = "reference"  # the format: "reference" (TF1 names), "albert_tf", "Hugging Face"

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

    def unused_encoder(self) -> list[str]:
        """Unused checkpoint variables of the encoder (reference ``bert/...``, albert_tf
        ``model/albert/...``, Hugging Face ``albert....``): a checkpoint whose encoder the model
        reads only in part (fewer groups or inner groups, another cross-layer sharing)."""
        return [name for name in self.unused if name.startswith(_ENCODER_SCOPES)]

    def require_same_encoder(self, config_file: str | None = None) -> None:
        """``require_complete_encoder``, and raises if the checkpoint holds encoder variables the
        model has no place for: converting or exporting would silently drop part of the encoder
        (a config of fewer groups reads a checkpoint of more without a missing variable)."""
        self.require_complete_encoder()
        unused = self.unused_encoder()
        if unused:
            raise CheckpointMismatchError(
                f"Checkpoint {self.checkpoint} holds {len(unused)} encoder variable(s) that "
                f"{model_description(config_file)} has no place for, e.g. {unused[:2]}: it was "
                "written with another config (num_hidden_groups, inner_group_num or "
                "cross_layer_sharing); use the config the checkpoint was written with.")

    def format(self) -> str:
        """A human-readable summary, printed by the scripts; missing heads get a WARNING line."""
        lines = [f"Loaded {len(self.loaded)} variable(s) from {self.kind} checkpoint "
                 f"{self.checkpoint} ({self.ignored} training-state value(s) ignored: optimizer "
                 "slots, step, dropout seed)."]
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
