"""Checkpoint files on disk, whatever the format: names, prefixes, the ``checkpoint`` state file.

- ``not_a_checkpoint_message``: why a path names no checkpoint; ``check_data_shards``: a
  checkpoint's data shards are all there; ``is_object_based_checkpoint`` tells albert_tf's own
  format from the reference's TF1 one. (What a path given as a checkpoint names, a run directory
  included: albert_tf/checkpoints/run_directory.py.)
- ``write_checkpoint_state``: points a directory's ``checkpoint`` file at one prefix, atomically.
- ``checkpoint_fingerprint``: which checkpoint a prefix holds, the same after a rename or copy.
- ``list_checkpoints``, ``checkpoint_files``, ``copy_checkpoint``, ``rename_checkpoint``,
  ``remove_checkpoint``: the ``model.ckpt-<step>`` checkpoints of a run and their files, moved in an
  order (index last on arrival, first on removal) so a reader never sees an index without its data.
  The trainer and the evaluation sweep (albert_tf/evaluation/checkpoint_sweep.py) use them.
"""

from __future__ import annotations

import hashlib
import os
import re

import tensorflow as tf
from google.protobuf import text_encoding

from albert_tf.errors.user_error import MissingFileError
from albert_tf.files.atomic import atomic_write_text

TF2_CHECKPOINT_NAME = "model.ckpt"
BEST_CHECKPOINT_NAME = TF2_CHECKPOINT_NAME + "-best"  # the checkpoint a run's sweep chose
CHECKPOINT_STATE_FILE = "checkpoint"  # names the latest checkpoint of a directory
SAVED_MODEL_FILE = "saved_model.pb"
SAVED_MODEL_VARIABLES = ("variables", "variables")  # the checkpoint prefix inside a SavedModel


def not_a_checkpoint_message(path: str) -> str:
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


_STEP_PATTERN = re.compile(re.escape(TF2_CHECKPOINT_NAME) + r"-(\d+)$")


def checkpoint_step(prefix: str) -> int | None:
    """The step of a prefix named ``model.ckpt-<step>``; None for any other name (the best)."""
    match = _STEP_PATTERN.search(os.path.basename(prefix))
    return int(match.group(1)) if match else None


def list_checkpoints(directory: str) -> list[tuple[int, str]]:
    """[(step, prefix)] of ``model.ckpt-<step>`` in ``directory``, ascending; best excluded."""
    prefixes = [path[:-len(".index")] for path in
                tf.io.gfile.glob(os.path.join(directory, TF2_CHECKPOINT_NAME + "-*.index"))]
    return sorted((checkpoint_step(prefix), prefix) for prefix in prefixes
                  if checkpoint_step(prefix) is not None)


def checkpoint_fingerprint(prefix: str) -> str:
    """A digest of the checkpoint ``prefix`` (hex): its index file, which holds the checksum of
    every tensor's bytes, and the size of each data shard. Reading the index alone keeps it cheap
    for checkpoints of gigabytes; a rename or a copy keeps it."""
    digest = hashlib.sha256()
    with tf.io.gfile.GFile(prefix + ".index", "rb") as handle:
        digest.update(handle.read())
    for path in checkpoint_files(prefix)[:-1]:
        digest.update(f"{path[len(prefix):]}:{tf.io.gfile.stat(path).length};".encode())
    return digest.hexdigest()


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
