"""Atomic outputs: a file or directory appears under its name only when complete.

Until then it lives under a temporary name beside it (``.<name>.<machine>-<pid>-<random>.tmp``),
which input globs never pick up (albert_tf/files/paths.py skips it) and which is removed when the
writing block fails. A temporary left by a killed run of this machine is removed by the next write
of the same path. Works on local paths and on anything ``tf.io.gfile`` handles (``gs://...``).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import socket
import uuid
from typing import IO, Iterator

import tensorflow as tf
from absl import logging

from albert_tf.files.processes import is_running

# Which machine wrote a temporary file: processes of other machines cannot be checked for life.
_MACHINE_ID = hashlib.sha256(socket.gethostname().encode()).hexdigest()[:8]
_TEMPORARY_NAME = re.compile(
    r"^\.(?P<target>.+)\.(?P<machine>[0-9a-f]{8})-(?P<pid>[0-9]+)-[0-9a-f]{8}\.tmp$")


def is_temporary_path(path: str) -> bool:
    """Whether ``path`` is a temporary file or directory of ``temporary_path`` (finished or not)."""
    return _TEMPORARY_NAME.match(os.path.basename(path)) is not None


def _remove(path: str) -> None:
    if tf.io.gfile.isdir(path):
        tf.io.gfile.rmtree(path)
    elif tf.io.gfile.exists(path):
        tf.io.gfile.remove(path)


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
        if match["machine"] == _MACHINE_ID and not is_running(int(match["pid"])):
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
