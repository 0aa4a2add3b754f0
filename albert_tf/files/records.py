"""Reading TFRecord files, with the checks that turn TensorFlow's silent or nameless failures into
errors naming the file.

- ``tfrecord_dataset``: the serialized records of files in order, each file remembered.
- ``require_records``: a file with no record (which a repeated dataset would search forever) or
  fewer records than one batch that drops its remainder is a ``RecordFileError`` naming the file.
- ``require_parsable``: the first records of a file must parse with its pipeline's parse
  function (records of another ``--max_seq_length`` or of another task do not): a
  ``RecordFileError`` naming the file and the record, before any work.
- ``reading_records`` (around the loops that iterate the pipelines) and ``record_file_error``:
  TensorFlow reports a corrupt record, or a record the parse function refuses, inside a training
  or prediction step without a file name; the remembered files are re-read to find it, and the
  error becomes a ``RecordFileError`` naming the file (the error boundary,
  albert_tf/cli/error_boundary.py, does the same for a corrupt record met elsewhere).

The pipelines built on these are in albert_tf/training/input_pipeline.py.
"""

from __future__ import annotations

import contextlib
import re
from typing import Callable, Iterator, Sequence

import tensorflow as tf

from albert_tf.errors.user_error import UserError

# TFRecordDataset's default read buffer, given explicitly: TensorFlow logs an unspecified one.
READ_BUFFER_BYTES = 256 * 1024

# serialized records [B] -> feature dict with a leading B (a pipeline's parse function).
ParseFn = Callable[[tf.Tensor], dict[str, tf.Tensor]]

# The record files the pipelines of this process read, in order, each with the parse function of
# its pipeline (None where the pipeline gave none).
_FILES_READ: dict[str, ParseFn | None] = {}
_RECORD_OFFSET = re.compile(r"(?:corrupted|truncated) record at (\d+)")
# TensorFlow's error when a parse op refuses a record: the node is named in the message.
_PARSE_ERROR = re.compile(r"\{\{node [^}]*Parse\w*Example|\[Op:Parse\w*Example|"
                          r"Could not parse example input|Can't parse serialized Example")
# The reason in such a message: "Name: <unknown>, Key: input_ids, Index: 3.  Number of ...".
_PARSE_REASON = re.compile(r"(?:Name: [^,\n]*, )?((?:Key|Feature): [^\n]*?|Could not parse example "
                           r"input[^\n]*?)\s*(?:\[\[|\[Op:|\n|$)")
_BATCH_INDEX = re.compile(r"Index: (\d+)\.\s*")
# Records parsed at once when a file is searched for the one its parse function refuses.
_SEARCH_BATCH = 256


class RecordFileError(UserError, ValueError):
    """A TFRecord file cannot be read, or holds fewer records than the run needs."""


def remember_record_files(paths: Sequence[str], parse: ParseFn | None = None) -> None:
    """Notes files a pipeline reads, and its ``parse`` function, for ``record_file_error`` (the
    files of the latest pipeline come last)."""
    for path in paths:
        known = _FILES_READ.pop(path, None)
        _FILES_READ[path] = parse if parse is not None else known


def without_autotuning(dataset: tf.data.Dataset) -> tf.data.Dataset:
    """``dataset`` with tf.data's autotuning off, as every dataset albert_tf reads.

    With autotuning on, deleting an iterator waits for the autotuning thread's next tick, and the
    ticks come at 0.01, 0.03, .., 20.47, 40.95 s (periods doubling up to 60 s) after the iterator
    was made. Every evaluation pass and training run ends by deleting its iterator, and the
    iterator of a file check (``read_first_records``) may be deleted by Python's garbage collector
    in the middle of a later pass: an SST-2 dev pass of 24 s took 41.0 s. Our pipelines read,
    parse and batch cheaply next to the model step, so fixed parallelism (a map's AUTOTUNE then
    means one call per core) and the prefetch buffer's own sizing lose nothing.
    """
    options = tf.data.Options()
    options.autotune.enabled = False
    return dataset.with_options(options)


def tfrecord_dataset(paths: str | Sequence[str],
                     parse: ParseFn | None = None) -> tf.data.Dataset:
    """The serialized records of ``paths`` in order (files remembered with the ``parse`` function
    the pipeline applies to them, see the module doc)."""
    paths = [paths] if isinstance(paths, str) else list(paths)
    remember_record_files(paths, parse)
    return file_records(paths)


def file_records(paths: str | tf.Tensor | Sequence[str]) -> tf.data.Dataset:
    """The serialized records of ``paths`` in order, read with ``READ_BUFFER_BYTES``, without
    autotuning; no file is remembered (``tfrecord_dataset`` does that): also the reader of one
    file name (a string tensor) inside an interleave, whose caller remembers the files."""
    return without_autotuning(tf.data.TFRecordDataset(paths, buffer_size=READ_BUFFER_BYTES))


