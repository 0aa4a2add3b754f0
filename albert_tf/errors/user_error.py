"""``UserError``: the base class of every error that a user's data, flags, paths or checkpoints
cause, told apart from the project's own bugs.

The error boundary of the commands (albert_tf/cli/error_boundary.py) prints a ``UserError`` as one
line ``<command>: error: <message>`` and exits with status 1; any other exception is a bug of
albert_tf and keeps its traceback, followed by a line asking to report it. A project error class
derives from ``UserError`` and, where callers (and tests) catch it as such, from the builtin class
it replaced::

    class ConfigError(UserError, ValueError):
        '''The ALBERT config file is malformed.'''

``UserFileError`` is an OS error on a path the user gave (a missing file, a directory that cannot
be written), raised where that path is opened (``opening_user_path``), so that an OS error
anywhere else stays a bug.
"""

from __future__ import annotations

import contextlib
from typing import Iterator


class UserError(Exception):
    """A mistake of the user's (data, flag, path, checkpoint): its message says what is wrong and
    where (file, line, flag), in one line."""


class UserFileError(UserError, OSError):
    """An OS error on a path the user gave: its message names the path and what went wrong."""


@contextlib.contextmanager
def opening_user_path(path: str, what: str = "") -> Iterator[None]:
    """Within the block, an ``OSError`` is a ``UserFileError`` naming ``path`` (and ``what`` it is,
    e.g. "--train_file"), with the OS's reason: the block opens or reads a path the user gave."""
    try:
        yield
    except UserError:
        raise
    except OSError as error:
        reason = error.strerror or str(error) or type(error).__name__
        named = f"{what} {path}" if what else path
        raise UserFileError(f"{named}: {reason}") from error
