"""The NER record schema (feature names, dtypes and shapes) and its parser.

data_prep/token_classification/ writes these records with these names; run_ner.py reads them
with ``parse_ner_record``. One record per window of a sentence, of max_seq_length S, all int64:

- ``input_ids``, ``input_mask``, ``segment_ids`` (all 0): [S];
- ``label_ids``: [S], the tag id at a word's first piece, else 0;
- ``label_weights``: [S], 1 at the first piece of every word (the training loss's positions);
- ``word_index``: [S], the word's index in its sentence where this window is the one where the
  word's first piece has the most context, else -1 (one position per word over the windows);
- ``sentence_index``: scalar, the window's sentence.

Keras-free (TensorFlow only), so that data_prep may import it.
"""

from __future__ import annotations

import tensorflow as tf

from albert_tf.files.record_features import (ENCODER_INPUTS, INPUT_IDS, INPUT_MASK,  # noqa: F401
                                             LABEL_IDS, SEGMENT_IDS)

LABEL_WEIGHTS = "label_weights"
WORD_INDEX = "word_index"
SENTENCE_INDEX = "sentence_index"
# The features of length S.
SEQUENCE_FEATURES = (*ENCODER_INPUTS, LABEL_IDS, LABEL_WEIGHTS, WORD_INDEX)


def ner_feature_spec(max_seq_length: int) -> dict[str, tf.io.FixedLenFeature]:
    """``tf.io.parse_example`` spec of an NER record."""
    spec = {name: tf.io.FixedLenFeature([max_seq_length], tf.int64) for name in SEQUENCE_FEATURES}
    spec[SENTENCE_INDEX] = tf.io.FixedLenFeature([], tf.int64)
    return spec


def parse_ner_record(serialized: tf.Tensor, max_seq_length: int) -> dict[str, tf.Tensor]:
    """Serialized records [B] (or one) -> int32 features: sequences [B, S], sentence_index [B]."""
    parsed = tf.io.parse_example(serialized, ner_feature_spec(max_seq_length))
    return {name: tf.cast(value, tf.int32) for name, value in parsed.items()}
