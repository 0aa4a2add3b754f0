"""ONNX export of a fine-tuned model (``--onnx_file``), for ONNX Runtime and other ONNX engines.

``export_onnx(model, path, max_seq_length, outputs_of, quantization="none")`` converts the function the TFLite export
converts (albert_tf/serving/tflite.py: ``outputs_of(model, inputs)`` on int32 ``input_ids``,
``input_mask``, ``segment_ids`` [1, L], L any length from 1 to max_seq_length, one example per
call) into an ONNX graph with float32 weights, using tf2onnx (opset ``OPSET``). The file's inputs
keep the dynamic length L; the batch axis is fixed at 1, as in the TFLite files, because
tf2onnx 1.17.0 mistranslates the model's reshapes on a dynamic batch axis (ONNX Runtime then
fails in the attention's Reshape). ``max_seq_length`` is recorded in the model's metadata
(``metadata_props``, key ``max_seq_length``): ONNX Runtime does not bound L by it, so a client
should (the graph runs up to the config's max_position_embeddings): ``OnnxModel``
(albert_tf/serving/onnx_client.py) does, with the other checks of a request's inputs.

The converted graph is rewritten before it is written (albert_tf/serving/onnx_graph.py: layer
norms as ``LayerNormalization``, constant reshape targets, the query, key and value products as
one), in standard ONNX operators only, so the file stays portable and every engine that opens it
gains; rewriting once at export costs nothing per request, where rewriting in the client would
cost every process that opens the file about a second of shape inference (albert base). ``quantization``
``dynamic_range`` writes the int8 copy (albert_tf/serving/onnx_quantize.py) instead.

tf2onnx is an optional requirement (requirements-onnx.txt, as Beam's requirements-beam.txt),
imported only when a file is written; without it the export is an OnnxExportError saying what to
install. Keras 3's own ``model.export(format="onnx")`` goes through tf2onnx too, and cannot
export albert_tf's task models (their outputs hold a list of tensors, which its output naming
does not take).
"""

from __future__ import annotations

from typing import Any

import keras
import tensorflow as tf

from albert_tf.errors.user_error import UserError
from albert_tf.files.atomic import atomic_open
from albert_tf.models.encoder import INPUT_NAMES
from albert_tf.serving.onnx_client import LENGTH_KEY
from albert_tf.serving.tflite import (OutputsFn, check_convertible, check_file_path,
                                      serving_function)

OPSET = 17
QUANTIZATIONS = ("none", "dynamic_range")  # the weight storages: float32, int8


class OnnxExportError(UserError, ValueError):
    """A model, setting or installation that gives no ONNX export."""


def input_specs() -> list[tf.TensorSpec]:
    """The graph's inputs, in ``INPUT_NAMES`` order: int32 [1, L] each, L dynamic."""
    return [tf.TensorSpec([1, None], tf.int32, name=name) for name in INPUT_NAMES]


def check_onnx_path(path: str, flag: str | None = None) -> None:
    """Raises OnnxExportError if ``path`` is an existing directory (the export is one file; an
    existing file is replaced). A command calls it before any work, with ``flag`` to name it."""
    check_file_path(path, flag, OnnxExportError, "ONNX", "model.onnx")


def check_quantization(quantization: str) -> None:
    """Raises OnnxExportError for a weight storage not in ``QUANTIZATIONS``."""
    if quantization not in QUANTIZATIONS:
        raise OnnxExportError(f"quantization must be one of {', '.join(QUANTIZATIONS)}; got "
                              f"{quantization!r}.")


def _tf2onnx():
    """The converter module; OnnxExportError saying what to install where it is missing."""
    try:
        import tf2onnx  # the optional converter: requirements-onnx.txt
    except ImportError as error:
        raise OnnxExportError(f"the ONNX export needs tf2onnx ({error}): pip install -r "
                              "requirements-onnx.txt") from error
    return tf2onnx


def tf2onnx_graph(model: keras.Model, max_seq_length: int, outputs_of: OutputsFn) -> Any:
    """tf2onnx's ``onnx.ModelProto`` of ``model``'s serving function, with ``max_seq_length`` in
    its metadata, before ``convert_to_onnx`` rewrites it (what the rewrite is tested against)."""
    check_convertible(model, max_seq_length, OnnxExportError, "ONNX")
    function = tf.function(serving_function(model, outputs_of), autograph=False)
    proto, _ = _tf2onnx().convert.from_function(function, input_signature=input_specs(),
                                                opset=OPSET)
    entry = proto.metadata_props.add()
    entry.key, entry.value = LENGTH_KEY, str(max_seq_length)
    return proto


def convert_to_onnx(model: keras.Model, max_seq_length: int, outputs_of: OutputsFn,
                    quantization: str = "none") -> bytes:
    """The serialized ONNX model of ``model`` (see the module docstring), its weights float32
    (``quantization`` ``none``) or int8 (``dynamic_range``). OnnxExportError, before converting,
    for a model that computes in another dtype than float32, a max_seq_length outside
    [1, max_position_embeddings], an unknown quantization, or a missing tf2onnx (or, for int8,
    ONNX Runtime's quantizer)."""
    check_quantization(quantization)
    check_convertible(model, max_seq_length, OnnxExportError, "ONNX")
    _tf2onnx()
    # Both import onnx, which tf2onnx installs: loaded only here, as tf2onnx is.
    from albert_tf.serving.onnx_graph import optimize
    from albert_tf.serving.onnx_quantize import load_quantizer, quantize_dynamic_range

    if quantization == "dynamic_range":
        load_quantizer(OnnxExportError)
    proto = tf2onnx_graph(model, max_seq_length, outputs_of)
    optimize(proto)
    if quantization == "dynamic_range":
        proto = quantize_dynamic_range(proto, OnnxExportError)
    return proto.SerializeToString()


def export_onnx(model: keras.Model, path: str, max_seq_length: int, outputs_of: OutputsFn,
                quantization: str = "none") -> str:
    """Writes the ONNX model of ``model`` (outputs ``outputs_of(model, inputs)``, weights as
    ``quantization`` says) to ``path`` (a file, replaced if it exists; written under a temporary
    name and renamed); returns ``path``. The tasks call it with their outputs. OnnxExportError
    (before converting) for an existing directory at ``path`` and what ``convert_to_onnx``
    refuses."""
    check_onnx_path(path)
    serialized = convert_to_onnx(model, max_seq_length, outputs_of, quantization)
    with atomic_open(path, "wb") as handle:
        handle.write(serialized)
    return path
