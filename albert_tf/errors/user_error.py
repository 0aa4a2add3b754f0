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
anywhere else stays a bug; ``MissingFileError`` is the one of a path that does not exist (also a
``FileNotFoundError``), ``ExistingFileError`` of an output that exists already (a
``FileExistsError``).
"""

from __future__ import annotations

import contextlib
import sys
from typing import Iterator


class UserError(Exception):
    """A mistake of the user's (data, flag, path, checkpoint): its message says what is wrong and
    where (file, line, flag), in one line."""


class UserFileError(UserError, OSError):
    """An OS error on a path the user gave: its message names the path and what went wrong."""


class MissingFileError(UserFileError, FileNotFoundError):
    """A file or directory the user named, or that the run needs in the user's directory, does not
    exist: the message names it (and what would create it)."""


class ExistingFileError(UserFileError, FileExistsError):
    """An output the user named exists already and is never replaced: the message names it."""


def _file_errors() -> tuple[type[BaseException], ...]:
    """OSError and, once TensorFlow is loaded, the errors ``tf.io.gfile`` raises for a path (it
    raises no OSError); TensorFlow is never imported here."""
    tf = sys.modules.get("tensorflow")
    if tf is None or not hasattr(tf, "errors"):
        return (OSError,)
    return (OSError, tf.errors.NotFoundError, tf.errors.PermissionDeniedError,
            tf.errors.FailedPreconditionError, tf.errors.AlreadyExistsError,
            tf.errors.UnimplementedError)


@contextlib.contextmanager
def opening_user_path(path: str, what: str = "") -> Iterator[None]:
    """Within the block, an ``OSError`` (or a ``tf.io.gfile`` error on a path) is a
    ``UserFileError`` naming ``path`` (and ``what`` it is, e.g. "--train_file"), with the reason:
    the block opens, reads or writes a path the user gave. A missing path is a
    ``MissingFileError``."""
    try:
        yield
    except UserError:
        raise
    except _file_errors() as error:
        reason = (getattr(error, "strerror", None) or getattr(error, "message", None)
                  or str(error) or type(error).__name__)
        reason = reason.split("; ", 1)[1] if reason.startswith(f"{path}; ") else reason  # TF's
        named = f"{what} {path}" if what else path
        missing = isinstance(error, FileNotFoundError) or type(error).__name__ == "NotFoundError"
        raise (MissingFileError if missing else UserFileError)(f"{named}: {reason}") from error
