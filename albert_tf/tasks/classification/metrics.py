"""GLUE metrics: ``glue_metrics`` computes the metric kinds a task asks for (the task table lives in
data_prep/classification/glue_tasks.py) under the reference's keys (``eval_accuracy``,
``eval_loss``, ``matthew_corr``, ``pearson``, ``MSE``) plus ``f1`` and ``spearman``, which the
reference lacks but the GLUE leaderboard reports. The metric functions themselves
(albert_tf/evaluation/metrics.py) take per-example weights (``is_real_example``: padding examples
weigh 0) and return 0 instead of NaN in degenerate cases, like the reference's ``div_no_nan``.
"""

from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

from albert_tf.evaluation.metrics import (accuracy, f1_score, matthews_corrcoef, mean_squared_error,
                                          pearson_correlation, safe_div, spearman_correlation,
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
