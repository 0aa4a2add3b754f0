"""The pretraining TFRecord schema (the reference's feature names, dtypes and shapes) and its
parser, shared by every reader of those files.

Files written by the reference's create_pretraining_data and by ours (data_prep/) hold the same
features; run_pretraining's input pipeline parses them with ``parse_pretraining_example``.
"""

from __future__ import annotations

import tensorflow as tf

# Feature name -> (length kind, dtype on disk). "seq": max_seq_length S; "pred": max_predictions_per_seq M.
_PRETRAINING_FEATURES = (
    ("input_ids", "seq", tf.int64),
    ("input_mask", "seq", tf.int64),
    ("segment_ids", "seq", tf.int64),
    ("token_boundary", "seq", tf.int64),
    ("masked_lm_positions", "pred", tf.int64),
    ("masked_lm_ids", "pred", tf.int64),
    ("masked_lm_weights", "pred", tf.float32),
    ("next_sentence_labels", "one", tf.int64),
)


def pretraining_feature_spec(max_seq_length: int,
                             max_predictions_per_seq: int) -> dict[str, tf.io.FixedLenFeature]:
    """``tf.io.parse_single_example`` spec of one pretraining record.

    input_ids, input_mask, segment_ids, token_boundary: int64 [S]; masked_lm_positions, masked_lm_ids:
    int64 [M]; masked_lm_weights: float32 [M]; next_sentence_labels: int64 [1] (the sentence-order label:
    1 = segments swapped or B from another document).
    """
    lengths = {"seq": max_seq_length, "pred": max_predictions_per_seq, "one": 1}
    return {name: tf.io.FixedLenFeature([lengths[kind]], dtype)
            for name, kind, dtype in _PRETRAINING_FEATURES}


def parse_pretraining_example(serialized: tf.Tensor, max_seq_length: int,
                              max_predictions_per_seq: int) -> dict[str, tf.Tensor]:
    """Parses serialized records (a scalar, or a batch [B] -> features with a leading B); int64
    features become int32 (as the reference's input pipeline does, for TPU), masked_lm_weights stays
    float32. Shapes as in ``pretraining_feature_spec``."""
    example = tf.io.parse_example(
        serialized, pretraining_feature_spec(max_seq_length, max_predictions_per_seq))
    return {name: tf.cast(value, tf.int32) if value.dtype == tf.int64 else value
            for name, value in example.items()}
