"""The GLUE classifier: the encoder with the reference's classifier head (``ClassifierHead``,
albert_tf/models/heads.py): dropout 0.1 (fixed, training only) on the pooled output, then
``output_weights`` [num_labels, H] and ``output_bias`` [num_labels] under the reference's
root-scoped names; one output for a regression (STS-B).
"""

from __future__ import annotations

from typing import Mapping

import keras
import tensorflow as tf

from albert_tf.models.config import AlbertConfig
from albert_tf.models.heads import ClassifierHead
from albert_tf.models.task_model import AlbertTaskModel


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
