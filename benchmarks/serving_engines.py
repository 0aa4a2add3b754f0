"""The engines the serving benchmarks time, each as a call on a batch of token ids.

Every ``Call`` takes ``{"input_ids", "input_mask", "segment_ids"}`` int32 NumPy arrays [B, L] and
returns the classifier's probabilities float32 [B, num_labels], so that the engines' outputs can
be compared with each other:

- ``saved_model_call``: albert_tf's ids SavedModel (``serving_default``), the whole batch per call;
- ``tflite_call``: an albert_tf TFLite file through ``TFLiteModel`` (albert_tf/serving/
  tflite_client.py: inputs checked, the interpreter resized to each example's length), one example
  per call, so a batch is a loop over its rows;
- ``write_hf_classifier``, ``load_hf_classifier`` and ``torch_call``: Hugging Face transformers'
  ``AlbertForSequenceClassification`` holding the same weights (the encoder through albert_tf's
  Hugging Face directory writer, the classifier copied), run eagerly by PyTorch;
- ``onnx_files`` and ``onnx_runtime_call``: that PyTorch model exported by ``torch.onnx.export``
  with dynamic batch and sequence axes, and its int8 copy by ONNX Runtime's ``quantize_dynamic``,
  run by a plain ONNX Runtime session with every graph optimization;
- ``onnx_model_call``: albert_tf's own ONNX files (albert_tf/serving/onnx_export.py, float32 or
  int8) through ``OnnxModel`` (albert_tf/serving/onnx_client.py: inputs checked, ONNX Runtime
  with every graph optimization), one example per call.

PyTorch, transformers, onnx and onnxruntime are test / benchmark requirements
(requirements-test.txt), imported only by the functions that use them.
"""

from __future__ import annotations

import os
from typing import Callable

import numpy as np
import tensorflow as tf
from absl import flags

from albert_tf.checkpoints.hf_format import write_hf_directory
from albert_tf.models.config import AlbertConfig
from albert_tf.serving.onnx_client import OnnxModel
from albert_tf.serving.tflite_client import TFLiteModel
from albert_tf.tasks.classification.model import AlbertClassifierModel
from benchmarks.base_config import define_config_flag
from tests.shared_setup import tiny_config

Inputs = dict[str, np.ndarray]
Call = Callable[[Inputs], np.ndarray]

def define_model_flags() -> None:
    """--albert_config_file and --tiny: the model a serving benchmark times."""
    define_config_flag()
    flags.DEFINE_bool("tiny", False, "Use the 2-layer test model instead of --albert_config_file.")


def model_config() -> tuple[AlbertConfig, str]:
    """The config ``define_model_flags``' flags name, and how the benchmark's first line names
    it."""
    values = flags.FLAGS
    if values.tiny:
        return tiny_config(), "tiny test model"
    return AlbertConfig.from_json_file(values.albert_config_file), values.albert_config_file


def directory_bytes(path: str) -> int:
    """The size of every file under ``path``."""
    return sum(os.path.getsize(os.path.join(root, name))
               for root, _, names in os.walk(path) for name in names)


def softmax(logits: np.ndarray) -> np.ndarray:
    """Softmax over the last axis of float logits [B, C]."""
    shifted = np.exp(logits - logits.max(axis=-1, keepdims=True))
    return shifted / shifted.sum(axis=-1, keepdims=True)


def saved_model_call(export_dir: str) -> Call:
    """Probabilities [B, num_labels] of the SavedModel's ``serving_default`` on ids of any batch."""
    signature = tf.saved_model.load(export_dir).signatures["serving_default"]
    return lambda inputs: signature(**{k: tf.constant(v) for k, v in inputs.items()})[
        "probabilities"].numpy()


def tflite_call(model_path: str, threads: int | None = None) -> Call:
    """Probabilities [B, num_labels] of an albert_tf TFLite file, one example [1, L] per call of
    ``TFLiteModel`` (``threads``: the interpreter's)."""
    return one_example_per_call(TFLiteModel(model_path, num_threads=threads))


def one_example_per_call(model: Callable[..., dict[str, np.ndarray]]) -> Call:
    """The ``Call`` of a client that takes one example [1, L] per call as keyword arguments
    (``TFLiteModel``, ``OnnxModel``): a batch is a loop over its rows."""

    def call(inputs: Inputs) -> np.ndarray:
        return np.concatenate([model(**{name: value[row:row + 1]
                                        for name, value in inputs.items()})["probabilities"]
                               for row in range(len(inputs["input_ids"]))])

    return call


