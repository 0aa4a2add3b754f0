"""TODO(split) Task heads on top of AlbertModel, and the pretraining model, under the reference's variable names.

- ``MaskedLMHead``: gather at the masked positions -> dense(E, hidden_act) -> LayerNorm -> logits
  against the tied word-embedding table + ``output_bias`` (the reference's ``cls/predictions``).
- the sentence-order head: a ``ClassifierHead`` with 2 labels and no dropout
  (``cls/seq_relationship``).
- ``AlbertPretrainingModel``: the encoder plus both heads.
- ``ClassifierHead`` / ``AlbertClassifierModel``: the reference's GLUE head: dropout 0.1 (fixed, training
  only) on the pooled output, then ``output_weights`` [num_labels, H] and ``output_bias`` [num_labels]
  under the reference's root-scoped names; one output for regression (STS-B).

Both models are ``AlbertTaskModel``s: the encoder in ``albert``, the head's reference names in
``tf1_head_variables()``.
"""

from __future__ import annotations

import keras
import tensorflow as tf

from albert_tf.models.config import AlbertConfig
from albert_tf.models.layers import Dense, LayerNorm, dropout, truncated_normal


def gather_positions(sequence: tf.Tensor, positions: tf.Tensor) -> tf.Tensor:
    """[B, S, H] gathered at int positions [B, M] -> [B, M, H]."""
    return tf.gather(sequence, tf.cast(positions, tf.int32), batch_dims=1)


class MaskedLMHead(keras.layers.Layer):
    """The MLM head. Weights: ``transform`` dense [H, E] + bias [E], ``LayerNorm`` [E], ``output_bias`` [V].

    ``call(sequence_output [B, S, H], positions [B, M], embedding_table [V, E])`` -> float32 logits
    [B, M, V]. The output matrix is the encoder's word-embedding table (tied, not a copy).
    """

    def __init__(self, config: AlbertConfig, name: str = "predictions", **kwargs):
        super().__init__(name=name, **kwargs)
        self.transform = Dense(config.hidden_size, config.embedding_size, config.initializer_range,
                               activation=config.hidden_act, name="transform")
        self.layer_norm = LayerNorm(config.embedding_size, name="LayerNorm")
        self.output_bias = self.add_weight(shape=(config.vocab_size,), name="output_bias",
                                           initializer="zeros")
        self.built = True

    def call(self, sequence_output: tf.Tensor, positions: tf.Tensor,
             embedding_table: tf.Tensor) -> tf.Tensor:
        hidden = self.layer_norm(self.transform(gather_positions(sequence_output, positions)))
        table = tf.cast(embedding_table, tf.float32)
        # One 2-D [B*M, E] x [E, V] matmul: a batched [B, M, E] x [V, E]ᵀ matmul would broadcast the
        # table, and its gradient would build a [B, V, E] tensor only to sum it over B.
        flat = tf.reshape(tf.cast(hidden, tf.float32), [-1, tf.shape(hidden)[-1]])
        logits = tf.matmul(flat, table, transpose_b=True) + tf.cast(self.output_bias, tf.float32)
        return tf.reshape(logits, tf.concat([tf.shape(hidden)[:-1], tf.shape(table)[:1]], axis=0))


# The reference's classifier dropout on the pooled output: keep_prob 0.9 hard-coded, not in the config.
CLASSIFIER_DROPOUT = 0.1


class ClassifierHead(keras.layers.Layer):
    """pooled [B, H] -> dropout ``dropout_rate`` (training only; the reference's 0.1 by default)
    -> @ ``output_weights``ᵀ [num_labels, H] + ``output_bias`` [num_labels] -> float32 logits
    [B, num_labels].

    Initialisation: truncated normal (config.initializer_range) / zeros, as the reference.
    A float32 layer under any precision policy: a mixed policy would otherwise read its weights
    rounded to bfloat16 / float16.
    """

    def __init__(self, config: AlbertConfig, num_labels: int, name: str = "classifier",
                 dropout_rate: float = CLASSIFIER_DROPOUT, **kwargs):
        super().__init__(name=name, dtype="float32", **kwargs)
        self.dropout_rate = dropout_rate
        if num_labels < 1:
            raise ValueError(f"num_labels must be >= 1 (1 = regression), got {num_labels}.")
        self.num_labels = num_labels
        self.output_weights = self.add_weight(
            shape=(num_labels, config.hidden_size), name="output_weights",
            initializer=truncated_normal(config.initializer_range))
        self.output_bias = self.add_weight(shape=(num_labels,), name="output_bias",
                                           initializer="zeros")
        self.built = True

    def call(self, pooled_output: tf.Tensor, training: bool | None = None) -> tf.Tensor:
        pooled = dropout(tf.cast(pooled_output, tf.float32), self.dropout_rate, training)
        return tf.matmul(pooled, self.output_weights, transpose_b=True) + self.output_bias
