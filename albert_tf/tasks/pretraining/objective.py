"""The sentence-level objective of a pretraining run, and its record in the output directory.

The paper compares three objectives beside the masked LM (its Table 5):

- ``sop``: sentence-order prediction, the reference's (records of create_pretraining_data as is);
- ``nsp``: next-sentence prediction, BERT's (records of create_pretraining_data
  --random_next_sentence); the same 2-way head (``cls/seq_relationship``) and loss, other data;
- ``none``: the masked LM alone; the sentence head (and the pooler, which only it reads) is not
  trained and keeps its initial weights, but evaluation still measures its accuracy.

Labels, the reference's ``next_sentence_labels``: 0 = segment B follows A in the document (SOP: in
order; NSP: the actual next text), 1 = B was swapped with A (SOP) or taken from a random document
(NSP; SOP data holds such negatives too, for chunks of a single sentence).

A run records its objective in ``<output_dir>/sentence_objective.json``; resuming that directory
with another objective is refused, since the checkpoints' head and optimizer state were trained
for the recorded one.
"""

from __future__ import annotations

import json
import os

import tensorflow as tf

from albert_tf.errors.user_error import UserError
from albert_tf.files.atomic import atomic_write_text

SENTENCE_OBJECTIVES = ("sop", "nsp", "none")
SENTENCE_TASKS = ("sop", "nsp")
OBJECTIVE_FILE = "sentence_objective.json"

# The metric names of the sentence task an evaluation set holds: the reference's for SOP, BERT's
# run_pretraining's for NSP.
_METRIC_PREFIX = {"sop": "sentence_order", "nsp": "next_sentence"}


class SentenceObjectiveError(UserError, ValueError):
    """An output directory was trained with another sentence objective, or records one in a file
    that is not an objective file."""


def require_objective(objective: str) -> str:
    """``objective`` when it is one of SENTENCE_OBJECTIVES; ValueError otherwise."""
    if objective not in SENTENCE_OBJECTIVES:
        raise ValueError(f"Unknown sentence objective {objective!r}; expected one of "
                         f"{', '.join(SENTENCE_OBJECTIVES)}.")
    return objective


def sentence_metric_names(sentence_task: str) -> tuple[str, str]:
    """(loss key, accuracy key) of the sentence task ``sop`` or ``nsp``, e.g.
    ``("next_sentence_loss", "next_sentence_accuracy")``."""
    if sentence_task not in SENTENCE_TASKS:
        raise ValueError(f"Unknown sentence task {sentence_task!r}; expected one of "
                         f"{', '.join(SENTENCE_TASKS)}.")
    prefix = _METRIC_PREFIX[sentence_task]
    return f"{prefix}_loss", f"{prefix}_accuracy"


def evaluation_name(objective: str, eval_sentence_task: str | None) -> str:
    """The name of an evaluation of an ``objective`` run on records of ``eval_sentence_task``: ""
    when they are the objective's own (its results are eval_results.txt, best_results.json), else
    the records' task, which names the results files (``eval_results_nsp.txt``, ...) so that a
    run's evaluations on SOP and on NSP records are kept side by side. A ``none`` run has no task
    of its own: every evaluation is named."""
    if eval_sentence_task is None or eval_sentence_task == require_objective(objective):
        return ""
    return eval_sentence_task


def recorded_objective(output_dir: str) -> str | None:
    """The objective recorded in ``output_dir`` (None when no run recorded one)."""
    path = os.path.join(output_dir, OBJECTIVE_FILE)
    if not tf.io.gfile.exists(path):
        return None
    with tf.io.gfile.GFile(path) as handle:
        text = handle.read()
    try:
        return require_objective(json.loads(text)["sentence_objective"])
    except (ValueError, KeyError, TypeError):
        raise SentenceObjectiveError(f"{path}: expected {{\"sentence_objective\": one of "
                                     f"{', '.join(SENTENCE_OBJECTIVES)}}}, got "
                                     f"{text.strip()!r}.") from None


def check_objective(output_dir: str, objective: str, flag: str = "--sentence_objective") -> None:
    """SentenceObjectiveError (a ValueError) naming both objectives and ``output_dir`` when the
    directory was trained with another objective than ``objective``."""
    recorded = recorded_objective(output_dir)
    if recorded is not None and recorded != require_objective(objective):
        raise SentenceObjectiveError(f"{flag}={objective}, but {output_dir} was trained with "
                                     f"{flag}={recorded} (recorded in {OBJECTIVE_FILE}); rerun "
                                     f"with {flag}={recorded} or use another output directory.")


def record_objective(output_dir: str, objective: str) -> None:
    """Writes ``objective`` to ``<output_dir>/sentence_objective.json`` (atomically) unless the
    directory already records it; a directory recording another one is refused (check_objective).
    """
    check_objective(output_dir, objective)
    if recorded_objective(output_dir) is None:
        atomic_write_text(os.path.join(output_dir, OBJECTIVE_FILE),
                          json.dumps({"sentence_objective": objective}) + "\n")