def write_hf_classifier(model: AlbertClassifierModel, directory: str) -> str:
    """Writes ``model`` as a directory that transformers' ``AlbertForSequenceClassification``
    loads (``load_hf_classifier``) under ``directory``; returns its path. The encoder goes through
    albert_tf's Hugging Face writer, the classifier ([num_labels, H] and [num_labels], as
    PyTorch's Linear stores them) is copied into the loaded model, which is saved again."""
    import torch
    from transformers import AlbertForSequenceClassification

    path = os.path.join(directory, "huggingface")
    write_hf_directory(model.albert, path)
    hf = AlbertForSequenceClassification.from_pretrained(path, num_labels=model.num_labels)
    with torch.no_grad():
        hf.classifier.weight.copy_(torch.from_numpy(model.classifier.output_weights.numpy()))
        hf.classifier.bias.copy_(torch.from_numpy(model.classifier.output_bias.numpy()))
    hf.save_pretrained(path)
    return path


def load_hf_classifier(path: str):
    """The ``AlbertForSequenceClassification`` of ``write_hf_classifier``, in eval mode."""
    from transformers import AlbertForSequenceClassification

    return AlbertForSequenceClassification.from_pretrained(path).eval()


def _torch_inputs(inputs: Inputs) -> tuple:
    import torch

    return tuple(torch.from_numpy(inputs[name].astype(np.int64))
                 for name in ("input_ids", "input_mask", "segment_ids"))


def torch_call(hf) -> Call:
    """Probabilities [B, num_labels] of the PyTorch model, eager, without autograd."""
    import torch

    def call(inputs: Inputs) -> np.ndarray:
        ids, mask, types = _torch_inputs(inputs)
        with torch.inference_mode():
            logits = hf(input_ids=ids, attention_mask=mask, token_type_ids=types).logits
        return softmax(logits.numpy())

    return call


ONNX_INPUTS = ("input_ids", "attention_mask", "token_type_ids")


def onnx_files(hf, directory: str) -> tuple[str, str]:
    """``hf`` exported to ONNX (float32) with dynamic batch and sequence axes, and its int8 copy
    (``quant_pre_process``, then ``quantize_dynamic``: int8 weights, activations quantized call
    by call, as albert_tf's ``dynamic_range``); returns the two paths under ``directory``. The trace's example holds a
    padded row, so that the traced graph applies the attention mask (transformers skips a mask
    of all ones, and a trace keeps only the branch it took)."""
    import torch
    from onnxruntime.quantization import QuantType, quantize_dynamic
    from onnxruntime.quantization.shape_inference import quant_pre_process

    float32 = os.path.join(directory, "hf_albert.onnx")
    prepared = os.path.join(directory, "hf_albert.prepared.onnx")
    int8 = os.path.join(directory, "hf_albert.int8.onnx")
    mask = np.ones([2, 8], np.int32)
    mask[1, 5:] = 0
    example = {"input_ids": 5 * mask, "input_mask": mask, "segment_ids": np.zeros_like(mask)}
    axes = {0: "batch", 1: "sequence"}
    torch.onnx.export(hf, _torch_inputs(example), float32, input_names=list(ONNX_INPUTS),
                      output_names=["logits"], dynamic_axes={name: axes for name in ONNX_INPUTS},
                      opset_version=17, dynamo=False)
    # ONNX Runtime's pre-processing first (the quantizer asks for it): without it, the weights
    # the trace reaches through a Transpose are no constant to quantize_dynamic, which leaves
    # their MatMuls in float32 (on the tiny model 9 of 15 weight products quantized, with it 15).
    quant_pre_process(float32, prepared, skip_symbolic_shape=True)
    quantize_dynamic(prepared, int8, weight_type=QuantType.QInt8)
    return float32, int8


def onnx_runtime_call(path: str, threads: int) -> Call:
    """Probabilities [B, num_labels] of transformers' ONNX file (``onnx_files``) run by ONNX
    Runtime's CPU provider with every graph optimization and ``threads`` intra-op threads, the
    whole batch per call (int64 inputs named as transformers names them)."""
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.intra_op_num_threads = threads
    session = onnxruntime.InferenceSession(path, options, providers=["CPUExecutionProvider"])

    def call(inputs: Inputs) -> np.ndarray:
        feed = {name: inputs[ours].astype(np.int64)
                for name, ours in zip(ONNX_INPUTS, ("input_ids", "input_mask", "segment_ids"))}
        return softmax(session.run(None, feed)[0])

    return call


def onnx_model_call(path: str, threads: int) -> Call:
    """Probabilities [B, num_labels] of an albert_tf ONNX file, one example [1, L] per call of
    ``OnnxModel`` (``threads``: its session's intra-op threads)."""
    return one_example_per_call(OnnxModel(path, num_threads=threads))
