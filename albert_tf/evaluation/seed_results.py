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
import math
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


def _shown(value: Any) -> str:
    """A value as the JSON file spells it (``NaN``, ``Infinity``, ``"0.5"``, ``null``),
    shortened."""
    text = json.dumps(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _require(path: str, values: dict[str, Any], key: str, kind: type | tuple[type, ...],
             expected: str, where: str = "") -> Any:
    """``values[key]`` when it is of ``kind`` (a bool is no number); RunResultsError naming
    ``path`` and the key (``where`` + key, e.g. 'seeds.1.metrics') otherwise."""
    name = f"{where}{key}"
    if key not in values:
        raise RunResultsError(f"{path} is not a results file of albert_tf: no {name!r} "
                              f"({expected})")
    value = values[key]
    if not isinstance(value, kind) or isinstance(value, bool):
        raise RunResultsError(f"{path}: {name!r} is {_shown(value)}: expected {expected}")
    return value


def _finite_numbers(path: str, values: dict[str, Any], key: str, where: str = ""
                    ) -> dict[str, float]:
    """The object ``values[key]`` of scores, each a finite number; RunResultsError naming the file
    and the key of the first that is not (a NaN, an infinity, a string, a list, null)."""
    scores = _require(path, values, key, dict, "an object of scores", where)
    for name, value in scores.items():
        if (not isinstance(value, (int, float)) or isinstance(value, bool)
                or not math.isfinite(value)):
            raise RunResultsError(f"{path}: {f'{where}{key}.{name}'!r} is {_shown(value)}: "
                                  "expected a finite number")
    return scores


def _check_best_results(path: str, results: dict[str, Any], where: str = "") -> dict[str, Any]:
    """``results`` when it has the shape of a sweep's best_results.json: ``selection_metric`` (a
    name), ``best_step`` (an integer >= 0) and ``metrics`` (finite numbers)."""
    _finite_numbers(path, results, "metrics", where)
    metric = _require(path, results, "selection_metric", str, "the name of a metric", where)
    if not metric:
        raise RunResultsError(f"{path}: {f'{where}selection_metric'!r} is empty: expected the "
                              "name of a metric")
    step = _require(path, results, "best_step", int, "a step, an integer >= 0", where)
    if step < 0:
        raise RunResultsError(f"{path}: {f'{where}best_step'!r} is {step}: expected a step, an "
                              "integer >= 0")
    return results


def read_best_results_file(path: str) -> dict[str, Any]:
    """A sweep's ``best_results*.json`` (albert_tf/evaluation/best_checkpoint.py): ``{"selection_
    metric": name, "best_step": step, "metrics": {name: score}}``, every value checked.

    RunResultsError (a ValueError), one line naming the file and the key, when the file is not
    valid JSON, not an object, lacks a key, or holds a value of another type or a score that is
    not a finite number (NaN, Infinity)."""
    return _check_best_results(path, read_json_object(path, RunResultsError, path))


def read_seed_results_file(path: str) -> dict[str, Any]:
    """A ``seed_results.json`` (``write_seed_results``): ``{"selection_metric": name, "seeds":
    {seed: best results}, "median": {name: score}}``, every value checked as
    ``read_best_results_file`` checks its own (RunResultsError naming the file and the key)."""
    summary = read_json_object(path, RunResultsError, path)
    _finite_numbers(path, summary, "median")
    _require(path, summary, "selection_metric", str, "the name of a metric")
    seeds = _require(path, summary, "seeds", dict, "an object of each seed's best results")
    if not seeds:
        raise RunResultsError(f"{path}: 'seeds' is empty: expected each seed's best results")
    for seed, results in seeds.items():
        if not isinstance(results, dict):
            raise RunResultsError(f"{path}: {f'seeds.{seed}'!r} is {_shown(results)}: expected "
                                  "the seed's best results, an object")
        _check_best_results(path, results, where=f"seeds.{seed}.")
    return summary


def read_best_results(directory: str) -> dict[str, Any]:
    """The ``best_results.json`` of a run, checked (``read_best_results_file``); MissingFileError
    (a FileNotFoundError) naming it when the run has none (its sweep has not finished)."""
    path = os.path.join(directory, BEST_RESULTS_FILE)
    if not tf.io.gfile.exists(path):
        raise MissingFileError(f"{path} does not exist: the run in {directory} has not finished "
                               "its evaluation sweep (--do_eval; run_squad: --do_predict)")
    return read_best_results_file(path)


def summarize_seeds(output_dir: str, seeds: Sequence[int]) -> dict[str, Any]:
    """Each seed's best results and, per metric every seed reports, the median over the seeds.

    RunResultsError when a seed's best_results.json is not one (``read_best_results_file``) or
    lacks the score of its own selection metric, or when the seeds' runs selected their
    checkpoints by different metrics (runs of different tasks in one directory)."""
    per_seed = {str(seed): read_best_results(seed_directory(output_dir, seed)) for seed in seeds}
    for seed, results in per_seed.items():
        if results["selection_metric"] not in results["metrics"]:
            path = os.path.join(seed_directory(output_dir, int(seed)), BEST_RESULTS_FILE)
            raise RunResultsError(f"{path}: 'metrics' has no score of its selection_metric "
                                  f"{results['selection_metric']!r}")
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
