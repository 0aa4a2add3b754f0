"""Running a TFLite export (albert_tf/serving/tflite.py) with its inputs checked first, so that a
wrong input is named.

LiteRT's signature runner names no input when one is wrong: a sequence of another length or a
batch of two ends in ``XNNPack delegate failed to reshape runtime``, an id outside the vocabulary
in ``gather index out of bounds Node number 0 (GATHER)``, an input of another rank runs silently,
and after an error the runner keeps the wrong shape, so the next correct call fails too.
``TFLiteModel`` checks every input against the file's signature before running it:

- the names: a missing or unknown input, listing the signature's inputs;
- the dtype: integers only (int64 and other integer types are cast to int32 after a check that
  the values fit), never floats or strings;
- the shape: exactly the signature's [1, S] (a TFLite export has a fixed length: pad every
  example to S, one example per call);
- the values: ``input_mask`` 0 or 1, and an input looked up in an embedding table (``input_ids``,
  ``segment_ids``) within that table's rows, read off the file.

Each mistake is a ``TFLiteInputError`` (a ``UserError`` and ``ValueError``) naming the input, e.g.
``input_ids has shape (1, 9) but this TFLite model takes [1, 8] ...``. It imports NumPy and LiteRT
only (``ai_edge_litert``, loaded when a model is opened), not TensorFlow, so a client can use it
where the plain interpreter runs.
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from albert_tf.errors.user_error import UserError

SIGNATURE_KEY = "serving_default"  # the one signature of albert_tf's TFLite exports
_MASK = "input_mask"


class TFLiteInputError(UserError, ValueError):
    """An input that the TFLite model's signature does not take, named."""


def _table_rows(interpreter: Any, input_indices: Mapping[str, int]) -> dict[str, int]:
    """{input name: rows of the embedding table it is looked up in} for the inputs that feed a
    GATHER op directly (ids and segment ids). Read through the interpreter's op list, which LiteRT
    exposes only privately: empty (no range check) where it is unavailable."""
    try:
        ops = interpreter._get_ops_details()  # pylint: disable=protected-access
        shapes = {detail["index"]: detail["shape"] for detail in interpreter.get_tensor_details()}
    except (AttributeError, KeyError, RuntimeError, ValueError):
        return {}
    by_index = {index: name for name, index in input_indices.items()}
    rows = {}
    for op in ops:
        if op.get("op_name") != "GATHER" or len(op.get("inputs", ())) != 2:
            continue
        params, indices = (int(index) for index in op["inputs"])
        name = by_index.get(indices)
        if name is not None and params in shapes and len(shapes[params]) >= 1:
            rows[name] = int(shapes[params][0])
    return rows


def _as_int32(name: str, value: Any) -> np.ndarray:
    """``value`` as an int32 array; TFLiteInputError naming ``name`` for a non-integer dtype or
    values beyond int32."""
    array = np.asarray(value)
    if array.dtype == np.int32:
        return array
    if not np.issubdtype(array.dtype, np.integer):
        raise TFLiteInputError(f"{name} has dtype {array.dtype} but must be int32 (or another "
                               "integer type whose values fit int32)")
    if array.size:
        info = np.iinfo(np.int32)
        low, high = int(array.min()), int(array.max())
        if low < info.min or high > info.max:
            raise TFLiteInputError(f"{name} holds values from {low} to {high}, outside int32")
    return array.astype(np.int32)


def check_inputs(inputs: Mapping[str, Any], shapes: Mapping[str, tuple[int, ...]],
                 rows: Mapping[str, int]) -> dict[str, np.ndarray]:
    """``inputs`` as int32 arrays of the signature's ``shapes`` ({name: shape}), checked as the
    module docstring says; ``rows``: {name: embedding-table rows} bounding an input's values.
    TFLiteInputError naming the first wrong input."""
    expected = sorted(shapes)
    missing = [name for name in expected if name not in inputs]
    unknown = sorted(name for name in inputs if name not in shapes)
    if unknown or missing:
        problem = (f"{', '.join(unknown)} {'is not an input' if len(unknown) == 1 else 'are not inputs'}"
                   if unknown else f"{', '.join(missing)} {'is' if len(missing) == 1 else 'are'} "
                   "missing")
        raise TFLiteInputError(f"{problem}: this TFLite model takes {', '.join(expected)}")
    checked = {}
    for name in expected:
        array = _as_int32(name, inputs[name])
        shape = tuple(int(size) for size in shapes[name])
        if array.shape != shape:
            raise TFLiteInputError(
                f"{name} has shape {array.shape} but this TFLite model takes "
                f"[{', '.join(map(str, shape))}]: one example per call, padded to the export's "
                f"max_seq_length {shape[-1]} (the TFLite export has a fixed shape)")
        bound = 2 if name == _MASK else rows.get(name)
        if bound is not None and array.size:
            low, high = int(array.min()), int(array.max())
            if low < 0 or high >= bound:
                what = ("1 for a token, 0 for padding" if name == _MASK
                        else "the rows of its embedding table in the model")
                raise TFLiteInputError(f"{name} must lie in [0, {bound}) ({what}) but holds "
                                       f"values from {low} to {high}")
        checked[name] = array
    return checked


class TFLiteModel:
    """A TFLite export run by LiteRT's interpreter, its inputs checked first (module docstring).

    ``model_path``: the .tflite file; ``num_threads``: the interpreter's threads (its default when
    None). Calling it with the inputs as keyword arguments (NumPy arrays or lists) returns the
    signature's outputs, {name: array}.
    """

    def __init__(self, model_path: str, num_threads: int | None = None):
        from ai_edge_litert.interpreter import Interpreter  # LiteRT: loaded only when used

        self._interpreter = Interpreter(model_path=model_path, num_threads=num_threads)
        self._runner = self._interpreter.get_signature_runner(SIGNATURE_KEY)
        details = self._runner.get_input_details()
        self.input_shapes = {name: tuple(int(size) for size in detail["shape"])
                             for name, detail in details.items()}
        self.value_bounds = _table_rows(self._interpreter,
                                        {name: int(detail["index"])
                                         for name, detail in details.items()})

    @property
    def max_seq_length(self) -> int:
        """The fixed length S of every input, [1, S]."""
        return next(iter(self.input_shapes.values()))[-1]

    def __call__(self, **inputs: Any) -> dict[str, np.ndarray]:
        return self._runner(**check_inputs(inputs, self.input_shapes, self.value_bounds))
