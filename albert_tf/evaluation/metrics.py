"""Evaluation metrics on whole NumPy arrays, shared by every task's ``reduce``.

``accuracy``, ``f1_score`` (binary, class 1), ``matthews_corrcoef``, ``pearson_correlation``,
``spearman_correlation`` (on ``average_ranks``), ``mean_squared_error`` and the per-class
``class_counts`` / ``precision_recall_f1`` of a multi-class problem. Every metric takes
optional per-example weights (``is_real_example``: padding examples weigh 0). Degenerate cases
return 0 instead of NaN, like the reference's ``div_no_nan`` (``safe_div``): MCC with a zero
denominator, F1 with no predicted and no true positives, Pearson/Spearman with a constant input.

The task-specific metrics built on these live with their tasks: the GLUE metrics under the
reference's keys in albert_tf/tasks/classification/metrics.py, the official SQuAD v1.1 / v2.0
scoring in albert_tf/tasks/question_answering/metrics.py.
"""

from __future__ import annotations

import numpy as np

# -- weighted metrics over whole arrays ------------------------------------------------------------

def weights_for(values: np.ndarray, weights: np.ndarray | None) -> np.ndarray:
    if weights is None:
        return np.ones(values.shape[0], dtype=np.float64)
    weights = np.asarray(weights, dtype=np.float64).reshape(-1)
    if weights.shape[0] != values.shape[0]:
        raise ValueError(f"weights has {weights.shape[0]} entries, expected {values.shape[0]}")
    return weights


def _as_pair(predictions, labels) -> tuple[np.ndarray, np.ndarray]:
    predictions = np.asarray(predictions).reshape(-1)
    labels = np.asarray(labels).reshape(-1)
    if predictions.shape != labels.shape:
        raise ValueError(f"predictions has {predictions.shape[0]} entries, labels {labels.shape[0]}")
    return predictions, labels


def safe_div(numerator: float, denominator: float) -> float:
    return float(numerator / denominator) if denominator != 0 else 0.0


def accuracy(predictions, labels, weights=None) -> float:
    """Weighted fraction of predictions equal to labels (0 when all weights are 0)."""
    predictions, labels = _as_pair(predictions, labels)
    w = weights_for(labels, weights)
    return safe_div(np.sum(w * (predictions == labels)), np.sum(w))


def _binary_counts(predictions, labels, weights) -> tuple[float, float, float, float]:
    """Weighted (tp, tn, fp, fn) with class 1 positive; labels/predictions must be 0/1."""
    predictions, labels = _as_pair(predictions, labels)
    for name, values in (("predictions", predictions), ("labels", labels)):
        if not np.isin(values, (0, 1)).all():
            raise ValueError(f"binary metric: {name} must be 0/1, found {np.unique(values)[:5]}")
    w = weights_for(labels, weights)
    pred, true = predictions == 1, labels == 1
    return (float(np.sum(w * (pred & true))), float(np.sum(w * (~pred & ~true))),
            float(np.sum(w * (pred & ~true))), float(np.sum(w * (~pred & true))))


def matthews_corrcoef(predictions, labels, weights=None) -> float:
    """(tp·tn − fp·fn) / sqrt((tp+fp)(tp+fn)(tn+fp)(tn+fn)) from weighted counts; 0 if the root is 0."""
    tp, tn, fp, fn = _binary_counts(predictions, labels, weights)
    denominator = np.sqrt((tp + fp) * (tp + fn) * (tn + fp) * (tn + fn))
    return safe_div(tp * tn - fp * fn, denominator)


def f1_score(predictions, labels, weights=None) -> float:
    """Binary F1 of class 1: 2·tp / (2·tp + fp + fn).

    Defined as 0 when 2·tp + fp + fn = 0, i.e. no positive predicted and none true (as scikit-learn's
    default zero_division).
    """
    tp, _, fp, fn = _binary_counts(predictions, labels, weights)
    return safe_div(2 * tp, 2 * tp + fp + fn)


def pearson_correlation(predictions, labels, weights=None) -> float:
    """Weighted Pearson correlation (weighted means and co-moments); 0 if either input is constant."""
    x, y = _as_pair(predictions, labels)
    x, y = x.astype(np.float64), y.astype(np.float64)
    w = weights_for(y, weights)
    total = np.sum(w)
    if total == 0:
        return 0.0
    dx = x - np.sum(w * x) / total
    dy = y - np.sum(w * y) / total
    return safe_div(np.sum(w * dx * dy), np.sqrt(np.sum(w * dx * dx) * np.sum(w * dy * dy)))


def average_ranks(values) -> np.ndarray:
    """1-based ranks; tied values share the mean of the ranks they span ([10, 20, 20] -> [1, 2.5, 2.5])."""
    values = np.asarray(values).reshape(-1)
    order = np.argsort(values, kind="stable")
    sorted_values = values[order]
    ranks = np.empty(values.shape[0], dtype=np.float64)
    start = 0
    while start < len(sorted_values):
        end = start
        while end + 1 < len(sorted_values) and sorted_values[end + 1] == sorted_values[start]:
            end += 1
        ranks[order[start:end + 1]] = (start + end) / 2.0 + 1.0
        start = end + 1
    return ranks


def spearman_correlation(predictions, labels, weights=None) -> float:
    """Pearson correlation of the average ranks, ranked among the examples of non-zero weight."""
    x, y = _as_pair(predictions, labels)
    w = weights_for(y, weights)
    keep = w != 0
    return pearson_correlation(average_ranks(x[keep]), average_ranks(y[keep]), w[keep])


def mean_squared_error(predictions, labels, weights=None) -> float:
    """Weighted mean of (prediction − label)²."""
    x, y = _as_pair(predictions, labels)
    w = weights_for(y, weights)
    return safe_div(np.sum(w * (x.astype(np.float64) - y) ** 2), np.sum(w))


def class_counts(predictions, labels, num_classes: int, weights=None
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Weighted (true positives, predicted, true) per class, each float64 [num_classes].

    predictions, labels: class ids [N] in 0..num_classes-1.
    """
    predictions, labels = _as_pair(predictions, labels)
    w = weights_for(labels, weights)
    predictions, labels = predictions.astype(np.int64), labels.astype(np.int64)
    hits = np.bincount(labels, weights=w * (predictions == labels), minlength=num_classes)
    predicted = np.bincount(predictions, weights=w, minlength=num_classes)
    true = np.bincount(labels, weights=w, minlength=num_classes)
    return hits[:num_classes], predicted[:num_classes], true[:num_classes]


def precision_recall_f1(predictions, labels, num_classes: int, weights=None
                        ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per-class precision, recall and F1, each float64 [num_classes]; 0 where undefined (a class
    never predicted has precision 0, one never true recall 0; scikit-learn's zero_division=0)."""
    hits, predicted, true = class_counts(predictions, labels, num_classes, weights)
    precision = np.array([safe_div(h, p) for h, p in zip(hits, predicted)])
    recall = np.array([safe_div(h, t) for h, t in zip(hits, true)])
    f1 = np.array([safe_div(2 * h, p + t) for h, p, t in zip(hits, predicted, true)])
    return precision, recall, f1
