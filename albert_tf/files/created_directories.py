"""The directories a command's pre-flight check creates, removed again if the command stops empty.

The pre-flight check (albert_tf/files/run_files.py) creates every directory the run writes into
(``--output_dir``, ``--cached_dir``, an export's parent) to prove it can be written. A command that
is then refused by a later check (a missing SentencePiece model, a config that does not fit the
checkpoint) or stopped before writing anything would leave those directories behind, empty, as if
a run had started there. ``make_directories`` records the local directories it creates (each
missing ancestor too); ``remove_those_left_empty``, called by the error boundary when a command
ends with an error or a stop, removes the ones still empty, deepest first. A directory that
existed before, or that holds anything but the run manifest the check wrote
(albert_tf/files/run_manifest.py), is never touched; paths of other file systems (``gs://``)
are created but not recorded.
"""

from __future__ import annotations

import os

import tensorflow as tf

from albert_tf.files.run_manifest import MANIFEST_NAME

# Local directories created by ``make_directories`` during this command, in creation order.
_created: list[str] = []


def make_directories(path: str) -> None:
    """``tf.io.gfile.makedirs(path)``, recording the local directories it creates."""
    missing = []
    if "://" not in path:
        ancestor = os.path.abspath(path)
        while not os.path.lexists(ancestor):
            missing.append(ancestor)
            ancestor = os.path.dirname(ancestor)
    tf.io.gfile.makedirs(path)
    _created.extend(reversed(missing))


def forget() -> None:
    """Starts a new command's record (the commands of one process, e.g. the tests, run one after
    another)."""
    _created.clear()


def remove_those_left_empty() -> None:
    """Removes the recorded directories that are still empty, deepest first, then forgets them.
    A directory holding only the run manifest the pre-flight check wrote into it counts as
    empty."""
    for path in sorted(set(_created), key=len, reverse=True):
        try:
            if os.listdir(path) == [MANIFEST_NAME]:
                os.remove(os.path.join(path, MANIFEST_NAME))
            os.rmdir(path)  # only an empty directory goes
        except OSError:
            pass
    forget()
