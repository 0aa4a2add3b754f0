"""What data_prep's readers and builders share about the user's mistakes (albert_tf/errors/):

- ``SettingsError``: a setting the user gave (a flag, or the argument a command passes on) that
  cannot work: a sequence length too short for its special tokens, a stride below 1, a vocabulary
  size without room for pieces, an option a Beam runner does not know; the message names the
  setting and what it must be.
- ``opening_user_file``: ``opening_user_path`` (albert_tf/errors/user_error.py) for the paths
  read or written through ``tf.io.gfile``: within the block, an ``OSError`` or a TensorFlow
  file-system error (permission denied, not found, ...) is a ``UserFileError`` naming the path.

Each reader's own error class (``GlueDataError``, ``SquadDataError``, ...) says what is wrong with
the contents of a user's file; these two cover the settings and the file system.
"""

from __future__ import annotations

import contextlib
from typing import Iterator

import tensorflow as tf

from albert_tf.errors.user_error import UserError, opening_user_path


class SettingsError(UserError, ValueError):
    """A setting the user gave cannot work; the message names it and what it must be."""


@contextlib.contextmanager
def opening_user_file(path: str, what: str = "") -> Iterator[None]:
    """Within the block, an ``OSError`` or a ``tf.errors.OpError`` is a ``UserFileError`` naming
    ``path`` (and ``what`` it is, e.g. "--input_file") with the reason: the block opens, reads or
    writes through ``tf.io.gfile`` a path the user gave. A ``UserError`` passes unchanged."""
    with opening_user_path(path, what):
        try:
            yield
        except tf.errors.NotFoundError as error:
            raise FileNotFoundError(error.message) from error
        except tf.errors.OpError as error:
            raise OSError(error.message) from error
