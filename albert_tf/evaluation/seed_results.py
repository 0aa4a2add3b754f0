"""The results of one fine-tuning recipe run with several seeds: each seed's best dev scores and
their median, as the paper reports its GLUE numbers (the median of 5 runs).

Each seed's run lives in ``<output_dir>/seed_<seed>`` and its sweep writes ``best_results.json``
there (albert_tf/evaluation/best_checkpoint.py). ``summarize_seeds`` gathers them::

    summary = summarize_seeds("runs/rte", [1, 2, 3, 4, 5])
    summary["median"]["eval_accuracy"]

The summary is ``{"selection_metric": key, "seeds": {"1": best_results, ...}, "median": {metric:
median over the seeds}}``; ``write_seed_results`` writes it to ``<output_dir>/seed_results.json``.
"""

from __future__ import annotations

import json
import os
import statistics
from typing import Any, Sequence

import tensorflow as tf

from albert_tf.errors.user_error import MissingFileError, UserError
from albert_tf.evaluation.best_checkpoint import BEST_RESULTS_FILE
from albert_tf.files.atomic import atomic_write_text
from albert_tf.files.json_objects import read_json_object

SEED_RESULTS_FILE = "seed_results.json"
SEED_DIRECTORY_PREFIX = "seed_"  # each seed's run directory: seed_<S>


class RunResultsError(UserError, ValueError):
    """Runs whose results cannot be summarised: a results file that is corrupt or foreign, or run
    directories that do not go together (another task, two runs of one setting); the message
    names the files or directories."""


def seed_directory(output_dir: str, seed: int) -> str:
    """Where the run of ``seed`` writes its checkpoints and results."""
    return os.path.join(output_dir, f"{SEED_DIRECTORY_PREFIX}{seed}")


def read_results_file(path: str, *keys: str) -> dict[str, Any]:
    """A results file (``best_results*.json``, ``seed_results.json``) holding ``keys``;
    RunResultsError (a ValueError) naming the file when it is not such a JSON object (a corrupt or
    foreign file)."""
    results = read_json_object(path, RunResultsError, path)
    missing = [key for key in keys if not isinstance(results.get(key), dict)]
    if missing:
        raise RunResultsError(f"{path} is not a results file of albert_tf: no {missing[0]!r} "
                              "object.")
    return results


def read_best_results(directory: str) -> dict[str, Any]:
    """The ``best_results.json`` of a run; MissingFileError (a FileNotFoundError) naming it when
    the run has none (its sweep has not finished)."""
    path = os.path.join(directory, BEST_RESULTS_FILE)
    if not tf.io.gfile.exists(path):
        raise MissingFileError(f"{path} does not exist: the run in {directory} has not finished "
                               "its evaluation sweep (--do_eval; run_squad: --do_predict)")
    return read_results_file(path, "metrics")


def summarize_seeds(output_dir: str, seeds: Sequence[int]) -> dict[str, Any]:
    """Each seed's best results and, per metric every seed reports, the median over the seeds.

    RunResultsError when the seeds' runs selected their checkpoints by different metrics (runs
    of different tasks in one directory)."""
    per_seed = {str(seed): read_best_results(seed_directory(output_dir, seed)) for seed in seeds}
    keys = {results["selection_metric"] for results in per_seed.values()}
    if len(keys) != 1:
        raise RunResultsError(f"the runs in {output_dir} select their best checkpoint by "
                              f"different metrics ({sorted(keys)}): one directory must hold one "
                              "recipe's seeds")
    common = set.intersection(*(set(results["metrics"]) for results in per_seed.values()))
    median = {name: statistics.median(results["metrics"][name] for results in per_seed.values())
              for name in sorted(common)}
    return {"selection_metric": keys.pop(), "seeds": per_seed, "median": median}


def write_seed_results(output_dir: str, summary: dict[str, Any]) -> str:
    """Writes ``summary`` to ``<output_dir>/seed_results.json`` (atomically); returns the path."""
    path = os.path.join(output_dir, SEED_RESULTS_FILE)
    atomic_write_text(path, json.dumps(summary, indent=1, sort_keys=True) + "\n")
    return path


def format_seed_results(summary: dict[str, Any]) -> str:
    """A table: one line per seed with its best step and selection metric, then the median."""
    key = summary["selection_metric"]
    lines = [f"{'seed':>6}  {'best step':>9}  {key}"]
    for seed, results in summary["seeds"].items():
        lines.append(f"{seed:>6}  {results['best_step']:>9}  {results['metrics'][key]:.4f}")
    lines.append(f"{'median':>6}  {'':>9}  {summary['median'][key]:.4f}")
    return "\n".join(lines)
