"""The GLUE record schema (the reference's feature names, dtypes and shapes) and its parser.

data_prep/classification/ writes these records with these names; run_classifier.py reads them
with ``parse_glue_example``. One record per example, of max_seq_length S:

- ``input_ids``, ``input_mask``, ``segment_ids``: int64 [S];
- ``label_ids``: int64 scalar, the label's index (float32 for a regression such as STS-B);
- ``is_real_example``: int64 scalar (1 for every record written; the input pipeline pads the last
  batch itself).

Keras-free (TensorFlow only), so that data_prep may import it.
"""

from __future__ import annotations

import tensorflow as tf

from albert_tf.files.record_features import (ENCODER_INPUTS, INPUT_IDS, INPUT_MASK,  # noqa: F401
                                             IS_REAL_EXAMPLE, LABEL_IDS, SEGMENT_IDS)

# The features of length S, in the reference's order.
SEQUENCE_FEATURES = ENCODER_INPUTS


def glue_feature_spec(max_seq_length: int, is_regression: bool) -> dict[str, tf.io.FixedLenFeature]:
    """``tf.io.parse_example`` spec of a GLUE record."""
    spec = {name: tf.io.FixedLenFeature([max_seq_length], tf.int64) for name in SEQUENCE_FEATURES}
    spec[LABEL_IDS] = tf.io.FixedLenFeature([], tf.float32 if is_regression else tf.int64)
    spec[IS_REAL_EXAMPLE] = tf.io.FixedLenFeature([], tf.int64)
    return spec


def parse_glue_example(serialized: tf.Tensor, max_seq_length: int,
                       is_regression: bool) -> dict[str, tf.Tensor]:
    """Parses one serialized record (scalar string) or a batch [B]; int64 features become int32.

    Shapes: ids/mask/segments [S] (or [B, S]); label_ids and is_real_example [] (or [B]).
    """
    parsed = tf.io.parse_example(serialized, glue_feature_spec(max_seq_length, is_regression))
    return {name: tf.cast(value, tf.int32) if value.dtype == tf.int64 else value
            for name, value in parsed.items()}
