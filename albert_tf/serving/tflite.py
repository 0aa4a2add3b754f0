"""TFLite export of a fine-tuned model: the conversion every task's TFLite export goes through.

``export_tflite(model, path, max_seq_length, outputs_of, quantization)`` writes a TFLite flatbuffer
with two signatures:

- ``serving_default`` on inputs ``input_ids``, ``input_mask``, ``segment_ids`` int32 [1, L], one
  example per call, of any length L from 1 to max_seq_length (the sequence axis is dynamic:
  LiteRT's signature runner resizes the inputs to each call's L), returning what the task's
  ``outputs_of(model, inputs)`` computes. A request computes on its own L tokens, not on
  max_seq_length: at batch 1 the unpadded ids give the outputs of the same ids zero-padded to
  max_seq_length (padding is masked out of attention), at a cost that grows with L;
- ``serving_max_seq_length`` (no inputs): ``serving_max_seq_length`` int32 scalar, the
  export's max_seq_length, the longest L it was made for (``TFLiteModel``,
  albert_tf/serving/tflite_client.py, refuses longer inputs; the file's graph alone would run up
  to the config's max_position_embeddings).

The tasks that have one: the GLUE classifier (``logits``, ``probabilities``;
albert_tf/tasks/classification/serving.py) and the SQuAD v1.1 model (``start_logits``,
``end_logits``, the outputs of the reference's SQuAD v1 TFLite export;
albert_tf/tasks/question_answering/serving.py). The SQuAD 2.0 model is not exported, as in the
reference.

``quantization`` (one of ``QUANTIZATIONS``) chooses how the weights are stored; the signature is the
same float32 one in every case:

- ``none``: float32 weights and arithmetic (the default, and what the reference exported).
- ``dynamic_range``: the converter's dynamic-range quantization: int8 weights for the matrix
  products (one scale per output unit) and the word-embedding table (one scale), each weight of at
  least 1024 values; about a quarter of the float32 file at base size. The activations entering
  those products are quantized to int8 call by call; the outputs move by about a percent of their
  range.
- ``float16``: the weights stored as float16 (half the file) and widened to float32 when the model
  is loaded; the arithmetic stays float32, so the outputs move only by the weights' rounding.

The conversion uses the pinned TensorFlow's own converter (``tf.lite.TFLiteConverter``). It goes
through a SavedModel written by ``keras.export.ExportArchive``: converting the traced function
directly (``from_concrete_functions``) leaves Keras 3 variables as resource variables that the
TFLite interpreter cannot read, whereas the archive's SavedModel lets the converter freeze them
into constants. A model computing in another dtype than float32 is a ``TFLiteExportError``.
The files are meant for LiteRT's interpreter (``ai_edge_litert.interpreter.Interpreter``;
TensorFlow's own ``tf.lite.Interpreter`` is deprecated), which the tests and benchmarks use.
"""

from __future__ import annotations

import os
import tempfile
from typing import Callable

import keras
import tensorflow as tf

from albert_tf.errors.user_error import UserError
from albert_tf.files.atomic import atomic_open
from albert_tf.models.encoder import INPUT_NAMES
from albert_tf.serving.saved_model import output_name
# The signatures' names, defined once in the TensorFlow-free client that reads them.
from albert_tf.serving.tflite_client import LENGTH_SIGNATURE_KEY, SIGNATURE_KEY

# The weight storages of the export; flag_definitions keeps the same names for
# --tflite_quantization (tested equal).
QUANTIZATIONS = ("none", "dynamic_range", "float16")


class TFLiteExportError(UserError, ValueError):
    """A model or setting that has no TFLite export."""


def input_specs() -> list[tf.TensorSpec]:
    """The signature's inputs, in ``INPUT_NAMES`` order: int32 [1, L] each, L any length (one
    example per call; the converter keeps the unknown L as a dynamic axis, -1 in the file's
    ``shape_signature``)."""
    return [tf.TensorSpec([1, None], tf.int32, name=name) for name in INPUT_NAMES]


# A task's exported outputs: (model, {input name: int32 [1, S]}) -> {output name: tensor}.
OutputsFn = Callable[[keras.Model, dict[str, tf.Tensor]], dict[str, tf.Tensor]]


def check_convertible(model: keras.Model, max_seq_length: int, error: type[Exception],
                      export: str) -> None:
    """Raises ``error`` (the ``export`` format's, e.g. TFLiteExportError for "TFLite") for a model
    that computes in another dtype than float32 (built under a mixed-precision policy) or a
    max_seq_length outside [1, max_position_embeddings]: what a converted file cannot take."""
    if model.compute_dtype != "float32":
        raise error(f"the model computes in {model.compute_dtype}; the {export} export converts a "
                    "float32 model (quantization is the converter's job): build the model under "
                    "the float32 policy (keras.mixed_precision.set_global_policy('float32')) and "
                    "load its checkpoint into it.")
    limit = model.config.max_position_embeddings
    if not 1 <= max_seq_length <= limit:
        raise error(f"max_seq_length must lie in [1, {limit}] (the config's "
                    f"max_position_embeddings), got {max_seq_length}.")


