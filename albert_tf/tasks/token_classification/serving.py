"""The token classifier's SavedModel export (the two-SavedModel layout of
albert_tf/serving/saved_model.py); both hold the tag names (in the graph, and as
``assets.extra/tags.txt``, one per line, tag id = line index).

- ``serving_default`` (``ids_only`` and ``with_text``): ``input_ids``, ``input_mask``,
  ``segment_ids`` int32 [batch, seq] -> per position ``probabilities`` float32
  [batch, seq, num_tags] (softmax), ``predictions`` int32 [batch, seq] (arg-max tag id) and
  ``tags`` string [batch, seq] (its name). Loads with TensorFlow alone.
- ``serve_text`` (``with_text``): ``text`` string [batch], split on whitespace into words ->
  ``words`` string [batch, W] (padded with "") and the per-word outputs below;
- ``serve_words`` (``with_text``): ``words`` string [batch, W], pre-tokenized (trailing "" are
  padding) -> per word ``tags`` string [batch, W] and ``tag_ids`` int32 [batch, W], plus
  ``input_ids`` [batch, L] and ``truncated`` bool [batch].

Words are tokenized one by one, as the features are (a word without any piece reads as the unknown
piece), and each word's tag is the prediction at its first piece. The text signatures read one
window: a sentence's first max_seq_length - 2 pieces. The words whose first piece lies beyond it
get the tag "" and tag id -1, and ``truncated`` is True for their row (padding words get "" / -1
too); run_ner's prediction files split long sentences into windows instead. They hold
SentencePiece ops: a process loading ``with_text`` imports ``tensorflow_text`` first.
"""

from __future__ import annotations

from typing import Sequence

import tensorflow as tf

from albert_tf.serving.input_checks import with_ranks
from albert_tf.serving.saved_model import (ServingModule, has_text_signature, ids_specs, text_specs,
                                           write_export)
from albert_tf.serving.text_packing import constant_column, keep_first, pack_segments
from albert_tf.tasks.token_classification.model import AlbertTokenClassifierModel
from albert_tf.tokenization.full_tokenizer import FullTokenizer
from albert_tf.tokenization.in_graph import InGraphTokenizer

TAGS_ASSET = "tags.txt"
WORDS_LAYOUT = ("batch", "words")


class WordPacker(tf.Module):
    """Words -> one window of model inputs and each word's first-piece position.

    ``packer(words)`` (string RaggedTensor [B, (W)]) -> ``input_ids``, ``input_mask``,
    ``segment_ids`` int32 [B, L] (``[CLS] pieces [SEP]``, the first max_seq_length - 2 pieces,
    zero-padded to the longest row), ``first_piece`` int32 RaggedTensor [B, (W)] (input position
    of each word's first piece) and ``kept`` int32 [B] (pieces in the window).
    """

    def __init__(self, tokenizer: FullTokenizer, max_seq_length: int, name: str = "word_packer"):
        super().__init__(name=name)
        self.tokenizer = InGraphTokenizer.from_full_tokenizer(tokenizer)
        self.cls_id, self.sep_id, self.unk_id = tokenizer.cls_id, tokenizer.sep_id, tokenizer.unk_id
        self.max_seq_length = max_seq_length

    def __call__(self, words: tf.RaggedTensor) -> dict[str, tf.Tensor | tf.RaggedTensor]:
        pieces = self.tokenizer(words.flat_values)  # [N, (P)]
        count = pieces.row_lengths()
        unknown = keep_first(constant_column(tf.shape(count)[0], self.unk_id),
                             tf.cast(count == 0, tf.int64))
        pieces = tf.concat([pieces, unknown], axis=1)
        count = tf.cast(pieces.row_lengths(), tf.int32)
        sentence = words.with_flat_values(pieces).merge_dims(1, 2)  # [B, (T)]
        starts = tf.concat([tf.cumsum(count, exclusive=True), [tf.reduce_sum(count)]], axis=0)
        offset = tf.gather(starts, words.row_starts())
        first = starts[:-1] - tf.gather(offset, words.value_rowids()) + 1  # after [CLS]
        kept = tf.minimum(tf.cast(sentence.row_lengths(), tf.int32), self.max_seq_length - 2)
        batch = words.nrows()
        packed = pack_segments(keep_first(sentence, kept), sentence[:, :0],
                               tf.zeros([batch], tf.bool), self.cls_id, self.sep_id)
        return {**packed, "first_piece": words.with_flat_values(first), "kept": kept}


