"""Token ids -> ``input_ids``, ``input_mask``, ``segment_ids`` inside the graph, for serving.

The pieces every text signature is built from (the tasks' exports and the preprocessing model):

- ``pair_lengths``: the lengths the Python features' pair truncation leaves (pop from the end of the
  longer side, ties pop the second), in closed form for a batch;
- ``keep_first`` / ``keep_last``: cut every row of ragged ids [B, (n)] to a per-row length;
- ``pack_segments``: ``[CLS] first [SEP] second [SEP]`` with segment ids 0 / 1, padded to the longest
  example of the batch (no second segment: ``[CLS] first [SEP]``): int32 [B, L];
- ``truncate_and_pack``: the classifier features' truncation (a pair to ``max_seq_length - 3``
  pieces, a single segment to ``max_seq_length - 2``), then ``pack_segments``;
- ``pad_to_length``: zero-padding [B, L] -> [B, length].

The packers that tokenize a task's raw texts with the ``InGraphTokenizer`` and apply these live with
their tasks: ``TextPacker`` in albert_tf/tasks/classification/serving.py, ``MultipleChoicePacker``
(RACE) in albert_tf/tasks/multiple_choice/serving.py, ``QuestionContextPacker`` (SQuAD) in
albert_tf/tasks/question_answering/serving.py.
"""

from __future__ import annotations

import tensorflow as tf


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


def constant_column(batch: tf.Tensor, value: int) -> tf.RaggedTensor:
    """[B, 1] ragged ids, every row holding ``value``."""
    return tf.RaggedTensor.from_row_lengths(tf.fill([batch], tf.constant(value, tf.int32)),
                                            tf.ones([batch], tf.int64))


def pack_segments(first: tf.RaggedTensor, second: tf.RaggedTensor, has_second: tf.Tensor,
                  cls_id: int, sep_id: int) -> dict[str, tf.Tensor]:
    """``[CLS] first [SEP] second [SEP]`` per row (the second ``[SEP]`` only where ``has_second``).

    first, second: int32 ids [B, (n)], already truncated; has_second: bool [B].
    Returns int32 ``input_ids``, ``input_mask``, ``segment_ids`` [B, L], L the longest row,
    zero-padded (an empty batch: L = 2, the length of ``[CLS] [SEP]``, which the model runs on).
    """
    batch = first.nrows()
    second_sep = keep_first(constant_column(batch, sep_id), tf.cast(has_second, tf.int64))
    head = tf.concat([constant_column(batch, cls_id), first, constant_column(batch, sep_id)], axis=1)
    tail = tf.concat([second, second_sep], axis=1)
    input_ids = tf.concat([head, tail], axis=1)
    segment_ids = tf.concat([tf.zeros_like(head), tf.ones_like(tail)], axis=1)
    shape = tf.stack([batch, tf.maximum(input_ids.bounding_shape(axis=1), 2)])
    return {"input_ids": input_ids.to_tensor(shape=shape),
            "input_mask": tf.ones_like(input_ids).to_tensor(shape=shape),
            "segment_ids": segment_ids.to_tensor(shape=shape)}


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
