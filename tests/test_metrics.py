"""albert_tf/evaluation/metrics.py and the GLUE and SQuAD metrics of albert_tf/tasks/ against values
computed by hand in the comments."""

from __future__ import annotations

import math

import numpy as np
import pytest

from albert_tf.evaluation.metrics import (accuracy, average_ranks, f1_score, matthews_corrcoef,
                                          mean_squared_error, pearson_correlation,
                                          spearman_correlation)
from albert_tf.tasks.classification.metrics import glue_metrics
from albert_tf.tasks.question_answering.metrics import (find_best_thresh, normalize_answer,
                                                        squad_v1_f1, squad_v1_scores, squad_v2_f1,
                                                        squad_v2_scores)
from data_prep.classification.glue_tasks import GLUE_TASKS, glue_task

# -- GLUE ------------------------------------------------------------------------------------------

# preds/labels: tp = {0, 4}, fp = {1}, tn = {2, 3}, fn = {5}.
PREDS = [1, 1, 0, 0, 1, 0]
LABELS = [1, 0, 0, 0, 1, 1]


def test_accuracy_plain_and_weighted():
    assert accuracy([1, 0, 1, 1], [1, 1, 1, 0]) == 0.5
    # The last (wrong) example is padding: 2 right out of 3 real ones.
    assert accuracy([1, 0, 1, 1], [1, 1, 1, 0], weights=[1, 1, 1, 0]) == pytest.approx(2 / 3)
    assert accuracy([1], [1], weights=[0]) == 0.0


def test_matthews_correlation():
    # (tp*tn - fp*fn) / sqrt((tp+fp)(tp+fn)(tn+fp)(tn+fn)) = (2*2 - 1*1) / sqrt(3*3*3*3) = 3/9.
    assert matthews_corrcoef(PREDS, LABELS) == pytest.approx(1 / 3)
    # Weighting out example 5 (the fn): tp 2, fp 1, tn 2, fn 0 -> (4 - 0) / sqrt(3*2*3*2) = 4/6.
    assert matthews_corrcoef(PREDS, LABELS, weights=[1, 1, 1, 1, 1, 0]) == pytest.approx(2 / 3)
    assert matthews_corrcoef([1, 0, 1], [1, 0, 1]) == pytest.approx(1.0)
    assert matthews_corrcoef([1, 1, 1], [1, 0, 1]) == 0.0  # tn + fn = 0: div_no_nan
    with pytest.raises(ValueError, match="must be 0/1"):
        matthews_corrcoef([2, 0], [1, 0])


def test_f1():
    # precision 2/3, recall 2/3 -> F1 2/3.
    assert f1_score(PREDS, LABELS) == pytest.approx(2 / 3)
    # tp 1 (idx 0), fp 2 (idx 1, 2), fn 0 -> precision 1/3, recall 1 -> 2*(1/3)/(4/3) = 1/2.
    assert f1_score([1, 1, 1, 0], [1, 0, 0, 0]) == pytest.approx(0.5)
    assert f1_score([0, 0], [0, 0]) == 0.0  # no positives anywhere: defined as 0


def test_pearson_and_mse():
    # x - 2.5 = [-1.5, -.5, .5, 1.5]; y - 5 = [-3, -1, 0, 4]; sum products 11; sums of squares 5 and 26.
    assert pearson_correlation([1, 2, 3, 4], [2, 4, 5, 9]) == pytest.approx(11 / math.sqrt(130))
    # A zero-weight outlier changes nothing.
    assert pearson_correlation([1, 2, 3, 4, 100], [2, 4, 5, 9, -50],
                               weights=[1, 1, 1, 1, 0]) == pytest.approx(11 / math.sqrt(130))
    assert pearson_correlation([1, 1, 1], [1, 2, 3]) == 0.0
    assert mean_squared_error([1, 2], [0, 4]) == pytest.approx(2.5)  # (1 + 4) / 2
    assert mean_squared_error([1, 2, 7], [0, 4, 0], weights=[1, 1, 0]) == pytest.approx(2.5)