class TokenClassifierServing(ServingModule):
    """The token classifier's signatures (see the module doc); ``packer`` adds the text ones."""

    def __init__(self, model: AlbertTokenClassifierModel, tags: Sequence[str],
                 packer: WordPacker | None = None):
        super().__init__(model, name="albert_token_classifier_serving")
        if len(tags) != model.num_tags:
            raise ValueError(f"{len(tags)} tag names for a model of {model.num_tags} tags")
        self.tag_names = tf.constant(list(tags), tf.string)
        self.packer = packer
        self.define_signatures(ids_specs(), text_specs("text") if packer is not None else None)
        if packer is not None:
            # One traced graph of the word tagging, shared by both text signatures.
            self._tag_words = tf.function(self._tag_words, autograph=False, input_signature=[
                tf.RaggedTensorSpec([None, None], tf.string, row_splits_dtype=tf.int64)])
            self.serve_words = tf.function(
                self._outputs_from_words_dict, autograph=False,
                input_signature=[{"words": tf.TensorSpec([None, None], tf.string, name="words")}])

    def outputs_from_ids(self, input_ids: tf.Tensor, input_mask: tf.Tensor,
                         segment_ids: tf.Tensor) -> dict[str, tf.Tensor]:
        logits = self.model({"input_ids": input_ids, "input_mask": input_mask,
                             "segment_ids": segment_ids}, training=False)["logits"]
        predictions = tf.argmax(logits, axis=-1, output_type=tf.int32)
        return {"probabilities": tf.nn.softmax(logits, axis=-1), "predictions": predictions,
                "tags": tf.gather(self.tag_names, predictions)}

    def _tag_words(self, words: tf.RaggedTensor) -> dict[str, tf.Tensor]:
        features = self.packer(words)
        predictions = self.serve_features(features)["predictions"]  # [B, L]
        first = features["first_piece"]
        in_window = first.with_flat_values(
            first.flat_values <= tf.gather(features["kept"], first.value_rowids()))
        positions = first.with_flat_values(
            tf.where(in_window.flat_values, first.flat_values, 0)).to_tensor(0)
        tag_ids = tf.gather(predictions, positions, batch_dims=1)
        tag_ids = tf.where(in_window.to_tensor(False), tag_ids, -1)
        tags = tf.where(tag_ids >= 0, tf.gather(self.tag_names, tf.maximum(tag_ids, 0)), "")
        truncated = tf.reduce_any(tf.logical_not(in_window), axis=1)
        return {"tags": tags, "tag_ids": tag_ids, "input_ids": features["input_ids"],
                "truncated": truncated}

    def outputs_from_text(self, text: tf.Tensor) -> dict[str, tf.Tensor]:
        words = tf.strings.split(text)
        return {**self._tag_words(words), "words": words.to_tensor("")}

    def _outputs_from_words_dict(self, inputs: dict[str, tf.Tensor]) -> dict[str, tf.Tensor]:
        inputs = with_ranks(inputs, {"words": WORDS_LAYOUT})
        words = tf.RaggedTensor.from_tensor(inputs["words"], padding="")
        outputs = self._tag_words(words)
        width = tf.shape(inputs["words"])[1]
        padding = [[0, 0], [0, width - tf.shape(outputs["tags"])[1]]]
        return {**outputs, "tags": tf.pad(outputs["tags"], padding, constant_values=""),
                "tag_ids": tf.pad(outputs["tag_ids"], padding, constant_values=-1)}

    def signatures(self) -> dict[str, tf.types.experimental.GenericFunction]:
        signatures = super().signatures()
        if self.packer is not None:
            signatures["serve_words"] = self.serve_words
        return signatures


def export_token_classifier(model: AlbertTokenClassifierModel, export_dir: str,
                            tags: Sequence[str], tokenizer: FullTokenizer | None = None,
                            max_seq_length: int | None = None) -> str:
    """Writes the token classifier's export to ``export_dir`` (see the module doc); returns the
    path. tokenizer (SentencePiece mode) adds ``with_text``, reading ``max_seq_length`` (default
    max_position_embeddings) positions."""
    max_seq_length = max_seq_length or model.config.max_position_embeddings

    def serving_module(with_text: bool) -> TokenClassifierServing:
        packer = WordPacker(tokenizer, max_seq_length) if with_text else None
        return TokenClassifierServing(model, tags, packer)

    return write_export(export_dir, serving_module, has_text_signature(tokenizer),
                        {TAGS_ASSET: "\n".join(tags) + "\n"})
