"""Reading a tokenizer's model or vocabulary file, and the error every tokenizer module raises.

``TokenizerError`` is a ``ValueError`` naming the file and the problem (a corrupt model, a vocabulary
lacking [CLS]/[SEP]/[MASK], ...); the reference raised nothing or a bare exception. A missing file is
a ``MissingFileError`` (a ``FileNotFoundError``) naming what it is, one that cannot be read a
``UserFileError``. Files are read through ``tf.io.gfile`` (``gs://`` works).
"""

from __future__ import annotations

import tensorflow as tf

from albert_tf.errors.user_error import MissingFileError, UserError, opening_user_path


class TokenizerError(UserError, ValueError):
    """A vocabulary or SentencePiece model is unusable; the message names the file and the problem."""


def read_model_file(path: str, what: str) -> bytes:
    """Reads a local or remote (gs://...) file; a missing file is an error naming ``what`` and the path."""
    if not path:
        raise TokenizerError(f"no {what} given (empty path)")
    if not tf.io.gfile.exists(path):
        raise MissingFileError(f"{what} not found: {path}")
    with opening_user_path(path, what), tf.io.gfile.GFile(path, "rb") as handle:
        return handle.read()
