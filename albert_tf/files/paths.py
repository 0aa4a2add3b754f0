"""Paths of every command: input glob patterns and checks of output paths before any work.

``expand_input_patterns`` turns comma-separated patterns into files; a wildcard never matches what
is not data (hidden files, the temporaries of albert_tf/files/atomic.py, ``*.stats.json``
summaries). The checks of outputs run before any work, so a run fails in its first seconds rather
than after hours, and never after it destroyed an input:

- ``check_output_paths``: output files that would replace an input or another output of the same
  run, or cannot be written;
- ``check_outputs_are_not_inputs``: outputs (files or directories) that are one of the inputs;
- ``check_directory_holds_no_input``: inputs lying in an output directory whose files the run
  replaces or deletes (a run's own checkpoint directory);
- ``check_output_directories_apart``: directories written whole (exports) that are one directory or
  nested.

Paths are compared as files: relative and absolute spellings, symbolic and hard links of one file or
directory are the same. Works on local paths and on anything ``tf.io.gfile`` handles (``gs://...``).
"""

from __future__ import annotations

import os
import re
from typing import Sequence

import tensorflow as tf

from albert_tf.errors.user_error import MissingFileError, UserError
from albert_tf.files.atomic import is_temporary_path

# Suffix of the JSON summary that data tools write beside their data (create_pretraining_data's
# ``<first output>.stats.json``); input globs skip such files.
STATISTICS_SUFFIX = ".stats.json"


_GLOB_MAGIC = re.compile(r"[*?[]")


class OutputPathError(UserError, ValueError):
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

    Raises MissingFileError (a FileNotFoundError) naming a pattern that matches no file, or when no
    pattern is given.
    """
    if isinstance(patterns, str):
        patterns = patterns.split(",")
    patterns = [pattern.strip() for pattern in patterns if pattern.strip()]
    if not patterns:
        raise MissingFileError("--input_file is empty: give one or more comma-separated file "
                               "patterns")
    files: list[str] = []
    for pattern in patterns:
        try:
            matches = sorted(tf.io.gfile.glob(pattern))
        except tf.errors.OpError as err:
            raise MissingFileError(f"input pattern {pattern!r} cannot be listed: "
                                   f"{err.message}") from err
        if _GLOB_MAGIC.search(pattern):
            matches = [path for path in matches if not _skipped_by_wildcard(path, pattern)]
        regular = [path for path in matches if not tf.io.gfile.isdir(path)]
        if not regular:
            hint = " (only directories: give files, e.g. dir/*.txt)" if matches else ""
            raise MissingFileError(f"input pattern {pattern!r} matches no file{hint}")
        files.extend(path for path in regular if path not in files)
    return files


def _path_identity(path: str) -> tuple:
    """Equal for two spellings of one file or directory: device and inode of an existing local path
    (through symbolic and hard links), else the resolved absolute path; a URL without a trailing
    '/'."""
    if "://" in path:
        return ("url", path.rstrip("/"))
    resolved = os.path.realpath(path)
    try:
        status = os.stat(resolved)
    except OSError:
        return ("path", resolved)
    return ("inode", status.st_dev, status.st_ino)


def _parent(path: str) -> str:
    """The directory holding ``path`` ("/" is its own parent)."""
    return os.path.dirname(path.rstrip("/") or "/") or "."


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


def check_outputs_are_not_inputs(outputs: Sequence[tuple[str, str]],
                                 inputs: Sequence[tuple[str, str]]) -> None:
    """Refuses, before any work, an output (a file or a directory) that is one of the inputs.

    outputs, inputs: ``(what, path)`` pairs; ``what`` names the path's origin in messages (e.g.
    "--output_file"). Paths are compared as files, so relative and absolute spellings, symbolic and
    hard links of one file or directory are the same. Raises OutputPathError naming both.
    """
    read = {_path_identity(path): (what, path) for what, path in inputs}
    for what, path in outputs:
        if _path_identity(path) in read:
            input_what, input_path = read[_path_identity(path)]
            raise OutputPathError(f"{what} {path!r} is also an input ({input_what} "
                                  f"{input_path!r}): writing it would replace that input; choose "
                                  "another output path")


def check_directory_holds_no_input(directory: tuple[str, str], inputs: Sequence[tuple[str, str]],
                                   consequence: str) -> None:
    """Refuses, before any work, an input file that lies in the output directory ``directory``
    (``(what, path)``, as the inputs), where the run would replace or delete it: OutputPathError
    naming both, followed by ``consequence`` (what the run does there, what to do instead)."""
    what, path = directory
    for input_what, input_path in inputs:
        if _path_identity(_parent(input_path)) == _path_identity(path):
            raise OutputPathError(f"{what} {path!r} holds the input {input_what} {input_path!r}: "
                                  f"{consequence}")


def _check_distinct(outputs: Sequence[tuple[str, str]], noun: str) -> None:
    """Refuses two outputs that are one ``noun`` (the second would replace the first)."""
    seen: dict[tuple, tuple[str, str]] = {}
    for what, path in outputs:
        identity = _path_identity(path)
        if identity in seen:
            first_what, first_path = seen[identity]
            raise OutputPathError(f"{what} {path!r} and {first_what} {first_path!r} are the same "
                                  f"{noun}: every output of a run must be a different {noun}")
        seen[identity] = (what, path)


def check_output_directories_apart(outputs: Sequence[tuple[str, str]]) -> None:
    """Refuses, before any work, directory outputs written whole (exports) that are one directory,
    or one inside another: OutputPathError naming both."""
    _check_distinct(outputs, "directory")
    for what, path in outputs:
        for outer_what, outer_path in outputs:
            if _is_inside(path, outer_path) and (what, path) != (outer_what, outer_path):
                raise OutputPathError(f"{what} {path!r} is inside {outer_what} {outer_path!r}: "
                                      "each is written whole, so neither may hold the other")


def _is_inside(path: str, directory: str) -> bool:
    """Whether ``path`` lies (at any depth) inside ``directory``, both resolved."""
    target = _path_identity(directory)
    current = absolute_path(path)
    while True:
        parent = _parent(current)
        if parent == current or ("://" in parent) != ("://" in current):
            return False
        if _path_identity(parent) == target:
            return True
        current = parent


def check_output_paths(outputs: Sequence[tuple[str, str]],
                       inputs: Sequence[tuple[str, str]] = ()) -> None:
    """Refuses, before any work, output files that would lose data or cannot be written.

    outputs, inputs: ``(what, path)`` pairs, compared as in ``check_outputs_are_not_inputs``.

    Raises OutputPathError when two outputs are one file (the second would replace the first), an
    output is also an input (it would be replaced), an output is an existing directory or its
    directory cannot be created because a file is in the way.
    """
    _check_distinct(outputs, "file")
    check_outputs_are_not_inputs(outputs, inputs)
    for what, path in outputs:
        _check_writable_location(what, path)
