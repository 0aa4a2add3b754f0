"""The evaluation data a sweep's results were computed on, recorded beside them (``eval_data.json``)
and checked when a sweep resumes.

A resumable sweep (run_classifier's and run_ner's, whose state is ``best_trial.txt``) evaluates only
the checkpoints after the last one it evaluated, and reports the best of all of them. Were the
evaluation data changed between two runs in one --output_dir (another --dev_file or --eval_file,
another --max_seq_length), the later run would evaluate nothing new, or only the newer checkpoints
on other data, and report a best checkpoint chosen on the earlier data as this run's: a silently
wrong result. So every sweep records, per evaluation set, the name of the feature file it evaluates
(a name that changes with the data file's contents and with every feature setting,
data_prep/common/feature_cache.py), and a sweep that would resume the state of an earlier one
refuses other data before any evaluation. A sweep that starts afresh (no state file: SQuAD, RACE,
or a first run) evaluates every checkpoint present and records its own data.
"""

from __future__ import annotations

import json
import os
from typing import Mapping, Sequence

import tensorflow as tf

from albert_tf.errors.user_error import UserError
from albert_tf.files.atomic import atomic_write_text
from albert_tf.training.task import EvalSet

EVAL_DATA_FILE = "eval_data.json"


class EvalDataChanged(UserError, ValueError):
    """A resumed sweep's evaluation data differ from those of the sweep it resumes."""


def eval_data_file_name(results_name: str = "") -> str:
    """``eval_data.json``, or ``eval_data_<name>.json`` beside a named evaluation's results."""
    stem, extension = os.path.splitext(EVAL_DATA_FILE)
    return f"{stem}_{results_name}{extension}" if results_name else EVAL_DATA_FILE


def _describe(sources: Mapping[str, str]) -> str:
    return ", ".join(f"{name + ': ' if name else ''}{source}" for name, source in sources.items())


def check_and_record_eval_data(output_dir: str, eval_sets: Sequence[EvalSet],
                               state_file: str | None, results_name: str = "") -> None:
    """Refuses (EvalDataChanged, naming both) evaluation data other than those recorded when the
    sweep state ``state_file`` of ``output_dir`` exists (the sweep would resume it); then records
    this sweep's data. Eval sets without a ``source`` are neither checked nor recorded."""
    sources = {eval_set.name: eval_set.source for eval_set in eval_sets if eval_set.source}
    if not sources:
        return
    path = os.path.join(output_dir, eval_data_file_name(results_name))
    resumes = bool(state_file) and tf.io.gfile.exists(os.path.join(output_dir, state_file))
    if resumes and tf.io.gfile.exists(path):
        with tf.io.gfile.GFile(path) as handle:
            try:
                recorded = json.load(handle)["eval_sets"]
            except (ValueError, KeyError, TypeError):
                recorded = None
        if recorded != sources:
            shown = _describe(recorded) if isinstance(recorded, dict) else "unreadable data"
            raise EvalDataChanged(
                f"{path}: the checkpoints in this directory were evaluated on {shown}; this run "
                f"evaluates {_describe(sources)} (another evaluation file, or other feature "
                f"settings such as --max_seq_length). Resuming the sweep of {state_file} would "
                "report a best checkpoint chosen on the earlier data. Give the earlier evaluation "
                "file and settings, or use another --output_dir")
    atomic_write_text(path, json.dumps({"eval_sets": sources}, indent=1, sort_keys=True) + "\n")
