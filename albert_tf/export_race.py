"""SavedModel export of a fine-tuned RACE (multiple-choice) model, in the layout of albert_tf/export.py.

- ``serving_default``: ``input_ids``, ``input_mask``, ``segment_ids`` int32 [batch, 4, seq], row c
  being option c's ``[CLS] article [SEP] question+option [SEP]`` (the feature records' rows) ->
  ``probabilities`` float32 [batch, 4] (softmax over the options, A first) and ``predictions``
  int32 [batch] (0-3 for A-D).
- ``serve_text``: ``article``, ``question`` string [batch] and ``options`` string [batch, 4] -> the
  same outputs and the packed ``input_ids`` int32 [batch, 4, L]. The texts are normalised as the
  reader does; each option fills every "_" of the question (or, without one, is appended after a
  space); the question+option keeps its last ``max_qa_length`` pieces and the article its first
  ``max_seq_length - 3 - len(question+option)`` (``MultipleChoicePacker``).
"""

from __future__ import annotations

import tensorflow as tf

from albert_tf.export import ServingModule, has_text_signature, ids_specs, text_specs, write_export
from albert_tf.multiple_choice import MODEL_INPUTS, AlbertMultipleChoiceModel
from albert_tf.text_packing import MultipleChoicePacker
from albert_tf.tokenization import FullTokenizer


class MultipleChoiceServing(ServingModule):
    """The RACE model's signatures (see the module doc); ``packer`` adds ``serve_text``."""

    def __init__(self, model: AlbertMultipleChoiceModel, packer: MultipleChoicePacker | None = None):
        super().__init__(model, name="albert_multiple_choice_serving")
        self.packer = packer
        choices = model.num_choices
        text_inputs = None
        if packer is not None:
            text_inputs = [*text_specs("article", "question"),
                           *text_specs("options", shape=(None, choices))]
        self.define_signatures(ids_specs(MODEL_INPUTS, shape=(None, choices, None)), text_inputs)

    def outputs_from_ids(self, input_ids: tf.Tensor, input_mask: tf.Tensor,
                         segment_ids: tf.Tensor) -> dict[str, tf.Tensor]:
        logits = self.model({"input_ids": self.checked_ids(input_ids), "input_mask": input_mask,
                             "segment_ids": segment_ids}, training=False)["logits"]
        return {"probabilities": tf.nn.softmax(logits, axis=-1),
                "predictions": tf.argmax(logits, axis=-1, output_type=tf.int32)}

    def outputs_from_text(self, article: tf.Tensor, question: tf.Tensor,
                          options: tf.Tensor) -> dict[str, tf.Tensor]:
        features = self.packer(article, question, options)
        return {**self.serve_features(features), "input_ids": features["input_ids"]}


def export_multiple_choice(model: AlbertMultipleChoiceModel, export_dir: str,
                           tokenizer: FullTokenizer | None = None, max_seq_length: int | None = None,
                           max_qa_length: int = 128) -> str:
    """Writes the RACE model's export to ``export_dir`` (see the module doc); returns the path.

    tokenizer (SentencePiece mode) adds ``with_text``, with the features' ``max_seq_length``
    (default max_position_embeddings) and ``max_qa_length``. Raises ValueError for lengths the
    features reject.
    """
    max_seq_length = max_seq_length or model.config.max_position_embeddings
    if max_seq_length < max_qa_length + 3:
        raise ValueError(f"max_seq_length ({max_seq_length}) must be at least max_qa_length + 3 "
                         f"({max_qa_length + 3}).")

    def serving_module(with_text: bool) -> MultipleChoiceServing:
        packer = (MultipleChoicePacker(tokenizer, max_seq_length, max_qa_length) if with_text
                  else None)
        return MultipleChoiceServing(model, packer)

    return write_export(export_dir, serving_module, has_text_signature(tokenizer))
