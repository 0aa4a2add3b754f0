"""Task heads on top of AlbertModel, and the pretraining model, under the reference's variable names.

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

from typing import Mapping

import keras
import tensorflow as tf

from albert_tf.config import AlbertConfig
from albert_tf.layers import Dense, LayerNorm, dropout, truncated_normal
from albert_tf.task_model import AlbertTaskModel


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


class AlbertPretrainingModel(AlbertTaskModel):
    """Encoder + MLM + SOP heads.

    Inputs: AlbertModel's dict plus ``masked_lm_positions`` int [B, M]. Outputs: AlbertModel's dict
    plus ``mlm_logits`` float32 [B, M, V] and ``sop_logits`` float32 [B, 2].
    """

    def __init__(self, config: AlbertConfig, name: str = "albert_pretraining", **kwargs):
        super().__init__(config, name=name, **kwargs)
        self.mlm_head = MaskedLMHead(config)
        # The SOP head (cls/seq_relationship): the same linear head, 2 labels, no dropout.
        self.sop_head = ClassifierHead(config, 2, name="seq_relationship", dropout_rate=0.0)
        self.built = True

    def tf1_head_variables(self) -> dict[str, keras.Variable]:
        """The heads' reference names (``cls/predictions/*``, ``cls/seq_relationship/*``)."""
        mlm, sop = self.mlm_head, self.sop_head
        return {
            "cls/predictions/transform/dense/kernel": mlm.transform.kernel,
            "cls/predictions/transform/dense/bias": mlm.transform.bias,
            "cls/predictions/transform/LayerNorm/beta": mlm.layer_norm.beta,
            "cls/predictions/transform/LayerNorm/gamma": mlm.layer_norm.gamma,
            "cls/predictions/output_bias": mlm.output_bias,
            "cls/seq_relationship/output_weights": sop.output_weights,
            "cls/seq_relationship/output_bias": sop.output_bias,
        }

    def call(self, inputs: Mapping[str, tf.Tensor],
             training: bool | None = None) -> dict[str, tf.Tensor | list[tf.Tensor]]:
        if "masked_lm_positions" not in inputs:
            raise KeyError("AlbertPretrainingModel inputs need 'masked_lm_positions' [batch, M]; "
                           f"got keys {sorted(inputs)}.")
        outputs = dict(self.albert(inputs, training=training))
        outputs["mlm_logits"] = self.mlm_head(outputs["sequence_output"],
                                              inputs["masked_lm_positions"],
                                              embedding_table=self.albert.get_embedding_table())
        outputs["sop_logits"] = self.sop_head(outputs["pooled_output"])
        return outputs


class AlbertClassifierModel(AlbertTaskModel):
    """Encoder + ``ClassifierHead`` (run_classifier's model).

    Inputs: AlbertModel's dict (``input_ids``, ``input_mask``, ``segment_ids`` int [B, S]).
    Outputs: AlbertModel's dict plus ``logits`` float32 [B, num_labels]. ``is_regression``: one
    output trained as a real-valued score (STS-B); it requires num_labels 1.
    """

    def __init__(self, config: AlbertConfig, num_labels: int, is_regression: bool = False,
                 name: str = "albert_classifier", **kwargs):
        super().__init__(config, name=name, **kwargs)
        if is_regression and num_labels != 1:
            raise ValueError(f"a regression has one output, got num_labels={num_labels}.")
        self.num_labels = num_labels
        self.is_regression = is_regression
        self.classifier = ClassifierHead(config, num_labels)
        self.built = True

    def tf1_head_variables(self) -> dict[str, keras.Variable]:
        """The head's reference names: root-scoped ``output_weights`` and ``output_bias``."""
        return {"output_weights": self.classifier.output_weights,
                "output_bias": self.classifier.output_bias}

    def call(self, inputs: Mapping[str, tf.Tensor],
             training: bool | None = None) -> dict[str, tf.Tensor | list[tf.Tensor]]:
        outputs = dict(self.albert(inputs, training=training))
        outputs["logits"] = self.classifier(outputs["pooled_output"], training=training)
        return outputs
