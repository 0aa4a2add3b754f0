"""The heads several task models share, on top of ``AlbertModel``, under the reference's variable names.

- ``MaskedLMHead``: gather at the masked positions -> dense(E, hidden_act) -> LayerNorm -> logits
  against the tied word-embedding table + ``output_bias`` (the reference's ``cls/predictions``):
  [B, S, H] at positions [B, M] -> float32 [B, M, V].
- ``ClassifierHead``: the reference's GLUE head: dropout (0.1 by default, fixed, training only) on
  the pooled output [B, H], then ``output_weights`` [num_labels, H] and ``output_bias``
  [num_labels] -> float32 [B, num_labels]; one output for regression (STS-B). With 2 labels and no
  dropout it is also the sentence-order head (``cls/seq_relationship``), and RACE scores each choice
  with it.
- ``gather_positions``: [B, S, H] at positions [B, M] -> [B, M, H].

The models that use them (and give them their reference names) live in their task's folder:
albert_tf/tasks/pretraining/model.py (MLM + SOP), albert_tf/tasks/classification/model.py,
albert_tf/tasks/multiple_choice/model.py; the SQuAD heads are in
albert_tf/tasks/question_answering/heads.py.
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
