"""Evaluation metrics on whole NumPy arrays: GLUE and the official SQuAD v1.1 / v2.0 scoring.

GLUE. ``glue_metrics`` computes the metric kinds a task asks for (the task table lives in
data_prep/glue_tasks.py) under the reference's keys (``eval_accuracy``, ``eval_loss``,
``matthew_corr``, ``pearson``, ``MSE``) plus ``f1`` and ``spearman``, which the reference lacks but
the GLUE leaderboard reports. Every metric takes optional per-example weights (``is_real_example``:
padding examples weigh 0). Degenerate cases return 0 instead of NaN, like the reference's
``div_no_nan``: MCC with a zero denominator, F1 with no predicted and no true positives,
Pearson/Spearman with a constant input.

SQuAD. The official evaluation scripts re-derived: answers are normalized (lowercase, punctuation
removed, articles a/an/the removed, whitespace collapsed) and compared by exact match and by token F1,
each taking the best over the gold answers and reported in percent. v2.0 adds unanswerable questions
(gold answer "" after dropping gold answers that normalize to nothing), a no-answer threshold on
per-question "no-answer probabilities" (``na_probs``, run_squad's ``null_odds``), HasAns/NoAns splits and
the search for the best threshold (``find_all_best_thresh``).
"""

from __future__ import annotations

import collections
import re
import string
from typing import Callable, Iterable, Mapping, Sequence

import numpy as np


# -- GLUE ------------------------------------------------------------------------------------------

def _weights_for(values: np.ndarray, weights: np.ndarray | None) -> np.ndarray:
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


def _safe_div(numerator: float, denominator: float) -> float:
    return float(numerator / denominator) if denominator != 0 else 0.0


def accuracy(predictions, labels, weights=None) -> float:
    """Weighted fraction of predictions equal to labels (0 when all weights are 0)."""
    predictions, labels = _as_pair(predictions, labels)
    w = _weights_for(labels, weights)
    return _safe_div(np.sum(w * (predictions == labels)), np.sum(w))


def _binary_counts(predictions, labels, weights) -> tuple[float, float, float, float]:
    """Weighted (tp, tn, fp, fn) with class 1 positive; labels/predictions must be 0/1."""
    predictions, labels = _as_pair(predictions, labels)
    for name, values in (("predictions", predictions), ("labels", labels)):
        if not np.isin(values, (0, 1)).all():
            raise ValueError(f"binary metric: {name} must be 0/1, found {np.unique(values)[:5]}")
    w = _weights_for(labels, weights)
    pred, true = predictions == 1, labels == 1
    return (float(np.sum(w * (pred & true))), float(np.sum(w * (~pred & ~true))),
            float(np.sum(w * (pred & ~true))), float(np.sum(w * (~pred & true))))


def matthews_corrcoef(predictions, labels, weights=None) -> float:
    """(tp·tn − fp·fn) / sqrt((tp+fp)(tp+fn)(tn+fp)(tn+fn)) from weighted counts; 0 if the root is 0."""
    tp, tn, fp, fn = _binary_counts(predictions, labels, weights)
    denominator = np.sqrt((tp + fp) * (tp + fn) * (tn + fp) * (tn + fn))
    return _safe_div(tp * tn - fp * fn, denominator)


def f1_score(predictions, labels, weights=None) -> float:
    """Binary F1 of class 1: 2·tp / (2·tp + fp + fn).

    Defined as 0 when 2·tp + fp + fn = 0, i.e. no positive predicted and none true (as scikit-learn's
    default zero_division).
    """
    tp, _, fp, fn = _binary_counts(predictions, labels, weights)
    return _safe_div(2 * tp, 2 * tp + fp + fn)


def pearson_correlation(predictions, labels, weights=None) -> float:
    """Weighted Pearson correlation (weighted means and co-moments); 0 if either input is constant."""
    x, y = _as_pair(predictions, labels)
    x, y = x.astype(np.float64), y.astype(np.float64)
    w = _weights_for(y, weights)
    total = np.sum(w)
    if total == 0:
        return 0.0
    dx = x - np.sum(w * x) / total
    dy = y - np.sum(w * y) / total
    return _safe_div(np.sum(w * dx * dy), np.sqrt(np.sum(w * dx * dx) * np.sum(w * dy * dy)))


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
    w = _weights_for(y, weights)
    keep = w != 0
    return pearson_correlation(average_ranks(x[keep]), average_ranks(y[keep]), w[keep])


