"""The RACE record schema (the reference's feature names, dtypes and shapes) and its parser.

data_prep/multiple_choice/ writes these records with these names; run_race.py reads them with
``parse_race_record``. One record per question, of max_seq_length S and ``NUM_CHOICES`` rows:

- ``input_ids``, ``input_mask``, ``segment_ids``: int64 [NUM_CHOICES * S], the rows concatenated
  (option A first); parsed as [NUM_CHOICES, S];
- ``label_ids``: int64 scalar, the answer's row (0-3 for A-D);
- ``is_real_example``: int64 scalar (1 for every record written).

Keras-free (TensorFlow only), so that data_prep may import it.
"""

from __future__ import annotations

import tensorflow as tf

from albert_tf.files.record_features import (ENCODER_INPUTS, INPUT_IDS, INPUT_MASK,  # noqa: F401
                                             IS_REAL_EXAMPLE, LABEL_IDS, SEGMENT_IDS)

# Options per question (RACE's A-D), one row each.
NUM_CHOICES = 4

# The features stored flat as [NUM_CHOICES * S].
SEQUENCE_FEATURES = ENCODER_INPUTS


def race_feature_spec(max_seq_length: int) -> dict[str, tf.io.FixedLenFeature]:
    """``tf.io.parse_example`` spec of a RACE record (flat [4*S] sequences, as stored)."""
    spec = {name: tf.io.FixedLenFeature([NUM_CHOICES * max_seq_length], tf.int64)
            for name in SEQUENCE_FEATURES}
    spec[LABEL_IDS] = tf.io.FixedLenFeature([], tf.int64)
    spec[IS_REAL_EXAMPLE] = tf.io.FixedLenFeature([], tf.int64)
    return spec


def parse_race_record(serialized: tf.Tensor, max_seq_length: int) -> dict[str, tf.Tensor]:
    """Parses one serialized record (scalar string) or a batch [B]; every feature becomes int32.

    Shapes after parsing: ids/mask/segments reshaped to [4, S] (batch: [B, 4, S]), row i being
    option i; label_ids and is_real_example [] (batch: [B]).
    """
    serialized = tf.convert_to_tensor(serialized, tf.string)
    if serialized.shape.rank not in (0, 1):
        raise ValueError(f"expected one serialized record or a vector of them, got shape "
                         f"{serialized.shape}")
    choices_shape = [NUM_CHOICES, max_seq_length]
    if serialized.shape.rank == 1:
        choices_shape = [-1] + choices_shape
    parsed = tf.io.parse_example(serialized, race_feature_spec(max_seq_length))
    result = {name: tf.cast(value, tf.int32) for name, value in parsed.items()}
    for name in SEQUENCE_FEATURES:
        result[name] = tf.reshape(result[name], choices_shape)
    return result
