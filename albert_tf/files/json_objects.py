"""Reading a JSON file that must hold one object (configs, Hugging Face's config.json and index),
through tf.io.gfile so gs:// works, with errors that name the file."""

from __future__ import annotations

import json
from typing import Any

import tensorflow as tf


def read_json_object(path: str, error_type: type[Exception], described_as: str) -> dict[str, Any]:
    """The object in the JSON file ``path``; ``error_type`` saying "<described_as> is not valid
    JSON: ..." or "<described_as> must hold a JSON object." otherwise."""
    try:
        with tf.io.gfile.GFile(path, "rb") as reader:
            values = json.loads(reader.read().decode("utf-8"))
    except ValueError as err:
        raise error_type(f"{described_as} is not valid JSON: {err}") from None
    if not isinstance(values, dict):
        raise error_type(f"{described_as} must hold a JSON object.")
    return values
