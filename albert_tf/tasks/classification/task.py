"""GLUE fine-tuning: the classifier task for the Trainer and the prediction files.

- Loss: mean softmax cross-entropy of the logits (classification); mean squared error of the single
  output (STS-B regression).
- Eval outputs per example: ``probabilities`` (softmax [B, C]; STS-B: the raw output [B, 1]),
  ``predictions`` (arg-max id; STS-B: the score), the per-example loss, labels and
  ``is_real_example``; ``reduce`` computes the task's metrics with ``glue_metrics``
  weighted by ``is_real_example`` (padding examples weigh 0), plus ``loss`` (= ``eval_loss``, the key
  Estimator added to the reference's results).
- With ``early_exit`` (PABEE, albert_tf/tasks/classification/early_exit.py): the loss is the mean
  over layers of each internal classifier's loss, layer j weighted by j / (1 + ... + L); the eval
  outputs add ``layer_logits`` [B, L, C] and ``reduce`` adds the early-exit table (each layer's
  metrics, and the metrics and mean layers of patience 1..L and of each confidence), also
  printed. The ordinary outputs and metrics stay those of the full depth (layer L's classifier,
  the ordinary computation), which selects the best checkpoint.
- With ``internal_only`` (two-stage training's stage 2, albert_tf/tasks/classification/
  two_stage.py): the encoder (its pooler too) and the ordinary classifier are frozen (not in the
  model's trainable variables) and the loss is the mean over layers 1..L-1 of each internal
  classifier's loss; with the encoder frozen the heads do not interact, and Adam's steps do not
  depend on a loss's scale, so PABEE's weights would change nothing but the logged value. With
  ``distillation`` w > 0 each internal classifier's loss is (1 - w) x its loss on the labels + w x
  its distance to the full depth's answer (albert_tf/tasks/classification/distillation.py).
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
from albert_tf.tasks.classification import early_exit as exits
from albert_tf.tasks.classification.distillation import mixed_loss
from albert_tf.tasks.classification.metrics import GLUE_METRIC_KEYS, class_report, glue_metrics
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
    early_exit: None, or the kind of internal classifiers (``EARLY_EXIT_HEADS``): PABEE's loss and
      the early-exit table. regression_threshold: a regression's "unchanged" in that table.
    internal_only: train the separate internal classifiers alone, the rest frozen (module doc).
    distillation: with ``internal_only``, the weight in [0, 1] of the full depth's answers in
      each internal classifier's loss (``mixed_loss``; 0: the labels alone).
    """

    def __init__(self, config: AlbertConfig, metric_kinds: Sequence[str], num_labels: int,
                 is_regression: bool = False, class_names: Sequence[str] | None = None,
                 early_exit: str | None = None,
                 regression_threshold: float = exits.DEFAULT_REGRESSION_THRESHOLD,
                 internal_only: bool = False, distillation: float = 0.0):
        if internal_only and early_exit != "separate":
            raise ValueError(f"internal_only trains separate internal classifiers; early_exit is "
                             f"{early_exit!r}")
        if distillation and not internal_only:
            raise ValueError("distillation trains internal classifiers toward a frozen full "
                             "depth: it needs internal_only")
        if not 0.0 <= distillation <= 1.0:
            raise ValueError(f"distillation is a weight in [0, 1], got {distillation}")
        if class_names is not None and len(class_names) != num_labels:
            raise ValueError(f"{len(class_names)} class names for num_labels={num_labels}")
        self.config = config
        self.metric_kinds = tuple(metric_kinds)
        self.num_labels = num_labels
        self.is_regression = is_regression
        self.class_names = None if class_names is None else tuple(class_names)
        self.early_exit = early_exit
        self.regression_threshold = regression_threshold
        self.internal_only = internal_only
        self.distillation = distillation

    def build_model(self) -> keras.Model:
        model = AlbertClassifierModel(self.config, self.num_labels, self.is_regression,
                                      early_exit=self.early_exit)
        if self.internal_only:
            model.albert.trainable = False
            model.classifier.trainable = False
        return model

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
        outputs = model(model_inputs(features), training=True)
        per_example_loss, _, predictions = self._per_example(outputs["logits"], features)
        if self.internal_only:
            per_example_loss = self._internal_loss(outputs["layer_logits"], features)
        elif self.early_exit is not None:
            per_example_loss = self._pabee_loss(outputs["layer_logits"], features)
        if self.is_regression:
            return tf.reduce_sum(per_example_loss) / normalizers["examples"], {}
        return mean_with_accuracy(per_example_loss, predictions, features["label_ids"], normalizers)

    def _pabee_loss(self, layer_logits: tf.Tensor, features: Features) -> tf.Tensor:
        """float32 [B]: each example's internal-classifier losses [B, L] weighted by
        ``pabee_weights`` (layer j by j / (1 + ... + L)) and summed."""
        num_layers = layer_logits.shape[1]
        weights = tf.constant(exits.pabee_weights(num_layers), tf.float32)
        losses = [self._per_example(layer_logits[:, layer], features)[0]
                  for layer in range(num_layers)]
        return tf.linalg.matvec(tf.stack(losses, axis=1), weights)

    def _internal_loss(self, layer_logits: tf.Tensor, features: Features) -> tf.Tensor:
        """float32 [B]: the mean of each example's losses at layers 1..L-1 (``internal_only``),
        each mixed with its distance to the full depth (layer L) by ``distillation``."""
        full_depth = layer_logits[:, -1]
        losses = [mixed_loss(self._per_example(layer_logits[:, layer], features)[0],
                             layer_logits[:, layer], full_depth, self.is_regression,
                             self.distillation)
                  for layer in range(layer_logits.shape[1] - 1)]
        return tf.add_n(losses) / len(losses)

    def predict_outputs(self, model: keras.Model, features: Features) -> dict[str, tf.Tensor]:
        model_outputs = model(model_inputs(features), training=False)
        per_example_loss, probabilities, predictions = self._per_example(model_outputs["logits"],
                                                                         features)
        outputs = {"probabilities": probabilities, "predictions": predictions,
                   "per_example_loss": per_example_loss, "label_ids": features["label_ids"],
                   "is_real_example": features["is_real_example"]}
        if self.early_exit is not None:
            outputs["layer_logits"] = model_outputs["layer_logits"]
        return outputs

    def reduce(self, outputs: Mapping[str, np.ndarray], context: None = None) -> dict[str, float]:
        """The task's metrics over the real examples of one evaluation (the context is unused)."""
        metrics = glue_metrics(self.metric_kinds, outputs["predictions"], outputs["label_ids"],
                               weights=outputs["is_real_example"],
                               loss=outputs["per_example_loss"])
        metrics["loss"] = metrics["eval_loss"]
        if self.class_names is not None:
            metrics.update(class_report(outputs["predictions"], outputs["label_ids"],
                                        self.class_names, weights=outputs["is_real_example"]))
        if self.early_exit is not None:
            table = self.early_exit_table(outputs)
            metrics.update(table)
            print("Early exit (dev): each layer's classifier, and each patience and confidence "
                  "with the mean layers used\n"
                  f"{exits.format_table(table, self.metric_keys, self.internal_only)}", flush=True)
        return metrics

    @property
    def metric_keys(self) -> tuple[str, ...]:
        """The result keys of ``metric_kinds`` (e.g. ("eval_accuracy", "f1"))."""
        return tuple(GLUE_METRIC_KEYS[kind] for kind in self.metric_kinds)

    def early_exit_table(self, outputs: Mapping[str, np.ndarray]) -> dict[str, float]:
        """``early_exit_metrics`` of an evaluation's ``layer_logits``: the task's metrics of each
        layer and of each patience and confidence, over the real examples."""
        weights = outputs["is_real_example"]

        def metrics(layer_outputs: np.ndarray) -> dict[str, float]:
            return glue_metrics(self.metric_kinds, layer_outputs, outputs["label_ids"], weights)
        return exits.early_exit_metrics(np.asarray(outputs["layer_logits"]), metrics,
                                        self.is_regression, self.regression_threshold, weights)


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