def serving_function(model: keras.Model, outputs_of: OutputsFn) -> Callable[..., dict]:
    """(input_ids, input_mask, segment_ids) -> ``outputs_of(model, inputs)``: the function a
    converter converts, on the specs of ``input_specs``."""
    def serve(input_ids: tf.Tensor, input_mask: tf.Tensor,
              segment_ids: tf.Tensor) -> dict[str, tf.Tensor]:
        return outputs_of(model, {"input_ids": input_ids, "input_mask": input_mask,
                                  "segment_ids": segment_ids})

    return serve


def check_quantization(quantization: str) -> None:
    """Raises TFLiteExportError unless ``quantization`` is one of ``QUANTIZATIONS``."""
    if quantization not in QUANTIZATIONS:
        raise TFLiteExportError(f"quantization must be one of {', '.join(QUANTIZATIONS)}; "
                                f"got {quantization!r}.")


def _converter(saved_model_dir: str, quantization: str) -> tf.lite.TFLiteConverter:
    """TensorFlow's converter of ``saved_model_dir``, set for ``quantization``."""
    converter = tf.lite.TFLiteConverter.from_saved_model(
        saved_model_dir, signature_keys=[SIGNATURE_KEY, LENGTH_SIGNATURE_KEY])
    if quantization != "none":
        # Without a representative dataset, Optimize.DEFAULT is dynamic-range quantization;
        # with float16 as the only supported type it stores the weights as float16 instead.
        converter.optimizations = [tf.lite.Optimize.DEFAULT]
    if quantization == "float16":
        converter.target_spec.supported_types = [tf.float16]
    return converter


def convert_to_tflite(model: keras.Model, max_seq_length: int, outputs_of: OutputsFn,
                      quantization: str = "none") -> bytes:
    """The TFLite flatbuffer of ``model`` on inputs of 1 to ``max_seq_length`` positions with its
    weights stored as ``quantization`` says (see the module docstring), whose ``serving_default``
    returns ``outputs_of(model, inputs)`` and whose ``LENGTH_SIGNATURE_KEY`` signature returns
    ``max_seq_length``.

    Raises TFLiteExportError for a model that computes in another dtype than float32 (built under
    a mixed-precision policy), a max_seq_length outside [1, max_position_embeddings], or an unknown
    quantization.
    """
    check_quantization(quantization)
    check_convertible(model, max_seq_length, TFLiteExportError, "TFLite")
    archive = keras.export.ExportArchive()
    archive.track(model)
    archive.add_endpoint(SIGNATURE_KEY, serving_function(model, outputs_of),
                         input_signature=input_specs())
    archive.add_endpoint(LENGTH_SIGNATURE_KEY,
                         lambda: {LENGTH_SIGNATURE_KEY: tf.constant(max_seq_length, tf.int32)},
                         input_signature=[])
    with tempfile.TemporaryDirectory() as scratch:
        saved_model_dir = os.path.join(scratch, "saved_model")
        archive.write_out(saved_model_dir, verbose=False)
        return _converter(saved_model_dir, quantization).convert()


def check_file_path(path: str, flag: str | None, error: type[Exception], export: str,
                    example: str) -> None:
    """Raises ``error`` if ``path`` is an existing directory: the ``export`` format's export is one
    file (an existing file is replaced); ``example``: a file name the message suggests."""
    if tf.io.gfile.isdir(path):
        raise error(f"{output_name(path, flag)} is a directory; the {export} export is one file: "
                    f"give a file path, e.g. {os.path.join(path, example)}.")


def check_tflite_path(path: str, flag: str | None = None) -> None:
    """Raises TFLiteExportError if ``path`` is an existing directory: the export is one file (an
    existing file is replaced). ``export_tflite`` calls it before converting; a command calls it
    before any work, with ``flag`` to name its flag in the message."""
    check_file_path(path, flag, TFLiteExportError, "TFLite", "model.tflite")


def export_tflite(model: keras.Model, path: str, max_seq_length: int, outputs_of: OutputsFn,
                  quantization: str = "none") -> str:
    """Writes the TFLite model of ``model`` (outputs ``outputs_of(model, inputs)``, weights stored
    as ``quantization`` says) to ``path`` (a file, replaced if it exists; written under a temporary
    name and renamed, so ``path`` is never half-written); returns ``path``. The tasks call it with
    their outputs. An existing directory at ``path`` or an unknown quantization is a
    TFLiteExportError, raised before converting."""
    check_quantization(quantization)
    check_tflite_path(path)
    flatbuffer = convert_to_tflite(model, max_seq_length, outputs_of, quantization)
    with atomic_open(path, "wb") as handle:
        handle.write(flatbuffer)
    return path
