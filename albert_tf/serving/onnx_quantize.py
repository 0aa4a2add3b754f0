"""The int8 copy of an ONNX export: 8-bit weights, activations rounded to 8 bits call by call.

``quantize_dynamic_range(model, error)`` is ONNX Runtime's dynamic quantization of the weight
products (``onnxruntime.quantization``: ``quant_pre_process``, then ``quantize_dynamic`` with
int8 weights, one scale per output column), the kind of scheme of albert_tf's TFLite
``dynamic_range`` file: the products of a weight and an activation compute in int8 (the
activation rounded to 8 bits at each call), those of two activations (the
attention's scores and their weighted sum) stay float32 (``MatMulConstBOnly``). The
pre-processing is what makes every weight product quantizable: without it, the quantizer leaves
weights it cannot see as constants in float32. It runs on the rewritten graph
(albert_tf/serving/onnx_graph.py), whose joined query-key-value weights quantize as one product.

The quantizer is ONNX Runtime's, which albert_tf does not install: without it, an
``OnnxExportError`` says what to install. The file keeps the export's ``metadata_props`` (its
max_seq_length), which ``OnnxModel`` needs.
"""

from __future__ import annotations

import os
import tempfile
from typing import Any

import onnx


def load_quantizer(error: type[Exception]) -> tuple[Any, Any, Any]:
    """(``quant_pre_process``, ``quantize_dynamic``, ``QuantType``) of ONNX Runtime; ``error``
    (saying what to install) where it is missing."""
    try:
        from onnxruntime.quantization import QuantType, quantize_dynamic
        from onnxruntime.quantization.shape_inference import quant_pre_process
    except ImportError as missing:
        raise error(f"the int8 ONNX export needs ONNX Runtime's quantizer ({missing}): pip "
                    "install onnxruntime") from missing
    return quant_pre_process, quantize_dynamic, QuantType


def quantize_dynamic_range(model: onnx.ModelProto, error: type[Exception]) -> onnx.ModelProto:
    """The int8 copy of ``model`` (module docstring); ``error``: what to raise when ONNX
    Runtime's quantizer is not installed."""
    quant_pre_process, quantize_dynamic, quant_type = load_quantizer(error)
    with tempfile.TemporaryDirectory(prefix="albert_tf_onnx_") as scratch:
        source, prepared, target = (os.path.join(scratch, name)
                                    for name in ("float32.onnx", "prepared.onnx", "int8.onnx"))
        onnx.save(model, source)
        # The symbolic shape inference is for graphs with contrib operators; this one has none.
        quant_pre_process(source, prepared, skip_symbolic_shape=True)
        quantize_dynamic(prepared, target, weight_type=quant_type.QInt8, per_channel=True,
                         extra_options={"MatMulConstBOnly": True})
        quantized = onnx.load(target)
    del quantized.metadata_props[:]
    quantized.metadata_props.extend(model.metadata_props)
    return quantized
