"""The pretraining model: the encoder with the MLM and sentence-order heads, under the reference's
variable names.

- MLM head (``MaskedLMHead``, albert_tf/models/heads.py): gather at the masked positions ->
  dense(E, hidden_act) -> LayerNorm -> logits against the tied word-embedding table +
  ``output_bias`` (the reference's ``cls/predictions``);
- the sentence-order head: a ``ClassifierHead`` with 2 labels and no dropout
  (``cls/seq_relationship``).
"""

from __future__ import annotations

from typing import Mapping

import keras
import tensorflow as tf

from albert_tf.models.config import AlbertConfig
from albert_tf.models.heads import ClassifierHead, MaskedLMHead
from albert_tf.models.task_model import AlbertTaskModel


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

    def head_parameter_groups(self) -> dict[str, list[keras.layers.Layer]]:
        """The MLM head (its output matrix is the tied word-embedding table, counted in the
        encoder) and the SOP head."""
        return {"MLM head (excluding tied embeddings)": [self.mlm_head],
                "SOP head": [self.sop_head]}

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
