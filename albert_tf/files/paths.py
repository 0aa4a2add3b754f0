"""Paths of every command: input glob patterns, and what makes two paths one file.

``expand_input_patterns`` turns comma-separated patterns into files; a wildcard never matches what
is not data (hidden files, the temporaries of albert_tf/files/atomic.py, ``*.stats.json``
summaries), and the directories a pattern matches are skipped with a warning. ``path_identity``
compares paths as files: relative and absolute spellings, symbolic and hard links of one file or
directory are the same (what the pre-flight check of every command, albert_tf/files/run_files.py,
compares with). Works on local paths and on anything ``tf.io.gfile`` handles (``gs://...``).
"""

from __future__ import annotations

import os
import re
from typing import Sequence

import tensorflow as tf
from absl import logging

from albert_tf.errors.user_error import MissingFileError, UserError
from albert_tf.files.atomic import is_temporary_path

# Suffix of the JSON summary that data tools write beside their data (create_pretraining_data's
# ``<first output>.stats.json``); input globs skip such files.
STATISTICS_SUFFIX = ".stats.json"


_GLOB_MAGIC = re.compile(r"[*?[]")

# The patterns whose skipped directories were warned about: a command may expand its patterns more
# than once (its pre-flight check, then its work), and says it once.
_DIRECTORIES_WARNED: set[str] = set()


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


def _no_file_hint(directories: list[str], skipped: list[str]) -> str:
    """Why a pattern that matched something gave no file: only directories, or only files that a
    wildcard skips (named, so that "matches no file" is not read as a typo in the pattern)."""
    if skipped:
        shown = ", ".join(os.path.basename(path) for path in skipped[:3])
        more = f" and {len(skipped) - 3} more" if len(skipped) > 3 else ""
        return (f" to read: it matches only {shown}{more}, which a wildcard skips (hidden files, "
                f"temporaries of unfinished writes, {STATISTICS_SUFFIX} summaries); name such a "
                "file without wildcards to read it")
    if directories:
        return " (only directories: give files, e.g. dir/*.txt)"
    return ""


def expand_input_patterns(patterns: str | Sequence[str]) -> list[str]:
    """Files of comma-separated glob patterns (or a list of them), in pattern order (each pattern's
    matches sorted), without repeats or directories.

    A wildcard (``*``, ``?``, ``[...]``) never matches what is not data: hidden files (names starting
    with '.', unless the pattern's last component does), the temporary files of unfinished or killed
    writes (``temporary_path``) and the ``*.stats.json`` summaries written beside data. A path given
    without wildcards is used as it is. Directories a pattern matches are skipped, with a warning
    naming how many and the first (once per pattern); their files are not read.

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
        skipped = []
        if _GLOB_MAGIC.search(pattern):
            skipped = [path for path in matches if _skipped_by_wildcard(path, pattern)]
            matches = [path for path in matches if path not in skipped]
        regular = [path for path in matches if not tf.io.gfile.isdir(path)]
        if not regular:
            raise MissingFileError(f"input pattern {pattern!r} matches no file"
                                   f"{_no_file_hint(matches, skipped)}")
        if len(regular) < len(matches):
            _warn_directories_skipped(pattern, sorted(set(matches) - set(regular)))
        files.extend(path for path in regular if path not in files)
    return files


def _warn_directories_skipped(pattern: str, directories: list[str]) -> None:
    """One warning line per pattern (and process) naming how many directories it matched, which
    are skipped (what they hold is not read), and the first of them."""
    if pattern in _DIRECTORIES_WARNED:
        return
    _DIRECTORIES_WARNED.add(pattern)
    count = "1 directory" if len(directories) == 1 else f"{len(directories)} directories"
    logging.warning("input pattern %r also matches %s (%s%s), skipped: the files in a directory "
                    "are not read; add a pattern for them (e.g. %s) to read them", pattern, count,
                    directories[0], ", ..." if len(directories) > 1 else "",
                    os.path.join(directories[0], "*"))


def path_identity(path: str) -> tuple:
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
