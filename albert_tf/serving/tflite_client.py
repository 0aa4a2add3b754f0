"""Running a TFLite export (albert_tf/serving/tflite.py) with its inputs checked first, so that a
wrong input is named.

LiteRT's signature runner names no input when one is wrong: inputs of different lengths end in
a broadcast failure of an op deep in the model (a file of fixed length: ``XNNPack delegate failed
to reshape runtime``, and the runner keeps the wrong shape, so the next correct call fails too), an
id outside the vocabulary in ``gather index out of bounds Node number 0 (GATHER)``, and an input
of another rank, or longer than the export's max_seq_length but within the position table, runs
silently. ``TFLiteModel`` checks every input against the file's signature before running it, as
albert_tf/serving/request_checks.py says (names, integer dtype, shape [1, L] with L from 1 to the
export's max_seq_length S, mask and embedding-table ranges): S is read off the file's
``serving_max_seq_length`` signature (the runner resizes the inputs to L); a file of an earlier
export, of fixed shape [1, S], takes L = S only; the tables' rows are read off the GATHER ops.

Each mistake is a ``TFLiteInputError`` (``request_checks.ModelInputError``, a ``UserError`` and
``ValueError``) naming the input, e.g. ``input_ids has shape (1, 9) but this TFLite model takes
[1, L] with L from 1 to 8 ...``. It imports NumPy and LiteRT only (``ai_edge_litert``, loaded when
a model is opened), not TensorFlow, so a client can use it where the plain interpreter runs.
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from albert_tf.serving.request_checks import ModelInputError, check_inputs

SIGNATURE_KEY = "serving_default"  # the model's signature in albert_tf's TFLite exports
# The signature without inputs that returns the export's max_seq_length (int32 scalar). Its name
# sorts after SIGNATURE_KEY: the converter orders the subgraphs by signature key, and LiteRT lists
# the ops of the first subgraph only, which the client reads its embedding tables' sizes from.
LENGTH_SIGNATURE_KEY = "serving_max_seq_length"
# What TFLiteModel raises: the error of every client's checks, under the name callers know.
TFLiteInputError = ModelInputError


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
                                           self.max_seq_length, engine="TFLite"))
