"""Running an ONNX export (albert_tf/serving/onnx_export.py) in ONNX Runtime with its inputs
checked first, so that a wrong input is named.

ONNX Runtime checks an input's rank and fixed dimensions only: it runs an input longer than the
export's max_seq_length (up to the config's max_position_embeddings), answers ids beyond the
embedding table with garbage or a crash (and wraps negative ids around to the table's last rows),
and leaves inputs of different lengths to fail deep in the model. ``OnnxModel`` checks every
input before the session runs it, as albert_tf/serving/request_checks.py says (names, integer
dtype, shape [1, L] with L from 1 to the export's max_seq_length S, mask and embedding-table
ranges): S is read off the file's ``metadata_props`` (key ``LENGTH_KEY``, which the export
writes), the tables' rows off the graph: the first input of each ``Gather`` (axis 0) that an
input feeds directly, or the tables of a fused ``EmbedLayerNormalization``, when that table is an
initializer (an input gathered otherwise is not bounded). The int8 file
(albert_tf/serving/onnx_quantize.py) is run and checked the same way.

Each mistake is a ``request_checks.ModelInputError`` (a ``UserError`` and ``ValueError``) naming the input, e.g.
``input_ids has shape (1, 9) but this ONNX model takes [1, L] with L from 1 to 8 ...``; a file
that records no max_seq_length is an ``OnnxFileError``. It imports NumPy, and ONNX Runtime and
onnx when a model is opened, not TensorFlow. albert_tf does not install ONNX Runtime (only its
tests and benchmarks use it): a user installs ``onnxruntime`` and ``onnx`` themselves.
"""

from __future__ import annotations

from typing import Any, Iterable

import numpy as np

from albert_tf.errors.user_error import UserError
from albert_tf.serving.request_checks import check_inputs

LENGTH_KEY = "max_seq_length"  # the metadata_props entry recording the export's max_seq_length
ENGINE = "ONNX"  # how the checks' messages name the model


class OnnxFileError(UserError, ValueError):
    """An ONNX file that is not albert_tf's export: it records no max_seq_length."""


# ONNX Runtime's fused embedding (com.microsoft EmbedLayerNormalization): (index input, table
# input) positions of the ids and the segment ids. A graph fused by onnxruntime.transformers'
# optimizer holds it instead of the two Gathers; albert_tf's own rewrite (onnx_graph.py) keeps them.
EMBED_LAYER_NORM_TABLES = ((0, 2), (1, 4))


def _lookups(node: Any) -> list[tuple[str, str]]:
    """(index, table) pairs of the embedding lookups ``node`` makes: a ``Gather`` on axis 0, or
    the ids and segment ids of a fused ``EmbedLayerNormalization``."""
    if node.op_type == "Gather" and len(node.input) == 2:
        axis = next((attribute.i for attribute in node.attribute if attribute.name == "axis"), 0)
        return [(node.input[1], node.input[0])] if axis == 0 else []
    if node.op_type == "EmbedLayerNormalization":
        return [(node.input[index], node.input[table])
                for index, table in EMBED_LAYER_NORM_TABLES if len(node.input) > table]
    return []


def table_rows(graph: Any, input_names: Iterable[str]) -> dict[str, int]:
    """{input name: rows of the embedding table it is looked up in} for the inputs of ``graph``
    (an ``onnx.GraphProto``) that index an embedding table directly (``_lookups``: a ``Gather``
    on axis 0 or a fused ``EmbedLayerNormalization``) whose table is an initializer [rows, ...]
    (the ids and segment ids in albert_tf's exports, float32 or int8); the fewest rows where an
    input indexes several tables."""
    names = set(input_names)
    shapes = {tensor.name: tuple(tensor.dims) for tensor in graph.initializer}
    rows: dict[str, int] = {}
    for node in graph.node:
        for name, table in _lookups(node):
            if name in names and shapes.get(table):
                rows[name] = min(rows.get(name, shapes[table][0]), int(shapes[table][0]))
    return rows


def session_options(onnxruntime: Any, num_threads: int | None, spinning: bool = True) -> Any:
    """The ``onnxruntime.SessionOptions`` of ``OnnxModel``: ONNX Runtime's defaults (every graph
    optimization), ``num_threads`` intra-op threads (its default when None), and, with
    ``spinning`` False, the pool's threads sleeping instead of spinning while they wait for work
    (``session.intra_op.allow_spinning`` 0).

    At batch 1 a call is a chain of small operators. On a CPU of its own, spinning threads start
    each one sooner: on the quiet 2-core machine (albert base, 2 threads, 16 tokens) a plain
    session took 19.4 ms a call, one whose threads sleep 34.0 ms. On a CPU shared with other
    work, a spinning thread burns the core another thread of the call waits for: at load average
    2.2, spinning took 1.7-1.9x the CPU and wall time of sleeping threads (docs/export.md)."""
    options = onnxruntime.SessionOptions()
    if num_threads is not None:
        options.intra_op_num_threads = num_threads
    if not spinning:
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return options


class OnnxModel:
    """An ONNX export run by ONNX Runtime (CPU), its inputs checked first (module docstring).

    ``model_path``: the .onnx file; ``num_threads``: the session's intra-op threads (ONNX
    Runtime's default when None); ``spinning``: False on a CPU shared with other work (its
    threads then sleep while they wait: ``session_options``). Calling it with the
    inputs of one example as keyword arguments (NumPy arrays or lists, [1, L]) returns the
    model's outputs, {name: array} as ONNX Runtime gives them (per-position outputs [1, L]).
    ``input_shapes`` ({name: shape}, -1 for the dynamic length), ``value_bounds`` ({name: table
    rows}) and ``max_seq_length`` are what the checks use.
    """

    def __init__(self, model_path: str, num_threads: int | None = None, spinning: bool = True):
        import onnx  # both loaded only when used: the user installs them
        import onnxruntime

        self._session = onnxruntime.InferenceSession(
            model_path, sess_options=session_options(onnxruntime, num_threads, spinning),
            providers=["CPUExecutionProvider"])
        self.input_shapes = {
            node.name: tuple(size if isinstance(size, int) else -1 for size in node.shape)
            for node in self._session.get_inputs()}
        self._output_names = [node.name for node in self._session.get_outputs()]
        metadata = self._session.get_modelmeta().custom_metadata_map
        if LENGTH_KEY not in metadata:
            raise OnnxFileError(f"{model_path} records no {LENGTH_KEY} in its metadata_props: "
                                "not an ONNX export of albert_tf (--onnx_file)")
        self.max_seq_length = int(metadata[LENGTH_KEY])
        graph = onnx.load(model_path, load_external_data=False).graph
        self.value_bounds = table_rows(graph, self.input_shapes)

    def __call__(self, **inputs: Any) -> dict[str, np.ndarray]:
        checked = check_inputs(inputs, self.input_shapes, self.value_bounds, self.max_seq_length,
                               engine=ENGINE)
        return dict(zip(self._output_names, self._session.run(self._output_names, checked)))
