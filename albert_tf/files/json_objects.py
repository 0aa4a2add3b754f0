"""Reading a JSON file that must hold one object (configs, Hugging Face's config.json and index),
through tf.io.gfile so gs:// works, with errors that name the file (a file that cannot be read is a
``UserFileError``)."""

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
