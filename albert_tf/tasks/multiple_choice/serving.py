"""SavedModel export of a fine-tuned RACE (multiple-choice) model, in the two-SavedModel layout of
albert_tf/serving/saved_model.py, and the in-graph packing of its text signature.

- ``serving_default``: ``input_ids``, ``input_mask``, ``segment_ids`` int32 [batch, 4, seq], row c
  being option c's ``[CLS] article [SEP] question+option [SEP]`` (the feature records' rows) ->
  ``probabilities`` float32 [batch, 4] (softmax over the options, A first) and ``predictions``
  int32 [batch] (0-3 for A-D).
- ``serve_text``: ``article``, ``question`` string [batch] and ``options`` string [batch, 4] -> the
  same outputs and the packed ``input_ids`` int32 [batch, 4, L]. The texts are normalised as the
  reader does; each option fills every "_" of the question (or, without one, is appended after a
  space); the question+option keeps its last ``max_qa_length`` pieces and the article its first
  ``max_seq_length - 3 - len(question+option)`` (``MultipleChoicePacker``).

The signatures declare the option dimension as any size, so that another count reaches the graph's
check and its message ("RACE needs 4 options per question, got 3") rather than an error of the
signature's binding or of a Reshape inside the model.
"""

from __future__ import annotations

from typing import Mapping

import tensorflow as tf

from albert_tf.models.encoder import INPUT_NAMES
from albert_tf.serving.input_checks import dimension_is
from albert_tf.serving.saved_model import (ServingModule, has_text_signature, ids_specs, text_specs,
                                           write_export)
from albert_tf.serving.text_packing import keep_first, keep_last, pack_segments
from albert_tf.tasks.multiple_choice.model import AlbertMultipleChoiceModel
from albert_tf.tokenization.full_tokenizer import FullTokenizer
from albert_tf.tokenization.in_graph import InGraphTokenizer


def fill_in_options(questions: tf.Tensor, options: tf.Tensor) -> tf.Tensor:
    """RACE's question+option text of every choice: string [B] and [B, C] -> [B, C].

    Every "_" of the question is replaced by the option; a question without "_" gets
    ``question + " " + option`` (both already normalised, as the Python reader does it).
    """
    num_choices = tf.shape(options)[1]
    repeated = tf.repeat(questions, num_choices)
    flat_options = tf.reshape(options, [-1])
    parts = tf.strings.split(repeated, sep="_")  # [B*C, (blanks + 1)]
    is_last = tf.ragged.range(parts.row_lengths()) == tf.expand_dims(parts.row_lengths() - 1, 1)
    fillers = tf.where(is_last.flat_values, "", tf.gather(flat_options, parts.value_rowids()))
    filled = tf.strings.reduce_join(
        parts.with_flat_values(tf.strings.join([parts.flat_values, fillers])), axis=1)
    appended = tf.strings.join([repeated, flat_options], separator=" ")
    return tf.reshape(tf.where(parts.row_lengths() > 1, filled, appended), tf.shape(options))


class MultipleChoicePacker(tf.Module):
    """An article, a question and its options -> one packed row per choice, by the RACE features'
    rules (data_prep/multiple_choice/features.py).

    ``packer(article [B], question [B], options [B, C])`` (raw strings) -> ``input_ids``,
    ``input_mask``, ``segment_ids`` int32 [B, C, L], row c = ``[CLS] article [SEP] qa_c [SEP]``: qa_c
    (``fill_in_options``) keeps its last ``max_qa_length`` pieces, then the article its first
    ``max_seq_length - 3 - len(qa_c)``; L <= max_seq_length is the longest row of the batch.
    """

    def __init__(self, tokenizer: FullTokenizer, max_seq_length: int, max_qa_length: int,
                 name: str = "multiple_choice_packer"):
        super().__init__(name=name)
        self.tokenizer = InGraphTokenizer.from_full_tokenizer(tokenizer)
        self.cls_id, self.sep_id = tokenizer.cls_id, tokenizer.sep_id
        self.max_seq_length = max_seq_length
        self.max_qa_length = max_qa_length

    def __call__(self, article: tf.Tensor, question: tf.Tensor,
                 options: tf.Tensor) -> dict[str, tf.Tensor]:
        batch, num_choices = tf.shape(options)[0], tf.shape(options)[1]
        normalized_options = tf.reshape(self.tokenizer.normalize(tf.reshape(options, [-1])),
                                        tf.shape(options))
        qa_texts = fill_in_options(self.tokenizer.normalize(question), normalized_options)
        qa_ids = self.tokenizer.encode_normalized(tf.reshape(qa_texts, [-1]))  # [B*C, (n)]
        qa_ids = keep_last(qa_ids, tf.minimum(qa_ids.row_lengths(), self.max_qa_length))
        article_ids = tf.gather(self.tokenizer(article), tf.repeat(tf.range(batch), num_choices))
        article_length = tf.minimum(article_ids.row_lengths(),
                                    self.max_seq_length - 3 - qa_ids.row_lengths())
        packed = pack_segments(keep_first(article_ids, article_length), qa_ids,
                               tf.ones([batch * num_choices], tf.bool), self.cls_id, self.sep_id)
        # The width given explicitly: an empty batch has no size to infer a -1 from.
        return {name: tf.reshape(value, [batch, num_choices, tf.shape(value)[1]])
                for name, value in packed.items()}


class MultipleChoiceServing(ServingModule):
    """The RACE model's signatures (see the module doc); ``packer`` adds ``serve_text``."""

    def __init__(self, model: AlbertMultipleChoiceModel, packer: MultipleChoicePacker | None = None):
        super().__init__(model, name="albert_multiple_choice_serving")
        self.packer = packer
        text_inputs = None
        if packer is not None:
            text_inputs = [*text_specs("article", "question"),
                           *text_specs("options", shape=(None, None))]
        choices = f"{model.num_choices} options"
        layouts = {name: ("batch", choices, "seq") for name in INPUT_NAMES}
        self.define_signatures(ids_specs(INPUT_NAMES, shape=(None, None, None)), text_inputs,
                               {**layouts, "options": ("batch", choices)})

    def _choices_check(self, tensor: tf.Tensor, name: str) -> tf.Operation:
        choices = self.model.num_choices
        return dimension_is(tensor, name, 1, choices, f"RACE needs {choices} options per question")

    def ids_checks(self, ids: Mapping[str, tf.Tensor]) -> list[tf.Operation]:
        """The shared checks, and ``num_choices`` rows per example."""
        return [*super().ids_checks(ids), self._choices_check(ids["input_ids"], "input_ids")]

    def text_checks(self, texts: Mapping[str, tf.Tensor]) -> list[tf.Operation]:
        """The shared checks, and ``num_choices`` options per question."""
        return [*super().text_checks(texts), self._choices_check(texts["options"], "options")]

    def outputs_from_ids(self, input_ids: tf.Tensor, input_mask: tf.Tensor,
                         segment_ids: tf.Tensor) -> dict[str, tf.Tensor]:
        logits = self.model({"input_ids": input_ids, "input_mask": input_mask,
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
