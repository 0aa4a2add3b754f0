"""GLUE fine-tuning: the classifier task for the Trainer and the prediction files.

- Loss: mean softmax cross-entropy of the logits (classification); mean squared error of the single
  output (STS-B regression).
- Eval outputs per example: ``probabilities`` (softmax [B, C]; STS-B: the raw output [B, 1]),
  ``predictions`` (arg-max id; STS-B: the score), the per-example loss, labels and
  ``is_real_example``; ``reduce`` computes the task's metrics with ``glue_metrics``
  weighted by ``is_real_example`` (padding examples weigh 0), plus ``loss`` (= ``eval_loss``, the key
  Estimator added to the reference's results).
- Prediction files (reference format): ``test_results.tsv``, one line of tab-separated
  probabilities per real example (STS-B: the score); ``submit_results.tsv``, header
  ``index\\tprediction`` then ``guid\\t<label name>`` (STS-B: the score).
"""

from __future__ import annotations

from typing import Mapping, Sequence

import keras
import numpy as np
import tensorflow as tf

from albert_tf.files.atomic import atomic_open
from albert_tf.models.config import AlbertConfig
from albert_tf.models.encoder import INPUT_NAMES
from albert_tf.tasks.classification.metrics import class_report, glue_metrics
from albert_tf.tasks.classification.model import AlbertClassifierModel
from albert_tf.training.per_example import (examples_normalizer, mean_with_accuracy, real_examples,
                                            softmax_outputs)
from albert_tf.training.task import Features


class ClassifierTask:
    """Fine-tuning of ``AlbertClassifierModel`` on one GLUE task (a ``training.Task``).

    metric_kinds: what ``glue_metrics`` reports (e.g. ("accuracy", "f1") for MRPC).
    num_labels: classes (1 for a regression). is_regression: one real-valued output (STS-B).
    class_names: the label names in id order; when given, ``reduce`` adds ``class_report``
      (macro-F1 and per-class precision, recall, F1, support and predicted count).
    """

    def __init__(self, config: AlbertConfig, metric_kinds: Sequence[str], num_labels: int,
                 is_regression: bool = False, class_names: Sequence[str] | None = None):
        if class_names is not None and len(class_names) != num_labels:
            raise ValueError(f"{len(class_names)} class names for num_labels={num_labels}")
        self.config = config
        self.metric_kinds = tuple(metric_kinds)
        self.num_labels = num_labels
        self.is_regression = is_regression
        self.class_names = None if class_names is None else tuple(class_names)

    def build_model(self) -> keras.Model:
        return AlbertClassifierModel(self.config, self.num_labels, self.is_regression)

    def loss_normalizers(self, features: Features) -> dict[str, tf.Tensor]:
        return examples_normalizer(features)

    def _per_example(self, logits: tf.Tensor, features: Features):
        """(per-example loss [B], probabilities [B, C] or [B, 1], predictions [B])."""
        if self.is_regression:
            scores = logits[:, 0]
            labels = tf.cast(features["label_ids"], tf.float32)
            return tf.square(scores - labels), logits, scores
        return softmax_outputs(logits, features["label_ids"])

    def train_loss(self, model: keras.Model, features: Features,
                   normalizers: Mapping[str, tf.Tensor]) -> tuple[tf.Tensor, dict[str, tf.Tensor]]:
        logits = model(model_inputs(features), training=True)["logits"]
        per_example_loss, _, predictions = self._per_example(logits, features)
        if self.is_regression:
            return tf.reduce_sum(per_example_loss) / normalizers["examples"], {}
        return mean_with_accuracy(per_example_loss, predictions, features["label_ids"], normalizers)

    def predict_outputs(self, model: keras.Model, features: Features) -> dict[str, tf.Tensor]:
        logits = model(model_inputs(features), training=False)["logits"]
        per_example_loss, probabilities, predictions = self._per_example(logits, features)
        return {"probabilities": probabilities, "predictions": predictions,
                "per_example_loss": per_example_loss, "label_ids": features["label_ids"],
                "is_real_example": features["is_real_example"]}

    def reduce(self, outputs: Mapping[str, np.ndarray], context: None = None) -> dict[str, float]:
        """The task's metrics over the real examples of one evaluation (the context is unused)."""
        metrics = glue_metrics(self.metric_kinds, outputs["predictions"], outputs["label_ids"],
                               weights=outputs["is_real_example"],
                               loss=outputs["per_example_loss"])
        metrics["loss"] = metrics["eval_loss"]
        if self.class_names is not None:
            metrics.update(class_report(outputs["predictions"], outputs["label_ids"],
                                        self.class_names, weights=outputs["is_real_example"]))
        return metrics


def model_inputs(features: Features) -> dict[str, tf.Tensor]:
    return {name: features[name] for name in INPUT_NAMES}


def write_predictions(results_path: str, submit_path: str, guids: Sequence[str],
                      outputs: Mapping[str, np.ndarray], label_list: Sequence[str] | None,
                      header: Sequence[str] | None = None) -> tuple[str, str]:
    """Writes ``test_results.tsv`` (the probabilities) to ``results_path`` and
    ``submit_results.tsv`` (guid, label) to ``submit_path`` for the real examples.

    header: a first line for test_results.tsv naming its columns (the reference's file has none;
    the runs on the user's own files write their label names, or "score").

    ``outputs`` come from ``Trainer.predict`` in file order; padding records (is_real_example 0)
    may follow the real ones and are dropped. Returns the two paths.
    """
    probabilities, predictions = real_examples(outputs, "probabilities", "predictions")
    if len(probabilities) != len(guids):
        raise ValueError(f"Got {len(probabilities)} real predictions for {len(guids)} examples.")
    with atomic_open(results_path) as results, atomic_open(submit_path) as submit:
        submit.write("index\tprediction\n")
        if header is not None:
            results.write("\t".join(header) + "\n")
        for guid, row, prediction in zip(guids, probabilities, predictions):
            results.write("\t".join(str(value) for value in row) + "\n")
            label = str(prediction) if label_list is None else label_list[int(prediction)]
            submit.write(f"{guid}\t{label}\n")
    return results_path, submit_path
