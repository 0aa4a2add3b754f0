"""Multiple choice (RACE) for the Trainer, and its prediction file.

Loss: softmax cross-entropy over the choices. ``reduce`` reports the reference's ``eval_accuracy``
and ``eval_loss`` (and ``loss``) over the real examples, and, when the evaluation set's context gives
each record's level (``MultipleChoiceContext``), the accuracy per level (``middle_accuracy``,
``high_accuracy``), which the reference can only get from separate runs.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Mapping, Sequence

import keras
import numpy as np
import tensorflow as tf

from albert_tf.evaluation.metrics import accuracy
from albert_tf.files.atomic import atomic_write_text
from albert_tf.models.config import AlbertConfig
from albert_tf.models.encoder import INPUT_NAMES
from albert_tf.tasks.multiple_choice.model import AlbertMultipleChoiceModel
from albert_tf.training.per_example import (examples_normalizer, mean_with_accuracy, real_examples,
                                            softmax_outputs)
from albert_tf.training.task import Features


@dataclasses.dataclass(frozen=True)
class MultipleChoiceContext:
    """What an evaluation needs besides the outputs, one entry per real record in record order
    (padding records at the end have none): each question's level ("middle" / "high") and id."""

    levels: Sequence[str]
    example_ids: Sequence[str] = ()


class MultipleChoiceTask:
    """Fine-tuning of ``AlbertMultipleChoiceModel`` (a ``training.Task``)."""

    def __init__(self, config: AlbertConfig, num_choices: int = 4, dropout_prob: float = 0.1):
        self.config = config
        self.num_choices = num_choices
        self.dropout_prob = dropout_prob

    def build_model(self) -> keras.Model:
        return AlbertMultipleChoiceModel(self.config, self.num_choices, self.dropout_prob)

    def loss_normalizers(self, features: Features) -> dict[str, tf.Tensor]:
        return examples_normalizer(features)

    def _per_example(self, model: keras.Model, features: Features, training: bool):
        """(per-example loss [B], probabilities [B, C], predictions [B])."""
        logits = model({name: features[name] for name in INPUT_NAMES},
                       training=training)["logits"]
        return softmax_outputs(logits, features["label_ids"])

    def train_loss(self, model: keras.Model, features: Features,
                   normalizers: Mapping[str, tf.Tensor]) -> tuple[tf.Tensor, dict[str, tf.Tensor]]:
        loss, _, predictions = self._per_example(model, features, training=True)
        return mean_with_accuracy(loss, predictions, features["label_ids"], normalizers)

    def predict_outputs(self, model: keras.Model, features: Features) -> dict[str, tf.Tensor]:
        loss, probabilities, predictions = self._per_example(model, features, training=False)
        return {"probabilities": probabilities, "predictions": predictions,
                "per_example_loss": loss, "label_ids": features["label_ids"],
                "is_real_example": features["is_real_example"]}

    def reduce(self, outputs: Mapping[str, np.ndarray],
               context: MultipleChoiceContext | None = None) -> dict[str, float]:
        """eval_accuracy, eval_loss, loss over the real examples; per-level accuracy from the context."""
        predictions, labels, losses = real_examples(outputs, "predictions", "label_ids",
                                                    "per_example_loss")
        loss = float(np.mean(losses))
        metrics = {"eval_accuracy": accuracy(predictions, labels), "eval_loss": loss,
                   "loss": loss}
        if context is not None:
            levels = np.asarray(list(context.levels))
            if len(levels) != len(predictions):
                raise ValueError(f"{len(levels)} levels for {len(predictions)} real examples.")
            for level in sorted(set(levels.tolist())):
                chosen = levels == level
                metrics[f"{level}_accuracy"] = accuracy(predictions[chosen], labels[chosen])
        return metrics


def write_choice_predictions(path: str, example_ids: Sequence[str],
                             outputs: Mapping[str, np.ndarray]) -> str:
    """Writes ``{example id: {"answer": "A".."D", "probabilities": [p_A, .., p_D]}}`` as JSON.

    ``outputs`` come from ``Trainer.predict`` in record order; padding records (is_real_example 0)
    may follow the real ones and are dropped. Returns the path.
    """
    # The model's own arg-max of the logits, as the metrics count it (probabilities may tie).
    probabilities, choices = real_examples(outputs, "probabilities", "predictions")
    if len(probabilities) != len(example_ids):
        raise ValueError(f"Got {len(probabilities)} real predictions for {len(example_ids)} "
                         "questions.")
    predictions = {
        example_id: {"answer": chr(ord("A") + int(choice)),
                     "probabilities": [float(p) for p in row]}
        for example_id, row, choice in zip(example_ids, probabilities, choices)}
    atomic_write_text(path, json.dumps(predictions, indent=2) + "\n")
    return path
