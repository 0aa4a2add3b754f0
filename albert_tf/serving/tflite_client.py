"""Running a TFLite export (albert_tf/serving/tflite.py) with its inputs checked first, so that a
wrong input is named.

LiteRT's signature runner names no input when one is wrong: inputs of different lengths end in
a broadcast failure of an op deep in the model (a file of fixed length: ``XNNPack delegate failed
to reshape runtime``, and the runner keeps the wrong shape, so the next correct call fails too), an
id outside the vocabulary in ``gather index out of bounds Node number 0 (GATHER)``, and an input
of another rank, or longer than the export's max_seq_length but within the position table, runs
silently. ``TFLiteModel`` checks every input against the file's signature before running it:

- the names: a missing or unknown input, listing the signature's inputs;
- the dtype: integers only (int64 and other integer types are cast to int32 after a check that
  the values fit), never floats or strings;
- the shape: one example per call, [1, L], every input of the shape of ``input_ids``; L from 1 to
  the export's max_seq_length S (read off the file's ``serving_max_seq_length`` signature), so
  that a request computes on its own tokens (the runner resizes the inputs to L). A file of an
  earlier export, of fixed shape [1, S], takes L = S only: pad every example to S;
- the values: ``input_mask`` 0 or 1, and an input looked up in an embedding table (``input_ids``,
  ``segment_ids``) within that table's rows, read off the file.

Each mistake is a ``TFLiteInputError`` (a ``UserError`` and ``ValueError``) naming the input, e.g.
``input_ids has shape (1, 9) but this TFLite model takes [1, L] with L from 1 to 8 ...``. It
imports NumPy and LiteRT only (``ai_edge_litert``, loaded when a model is opened), not
TensorFlow, so a client can use it where the plain interpreter runs.
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from albert_tf.errors.user_error import UserError

SIGNATURE_KEY = "serving_default"  # the model's signature in albert_tf's TFLite exports
# The export's max_seq_length (int32 scalar), a signature without inputs.
LENGTH_SIGNATURE_KEY = "serving_max_seq_length"
_MASK = "input_mask"
_IDS = "input_ids"


class TFLiteInputError(UserError, ValueError):
    """An input that the TFLite model's signature does not take, named."""


def _table_rows(interpreter: Any, input_indices: Mapping[str, int]) -> dict[str, int]:
    """{input name: rows of the embedding table it is looked up in} for the inputs that feed a
    GATHER op directly (ids and segment ids). Read through the interpreter's op list of its first
    subgraph (``serving_default``'s), which LiteRT exposes only privately: empty (no range check)
    where it is unavailable."""
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


def _shape_text(shape: tuple[int, ...], max_length: int) -> str:
    """How a message writes a signature's shape: [1, 8], or [1, L] with L from 1 to 8."""
    if shape[-1] >= 0:
        return f"[{', '.join(map(str, shape))}]"
    return f"[{', '.join(map(str, shape[:-1]))}, L] with L from 1 to {max_length}"


def _check_shape(name: str, array: np.ndarray, shape: tuple[int, ...], max_length: int) -> None:
    """TFLiteInputError unless ``array`` fits ``shape`` (-1: a dynamic axis, the sequence's, taking
    1 to ``max_length`` positions)."""
    fits = (array.ndim == len(shape) and
            all(size == expected for size, expected in zip(array.shape, shape) if expected >= 0)
            and 1 <= array.shape[-1] <= max_length)
    if not fits:
        fixed = shape[-1] >= 0
        raise TFLiteInputError(
            f"{name} has shape {array.shape} but this TFLite model takes "
            f"{_shape_text(shape, max_length)}: one example per call, "
            + (f"padded to the export's max_seq_length {max_length} (this file has a fixed shape)"
               if fixed else f"at most the export's max_seq_length {max_length} tokens, "
               "truncated as the features are"))


def check_inputs(inputs: Mapping[str, Any], shapes: Mapping[str, tuple[int, ...]],
                 rows: Mapping[str, int], max_length: int | None = None) -> dict[str, np.ndarray]:
    """``inputs`` as int32 arrays of the signature's ``shapes`` ({name: shape}; -1 marks the
    dynamic sequence axis, which takes 1 to ``max_length`` positions, the same in every input),
    checked as the module docstring says; ``rows``: {name: embedding-table rows} bounding an
    input's values. TFLiteInputError naming the first wrong input."""
    expected = sorted(shapes)
    missing = [name for name in expected if name not in inputs]
    unknown = sorted(name for name in inputs if name not in shapes)
    if unknown or missing:
        problem = (f"{', '.join(unknown)} {'is not an input' if len(unknown) == 1 else 'are not inputs'}"
                   if unknown else f"{', '.join(missing)} {'is' if len(missing) == 1 else 'are'} "
                   "missing")
        raise TFLiteInputError(f"{problem}: this TFLite model takes {', '.join(expected)}")
    checked = {}
    reference = _IDS if _IDS in shapes else expected[0]
    for name in [reference] + [name for name in expected if name != reference]:
        array = _as_int32(name, inputs[name])
        shape = tuple(int(size) for size in shapes[name])
        _check_shape(name, array, shape, max_length or shape[-1])
        if name != reference and array.shape != checked[reference].shape:
            raise TFLiteInputError(f"{name} has shape {array.shape} but {reference} has "
                                   f"{checked[reference].shape}: they must be equal")
        bound = 2 if name == _MASK else rows.get(name)
        if bound is not None and array.size:
            low, high = int(array.min()), int(array.max())
            if low < 0 or high >= bound:
                what = ("1 for a token, 0 for padding" if name == _MASK
                        else "the rows of its embedding table in the model")
                raise TFLiteInputError(f"{name} must lie in [0, {bound}) ({what}) but holds "
                                       f"values from {low} to {high}")
        checked[name] = array
    return {name: checked[name] for name in expected}


class TFLiteModel:
    """A TFLite export run by LiteRT's interpreter, its inputs checked first (module docstring).

    ``model_path``: the .tflite file; ``num_threads``: the interpreter's threads (its default when
    None). Calling it with the inputs of one example as keyword arguments (NumPy arrays or lists,
    [1, L]) returns the signature's outputs, {name: array} (per-position outputs [1, L]); the
    runner resizes the interpreter's inputs when L changes from the previous call.
    """

    def __init__(self, model_path: str, num_threads: int | None = None):
        from ai_edge_litert.interpreter import Interpreter  # LiteRT: loaded only when used

        self._interpreter = Interpreter(model_path=model_path, num_threads=num_threads)
        self._runner = self._interpreter.get_signature_runner(SIGNATURE_KEY)
        details = self._runner.get_input_details()
        self.input_shapes = {name: tuple(int(size) for size in detail["shape_signature"])
                             for name, detail in details.items()}
        self.value_bounds = _table_rows(self._interpreter,
                                        {name: int(detail["index"])
                                         for name, detail in details.items()})

        self.max_seq_length = self._max_seq_length()

    def _max_seq_length(self) -> int:
        """The longest input L: the export's ``max_seq_length`` signature, or the fixed length of
        a file written before the sequence axis was dynamic."""
        length = next(iter(self.input_shapes.values()))[-1]
        if length >= 0:
            return length
        runner = self._interpreter.get_signature_runner(LENGTH_SIGNATURE_KEY)
        return int(runner()[LENGTH_SIGNATURE_KEY])

    def __call__(self, **inputs: Any) -> dict[str, np.ndarray]:
        return self._runner(**check_inputs(inputs, self.input_shapes, self.value_bounds,
                                           self.max_seq_length))