def mean_squared_error(predictions, labels, weights=None) -> float:
    """Weighted mean of (prediction − label)²."""
    x, y = _as_pair(predictions, labels)
    w = _weights_for(y, weights)
    return _safe_div(np.sum(w * (x.astype(np.float64) - y) ** 2), np.sum(w))


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
                                else _safe_div(np.sum(_weights_for(loss, weights) * loss),
                                               np.sum(_weights_for(loss, weights))))
    return results


# -- SQuAD -----------------------------------------------------------------------------------------

_ARTICLES = re.compile(r"\b(a|an|the)\b", re.UNICODE)
_PUNCTUATION = frozenset(string.punctuation)


def normalize_answer(text: str) -> str:
    """Lowercase, drop ASCII punctuation, replace the words a/an/the by spaces, collapse whitespace."""
    text = "".join(ch for ch in text.lower() if ch not in _PUNCTUATION)
    return " ".join(_ARTICLES.sub(" ", text).split())


def exact_match(prediction: str, ground_truth: str) -> float:
    """1.0 if both normalize to the same string, else 0.0."""
    return float(normalize_answer(prediction) == normalize_answer(ground_truth))


def _token_f1(prediction_tokens: list[str], truth_tokens: list[str]) -> float:
    common = collections.Counter(prediction_tokens) & collections.Counter(truth_tokens)
    num_same = sum(common.values())
    if num_same == 0:
        return 0.0
    precision = num_same / len(prediction_tokens)
    recall = num_same / len(truth_tokens)
    return 2 * precision * recall / (precision + recall)


def squad_v1_f1(prediction: str, ground_truth: str) -> float:
    """v1.1 token F1 of the normalized answers (0 when they share no token, even if both are empty)."""
    return _token_f1(normalize_answer(prediction).split(), normalize_answer(ground_truth).split())


def squad_v2_f1(prediction: str, ground_truth: str) -> float:
    """v2.0 token F1: as v1.1, except that when either side has no tokens it is 1 iff both have none."""
    prediction_tokens = normalize_answer(prediction).split()
    truth_tokens = normalize_answer(ground_truth).split()
    if not prediction_tokens or not truth_tokens:
        return float(prediction_tokens == truth_tokens)
    return _token_f1(prediction_tokens, truth_tokens)


def _questions(dataset: Sequence[Mapping]) -> Iterable[Mapping]:
    """Every qa dict of a SQuAD "data" list (articles -> paragraphs -> qas)."""
    for article in dataset:
        for paragraph in article["paragraphs"]:
            yield from paragraph["qas"]


def squad_v1_scores(dataset: Sequence[Mapping], predictions: Mapping[str, str]) -> dict[str, float]:
    """Official v1.1 scores: {"exact_match", "f1"} in percent over every question of ``dataset``.

    dataset: the JSON file's "data" list. predictions: question id -> answer text. A question without a
    prediction counts as 0 (as in the official script).
    """
    total = em_sum = f1_sum = 0.0
    for qa in _questions(dataset):
        total += 1
        if qa["id"] not in predictions:
            continue
        prediction = predictions[qa["id"]]
        truths = [answer["text"] for answer in qa["answers"]]
        if not truths:
            raise ValueError(f"question {qa['id']!r} has no gold answer (a v2.0 file? use squad_v2_scores)")
        em_sum += max(exact_match(prediction, truth) for truth in truths)
        f1_sum += max(squad_v1_f1(prediction, truth) for truth in truths)
    return {"exact_match": 100.0 * _safe_div(em_sum, total), "f1": 100.0 * _safe_div(f1_sum, total)}


def squad_v2_raw_scores(dataset: Sequence[Mapping], predictions: Mapping[str, str]
                        ) -> tuple[dict[str, float], dict[str, float], dict[str, bool]]:
    """Per-question (exact, f1, has_answer) of v2.0 before any no-answer threshold.

    has_answer: the question lists at least one gold answer. Gold answers that normalize to "" are
    dropped; a question with none left is scored against "". Questions without a prediction are left
    out of exact/f1 (official v2.0 behaviour) but kept in has_answer.
    """
    exact, f1, has_answer = {}, {}, {}
    for qa in _questions(dataset):
        qid = qa["id"]
        has_answer[qid] = bool(qa.get("answers"))
        truths = [answer["text"] for answer in qa.get("answers", []) if normalize_answer(answer["text"])]
        if qid not in predictions:
            continue
        truths = truths or [""]
        exact[qid] = max(exact_match(predictions[qid], truth) for truth in truths)
        f1[qid] = max(squad_v2_f1(predictions[qid], truth) for truth in truths)
    return exact, f1, has_answer


