"""Raw strings -> ``input_ids``, ``input_mask``, ``segment_ids`` inside the graph, for serving.

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

import tensorflow as tf

from albert_tf.span_tokenizer import SpanTokenizer
from albert_tf.tokenization import FullTokenizer, InGraphTokenizer


def pair_lengths(len_a: tf.Tensor, len_b: tf.Tensor,
                 max_length: int | tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    """Lengths int [B] after popping from the longer side (ties pop b) until a + b <= max_length:
    unchanged if they fit; else the longer side is cut to ``max_length - shorter`` when that keeps it
    the longer, otherwise a gets ceil(m/2), b floor(m/2)."""
    shorter = tf.minimum(len_a, len_b)
    fits = len_a + len_b <= max_length
    cut_longer = 2 * shorter <= max_length
    half_b = max_length // 2
    new_a = tf.where(fits, len_a, tf.where(cut_longer, tf.where(len_a >= len_b, max_length - len_b,
                                                                  len_a), max_length - half_b))
    new_b = tf.where(fits, len_b, tf.where(cut_longer, tf.where(len_a >= len_b, len_b,
                                                                  max_length - len_a), half_b))
    return new_a, new_b


def keep_first(ids: tf.RaggedTensor, lengths: tf.Tensor) -> tf.RaggedTensor:
    """The first ``lengths[i]`` ids of every row i (ids [B, (n)], lengths int [B])."""
    positions = tf.ragged.range(ids.row_lengths())
    return tf.ragged.boolean_mask(ids, positions < tf.expand_dims(tf.cast(lengths, tf.int64), 1))


def keep_last(ids: tf.RaggedTensor, lengths: tf.Tensor) -> tf.RaggedTensor:
    """The last ``lengths[i]`` ids of every row i (ids [B, (n)], lengths int [B])."""
    positions = tf.ragged.range(ids.row_lengths())
    first_kept = tf.expand_dims(ids.row_lengths() - tf.cast(lengths, tf.int64), 1)
    return tf.ragged.boolean_mask(ids, positions >= first_kept)


def _column(batch: tf.Tensor, value: int) -> tf.RaggedTensor:
    """[B, 1] ragged ids, every row holding ``value``."""
    return tf.RaggedTensor.from_row_lengths(tf.fill([batch], tf.constant(value, tf.int32)),
                                            tf.ones([batch], tf.int64))


def pack_segments(first: tf.RaggedTensor, second: tf.RaggedTensor, has_second: tf.Tensor,
                  cls_id: int, sep_id: int) -> dict[str, tf.Tensor]:
    """``[CLS] first [SEP] second [SEP]`` per row (the second ``[SEP]`` only where ``has_second``).

    first, second: int32 ids [B, (n)], already truncated; has_second: bool [B].
    Returns int32 ``input_ids``, ``input_mask``, ``segment_ids`` [B, L], L the longest row, zero-padded.
    """
    batch = first.nrows()
    second_sep = keep_first(_column(batch, sep_id), tf.cast(has_second, tf.int64))
    head = tf.concat([_column(batch, cls_id), first, _column(batch, sep_id)], axis=1)
    tail = tf.concat([second, second_sep], axis=1)
    input_ids = tf.concat([head, tail], axis=1)
    segment_ids = tf.concat([tf.zeros_like(head), tf.ones_like(tail)], axis=1)
    return {"input_ids": input_ids.to_tensor(), "input_mask": tf.ones_like(input_ids).to_tensor(),
            "segment_ids": segment_ids.to_tensor()}


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
        len_a, len_b = ids_a.row_lengths(), ids_b.row_lengths()
        pair_a, pair_b = pair_lengths(len_a, len_b, self.max_seq_length - 3)
        len_a = tf.where(has_b, pair_a, tf.minimum(len_a, self.max_seq_length - 2))
        len_b = tf.where(has_b, pair_b, tf.zeros_like(len_b))
        return pack_segments(keep_first(ids_a, len_a), keep_first(ids_b, len_b), has_b,
                             self.cls_id, self.sep_id)


def truncate_and_pack(first: tf.RaggedTensor, second: tf.RaggedTensor, has_second: tf.Tensor,
                      max_seq_length: int | tf.Tensor, cls_id: int,
                      sep_id: int) -> dict[str, tf.Tensor]:
    """Ids of one or two segments -> model inputs, with the classifier features' truncation.

    first, second: int32 ids [B, (n)]; has_second: bool [B] (where False, ``second`` is ignored).
    A pair is cut to ``max_seq_length - 3`` ids by ``pair_lengths``, a single segment to its first
    ``max_seq_length - 2``; then ``pack_segments``. Returns int32 [B, L], L <= max_seq_length.
    """
    max_seq_length = tf.cast(max_seq_length, tf.int64)
    len_a, len_b = first.row_lengths(), second.row_lengths()
    pair_a, pair_b = pair_lengths(len_a, len_b, max_seq_length - 3)
    len_a = tf.where(has_second, pair_a, tf.minimum(len_a, max_seq_length - 2))
    len_b = tf.where(has_second, pair_b, tf.zeros_like(len_b))
    return pack_segments(keep_first(first, len_a), keep_first(second, len_b), has_second, cls_id,
                         sep_id)


def pad_to_length(features: dict[str, tf.Tensor],
                  length: int | tf.Tensor) -> dict[str, tf.Tensor]:
    """Zero-pads every [B, L] tensor of ``features`` to [B, length] (requires L <= length)."""
    static_length = tf.get_static_value(length)
    length = tf.cast(length, tf.int32)
    padded = {}
    for name, tensor in features.items():
        padded[name] = tf.pad(tensor, [[0, 0], [0, length - tf.shape(tensor)[1]]])
        padded[name].set_shape([None, static_length])
    return padded


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
    rules (data_prep/race_features.py).

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
        return {name: tf.reshape(value, [batch, num_choices, -1]) for name, value in packed.items()}


class QuestionContextPacker(tf.Module):
    """A question and its context -> the first window of the SQuAD features
    (data_prep/squad_features.py), with every context token's character span.

    ``packer(question [B], context [B])`` (raw strings) -> int32 [B, max_seq_length]:

    - ``input_ids``, ``input_mask``, ``segment_ids``, ``p_mask``: ``[CLS] query [SEP] context [SEP]``
      as the features lay it out; the query keeps its first ``max_query_length`` pieces, the context
      its first ``max_seq_length - 3 - len(query)`` (the first window);
    - ``char_start``, ``char_end``: the code points ``[start, end)`` of the raw context that the
      token at each position comes from (``SpanTokenizer``), -1 where the position holds no context
      token.

    Rows are padded to max_seq_length as the features are (ids 0, p_mask 1), so the model's outputs
    are those of the features' first window, padding positions included.
    """

    def __init__(self, tokenizer: FullTokenizer, max_seq_length: int, max_query_length: int,
                 name: str = "question_context_packer"):
        super().__init__(name=name)
        self.tokenizer = SpanTokenizer(tokenizer)
        self.cls_id, self.sep_id = tokenizer.cls_id, tokenizer.sep_id
        self.max_seq_length = max_seq_length
        self.max_query_length = max_query_length

    def __call__(self, question: tf.Tensor, context: tf.Tensor) -> dict[str, tf.Tensor]:
        query = self.tokenizer.normalizer(question)
        query = keep_first(query, tf.minimum(query.row_lengths(), self.max_query_length))
        document = self.tokenizer(context)
        length = tf.minimum(document["ids"].row_lengths(),
                            self.max_seq_length - 3 - query.row_lengths())
        batch = query.nrows()
        features = pack_segments(query, keep_first(document["ids"], length),
                                 tf.ones([batch], tf.bool), self.cls_id, self.sep_id)
        for name in ("char_start", "char_end"):
            no_span = _column(batch, -1)
            features[name] = tf.concat([no_span, -tf.ones_like(query), no_span,
                                        keep_first(document[name], length), no_span],
                                       axis=1).to_tensor(default_value=-1)
        at_cls = tf.equal(tf.range(tf.shape(features["input_ids"])[1]), 0)
        features["p_mask"] = tf.where((features["char_start"] >= 0) | at_cls, 0, 1)
        padding = [[0, 0], [0, self.max_seq_length - tf.shape(features["input_ids"])[1]]]
        padding_values = {"p_mask": 1, "char_start": -1, "char_end": -1}
        padded = {name: tf.pad(value, padding, constant_values=padding_values.get(name, 0))
                  for name, value in features.items()}
        for value in padded.values():
            value.set_shape([None, self.max_seq_length])
        return padded
