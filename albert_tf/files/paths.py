"""Paths of every command: input glob patterns and checks of output paths before any work.

``expand_input_patterns`` turns comma-separated patterns into files; a wildcard never matches what
is not data (hidden files, the temporaries of albert_tf/files/atomic.py, ``*.stats.json``
summaries). ``check_output_paths`` refuses outputs that would replace an input or another output of
the same run, or that cannot be written, so a run fails in its first seconds rather than after
hours. Works on local paths and on anything ``tf.io.gfile`` handles (``gs://...``).
"""

from __future__ import annotations

import os
import re
from typing import Sequence

import tensorflow as tf

from albert_tf.files.atomic import is_temporary_path

# Suffix of the JSON summary that data tools write beside their data (create_pretraining_data's
# ``<first output>.stats.json``); input globs skip such files.
STATISTICS_SUFFIX = ".stats.json"


_GLOB_MAGIC = re.compile(r"[*?[]")


class OutputPathError(ValueError):
    """An output would replace an input or another output of the same run, or cannot be written."""


def absolute_path(path: str) -> str:
    """``os.path.abspath`` for local paths; URLs such as ``gs://bucket/x`` are returned unchanged."""
    return path if "://" in path else os.path.abspath(path)


def _skipped_by_wildcard(path: str, pattern: str) -> bool:
    """Whether a wildcard match is not data: a hidden file (unless the pattern's last component
    starts with '.', as in the shell), a temporary of ``temporary_path`` or a statistics summary."""
    name = os.path.basename(path)
    hidden = name.startswith(".") and not os.path.basename(pattern).startswith(".")
    return hidden or is_temporary_path(path) or name.endswith(STATISTICS_SUFFIX)


def expand_input_patterns(patterns: str | Sequence[str]) -> list[str]:
    """Files of comma-separated glob patterns (or a list of them), in pattern order (each pattern's
    matches sorted), without repeats or directories.

    A wildcard (``*``, ``?``, ``[...]``) never matches what is not data: hidden files (names starting
    with '.', unless the pattern's last component does), the temporary files of unfinished or killed
    writes (``temporary_path``) and the ``*.stats.json`` summaries written beside data. A path given
    without wildcards is used as it is.

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
        if _GLOB_MAGIC.search(pattern):
            matches = [path for path in matches if not _skipped_by_wildcard(path, pattern)]
        regular = [path for path in matches if not tf.io.gfile.isdir(path)]
        if not regular:
            hint = " (only directories: give files, e.g. dir/*.txt)" if matches else ""
            raise FileNotFoundError(f"input pattern {pattern!r} matches no file{hint}")
        files.extend(path for path in regular if path not in files)
    return files


def _file_identity(path: str) -> tuple:
    """Equal for two spellings of one file: device and inode of an existing local file (through
    symbolic and hard links), else the resolved absolute path; a URL as it is."""
    if "://" in path:
        return ("url", path)
    resolved = os.path.realpath(path)
    try:
        status = os.stat(resolved)
    except OSError:
        return ("path", resolved)
    return ("inode", status.st_dev, status.st_ino)


def _check_writable_location(what: str, path: str) -> None:
    if tf.io.gfile.isdir(path):
        raise OutputPathError(f"{what} {path!r} is a directory: give a file path (e.g. inside it)")
    if "://" in path:  # object stores have no directories a file could stand in the way of
        return
    parent = os.path.dirname(os.path.abspath(path))
    while not os.path.exists(parent):
        parent = os.path.dirname(parent)
    if not os.path.isdir(parent):
        raise OutputPathError(f"{what} {path!r} cannot be created: {parent!r} is a file, not a "
                              "directory")


def check_output_paths(outputs: Sequence[tuple[str, str]],
                       inputs: Sequence[tuple[str, str]] = ()) -> None:
    """Refuses, before any work, outputs that would lose data or cannot be written.

    outputs, inputs: ``(what, path)`` pairs; ``what`` names the path's origin in messages (e.g.
    "--output_file"). Paths are compared as files, so relative and absolute spellings, symbolic and
    hard links of one file are the same.

    Raises OutputPathError when two outputs are one file (the second would replace the first), an
    output is also an input (it would be replaced), an output is an existing directory or its
    directory cannot be created because a file is in the way.
    """
    read = {_file_identity(path): (what, path) for what, path in inputs}
    written: dict[tuple, tuple[str, str]] = {}
    for what, path in outputs:
        identity = _file_identity(path)
        if identity in written:
            first_what, first_path = written[identity]
            raise OutputPathError(f"{what} {path!r} and {first_what} {first_path!r} are the same "
                                  "file: every output of a run must be a different file")
        if identity in read:
            input_what, input_path = read[identity]
            raise OutputPathError(f"{what} {path!r} is also an input ({input_what} "
                                  f"{input_path!r}): writing it would replace that input; choose "
                                  "another output path")
        _check_writable_location(what, path)
        written[identity] = (what, path)