def apply_no_ans_threshold(scores: Mapping[str, float], na_probs: Mapping[str, float],
                           has_answer: Mapping[str, bool], threshold: float) -> dict[str, float]:
    """Scores after predicting "no answer" wherever na_prob > threshold (1 if right, 0 if wrong)."""
    return {qid: (float(not has_answer[qid]) if na_probs[qid] > threshold else score)
            for qid, score in scores.items()}


def _percentages(exact: Mapping[str, float], f1: Mapping[str, float],
                 qids: Sequence[str]) -> dict[str, float]:
    return {"exact": 100.0 * _safe_div(sum(exact[q] for q in qids), len(qids)),
            "f1": 100.0 * _safe_div(sum(f1[q] for q in qids), len(qids)),
            "total": len(qids)}


def find_best_thresh(predictions: Mapping[str, str], scores: Mapping[str, float],
                     na_probs: Mapping[str, float], has_answer: Mapping[str, bool]) -> tuple[float, float]:
    """(best score in percent, its threshold) over thresholds equal to some question's na_prob.

    Start from "every question predicted unanswerable" (score = number of unanswerable questions in
    ``has_answer``, threshold 0.0), then admit questions in increasing na_prob order (stable for
    ties): an answerable one adds its score, an unanswerable one loses its point if its prediction is
    non-empty. The threshold moves to a question's na_prob only when the running score strictly
    improves. The percentage divides by the number of scored questions.
    """
    current = best = float(sum(1 for qid in has_answer if not has_answer[qid]))
    best_threshold = 0.0
    for qid in sorted(na_probs, key=lambda q: na_probs[q]):
        if qid not in scores:
            continue
        if has_answer[qid]:
            current += scores[qid]
        elif predictions[qid]:
            current -= 1
        if current > best:
            best, best_threshold = current, na_probs[qid]
    return 100.0 * _safe_div(best, len(scores)), best_threshold


def find_all_best_thresh(results: dict, predictions: Mapping[str, str], exact_raw: Mapping[str, float],
                         f1_raw: Mapping[str, float], na_probs: Mapping[str, float],
                         has_answer: Mapping[str, bool]) -> None:
    """Adds best_exact, best_exact_thresh, best_f1, best_f1_thresh to ``results``."""
    results["best_exact"], results["best_exact_thresh"] = find_best_thresh(
        predictions, exact_raw, na_probs, has_answer)
    results["best_f1"], results["best_f1_thresh"] = find_best_thresh(
        predictions, f1_raw, na_probs, has_answer)


def squad_v2_scores(dataset: Sequence[Mapping], predictions: Mapping[str, str],
                    na_probs: Mapping[str, float] | None = None,
                    na_prob_thresh: float = 1.0) -> dict[str, float]:
    """Official v2.0 evaluation.

    na_probs: question id -> no-answer score (default 0 for every prediction). Returns exact, f1, total
    after ``apply_no_ans_threshold(na_prob_thresh)``; HasAns_/NoAns_ exact, f1, total over the scored
    questions of each kind (when there are any); and, when ``na_probs`` is given, best_exact,
    best_exact_thresh, best_f1, best_f1_thresh (computed on the raw scores).
    """
    exact_raw, f1_raw, has_answer = squad_v2_raw_scores(dataset, predictions)
    probs = na_probs if na_probs is not None else {qid: 0.0 for qid in predictions}
    missing = [qid for qid in exact_raw if qid not in probs]
    if missing:
        raise ValueError(f"na_probs lacks {len(missing)} predicted question ids, e.g. {missing[:3]}")
    exact = apply_no_ans_threshold(exact_raw, probs, has_answer, na_prob_thresh)
    f1 = apply_no_ans_threshold(f1_raw, probs, has_answer, na_prob_thresh)
    results = _percentages(exact, f1, list(exact))
    for prefix, wanted in (("HasAns", True), ("NoAns", False)):
        qids = [qid for qid in exact if has_answer[qid] == wanted]
        if qids:
            for name, value in _percentages(exact, f1, qids).items():
                results[f"{prefix}_{name}"] = value
    if na_probs is not None:
        find_all_best_thresh(results, predictions, exact_raw, f1_raw, probs, has_answer)
    return results