def early_exit_predictions(outputs: Mapping[str, np.ndarray], layers: np.ndarray,
                           is_regression: bool) -> dict[str, np.ndarray]:
    """``outputs`` of an early-exit model's prediction pass (with ``layer_logits`` [N, L, C]) with
    ``probabilities`` and ``predictions`` taken at each example's exit layer ``layers`` [N]
    (1-based), as the served model gives them, and ``exit_layers`` [N] added."""
    logits = exits.outputs_at(np.asarray(outputs["layer_logits"]), layers)
    if is_regression:
        probabilities, predictions = logits, logits[:, 0]
    else:
        probabilities = exits.softmax(logits).astype(np.float32)
        predictions = np.argmax(logits, axis=-1).astype(np.int32)
    return {**outputs, "probabilities": probabilities, "predictions": predictions,
            "exit_layers": np.asarray(layers)}


def write_exit_layers(path: str, guids: Sequence[str], outputs: Mapping[str, np.ndarray]) -> str:
    """Writes ``exit_layers.tsv``: header ``index\\tlayers``, then ``guid\\t<layers used>`` per
    real example of ``early_exit_predictions``' outputs. Returns ``path``."""
    (layers,) = real_examples(outputs, "exit_layers")
    with atomic_open(path) as handle:
        handle.write("index\tlayers\n")
        for guid, used in zip(guids, layers):
            handle.write(f"{guid}\t{int(used)}\n")
    return path
