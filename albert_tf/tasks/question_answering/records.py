"""The SQuAD record schema (the reference's ``FeatureWriter`` names, all int64) and its parser.

data_prep/question_answering/ writes these records with these names; run_squad.py reads them with
``parse_squad_record``. One record per window of max_seq_length S:

- ``unique_ids``: [1], the window's id (from 1000000000, in question order), which keys the
  post-processing's per-window metadata;
- ``input_ids``, ``input_mask``, ``segment_ids``, ``p_mask``: [S] (``p_mask`` 1 where no answer
  may start or end);
- training records add ``start_positions``, ``end_positions``, ``is_impossible``: [1].

Keras-free (TensorFlow only), so that data_prep may import it.
"""

from __future__ import annotations

import tensorflow as tf

from albert_tf.files.record_features import (ENCODER_INPUTS, INPUT_IDS, INPUT_MASK,  # noqa: F401
                                             SEGMENT_IDS)

UNIQUE_IDS = "unique_ids"
P_MASK = "p_mask"
START_POSITIONS = "start_positions"
END_POSITIONS = "end_positions"
IS_IMPOSSIBLE = "is_impossible"
# The features of length S.
SEQUENCE_FEATURES = (*ENCODER_INPUTS, P_MASK)
# The labels of a training record.
TRAINING_LABELS = (START_POSITIONS, END_POSITIONS, IS_IMPOSSIBLE)


def squad_feature_spec(max_seq_length: int, is_training: bool) -> dict[str, tf.io.FixedLenFeature]:
    """``tf.io.parse_example`` spec of a SQuAD record (the reference's names, int64)."""
    spec = {UNIQUE_IDS: tf.io.FixedLenFeature([], tf.int64)}
    spec.update({name: tf.io.FixedLenFeature([max_seq_length], tf.int64)
                 for name in SEQUENCE_FEATURES})
    if is_training:
        spec.update({name: tf.io.FixedLenFeature([], tf.int64) for name in TRAINING_LABELS})
    return spec


def parse_squad_record(serialized: tf.Tensor, max_seq_length: int,
                       is_training: bool) -> dict[str, tf.Tensor]:
    """Parses one serialized record (scalar string) or a batch [B]; int64 features become int32.

    Shapes: input_ids, input_mask, segment_ids, p_mask [S] (or [B, S]); unique_ids and the training
    labels [] (or [B]).
    """
    parsed = tf.io.parse_example(serialized, squad_feature_spec(max_seq_length, is_training))
    return {name: tf.cast(value, tf.int32) for name, value in parsed.items()}
