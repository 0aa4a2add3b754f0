"""Reading a JSON file that must hold one object (configs, Hugging Face's config.json and index),
through tf.io.gfile so gs:// works, with errors that name the file (a file that cannot be read is a
``UserFileError``); ``json_error_reason``, what a JSON Lines reader says of a line that is not JSON;
``json_line``, one JSON Lines line."""

from __future__ import annotations

import json
from typing import Any

import tensorflow as tf

from albert_tf.errors.user_error import opening_user_path


def read_json_object(path: str, error_type: type[Exception], described_as: str) -> dict[str, Any]:
    """The object in the JSON file ``path``; ``error_type`` saying "<described_as> is not valid
    JSON: ..." or "<described_as> must hold a JSON object." otherwise."""
    try:
        with opening_user_path(path), tf.io.gfile.GFile(path, "rb") as reader:
            text = reader.read()
        values = json.loads(text.decode("utf-8"))
    except ValueError as err:
        raise error_type(f"{described_as} is not valid JSON: {err}") from None
    if not isinstance(values, dict):
        raise error_type(f"{described_as} must hold a JSON object.")
    return values


# Characters json.dumps(ensure_ascii=False) writes as they are that some readers take for line
# breaks (str.splitlines, JavaScript before ES2019): json_line escapes them.
_LINE_SEPARATORS = {"\u0085": "\\u0085", "\u2028": "\\u2028", "\u2029": "\\u2029"}


def json_error_reason(error: json.JSONDecodeError) -> str:
    """Why one line is not JSON, with its column: "Expecting ',' delimiter at column 12"; a raw
    control character (a tab, U+001C, ...) inside a string is named, with its escaped form."""
    if error.msg.startswith("Invalid control character") and error.pos < len(error.doc):
        code = ord(error.doc[error.pos])
        return (f"a raw control character U+{code:04X} at column {error.colno}: inside a JSON "
                f"string it must be escaped, as \\u{code:04x}")
    return f"{error.msg} at column {error.colno}"


def json_line(value: Any) -> str:
    """``value`` as one line of a JSON Lines file (with its "\\n"): non-ASCII text as it is, but
    the characters some readers take for line breaks (U+0085, U+2028, U+2029) escaped, so that
    every reader sees one line."""
    text = json.dumps(value, ensure_ascii=False)
    for char, escaped in _LINE_SEPARATORS.items():
        text = text.replace(char, escaped)
    return text + "\n"