def test_spearman_with_ties():
    assert average_ranks([10, 20, 20, 5]).tolist() == [2.0, 3.5, 3.5, 1.0]
    # ranks x = [1, 2.5, 2.5, 4], y = [1, 3, 2, 4]; centred: [-1.5, 0, 0, 1.5] and [-1.5, .5, -.5, 1.5];
    # products 4.5, squares 4.5 and 5 -> 4.5 / sqrt(22.5) = 3 / sqrt(10).
    assert spearman_correlation([1, 2, 2, 3], [10, 30, 20, 40]) == pytest.approx(3 / math.sqrt(10))
    # The padded example (weight 0) is not ranked.
    assert spearman_correlation([1, 2, 2, 3, -9], [10, 30, 20, 40, 99],
                                weights=[1, 1, 1, 1, 0]) == pytest.approx(3 / math.sqrt(10))
    assert spearman_correlation([3, 1, 2], [30, 10, 20]) == pytest.approx(1.0)


def kinds(task_name: str) -> tuple[str, ...]:
    return glue_task(task_name).metric_kinds


def test_glue_metrics_keys_and_values():
    cola = glue_metrics(kinds("CoLA"), PREDS, LABELS, loss=[1.0, 2.0, 3.0, 4.0, 5.0, 6.0])
    assert cola == pytest.approx({"eval_accuracy": 4 / 6, "matthew_corr": 1 / 3, "eval_loss": 3.5})
    logits = np.array([[0.1, 0.9], [0.2, 0.8], [0.7, 0.3]])  # arg max: 1, 1, 0
    mrpc = glue_metrics(kinds("mrpc"), logits, [1, 0, 0], weights=[1, 1, 0], loss=[1.0, 3.0, 100.0])
    # Real examples 0 and 1: one right; tp 1, fp 1 -> F1 2/3; loss mean over them 2.
    assert mrpc == pytest.approx({"eval_accuracy": 0.5, "f1": 2 / 3, "eval_loss": 2.0})
    assert set(glue_metrics(kinds("rte"), [0, 1], [0, 0])) == {"eval_accuracy"}
    stsb = glue_metrics(kinds("sts-b"), np.array([[1.0], [2.0], [3.0], [4.0]]), [2, 4, 5, 9],
                        loss=0.25)
    assert stsb == pytest.approx({"pearson": 11 / math.sqrt(130), "spearman": 1.0,
                                  "MSE": (1 + 4 + 4 + 25) / 4, "eval_loss": 0.25})
    with pytest.raises(ValueError, match="unknown GLUE task_name 'stsb'"):
        glue_metrics(kinds("stsb"), [1.0], [1.0])
    with pytest.raises(ValueError, match=r"unknown GLUE metric kinds \['auc'\]"):
        glue_metrics(("accuracy", "auc"), [1], [1])


def test_selection_metric_and_task_list():
    assert glue_task("cola").selection_metric == "matthew_corr"
    assert glue_task("STS-B").selection_metric == "pearson"
    assert {glue_task(t).selection_metric for t in ("sst-2", "mnli", "mrpc", "rte")} == {"eval_accuracy"}
    # Every task's selection key is among the keys its metrics produce (with a loss, eval_loss too).
    for task in GLUE_TASKS.values():
        predictions = [0.5, 1.5, 2.5] if task.is_regression else [0, 1, 1]
        results = glue_metrics(task.metric_kinds, predictions, [0, 1, 0], loss=0.5)
        assert task.selection_metric in results and "eval_loss" in results, task.name


# -- SQuAD -----------------------------------------------------------------------------------------

def squad_dataset(questions: list[tuple[str, list[str]]]) -> list[dict]:
    """A one-article, one-paragraph "data" list with the given (id, gold answer texts)."""
    qas = [{"id": qid, "question": "?", "answers": [{"text": t, "answer_start": 0} for t in answers]}
           for qid, answers in questions]
    return [{"title": "t", "paragraphs": [{"context": "c", "qas": qas}]}]


