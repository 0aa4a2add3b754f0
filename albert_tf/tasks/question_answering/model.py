"""The SQuAD model: ``AlbertSquadModel`` puts ``SquadV1Head`` (start/end logits on every token) or
``SquadV2Head`` (the XLNet-style answer verifier) on the encoder's sequence output; the heads keep
the reference's TF1 names, so a reference-written SQuAD checkpoint loads, head included.
``V1_OUTPUTS`` / ``V2_OUTPUTS`` name the outputs post-processing reads.
"""

from __future__ import annotations

from typing import Mapping

import keras
import tensorflow as tf

from albert_tf.models.config import AlbertConfig
from albert_tf.models.encoder import INPUT_NAMES
from albert_tf.models.task_model import AlbertTaskModel
from albert_tf.tasks.question_answering.heads import (DEFAULT_END_N_TOP, DEFAULT_START_N_TOP,
                                                      DEFAULT_V2_DROPOUT, SquadV1Head, SquadV2Head)

V1_OUTPUTS = ("start_logits", "end_logits")
V2_OUTPUTS = ("start_top_log_probs", "start_top_index", "end_top_log_probs", "end_top_index",
              "cls_logits")


class AlbertSquadModel(AlbertTaskModel):
    """Encoder + SQuAD head.

    Inputs: ``input_ids``, ``input_mask``, ``segment_ids`` int [B, S]; v2 also ``p_mask`` [B, S]
    and, in training, ``start_positions`` [B]. Outputs: v1 ``start_logits`` / ``end_logits``
    float32 [B, S]; v2 the head's outputs (see ``SquadV2Head``).
    """

    def __init__(self, config: AlbertConfig, version_2: bool = False,
                 start_n_top: int = DEFAULT_START_N_TOP, end_n_top: int = DEFAULT_END_N_TOP,
                 dropout_prob: float = DEFAULT_V2_DROPOUT, name: str = "albert_squad", **kwargs):
        super().__init__(config, name=name, **kwargs)
        self.version_2 = version_2
        self.head = (SquadV2Head(config, start_n_top, end_n_top, dropout_prob) if version_2
                     else SquadV1Head(config))
        self.built = True

    def tf1_head_variables(self) -> dict[str, keras.Variable]:
        return self.head.tf1_variables()

    def call(self, inputs: Mapping[str, tf.Tensor], training: bool | None = None) -> dict:
        sequence = self.albert({name: inputs[name] for name in INPUT_NAMES},
                               training=training)["sequence_output"]
        if not self.version_2:
            return self.head(sequence)
        return self.head(sequence, inputs["p_mask"], inputs.get("start_positions"),
                         training=training)
