"""The sentence-level objective of a pretraining run, a fact of its output directory's manifest.

The paper compares three objectives beside the masked LM (its Table 5):

- ``sop``: sentence-order prediction, the reference's (records of create_pretraining_data as is);
- ``nsp``: next-sentence prediction, BERT's (records of create_pretraining_data
  --random_next_sentence); the same 2-way head (``cls/seq_relationship``) and loss, other data;
- ``none``: the masked LM alone; the sentence head (and the pooler, which only it reads) is not
  trained and keeps its initial weights, but evaluation still measures its accuracy.

Labels, the reference's ``next_sentence_labels``: 0 = segment B follows A in the document (SOP: in
order; NSP: the actual next text), 1 = B was swapped with A (SOP) or taken from a random document
(NSP; SOP data holds such negatives too, for chunks of a single sentence).

A run records its objective in its run manifest (the record ``OBJECTIVE``); resuming that
directory with another objective is refused, since the checkpoints' head and optimizer state were
trained for the recorded one.
"""

from __future__ import annotations

from albert_tf.errors.user_error import UserError
from albert_tf.files.run_manifest import Fact, read_manifest

SENTENCE_OBJECTIVES = ("sop", "nsp", "none")
SENTENCE_TASKS = ("sop", "nsp")

# The metric names of the sentence task an evaluation set holds: the reference's for SOP, BERT's
# run_pretraining's for NSP.
_METRIC_PREFIX = {"sop": "sentence_order", "nsp": "next_sentence"}


class SentenceObjectiveError(UserError, ValueError):
    """An output directory records a sentence objective that is not one."""


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


OBJECTIVE = Fact("sentence_objective", "checkpoints trained with",
                   describe="--sentence_objective={}".format)


def recorded_objective(output_dir: str) -> str | None:
    """The objective recorded in ``output_dir`` (None when no run recorded one);
    SentenceObjectiveError for a record that is not one."""
    manifest = read_manifest(output_dir)
    recorded = manifest.fact(OBJECTIVE.key)
    if recorded is None or (isinstance(recorded, str) and recorded in SENTENCE_OBJECTIVES):
        return recorded
    raise SentenceObjectiveError(f"{manifest.where(OBJECTIVE.key)}: the recorded sentence "
                                 f"objective {recorded!r} is not one of "
                                 f"{', '.join(SENTENCE_OBJECTIVES)}")