def read_first_records(path: str, count: int) -> list[bytes]:
    """Up to ``count`` serialized records from the start of ``path`` (fewer if it has fewer).

    Raises RecordFileError naming the file when it is missing or not a readable TFRecord file.
    """
    try:
        return [record.numpy() for record in file_records(path).take(count)]
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
        # A file of fewer bytes than a record's 12-byte header reads as no record at all.
        empty = all(tf.io.gfile.stat(path).length == 0 for path in paths)
        raise RecordFileError(f"{files}: no record (" + ("an empty file" if empty else
                              "too short to be a TFRecord file") + "); recreate the data or "
                              "leave it out of the input")
    raise RecordFileError(f"{files}: {found} record(s), fewer than one batch of {count}; give more "
                          "data or a smaller batch size")


def require_parsable(path: str, parse: ParseFn, count: int = 1) -> None:
    """Raises RecordFileError naming ``path`` and the record when one of its first ``count``
    records does not parse with ``parse`` (records of another length or of another task)."""
    refused = _first_refused_record(path, parse, limit=count)
    if refused is not None:
        raise RecordFileError(_parse_error_message(path, *refused))


def is_record_parse_error(error: BaseException) -> bool:
    """Whether ``error`` is TensorFlow's error for a record that a parse op refuses."""
    return (isinstance(error, tf.errors.InvalidArgumentError)
            and _PARSE_ERROR.search(error.message) is not None)


def record_file_error(error: BaseException) -> RecordFileError | None:
    """The RecordFileError naming the record file that caused TensorFlow's ``error``, met while
    iterating a pipeline of the remembered files: a corrupt record (DataLossError) or one that the
    pipeline's parse function refuses (InvalidArgumentError of a parse op). None for any other
    error, or a corrupt record no remembered file holds. The culprit is found by reading the files
    again: a corrupt record's offset, or the first record the file's parse function refuses (the
    files of the latest pipeline are searched first)."""
    if isinstance(error, tf.errors.DataLossError):
        located = locate_corrupt_record_file(error.message)
        if located is None:
            return None
        path, reason = located
        return RecordFileError(f"{path}: {reason}: the TFRecord file is truncated or corrupt; "
                               "recreate it or leave it out of the input")
    if not is_record_parse_error(error):
        return None
    for path, parse in reversed(_FILES_READ.items()):  # the latest pipeline's files first
        refused = None if parse is None else _first_refused_record(path, parse)
        if refused is not None:
            return RecordFileError(_parse_error_message(path, *refused))
    files = list(_FILES_READ)[-3:]
    named = ", ".join(files) + (f" (of {len(_FILES_READ)} files)" if len(_FILES_READ) > 3 else "")
    return RecordFileError(f"a record of {named or 'the input files'}: "
                           f"{_parse_reason(error.message)}: {_PARSE_ADVICE}")


@contextlib.contextmanager
def reading_records() -> Iterator[None]:
    """Within the block (a loop over pipelines of the remembered files), the TensorFlow errors that
    a record file causes are RecordFileErrors naming the file (``record_file_error``)."""
    try:
        yield
    except (tf.errors.DataLossError, tf.errors.InvalidArgumentError) as error:
        located = record_file_error(error)
        if located is None:
            raise
        raise located from error


_PARSE_ADVICE = ("the records do not fit this run (written with another --max_seq_length, "
                 "--max_predictions_per_seq or for another task?); recreate them with this run's "
                 "settings or give the settings they were written with")


def _parse_reason(message: str) -> str:
    """The parse op's reason in TensorFlow's ``message``, without the record's place in a batch."""
    match = _PARSE_REASON.search(message)
    reason = match.group(1) if match else message.strip().splitlines()[0]
    return re.sub(r"\s{2,}", " ", _BATCH_INDEX.sub("", reason)).strip().rstrip(".")


def _parse_error_message(path: str, number: int, reason: str) -> str:
    return f"{path}, record {number}: {reason}: {_PARSE_ADVICE}"


def _first_refused_record(path: str, parse: ParseFn,
                          limit: int | None = None) -> tuple[int, str] | None:
    """(record number, from 1; the parse op's reason) of the first record of ``path`` (of its
    first ``limit``) that ``parse`` refuses; None when they all parse or the file cannot be read
    (other checks report that)."""
    records = file_records(path) if limit is None else file_records(path).take(limit)
    first = 1
    try:
        for batch in records.batch(_SEARCH_BATCH):
            try:
                parse(batch)
            except tf.errors.InvalidArgumentError as error:  # the parse function refuses it
                index = _BATCH_INDEX.search(error.message)
                return first + (int(index.group(1)) if index else 0), _parse_reason(error.message)
            first += int(tf.shape(batch)[0])
    except tf.errors.OpError:
        return None
    return None


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
            file_records(path).reduce(0, lambda count, _: count + 1)
        except tf.errors.DataLossError as error:
            if match.group(0) in error.message:
                return path, match.group(0)
        except tf.errors.OpError:  # gone or unreadable since: not the file that failed
            continue
    return None
