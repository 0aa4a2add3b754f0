"""The warm start every script uses: a checkpoint named by the user, resolved once into a typed
``CheckpointSource``, then ``load_checkpoint(model, source)``.

``resolve_checkpoint_source`` decides what a path names (a reference TF1 checkpoint, an albert_tf
one, or a Hugging Face format directory; a prefix, a directory of checkpoints (its latest) or a
SavedModel) before any work, so a path that names nothing is an error in the first seconds, never
a silent random initialisation. ``load_checkpoint`` loads the source into a model through the
loader of its format: albert_tf/checkpoints/tf1_format.py, albert_tf/checkpoints/object_format.py
or albert_tf/checkpoints/hf_format.py. It returns a ``LoadReport`` of loaded / missing / unused
variables (reference names), which the scripts print. A shape mismatch is a
``CheckpointMismatchError`` raised before any variable changes.
"""

from __future__ import annotations

import dataclasses
import functools

import keras
import tensorflow as tf

from albert_tf.checkpoints.files import is_object_based_checkpoint
from albert_tf.checkpoints.run_directory import resolve_checkpoint_path
from albert_tf.checkpoints.hf_format import is_hf_directory, load_hf_checkpoint
from albert_tf.checkpoints.object_format import load_object_checkpoint
from albert_tf.checkpoints.report import LoadReport
from albert_tf.checkpoints.tf1_format import load_tf1_checkpoint
from albert_tf.errors.user_error import UserError

TF1 = "reference TF1"
ALBERT_TF = "albert_tf"
HUGGING_FACE = "Hugging Face"


class UnreadableCheckpointError(UserError, ValueError):
    """A checkpoint's index cannot be read (truncated, or not a checkpoint)."""


def unreadable_checkpoint(prefix: str, error: Exception) -> UnreadableCheckpointError:
    """The error for the checkpoint ``prefix`` whose reading raised ``error`` (TensorFlow's
    OpError, or the RuntimeError of its checkpoint reader)."""
    reason = error.message if isinstance(error, tf.errors.OpError) else str(error)
    return UnreadableCheckpointError(f"{prefix}: not a readable checkpoint ({reason}); give the "
                                     "prefix of a complete one")


@dataclasses.dataclass(frozen=True)
class CheckpointSource:
    """A checkpoint to warm-start from, resolved: ``given`` as the user wrote it, ``path`` what the
    loader reads (a checkpoint prefix, or the Hugging Face directory). ``kind``, its format
    (``TF1``, ``ALBERT_TF`` or ``HUGGING_FACE``), is read from the checkpoint when first needed,
    so a run's pre-flight check of its paths comes before anything reads the checkpoint."""

    given: str
    path: str
    hugging_face: bool = False

    @functools.cached_property
    def kind(self) -> str:
        """The format; UnreadableCheckpointError naming the checkpoint when its index cannot be
        read."""
        if self.hugging_face:
            return HUGGING_FACE
        try:
            return ALBERT_TF if is_object_based_checkpoint(self.path) else TF1
        except (tf.errors.OpError, RuntimeError) as error:
            raise unreadable_checkpoint(self.path, error) from None

    def __str__(self) -> str:
        return f"{self.kind} checkpoint {self.path}"


def resolve_checkpoint_source(path: str) -> CheckpointSource:
    """What ``path`` names: a Hugging Face directory, else the checkpoint prefix of a prefix, a
    run directory (its best checkpoint, else its last trained one) or a SavedModel. FileNotFoundError (a UserError) naming
    the path when it names no checkpoint."""
    if is_hf_directory(path):
        return CheckpointSource(path, path, hugging_face=True)
    return CheckpointSource(path, resolve_checkpoint_path(path))


def load_checkpoint(model: keras.Model, source: CheckpointSource, init_from_group0: bool = False,
                    config_file: str | None = None) -> LoadReport:
    """The warm start: loads ``source`` into ``model`` and returns the report. Callers print
    ``report.format()`` and call ``report.require_complete_encoder()``: heads may be missing
    (fine-tuning from pretraining), the encoder may not."""
    loader = {HUGGING_FACE: load_hf_checkpoint, ALBERT_TF: load_object_checkpoint,
              TF1: load_tf1_checkpoint}[source.kind]
    return loader(model, source.path, init_from_group0=init_from_group0, config_file=config_file)
