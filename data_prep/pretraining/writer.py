"""Writes pretraining records round-robin to TFRecord files that appear only when complete.

Every output is written under a temporary name beside it and renamed when the whole run succeeded;
on an error the temporary files are removed and existing outputs are left untouched. Works on local
paths and on anything tf.io.gfile writes (gs://...).
"""

from __future__ import annotations

import contextlib
import json
from typing import Any

import tensorflow as tf

from albert_tf.errors.user_error import UserFileError
from albert_tf.files.atomic import atomic_write_text, temporary_path
from albert_tf.files.run_files import Output, RunFiles, check_run_files


class RoundRobinRecordWriter:
    """Context manager: record k of the run goes to ``output_files[k % len(output_files)]``."""

    def __init__(self, output_files: list[str]):
        if not output_files:
            raise ValueError("no output file given")
        # Two writers renamed to one path would keep only the second's records.
        check_run_files(RunFiles(outputs=tuple(Output("output file", path)
                                               for path in output_files)))
        self.output_files = output_files
        self.records_written = 0
        self._writers: list[tf.io.TFRecordWriter] = []
        self._stack = contextlib.ExitStack()

    def __enter__(self) -> "RoundRobinRecordWriter":
        with self._stack as stack:
            for path in self.output_files:
                temporary = stack.enter_context(temporary_path(path))
                try:
                    writer = tf.io.TFRecordWriter(temporary)
                except tf.errors.OpError as err:
                    raise UserFileError(f"cannot create output file {path}: {err.message}") from err
                # Registered after the rename callback, so each writer closes before its rename.
                self._writers.append(stack.enter_context(writer))
            self._stack = stack.pop_all()
        return self

    def write(self, record: bytes) -> None:
        self._writers[self.records_written % len(self._writers)].write(record)
        self.records_written += 1

    def __exit__(self, exc_type, exc, traceback) -> bool | None:
        return self._stack.__exit__(exc_type, exc, traceback)


def write_json(path: str, value: Any) -> None:
    """Writes ``value`` as ``summary_json`` to ``path`` (temporary name, then rename)."""
    atomic_write_text(path, summary_json(value))


def summary_json(value: Any) -> str:
    """The statistics file's text: indented JSON, keys in insertion order."""
    return json.dumps(value, indent=2, sort_keys=False) + "\n"
