"""Reading TFRecord files, with the checks that turn TensorFlow's silent or nameless failures into
errors naming the file.

- ``tfrecord_dataset``: the serialized records of files in order, each file remembered.
- ``require_records``: a file with no record (which a repeated dataset would search forever) or
  fewer records than one batch that drops its remainder is a ``RecordFileError`` naming the file.
- ``locate_corrupt_record_file``: TensorFlow reports a corrupt record inside a training step
  without a file name; the remembered files are re-read to find it (used by the error boundary,
  albert_tf/cli/error_boundary.py).

The pipelines built on these are in albert_tf/training/input_pipeline.py.
"""

from __future__ import annotations

import re
from typing import Sequence

import tensorflow as tf

# TFRecordDataset's default read buffer, given explicitly: TensorFlow logs an unspecified one.
READ_BUFFER_BYTES = 256 * 1024

# The record files the pipelines of this process read, in order (a dict used as an ordered set).
_FILES_READ: dict[str, None] = {}
_RECORD_OFFSET = re.compile(r"(?:corrupted|truncated) record at (\d+)")


class RecordFileError(ValueError):
    """A TFRecord file cannot be read, or holds fewer records than the run needs."""


def remember_record_files(paths: Sequence[str]) -> None:
    """Notes files a pipeline reads, for ``locate_corrupt_record_file``."""
    _FILES_READ.update(dict.fromkeys(paths))


def tfrecord_dataset(paths: str | Sequence[str]) -> tf.data.TFRecordDataset:
    """The serialized records of ``paths`` in order (files remembered, see the module doc)."""
    paths = [paths] if isinstance(paths, str) else list(paths)
    remember_record_files(paths)
    return _records(paths)


def _records(paths: str | Sequence[str]) -> tf.data.TFRecordDataset:
    return tf.data.TFRecordDataset(paths, buffer_size=READ_BUFFER_BYTES)


def read_first_records(path: str, count: int) -> list[bytes]:
    """Up to ``count`` serialized records from the start of ``path`` (fewer if it has fewer).

    Raises RecordFileError naming the file when it is missing or not a readable TFRecord file.
    """
    try:
        return [record.numpy() for record in _records(path).take(count)]
    except tf.errors.NotFoundError:
        raise RecordFileError(f"{path} does not exist") from None
    except tf.errors.DataLossError as error:
        reason = _RECORD_OFFSET.search(error.message)
        raise RecordFileError(f"{path} cannot be read as a TFRecord file"
                              + (f": {reason.group(0)}" if reason else "")) from None


def require_records(paths: Sequence[str], count: int) -> None:
    """Raises RecordFileError naming the files unless together they hold ``count`` records or more.

    Reads the files in order and stops as soon as ``count`` records were seen. ``count`` is 1 for a
    repeated (training) dataset, the batch size for one that drops an incomplete batch.
    """
    if not paths:
        raise RecordFileError("no input file was given")
    found = 0
    for path in paths:
        found += len(read_first_records(path, count - found))
        if found >= count:
            return
    files = paths[0] if len(paths) == 1 else f"the {len(paths)} files {', '.join(paths)}"
    if found == 0:
        raise RecordFileError(f"{files}: no record (an empty TFRecord file); recreate the data or "
                              "leave it out of the input")
    raise RecordFileError(f"{files}: {found} record(s), fewer than one batch of {count}; give more "
                          "data or a smaller batch size")


def locate_corrupt_record_file(message: str) -> tuple[str, str] | None:
    """(file, reason) of the remembered record file that raised TensorFlow's DataLossError
    ``message``, or None when none did.

    The message names no file, only "<corrupted|truncated> record at <offset>": the culprit is the
    file that, read to its end, fails with that same reason. Only files longer than the offset are
    read, in the order the pipelines met them.
    """
    match = _RECORD_OFFSET.search(message)
    if match is None:
        return None
    for path in _FILES_READ:
        try:
            if tf.io.gfile.stat(path).length <= int(match.group(1)):
                continue
            _records(path).reduce(0, lambda count, _: count + 1)
        except tf.errors.DataLossError as error:
            if match.group(0) in error.message:
                return path, match.group(0)
        except tf.errors.OpError:  # gone or unreadable since: not the file that failed
            continue
    return None
