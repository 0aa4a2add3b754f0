"""Writes pretraining records round-robin to TFRecord files that appear only when complete.

Every output is written under a temporary name beside it and renamed when the whole run succeeded;
on an error the temporary files are removed and existing outputs are left untouched. Works on local
paths and on anything tf.io.gfile writes (gs://...).
"""

from __future__ import annotations

import json
import os
import uuid
from typing import Any

import tensorflow as tf


def _temporary_name(path: str) -> str:
    directory, name = os.path.split(path)
    return os.path.join(directory, f".{name}.{uuid.uuid4().hex[:12]}.tmp")


def _remove_quietly(path: str) -> None:
    if tf.io.gfile.exists(path):
        tf.io.gfile.remove(path)


class RoundRobinRecordWriter:
    """Context manager: record k of the run goes to ``output_files[k % len(output_files)]``."""

    def __init__(self, output_files: list[str]):
        if not output_files:
            raise ValueError("no output file given")
        self.output_files = output_files
        self.records_written = 0
        self._temporary = [_temporary_name(path) for path in output_files]
        self._writers: list[tf.io.TFRecordWriter] = []

    def __enter__(self) -> "RoundRobinRecordWriter":
        try:
            for path, temporary in zip(self.output_files, self._temporary):
                try:
                    tf.io.gfile.makedirs(os.path.dirname(temporary) or ".")
                    self._writers.append(tf.io.TFRecordWriter(temporary))
                except tf.errors.OpError as err:
                    raise OSError(f"cannot create output file {path}: {err.message}") from err
        except BaseException:
            self._discard()
            raise
        return self

    def write(self, record: bytes) -> None:
        self._writers[self.records_written % len(self._writers)].write(record)
        self.records_written += 1

    def __exit__(self, exc_type, exc, traceback) -> None:
        if exc_type is not None:
            self._discard()
            return
        for writer in self._writers:
            writer.close()
        for temporary, path in zip(self._temporary, self.output_files):
            tf.io.gfile.rename(temporary, path, overwrite=True)

    def _discard(self) -> None:
        for writer in self._writers:
            writer.close()
        for temporary in self._temporary:
            _remove_quietly(temporary)


def write_json(path: str, value: Any) -> None:
    """Writes ``value`` as indented JSON to ``path`` (temporary name, then rename)."""
    temporary = _temporary_name(path)
    try:
        with tf.io.gfile.GFile(temporary, "w") as handle:
            handle.write(json.dumps(value, indent=2, sort_keys=False) + "\n")
        tf.io.gfile.rename(temporary, path, overwrite=True)
    except BaseException:
        _remove_quietly(temporary)
        raise
