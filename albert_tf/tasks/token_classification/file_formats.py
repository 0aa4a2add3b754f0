"""The two formats of NER files, shared by their reader (data_prep/token_classification/reader.py)
and the prediction writer (predictions.py), which writes a file back in its own format:

- CoNLL (``conll``): one word per line, whitespace-separated columns, the word first and the tag
  last; a blank line ends a sentence; ``-DOCSTART-`` lines are no words (they end a sentence too);
- JSON Lines (``jsonl``): one sentence per line, ``{"tokens": [...], "tags": [...]}``; blank
  lines are skipped.

Lines end at "\\n" (or "\\r\\n") only, as every reader of the project splits them
(albert_tf/files/text_lines.py): U+2028, U+0085, "\\v", ... inside a JSON string or a CoNLL word are
characters of it. CoNLL columns are separated by spaces and tabs only (``conll_columns``), so a word
may hold any other character, a no-break space included.

``resolve_format`` picks one (by extension unless declared: ``.jsonl`` / ``.json`` = JSON Lines);
``read_lines`` reads a file's lines. Their mistakes are ``NerDataError`` naming the file (and line).
"""

from __future__ import annotations

import os
import re
from typing import Iterator

import tensorflow as tf

from albert_tf.errors.user_error import UserError, UserFileError
from albert_tf.files.text_lines import line_number_at, split_lines

CONLL, JSON_LINES = "conll", "jsonl"
FILE_FORMATS = ("auto", CONLL, JSON_LINES)
DOCUMENT_START = "-DOCSTART-"
_JSON_EXTENSIONS = (".jsonl", ".json")
_COLUMN_SEPARATOR = re.compile(r"[ \t]+")


class NerDataError(UserError, ValueError):
    """An NER file breaks its format or scheme; the message names the file and line."""


def resolve_format(path: str, file_format: str = "auto") -> str:
    """``conll`` or ``jsonl``: ``file_format`` unless "auto", then by the file's extension."""
    if file_format not in FILE_FORMATS:
        raise NerDataError(f"unknown file format {file_format!r}; expected one of "
                           f"{', '.join(FILE_FORMATS)}")
    if file_format != "auto":
        return file_format
    return JSON_LINES if os.path.splitext(path)[1].lower() in _JSON_EXTENSIONS else CONLL


def conll_columns(line: str) -> list[str]:
    """The columns of a CoNLL line: split at runs of spaces and tabs (no other character, so that
    a word keeps its U+00A0, U+2028, ...); a blank line (only whitespace, of any kind) has none."""
    if not line.strip():
        return []
    return _COLUMN_SEPARATOR.split(line.strip(" \t"))


def is_conll_word(columns: list[str]) -> bool:
    """Whether a CoNLL line split into ``columns`` holds a word (not blank, not -DOCSTART-)."""
    return bool(columns) and columns[0] != DOCUMENT_START


def read_lines(path: str) -> Iterator[tuple[int, str]]:
    """(1-based line number, text without the line break) of a UTF-8 file (local or gs://; a
    byte-order mark is ignored), split at "\\n" only (see the module doc).

    NerDataError for a missing file or one that is not UTF-8; UserFileError for a file that cannot
    be read.
    """
    if not tf.io.gfile.exists(path) or tf.io.gfile.isdir(path):
        raise NerDataError(f"{path}: file not found")
    try:
        with tf.io.gfile.GFile(path, "rb") as handle:
            data = handle.read()
    except (OSError, tf.errors.OpError) as error:
        reason = error.message if isinstance(error, tf.errors.OpError) else str(error)
        raise UserFileError(f"{path}: {reason}") from error
    try:
        text = data.decode("utf-8-sig")  # a byte-order mark is no character of the first word
    except UnicodeDecodeError as error:
        line = line_number_at(data, error.start)
        raise NerDataError(f"{path}:{line}: not UTF-8 ({error.reason})") from None
    yield from enumerate(split_lines(text), start=1)
