"""TODO(split) Raw strings -> ``input_ids``, ``input_mask``, ``segment_ids`` inside the graph, for serving.

The pieces every text signature is built from (classifier, and the tasks' exports):

- ``pair_lengths``: the lengths the Python features' pair truncation leaves (pop from the end of the
  longer side, ties pop the second), in closed form for a batch;
- ``keep_first`` / ``keep_last``: cut every row of ragged ids to a per-row length;
- ``pack_segments``: ``[CLS] first [SEP] second [SEP]`` with segment ids 0 / 1, padded to the longest
  example of the batch (no second segment: ``[CLS] first [SEP]``);
- ``TextPacker``: tokenizes one or two texts with the ``InGraphTokenizer`` (ids identical to the
  Python tokenizer) and packs them with the classifier's truncation rule: a pair to
  ``max_seq_length - 3`` pieces, a single text to ``max_seq_length - 2``;
- ``MultipleChoicePacker`` (RACE): an article, a question and its options -> one row per choice,
  with ``fill_in_options`` and the RACE features' truncation;
- ``QuestionContextPacker`` (SQuAD): a question and a context -> the features' first window, with
  every context token's character span.
"""

from __future__ import annotations

import math

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
    """The GLUE classifier's signatures (see the module doc); ``packer`` adds ``serve_text``."""

    def __init__(self, model: AlbertClassifierModel, threshold: float | None = None,
                 packer: TextPacker | None = None):
        super().__init__(model, name="albert_classifier_serving")
        self.threshold = None if threshold is None else tf.constant(threshold, tf.float32)
        self.packer = packer
        self.define_signatures(ids_specs(),
                               text_specs("text_a", "text_b") if packer is not None else None)

    def outputs_from_ids(self, input_ids: tf.Tensor, input_mask: tf.Tensor,
                         segment_ids: tf.Tensor) -> dict[str, tf.Tensor]:
        logits = self.model({"input_ids": self.checked_ids(input_ids), "input_mask": input_mask,
                             "segment_ids": segment_ids}, training=False)["logits"]
        if self.model.is_regression:
            outputs = {"probabilities": logits, "predictions": logits[:, 0]}
        else:
            outputs = {"probabilities": tf.nn.softmax(logits, axis=-1),
                       "predictions": tf.argmax(logits, axis=-1, output_type=tf.int32)}
        if self.threshold is not None:
            outputs["threshold"] = tf.identity(self.threshold)
        return outputs

    def outputs_from_text(self, text_a: tf.Tensor, text_b: tf.Tensor) -> dict[str, tf.Tensor]:
        features = self.packer(text_a, text_b)
        return {**self.serve_features(features), "input_ids": features["input_ids"]}


def export_classifier(model: AlbertClassifierModel, export_dir: str, threshold: float | None = None,
                      assets: dict[str, str] | None = None, tokenizer: FullTokenizer | None = None,
                      max_seq_length: int | None = None) -> str:
    """Writes the GLUE classifier's export to ``export_dir`` (see the module doc); returns the path.

    threshold: NaN or None = no ``threshold`` output. assets: e.g. {"labels.txt": ...}. tokenizer
    (SentencePiece mode): adds ``with_text``, truncating to ``max_seq_length`` (default
    max_position_embeddings).
    """
    if threshold is not None and math.isnan(threshold):
        threshold = None
    max_seq_length = max_seq_length or model.config.max_position_embeddings

    def serving_module(with_text: bool) -> ClassifierServing:
        packer = TextPacker(tokenizer, max_seq_length) if with_text else None
        return ClassifierServing(model, threshold, packer)

    return write_export(export_dir, serving_module, has_text_signature(tokenizer), assets)


def _tflite_outputs(model: AlbertClassifierModel, inputs: dict[str, tf.Tensor]
                    ) -> dict[str, tf.Tensor]:
    logits = model(inputs, training=False)["logits"]
    probabilities = logits if model.is_regression else tf.nn.softmax(logits, axis=-1)
    return {"logits": logits, "probabilities": probabilities}


def export_classifier_tflite(model: AlbertClassifierModel, path: str, max_seq_length: int) -> str:
    """Writes the classifier's float32 TFLite model to ``path``: ``logits`` and ``probabilities``
    float32 [1, num_labels] (softmax; a regression such as STS-B: the raw score, as the
    SavedModel's ``probabilities``). Returns ``path``."""
    return export_tflite(model, path, max_seq_length, _tflite_outputs)
