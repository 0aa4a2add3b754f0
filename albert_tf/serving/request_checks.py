"""The checks of one serving request's inputs before an engine runs an exported file (the TFLite
and ONNX clients, albert_tf/serving/tflite_client.py and onnx_client.py), naming a wrong input.

The engines name no input that is wrong (inputs of different lengths end in a failure of an op
deep in the model, an id outside the vocabulary gives garbage or a crash, and an input longer
than the export's max_seq_length but within the position table runs silently), so a client
checks every input against what the file takes before running it:

- the names: a missing or unknown input, listing the file's inputs;
- the dtype: integers only (int64 and other integer types are cast to int32 after a check that
  the values fit), never floats or strings;
- the shape: one example per call, [1, L], every input of the shape of ``input_ids``; L from 1 to
  the export's max_seq_length S, so that a request computes on its own tokens. A file of fixed
  shape [1, S] takes L = S only: pad every example to S;
- the values: ``input_mask`` 0 or 1, and an input looked up in an embedding table (``input_ids``,
  ``segment_ids``) within that table's rows, which the client reads off the file (no negative
  ids: ONNX's Gather would wrap them around to the table's last rows).

Each mistake is a ``ModelInputError`` (a ``UserError`` and ``ValueError``) naming the input, e.g.
``input_ids has shape (1, 9) but this TFLite model takes [1, L] with L from 1 to 8 ...``. NumPy
only: the clients run where TensorFlow is not installed.
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from albert_tf.errors.user_error import UserError

_MASK = "input_mask"
_IDS = "input_ids"


class ModelInputError(UserError, ValueError):
    """An input that the exported file does not take, named."""


def _as_int32(name: str, value: Any) -> np.ndarray:
    """``value`` as an int32 array; ModelInputError naming ``name`` for a non-integer dtype or
    values beyond int32."""
    array = np.asarray(value)
    if array.dtype == np.int32:
        return array
    if not np.issubdtype(array.dtype, np.integer):
        raise ModelInputError(f"{name} has dtype {array.dtype} but must be int32 (or another "
                              "integer type whose values fit int32)")
    if array.size:
        info = np.iinfo(np.int32)
        low, high = int(array.min()), int(array.max())
        if low < info.min or high > info.max:
            raise ModelInputError(f"{name} holds values from {low} to {high}, outside int32")
    return array.astype(np.int32)


def _shape_text(shape: tuple[int, ...], max_length: int) -> str:
    """How a message writes a file's input shape: [1, 8], or [1, L] with L from 1 to 8."""
    if shape[-1] >= 0:
        return f"[{', '.join(map(str, shape))}]"
    return f"[{', '.join(map(str, shape[:-1]))}, L] with L from 1 to {max_length}"


def _check_shape(name: str, array: np.ndarray, shape: tuple[int, ...], max_length: int,
                 engine: str) -> None:
    """ModelInputError unless ``array`` fits ``shape`` (-1: a dynamic axis, the sequence's,
    taking 1 to ``max_length`` positions)."""
    fits = (array.ndim == len(shape) and
            all(size == expected for size, expected in zip(array.shape, shape) if expected >= 0)
            and 1 <= array.shape[-1] <= max_length)
    if not fits:
        fixed = shape[-1] >= 0
        raise ModelInputError(
            f"{name} has shape {array.shape} but this {engine} model takes "
            f"{_shape_text(shape, max_length)}: one example per call, "
            + (f"padded to the export's max_seq_length {max_length} (this file has a fixed shape)"
               if fixed else f"at most the export's max_seq_length {max_length} tokens, "
               "truncated as the features are"))


def check_inputs(inputs: Mapping[str, Any], shapes: Mapping[str, tuple[int, ...]],
                 rows: Mapping[str, int], max_length: int | None = None, *,
                 engine: str) -> dict[str, np.ndarray]:
    """``inputs`` as int32 arrays of the file's input ``shapes`` ({name: shape}; -1 marks the
    dynamic sequence axis, which takes 1 to ``max_length`` positions, the same in every input),
    checked as the module docstring says; ``rows``: {name: embedding-table rows} bounding an
    input's values (an input without rows is not bounded); ``engine`` names the file's kind in
    the messages ("TFLite", "ONNX"). ModelInputError naming the first wrong input."""
    expected = sorted(shapes)
    missing = [name for name in expected if name not in inputs]
    unknown = sorted(name for name in inputs if name not in shapes)
    if unknown or missing:
        problem = (f"{', '.join(unknown)} {'is not an input' if len(unknown) == 1 else 'are not inputs'}"
                   if unknown else f"{', '.join(missing)} {'is' if len(missing) == 1 else 'are'} "
                   "missing")
        raise ModelInputError(f"{problem}: this {engine} model takes {', '.join(expected)}")
    checked = {}
    reference = _IDS if _IDS in shapes else expected[0]
    for name in [reference] + [name for name in expected if name != reference]:
        array = _as_int32(name, inputs[name])
        shape = tuple(int(size) for size in shapes[name])
        _check_shape(name, array, shape, max_length or shape[-1], engine)
        if name != reference and array.shape != checked[reference].shape:
            raise ModelInputError(f"{name} has shape {array.shape} but {reference} has "
                                  f"{checked[reference].shape}: they must be equal")
        bound = 2 if name == _MASK else rows.get(name)
        if bound is not None and array.size:
            low, high = int(array.min()), int(array.max())
            if low < 0 or high >= bound:
                what = ("1 for a token, 0 for padding" if name == _MASK
                        else "the rows of its embedding table in the model")
                raise ModelInputError(f"{name} must lie in [0, {bound}) ({what}) but holds "
                                      f"values from {low} to {high}")
        checked[name] = array
    return {name: checked[name] for name in expected}
