"""File paths for every script: atomic outputs, input glob patterns and checks of output paths.

An output appears under its name only when complete; until then it lives under a temporary name
beside it (``.<name>.<machine>-<pid>-<random>.tmp``) that input globs never pick up. Works on local
paths and on anything ``tf.io.gfile`` handles (``gs://...``).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import socket
import uuid
from typing import IO, Iterator, Sequence

import tensorflow as tf
from absl import logging

# Suffix of the JSON summary that data tools write beside their data (create_pretraining_data's
# ``<first output>.stats.json``); input globs skip such files.
STATISTICS_SUFFIX = ".stats.json"

# Which machine wrote a temporary file: processes of other machines cannot be checked for life.
_MACHINE_ID = hashlib.sha256(socket.gethostname().encode()).hexdigest()[:8]
_TEMPORARY_NAME = re.compile(
    r"^\.(?P<target>.+)\.(?P<machine>[0-9a-f]{8})-(?P<pid>[0-9]+)-[0-9a-f]{8}\.tmp$")
_GLOB_MAGIC = re.compile(r"[*?[]")


class OutputPathError(ValueError):
    """An output would replace an input or another output of the same run, or cannot be written."""


def absolute_path(path: str) -> str:
    """``os.path.abspath`` for local paths; URLs such as ``gs://bucket/x`` are returned unchanged."""
    return path if "://" in path else os.path.abspath(path)


def is_temporary_path(path: str) -> bool:
    """Whether ``path`` is a temporary file or directory of ``temporary_path`` (finished or not)."""
    return _TEMPORARY_NAME.match(os.path.basename(path)) is not None


def _remove(path: str) -> None:
    if tf.io.gfile.isdir(path):
        tf.io.gfile.rmtree(path)
    elif tf.io.gfile.exists(path):
        tf.io.gfile.remove(path)


def _process_exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # a process of another user
        return True
    return True


def _remove_stale_temporaries(path: str) -> None:
    """Removes the temporaries of ``path`` left by a killed run of this machine (its process is gone).

    A temporary of a live process (another run writing the same output now) or of another machine
    is left in place, with a warning: it is never read, and its owner may still rename it.
    """
    directory, name = os.path.split(path)
    for entry in tf.io.gfile.listdir(directory or "."):
        match = _TEMPORARY_NAME.match(entry.rstrip("/"))
        if match is None or match["target"] != name:
            continue
        temporary = os.path.join(directory, entry.rstrip("/"))
        if match["machine"] == _MACHINE_ID and not _process_exists(int(match["pid"])):
            logging.info("removing %s, left by an earlier run that was killed", temporary)
            _remove(temporary)
        else:
            logging.warning("%s belongs to process %s%s, which may still be writing %s; if no run "
                            "is, delete it", temporary, match["pid"],
                            "" if match["machine"] == _MACHINE_ID else " of another machine", path)


@contextlib.contextmanager
def temporary_path(path: str) -> Iterator[str]:
    """Yields a unique temporary path beside ``path``; renames it to ``path`` if the block succeeds.

    The block writes a file (or a directory) at the yielded path. On an exception what it wrote is
    removed and ``path`` is left untouched. An existing file at ``path`` is replaced; an existing
    directory is not (the rename fails), so callers decide what to do with one. Temporaries of
    ``path`` left by an earlier run of this machine that was killed are removed first.
    """
    directory, name = os.path.split(path)
    tf.io.gfile.makedirs(directory or ".")
    _remove_stale_temporaries(path)
    temporary = os.path.join(directory,
                             f".{name}.{_MACHINE_ID}-{os.getpid()}-{uuid.uuid4().hex[:8]}.tmp")
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
