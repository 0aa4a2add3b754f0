"""TFLite export of a fine-tuned model: the conversion every task's TFLite export goes through.

``export_tflite(model, path, max_seq_length, outputs_of)`` writes a float32 TFLite flatbuffer with
one signature, ``serving_default``, on fixed-shape inputs ``input_ids``, ``input_mask``,
``segment_ids`` (int32 [1, max_seq_length], one example per call, zero-padded as the Python
features are), returning what the task's ``outputs_of(model, inputs)`` computes. The tasks that
have one: the GLUE classifier (``logits``, ``probabilities``; albert_tf/tasks/classification/serving.py)
and the SQuAD v1.1 model (``start_logits``, ``end_logits``, the outputs of the reference's SQuAD v1
TFLite export; albert_tf/tasks/question_answering/serving.py). The SQuAD 2.0 model is not
exported, as in the reference.

The conversion uses the pinned TensorFlow's own converter (``tf.lite.TFLiteConverter``). It goes
through a SavedModel written by ``keras.export.ExportArchive``: converting the traced function
directly (``from_concrete_functions``) leaves Keras 3 variables as resource variables that the
TFLite interpreter cannot read, whereas the archive's SavedModel lets the converter freeze them
into constants. A model computing in another dtype than float32 is a ``TFLiteExportError``.
"""

from __future__ import annotations

import os
import tempfile
from typing import Callable

import keras
import tensorflow as tf

from albert_tf.files.atomic import atomic_open
from albert_tf.models.encoder import INPUT_NAMES
from albert_tf.serving.saved_model import output_name

SIGNATURE_KEY = "serving_default"


class TFLiteExportError(ValueError):
    """A model or setting that has no TFLite export."""


def input_specs(max_seq_length: int) -> list[tf.TensorSpec]:
    """The signature's inputs, in ``INPUT_NAMES`` order: int32 [1, max_seq_length] each."""
    return [tf.TensorSpec([1, max_seq_length], tf.int32, name=name) for name in INPUT_NAMES]


# A task's exported outputs: (model, {input name: int32 [1, S]}) -> {output name: tensor}.
OutputsFn = Callable[[keras.Model, dict[str, tf.Tensor]], dict[str, tf.Tensor]]


def convert_to_tflite(model: keras.Model, max_seq_length: int, outputs_of: OutputsFn) -> bytes:
    """The TFLite flatbuffer of ``model`` at ``max_seq_length`` (see the module docstring), whose
    signature returns ``outputs_of(model, inputs)``.

    Raises TFLiteExportError for a model that computes in another dtype than float32 (built under
    a mixed-precision policy), or a max_seq_length outside [1, max_position_embeddings].
    """
    if model.compute_dtype != "float32":
        raise TFLiteExportError(f"the model computes in {model.compute_dtype}; the TFLite export "
                                "is float32: build the model under the float32 policy "
                                "(keras.mixed_precision.set_global_policy('float32')) and load "
                                "its checkpoint into it.")
    limit = model.config.max_position_embeddings
    if not 1 <= max_seq_length <= limit:
        raise TFLiteExportError(f"max_seq_length must lie in [1, {limit}] (the config's "
                                f"max_position_embeddings), got {max_seq_length}.")

    def serve(input_ids: tf.Tensor, input_mask: tf.Tensor,
              segment_ids: tf.Tensor) -> dict[str, tf.Tensor]:
        return outputs_of(model, {"input_ids": input_ids, "input_mask": input_mask,
                                  "segment_ids": segment_ids})

    archive = keras.export.ExportArchive()
    archive.track(model)
    archive.add_endpoint(SIGNATURE_KEY, serve, input_signature=input_specs(max_seq_length))
    with tempfile.TemporaryDirectory() as scratch:
        saved_model_dir = os.path.join(scratch, "saved_model")
        archive.write_out(saved_model_dir, verbose=False)
        return tf.lite.TFLiteConverter.from_saved_model(saved_model_dir).convert()


def check_tflite_path(path: str, flag: str | None = None) -> None:
    """Raises TFLiteExportError if ``path`` is an existing directory: the export is one file (an
    existing file is replaced). ``export_tflite`` calls it before converting; a command calls it
    before any work, with ``flag`` to name its flag in the message."""
    if tf.io.gfile.isdir(path):
        raise TFLiteExportError(f"{output_name(path, flag)} is a directory; the TFLite export is "
                                f"one file: give a file path, e.g. "
                                f"{os.path.join(path, 'model.tflite')}.")


def export_tflite(model: keras.Model, path: str, max_seq_length: int, outputs_of: OutputsFn) -> str:
    """Writes the TFLite model of ``model`` (outputs ``outputs_of(model, inputs)``) to ``path`` (a
    file, replaced if it exists; written under a temporary name and renamed, so ``path`` is never
    half-written); returns ``path``. The tasks call it with their outputs. An existing directory at
    ``path`` is a TFLiteExportError naming it (``check_tflite_path``)."""
    check_tflite_path(path)
    flatbuffer = convert_to_tflite(model, max_seq_length, outputs_of)
    with atomic_open(path, "wb") as handle:
        handle.write(flatbuffer)
    return path
