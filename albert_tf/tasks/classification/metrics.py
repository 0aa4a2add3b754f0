"""GLUE metrics: ``glue_metrics`` computes the metric kinds a task asks for (the task table lives in
data_prep/classification/glue_tasks.py) under the reference's keys (``eval_accuracy``,
``eval_loss``, ``matthew_corr``, ``pearson``, ``MSE``) plus ``f1`` and ``spearman``, which the
reference lacks but the GLUE leaderboard reports. ``class_report`` adds, for a classifier with
named classes (the user's own data), macro-F1 and each class's precision, recall, F1, support and
predicted count, so that class imbalance shows in eval_results.txt. The metric functions themselves
(albert_tf/evaluation/metrics.py) take per-example weights (``is_real_example``: padding examples
weigh 0) and return 0 instead of NaN in degenerate cases, like the reference's ``div_no_nan``.
"""

from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

from albert_tf.evaluation.metrics import (accuracy, class_counts, f1_score, matthews_corrcoef,
                                          mean_squared_error, pearson_correlation,
                                          precision_recall_f1, safe_div, spearman_correlation,
                                          weights_for)

# GLUE metric kind -> (result key, metric(predictions, labels, weights)); the keys are the reference's.
_GLUE_METRICS: dict[str, tuple[str, Callable[..., float]]] = {
    "accuracy": ("eval_accuracy", accuracy),
    "mcc": ("matthew_corr", matthews_corrcoef),
    "f1": ("f1", f1_score),
    "pearson": ("pearson", pearson_correlation),
    "spearman": ("spearman", spearman_correlation),
    "mse": ("MSE", mean_squared_error),
}
# The result key of each GLUE metric kind.
GLUE_METRIC_KEYS: dict[str, str] = {kind: key for kind, (key, _) in _GLUE_METRICS.items()}


def glue_metrics(metric_kinds: Sequence[str], predictions, labels, weights=None,
                 loss=None) -> dict[str, float]:
    """The eval metrics of one GLUE task, keyed by ``GLUE_METRIC_KEYS`` in ``metric_kinds`` order.

    metric_kinds: some of ``GLUE_METRIC_KEYS`` (a task's ``GlueTask.metric_kinds``).
    predictions: class ids [N], or logits/probabilities [N, C] with C > 1 (arg-maxed); regression:
      scores [N] or [N, 1]. labels: label ids [N] (regression: float scores).
    weights: [N] (is_real_example) or None. loss: per-example losses [N] (weighted mean) or an
      already averaged scalar; when given it is reported as ``eval_loss``.
    """
    unknown = [kind for kind in metric_kinds if kind not in _GLUE_METRICS]
    if unknown:
        raise ValueError(f"unknown GLUE metric kinds {unknown}; expected some of {list(_GLUE_METRICS)}")
    predictions = np.asarray(predictions)
    if predictions.ndim == 2 and predictions.shape[1] > 1:
        predictions = np.argmax(predictions, axis=-1)
    results = {}
    for kind in metric_kinds:
        key, metric = _GLUE_METRICS[kind]
        results[key] = metric(predictions, labels, weights)
    if loss is not None:
        loss = np.asarray(loss, dtype=np.float64)
        results["eval_loss"] = (float(loss) if loss.ndim == 0
                                else safe_div(np.sum(weights_for(loss, weights) * loss),
                                              np.sum(weights_for(loss, weights))))
    return results


MACRO_F1_KEY = "macro_f1"
# The per-class result keys: class_key(name, field) = "class/<name>/<field>".
CLASS_FIELDS = ("precision", "recall", "f1", "support", "predicted")


def class_key(class_name: str, field: str) -> str:
    """The result key of one class's ``field`` (one of CLASS_FIELDS)."""
    return f"class/{class_name}/{field}"


def class_report(predictions, labels, class_names: Sequence[str], weights=None) -> dict[str, float]:
    """Macro-F1 and per-class precision, recall, F1, support (true examples) and predicted count.

    predictions: class ids [N] or logits/probabilities [N, C] (arg-maxed); labels: ids [N];
    weights: [N] or None. ``macro_f1`` is the mean F1 of the classes that occur among the labels
    or the predictions (scikit-learn's f1_score(average="macro") without an explicit label list).
    """
    predictions = np.asarray(predictions)
    if predictions.ndim == 2:
        predictions = np.argmax(predictions, axis=-1)
    num_classes = len(class_names)
    precision, recall, f1 = precision_recall_f1(predictions, labels, num_classes, weights)
    _, predicted, true = class_counts(predictions, labels, num_classes, weights)
    present = (predicted > 0) | (true > 0)
    report = {MACRO_F1_KEY: float(np.mean(f1[present])) if present.any() else 0.0}
    for index, name in enumerate(class_names):
        values = (precision[index], recall[index], f1[index], true[index], predicted[index])
        report.update({class_key(name, field): float(value)
                       for field, value in zip(CLASS_FIELDS, values)})
    return report


def format_class_report(metrics: dict[str, float], class_names: Sequence[str]) -> str:
    """A table of ``class_report``'s per-class values (one line per class, then macro-F1)."""
    width = max(len("class"), *(len(name) for name in class_names))
    lines = [f"{'class':<{width}}  precision  recall     f1  support  predicted"]
    for name in class_names:
        p, r, f, s, n = (metrics[class_key(name, field)] for field in CLASS_FIELDS)
        lines.append(f"{name:<{width}}  {p:9.4f}  {r:6.4f}  {f:.4f}  {s:7.0f}  {n:9.0f}")
    lines.append(f"macro-F1 {metrics[MACRO_F1_KEY]:.4f}")
    return "\n".join(lines)
