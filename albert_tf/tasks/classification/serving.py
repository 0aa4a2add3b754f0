"""The GLUE classifier's SavedModel export (the two-SavedModel layout of
albert_tf/serving/saved_model.py) and its TFLite model.

- ``serving_default``: ``input_ids``, ``input_mask``, ``segment_ids`` int32 [batch, seq] ->
  ``probabilities`` float32 [batch, num_labels] softmax (regression: the raw output [batch, 1]),
  ``predictions`` int32 [batch] arg-max class id (regression: float32 [batch] score), and
  ``threshold`` float32 scalar when one is given (the reference's ``--threshold_to_export``), and
  ``labels`` string [batch], the predicted class's name, when label names are given (a classifier
  trained on the user's own files);
- ``serve_text``: ``text_a``, ``text_b`` string [batch] (an empty ``text_b`` means a single
  sentence) -> the same outputs and the packed ``input_ids`` int32 [batch, L]: ``TextPacker``'s
  ``[CLS] a [SEP] b [SEP]``, a pair cut to max_seq_length - 3 pieces by popping from the end of the
  longer side (ties: b), a single sentence to max_seq_length - 2.

Unlike the reference's export (serialized ``tf.Example`` strings of fixed length), clients need no
protobuf step.

``TextPacker`` is the in-graph packing of ``serve_text`` (the classifier features' truncation).
``export_classifier_tflite`` writes the TFLite model (float32, or int8 / float16 weights):
``logits`` and ``probabilities`` [1, num_labels] on fixed-shape int32 [1, max_seq_length] ids
(albert_tf/serving/tflite.py).
"""

from __future__ import annotations

import math
from typing import Sequence

import tensorflow as tf

from albert_tf.serving.saved_model import (ServingModule, has_text_signature, ids_specs, text_specs,
                                           write_export)
from albert_tf.serving.text_packing import truncate_and_pack
from albert_tf.serving.tflite import export_tflite
from albert_tf.tasks.classification.model import AlbertClassifierModel
from albert_tf.tokenization.full_tokenizer import FullTokenizer
from albert_tf.tokenization.in_graph import InGraphTokenizer


class TextPacker(tf.Module):
    """One or two raw texts per example -> model inputs, with the classifier features' rules.

    ``packer(text_a, text_b)`` (string [B] each; an empty ``text_b`` after normalisation means a
    single-text example) -> ``input_ids``, ``input_mask``, ``segment_ids`` int32 [B, L] with
    L <= max_seq_length. Requires a SentencePiece tokenizer.
    """

    def __init__(self, tokenizer: FullTokenizer, max_seq_length: int,
                 name: str = "text_packer"):
        super().__init__(name=name)
        self.tokenizer = InGraphTokenizer.from_full_tokenizer(tokenizer)
        self.cls_id, self.sep_id = tokenizer.cls_id, tokenizer.sep_id
        self.max_seq_length = max_seq_length

    def __call__(self, text_a: tf.Tensor, text_b: tf.Tensor) -> dict[str, tf.Tensor]:
        normalized_b = self.tokenizer.normalize(text_b)
        ids_a, ids_b = self.tokenizer(text_a), self.tokenizer.encode_normalized(normalized_b)
        # A pair only where text_b is non-empty after normalisation (the reference's `if text_b`).
        has_b = tf.strings.length(normalized_b) > 0
        return truncate_and_pack(ids_a, ids_b, has_b, self.max_seq_length, self.cls_id,
                                 self.sep_id)


class ClassifierServing(ServingModule):
    """The GLUE classifier's signatures (see the module doc); ``packer`` adds ``serve_text``,
    ``label_names`` (class id order) the ``labels`` output."""

    def __init__(self, model: AlbertClassifierModel, threshold: float | None = None,
                 packer: TextPacker | None = None, label_names: Sequence[str] | None = None):
        super().__init__(model, name="albert_classifier_serving")
        self.threshold = None if threshold is None else tf.constant(threshold, tf.float32)
        if label_names is not None and (model.is_regression or
                                        len(label_names) != model.num_labels):
            raise ValueError(f"{len(label_names)} label names for a model with "
                             f"{model.num_labels} classes (regression: {model.is_regression})")
        self.label_names = None if label_names is None else tf.constant(list(label_names))
        self.packer = packer
        self.define_signatures(ids_specs(),
                               text_specs("text_a", "text_b") if packer is not None else None)

    def outputs_from_ids(self, input_ids: tf.Tensor, input_mask: tf.Tensor,
                         segment_ids: tf.Tensor) -> dict[str, tf.Tensor]:
        logits = self.model({"input_ids": input_ids, "input_mask": input_mask,
                             "segment_ids": segment_ids}, training=False)["logits"]
        if self.model.is_regression:
            outputs = {"probabilities": logits, "predictions": logits[:, 0]}
        else:
            outputs = {"probabilities": tf.nn.softmax(logits, axis=-1),
                       "predictions": tf.argmax(logits, axis=-1, output_type=tf.int32)}
        if self.threshold is not None:
            outputs["threshold"] = tf.identity(self.threshold)
        if self.label_names is not None:
            outputs["labels"] = tf.gather(self.label_names, outputs["predictions"])
        return outputs

    def outputs_from_text(self, text_a: tf.Tensor, text_b: tf.Tensor) -> dict[str, tf.Tensor]:
        features = self.packer(text_a, text_b)
        return {**self.serve_features(features), "input_ids": features["input_ids"]}


def export_classifier(model: AlbertClassifierModel, export_dir: str, threshold: float | None = None,
                      assets: dict[str, str] | None = None, tokenizer: FullTokenizer | None = None,
                      max_seq_length: int | None = None,
                      label_names: Sequence[str] | None = None) -> str:
    """Writes the GLUE classifier's export to ``export_dir`` (see the module doc); returns the path.

    threshold: NaN or None = no ``threshold`` output. assets: e.g. {"labels.txt": ...}. tokenizer
    (SentencePiece mode): adds ``with_text``, truncating to ``max_seq_length`` (default
    max_position_embeddings). label_names: adds the ``labels`` output (a classification).
    """
    if threshold is not None and math.isnan(threshold):
        threshold = None
    max_seq_length = max_seq_length or model.config.max_position_embeddings

    def serving_module(with_text: bool) -> ClassifierServing:
        packer = TextPacker(tokenizer, max_seq_length) if with_text else None
        return ClassifierServing(model, threshold, packer, label_names)

    return write_export(export_dir, serving_module, has_text_signature(tokenizer), assets)


def _tflite_outputs(model: AlbertClassifierModel, inputs: dict[str, tf.Tensor]
                    ) -> dict[str, tf.Tensor]:
    logits = model(inputs, training=False)["logits"]
    probabilities = logits if model.is_regression else tf.nn.softmax(logits, axis=-1)
    return {"logits": logits, "probabilities": probabilities}


def export_classifier_tflite(model: AlbertClassifierModel, path: str, max_seq_length: int,
                             quantization: str = "none") -> str:
    """Writes the classifier's TFLite model to ``path``: ``logits`` and ``probabilities`` float32
    [1, num_labels] (softmax; a regression such as STS-B: the raw score, as the SavedModel's
    ``probabilities``), its weights stored as ``quantization`` says (``none``: float32,
    ``dynamic_range``: int8, ``float16``; albert_tf/serving/tflite.py). Returns ``path``."""
    return export_tflite(model, path, max_seq_length, _tflite_outputs, quantization)
