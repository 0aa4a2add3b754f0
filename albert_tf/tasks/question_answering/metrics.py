"""The official SQuAD v1.1 / v2.0 scoring, re-derived, on plain Python data.

Answers are normalized (lowercase, punctuation removed, articles a/an/the removed, whitespace
collapsed) and compared by exact match and by token F1, each taking the best over the gold answers
and reported in percent. v2.0 adds unanswerable questions (gold answer "" after dropping gold
answers that normalize to nothing), a no-answer threshold on per-question "no-answer
probabilities" (``na_probs``, run_squad's ``null_odds``), HasAns/NoAns splits and the search for the
best threshold (``find_all_best_thresh``).
"""

from __future__ import annotations

import collections
import re
import string
from typing import Iterable, Mapping, Sequence

from albert_tf.evaluation.metrics import safe_div

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
    return {"exact_match": 100.0 * safe_div(em_sum, total), "f1": 100.0 * safe_div(f1_sum, total)}


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
    return {"exact": 100.0 * safe_div(sum(exact[q] for q in qids), len(qids)),
            "f1": 100.0 * safe_div(sum(f1[q] for q in qids), len(qids)),
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
    return 100.0 * safe_div(best, len(scores)), best_threshold


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
