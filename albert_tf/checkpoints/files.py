"""Checkpoint files on disk, whatever the format: names, prefixes, the ``checkpoint`` state file.

- ``resolve_checkpoint_path``: a prefix from a prefix, a directory of checkpoints (its latest) or a
  SavedModel directory (its ``variables/variables``), its index and data shards present
  (``check_data_shards``); ``is_object_based_checkpoint`` tells albert_tf's own format from the
  reference's TF1 one.
- ``write_checkpoint_state``: points a directory's ``checkpoint`` file at one prefix, atomically.
- ``list_checkpoints``, ``checkpoint_files``, ``copy_checkpoint``, ``rename_checkpoint``,
  ``remove_checkpoint``: the ``model.ckpt-<step>`` checkpoints of a run and their files, moved in an
  order (index last on arrival, first on removal) so a reader never sees an index without its data.
  The trainer and the evaluation sweep (albert_tf/evaluation/checkpoint_sweep.py) use them.
"""

from __future__ import annotations

import os
import re

import tensorflow as tf
from google.protobuf import text_encoding

from albert_tf.errors.user_error import MissingFileError
from albert_tf.files.atomic import atomic_write_text

TF2_CHECKPOINT_NAME = "model.ckpt"
CHECKPOINT_STATE_FILE = "checkpoint"  # names the latest checkpoint of a directory
SAVED_MODEL_FILE = "saved_model.pb"
SAVED_MODEL_VARIABLES = ("variables", "variables")  # the checkpoint prefix inside a SavedModel


def resolve_checkpoint_path(path: str) -> str:
    """A checkpoint prefix from a prefix, a directory of checkpoints (its latest) or a SavedModel
    directory; FileNotFoundError naming the path otherwise. It looks at names only (the index
    file): ``check_data_shards`` checks the data before a checkpoint is read.

    A SavedModel's ``variables/variables`` is an object-based checkpoint rooted at the exported
    module: albert_tf's exports keep their task model in the attribute ``model``, so it reads like
    a checkpoint of ``tf.train.Checkpoint(model=...)``.
    """
    if tf.io.gfile.isdir(path):
        if tf.io.gfile.exists(os.path.join(path, SAVED_MODEL_FILE)):
            prefix = os.path.join(path, *SAVED_MODEL_VARIABLES)
        else:
            prefix = tf.train.latest_checkpoint(path)
            if prefix is None:
                raise MissingFileError(f"No checkpoint found in directory {path}.")
    else:
        prefix = path
    if not tf.io.gfile.exists(prefix + ".index"):
        raise MissingFileError(_not_a_checkpoint_message(prefix))
    return prefix


def _not_a_checkpoint_message(path: str) -> str:
    """Why ``path`` names no checkpoint. A file of a checkpoint (its ``.index``, a data shard or a
    TF1 ``.meta`` graph) is the likeliest mistake: the message gives the prefix; any other existing
    file is named as such (not "does not exist", which the user can see is false)."""
    stem = _CHECKPOINT_FILE_SUFFIX.sub("", path)
    if stem != path and tf.io.gfile.exists(stem + ".index"):
        return (f"{path} is a file of the checkpoint {stem}: a checkpoint is named by its prefix, "
                f"without .index, .data-* or .meta: give {stem}")
    if tf.io.gfile.exists(path):
        return (f"{path} is not a checkpoint: there is no {os.path.basename(path)}.index beside it "
                "(a checkpoint is named by its prefix, e.g. <output_dir>/model.ckpt-best, or by "
                "its directory)")
    return f"{path} does not exist (no .index file with this prefix)"


# The suffix of a checkpoint's own files, which a user may give instead of its prefix.
_CHECKPOINT_FILE_SUFFIX = re.compile(r"\.(index|meta|data-\d+-of-\d+)$")
_SHARD_PATTERN = re.compile(r"\.data-(\d+)-of-(\d+)$")


def check_data_shards(prefix: str) -> None:
    """MissingFileError naming the first data shard of checkpoint ``prefix`` that is missing
    (``<prefix>.data-<i>-of-<n>``, ``i`` from 0 to n-1, n read from the shards present): a
    checkpoint copied without its data, which TensorFlow reports only when a variable is read."""
    numbers, counts = set(), set()
    for name in tf.io.gfile.glob(prefix + ".data-*"):
        match = _SHARD_PATTERN.search(name)
        if match:
            numbers.add(int(match.group(1)))
            counts.add(int(match.group(2)))
    if not counts:
        raise MissingFileError(f"{prefix}: the checkpoint has its .index but no .data-* shard (an "
                               "incomplete copy or download?); copy its data shards beside it")
    total = max(counts)
    missing = sorted(set(range(total)) - numbers)
    if missing:
        raise MissingFileError(f"{prefix}.data-{missing[0]:05d}-of-{total:05d} does not exist: the "
                               f"checkpoint has {total - len(missing)} of its {total} data shards "
                               "(an incomplete copy or download?)")


def is_object_based_checkpoint(path: str) -> bool:
    """True for checkpoints written by tf.train.Checkpoint (albert_tf's own runs)."""
    names = tf.train.load_checkpoint(path).get_variable_to_shape_map()
    return any("/.ATTRIBUTES/" in name for name in names)


def write_checkpoint_state(directory: str, name: str) -> None:
    """Points ``directory``'s ``checkpoint`` state file at the prefix ``name`` alone, atomically.
    ``name`` is relative to ``directory``, so that the directory can be moved."""
    entry = f'"{text_encoding.CEscape(name, as_utf8=True)}"'  # a text-format protobuf string
    atomic_write_text(os.path.join(directory, CHECKPOINT_STATE_FILE),
                      f"model_checkpoint_path: {entry}\nall_model_checkpoint_paths: {entry}\n")


_STEP_PATTERN = re.compile(re.escape(TF2_CHECKPOINT_NAME) + r"-(\d+)\.index$")


def list_checkpoints(directory: str) -> list[tuple[int, str]]:
    """[(step, prefix)] of ``model.ckpt-<step>`` in ``directory``, ascending; best excluded."""
    found = []
    for path in tf.io.gfile.glob(os.path.join(directory, TF2_CHECKPOINT_NAME + "-*.index")):
        match = _STEP_PATTERN.search(os.path.basename(path))
        if match:
            found.append((int(match.group(1)), path[:-len(".index")]))
    return sorted(found)


def checkpoint_files(prefix: str) -> list[str]:
    """The files of one checkpoint: its data shards, then the index (written/renamed last)."""
    return sorted(tf.io.gfile.glob(prefix + ".data-*")) + [prefix + ".index"]


def copy_checkpoint(source_prefix: str, target_prefix: str) -> None:
    """Copies a checkpoint's files; each lands under a temporary name first, the index last."""
    for path in checkpoint_files(source_prefix):
        target = target_prefix + path[len(source_prefix):]
        tf.io.gfile.copy(path, target + ".tmp", overwrite=True)
        tf.io.gfile.rename(target + ".tmp", target, overwrite=True)


def rename_checkpoint(source_prefix: str, target_prefix: str) -> None:
    """Renames a checkpoint's files (index last, so a reader never sees an index without data)."""
    for path in checkpoint_files(source_prefix):
        tf.io.gfile.rename(path, target_prefix + path[len(source_prefix):], overwrite=True)


def remove_checkpoint(prefix: str) -> None:
    """Deletes a checkpoint's files (index first, so it disappears from listings at once)."""
    for path in reversed(checkpoint_files(prefix)):
        if tf.io.gfile.exists(path):
            tf.io.gfile.remove(path)
