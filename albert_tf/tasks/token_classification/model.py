"""The token classifier: the encoder with ``ClassifierHead`` (albert_tf/models/heads.py) applied at
every position of the sequence output: dropout 0.1 (training only), then ``output_weights``
[num_tags, H] and ``output_bias`` [num_tags]. The reference has no NER model; the head's TF1 names
are scoped ``token_classifier/`` so that a GLUE checkpoint's root-scoped head never loads into it.
"""

from __future__ import annotations

from typing import Mapping

import keras
import tensorflow as tf

from albert_tf.models.config import AlbertConfig
from albert_tf.models.heads import ClassifierHead
from albert_tf.models.task_model import AlbertTaskModel

TF1_SCOPE = "token_classifier"


class AlbertTokenClassifierModel(AlbertTaskModel):
    """Encoder + per-position ``ClassifierHead``.

    Inputs: AlbertModel's dict (``input_ids``, ``input_mask``, ``segment_ids`` int [B, S]).
    Outputs: AlbertModel's dict plus ``logits`` float32 [B, S, num_tags].
    """

    def __init__(self, config: AlbertConfig, num_tags: int, name: str = "albert_token_classifier",
                 **kwargs):
        super().__init__(config, name=name, **kwargs)
        if num_tags < 2:
            raise ValueError(f"a token classifier needs at least 2 tags, got {num_tags}.")
        self.num_tags = num_tags
        self.classifier = ClassifierHead(config, num_tags)
        self.built = True

    def tf1_head_variables(self) -> dict[str, keras.Variable]:
        return {f"{TF1_SCOPE}/output_weights": self.classifier.output_weights,
                f"{TF1_SCOPE}/output_bias": self.classifier.output_bias}

    def call(self, inputs: Mapping[str, tf.Tensor],
             training: bool | None = None) -> dict[str, tf.Tensor | list[tf.Tensor]]:
        outputs = dict(self.albert(inputs, training=training))
        outputs["logits"] = self.classifier(outputs["sequence_output"], training=training)
        return outputs
