"""Atomic output for every script: a file or directory appears under its name only when complete.

Works on local paths and on anything ``tf.io.gfile`` writes (``gs://...``).
"""

from __future__ import annotations

import contextlib
import os
import uuid
from typing import IO, Iterator, Sequence

import tensorflow as tf


def absolute_path(path: str) -> str:
    """``os.path.abspath`` for local paths; URLs such as ``gs://bucket/x`` are returned unchanged."""
    return path if "://" in path else os.path.abspath(path)


def _remove(path: str) -> None:
    if tf.io.gfile.isdir(path):
        tf.io.gfile.rmtree(path)
    elif tf.io.gfile.exists(path):
        tf.io.gfile.remove(path)


@contextlib.contextmanager
def temporary_path(path: str) -> Iterator[str]:
    """Yields a unique temporary path beside ``path``; renames it to ``path`` if the block succeeds.

    The block writes a file (or a directory) at the yielded path. On an exception what it wrote is
    removed and ``path`` is left untouched. An existing file at ``path`` is replaced; an existing
    directory is not (the rename fails), so callers decide what to do with one.
    """
    directory, name = os.path.split(path)
    tf.io.gfile.makedirs(directory or ".")
    temporary = os.path.join(directory, f".{name}.{uuid.uuid4().hex[:12]}.tmp")
    try:
        yield temporary
        tf.io.gfile.rename(temporary, path, overwrite=not tf.io.gfile.isdir(temporary))
    except BaseException:
        _remove(temporary)
        raise


@contextlib.contextmanager
def atomic_open(path: str, mode: str = "w") -> Iterator[IO]:
    """``tf.io.gfile.GFile`` on a temporary name, renamed to ``path`` if the block succeeds."""
    with temporary_path(path) as temporary:
        with tf.io.gfile.GFile(temporary, mode) as handle:
            yield handle


def atomic_write_text(path: str, text: str) -> None:
    """Writes ``text`` to ``path`` atomically."""
    with atomic_open(path, "w") as handle:
        handle.write(text)


def expand_input_patterns(patterns: str | Sequence[str]) -> list[str]:
    """Files of comma-separated glob patterns (or a list of them), in pattern order (each pattern's
    matches sorted), without repeats or directories.

    Raises FileNotFoundError naming a pattern that matches no file, or when no pattern is given.
    """
    if isinstance(patterns, str):
        patterns = patterns.split(",")
    patterns = [pattern.strip() for pattern in patterns if pattern.strip()]
    if not patterns:
        raise FileNotFoundError("--input_file is empty: give one or more comma-separated file "
                                "patterns")
    files: list[str] = []
    for pattern in patterns:
        try:
            matches = sorted(tf.io.gfile.glob(pattern))
        except tf.errors.OpError as err:
            raise FileNotFoundError(f"input pattern {pattern!r} cannot be listed: "
                                    f"{err.message}") from err
        regular = [path for path in matches if not tf.io.gfile.isdir(path)]
        if not regular:
            hint = " (only directories: give files, e.g. dir/*.txt)" if matches else ""
            raise FileNotFoundError(f"input pattern {pattern!r} matches no file{hint}")
        files.extend(path for path in regular if path not in files)
    return files
