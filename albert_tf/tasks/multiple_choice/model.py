"""The multiple-choice model (RACE): the reference's choice scorer on the encoder.

Each example holds ``num_choices`` sequences (``[CLS] article [SEP] question+option [SEP]``),
flattened on disk to [num_choices * S]. They are encoded as one batch of B * num_choices sequences;
each pooled output goes through dropout (``dropout_prob``, training only) and a single linear output
(the reference's root-scoped ``output_weights`` [1, H] and ``output_bias`` [1]); the scores are
reshaped to logits [B, num_choices]. One output per choice does not make it a regression. The
encoder's last block computes [CLS] alone (``first_token_only``): nothing else of it is read.
"""

from __future__ import annotations

from typing import Mapping

import keras
import tensorflow as tf

from albert_tf.models.config import AlbertConfig
from albert_tf.models.encoder import INPUT_NAMES
from albert_tf.models.heads import ClassifierHead
from albert_tf.models.task_model import AlbertTaskModel


class AlbertMultipleChoiceModel(AlbertTaskModel):
    """Encoder + per-choice scorer.

    Inputs: ``input_ids``, ``input_mask``, ``segment_ids`` int [B, num_choices * S] (the record
    layout) or [B, num_choices, S]. Outputs: ``logits`` float32 [B, num_choices].
    """

    def __init__(self, config: AlbertConfig, num_choices: int = 4, dropout_prob: float = 0.1,
                 name: str = "albert_multiple_choice", **kwargs):
        super().__init__(config, name=name, **kwargs)
        self.num_choices = num_choices
        self.scorer = ClassifierHead(config, 1, name="choice_scorer", dropout_rate=dropout_prob)
        self.built = True

    def tf1_head_variables(self) -> dict[str, keras.Variable]:
        """The reference's root-scoped ``output_weights`` [1, H] and ``output_bias`` [1]."""
        return {"output_weights": self.scorer.output_weights,
                "output_bias": self.scorer.output_bias}

    def _per_sequence(self, ids: tf.Tensor) -> tf.Tensor:
        """[B, C * S] or [B, C, S] -> [B * C, S]."""
        width = tf.shape(ids)[-1]
        if ids.shape.rank == 2:
            width //= self.num_choices
        return tf.reshape(ids, [-1, width])

    def call(self, inputs: Mapping[str, tf.Tensor], training: bool | None = None) -> dict:
        flat = {name: self._per_sequence(inputs[name]) for name in INPUT_NAMES}
        pooled = self.albert(flat, training=training, first_token_only=True)["pooled_output"]
        scores = self.scorer(pooled, training=training)  # [B * num_choices, 1]
        return {"logits": tf.reshape(scores, [-1, self.num_choices])}