def test_normalize_answer():
    assert normalize_answer("The  Quick, brown fox!") == "quick brown fox"
    assert normalize_answer("an apple a day keeps THEM away") == "apple day keeps them away"
    assert normalize_answer("anthem (the)") == "anthem"


def test_squad_v1_scores():
    dataset = squad_dataset([("q1", ["Denver Broncos", "The Denver Broncos"]),
                             ("q2", ["Carolina Panthers"]),
                             ("q3", ["Santa Clara"])])
    # q1: exact after normalization. q2: "panthers team" vs "carolina panthers": 1 common token,
    # precision 1/2, recall 1/2 -> F1 1/2, EM 0. q3: no prediction -> 0 but counted.
    predictions = {"q1": "denver broncos!", "q2": "the Panthers team"}
    scores = squad_v1_scores(dataset, predictions)
    assert scores == pytest.approx({"exact_match": 100 / 3, "f1": 150 / 3})
    assert squad_v1_f1("", "") == 0.0 and squad_v2_f1("", "") == 1.0
    assert squad_v2_f1("a", "Paris") == 0.0  # "a" normalizes to nothing


def v2_case():
    dataset = squad_dataset([("q1", ["Normandy"]), ("q2", ["10th century", "the"]), ("q3", []),
                             ("q4", [])])
    predictions = {"q1": "Normandy", "q2": "the 10th", "q3": "France", "q4": ""}
    na_probs = {"q1": 0.1, "q2": 0.6, "q3": 0.8, "q4": 0.3}
    return dataset, predictions, na_probs


def test_squad_v2_scores_and_splits():
    dataset, predictions, na_probs = v2_case()
    # Raw per question: exact [1, 0, 0, 1]; f1 [1, 2/3, 0, 1] (q2: "10th" vs "10th century", P 1 R 1/2;
    # its gold "the" normalizes to "" and is dropped; q3 answers a no-answer question).
    scores = squad_v2_scores(dataset, predictions, na_probs)
    expected = {"exact": 50.0, "f1": 100 * (8 / 3) / 4, "total": 4,
                "HasAns_exact": 50.0, "HasAns_f1": 100 * (5 / 3) / 2, "HasAns_total": 2,
                "NoAns_exact": 50.0, "NoAns_f1": 50.0, "NoAns_total": 2,
                # Threshold search in na order q1 .1, q4 .3, q2 .6, q3 .8 starting at 2 (no-answer count):
                # exact: 3 (q1) 3 3 2 -> best 3/4 at .1; f1: 3 (q1) 3 3.667 (q2) 2.667 -> 3.667/4 at .6.
                "best_exact": 75.0, "best_exact_thresh": 0.1,
                "best_f1": 100 * (11 / 3) / 4, "best_f1_thresh": 0.6}
    assert scores == pytest.approx(expected)
    # A threshold of .5 turns q2 and q3 into "no answer": exact/f1 [1, 0, 1, 1].
    thresholded = squad_v2_scores(dataset, predictions, na_probs, na_prob_thresh=0.5)
    assert thresholded["exact"] == pytest.approx(75.0) and thresholded["f1"] == pytest.approx(75.0)
    without_probs = squad_v2_scores(dataset, predictions)
    assert "best_f1" not in without_probs and without_probs["exact"] == 50.0


def test_find_best_thresh_keeps_zero_when_nothing_improves():
    # One answerable question answered wrongly, one unanswerable answered with text: admitting either
    # never beats "all unanswerable" (score 1 of 2).
    predictions = {"a": "wrong", "b": "text"}
    best, threshold = find_best_thresh(predictions, {"a": 0.0, "b": 0.0}, {"a": 0.2, "b": 0.4},
                                       {"a": True, "b": False})
    assert (best, threshold) == (50.0, 0.0)
