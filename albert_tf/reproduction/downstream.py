"""The paper's downstream table from fine-tuning runs: MNLI, QNLI, QQP, RTE, SST-2, MRPC, CoLA,
STS-B, SQuAD1.1 F1/EM, SQuAD2.0 F1/EM, RACE and the paper's average, beside published numbers.

The runs of one pretrained checkpoint live in one directory, a subdirectory per task named as
``DOWNSTREAM_TASKS`` says (``<runs_dir>/mnli``, ``<runs_dir>/squad1.1``, ...; the layout the plan
of reproduction/plan.py writes). A task's score is the median over seeds when the directory holds
``seed_results.json`` (albert_tf.run_seeds), else the best checkpoint's score in
``best_results.json`` (one run's sweep). Scores are percentages: GLUE accuracy (CoLA Matthews
correlation, STS-B Pearson), SQuAD F1 and exact match (v2.0: the reference's threshold tuned on the
dev set, the figure the paper reports), RACE accuracy.

    table = downstream_table("runs/albert_base", "v2_base")
    print(format_downstream_markdown(table))
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any, Mapping

import tensorflow as tf

from albert_tf.checkpoints.run_config import recorded_config, run_config_path
from albert_tf.evaluation.best_checkpoint import BEST_RESULTS_FILE
from albert_tf.evaluation.seed_results import (SEED_DIRECTORY_PREFIX, SEED_RESULTS_FILE,
                                               RunResultsError, read_best_results_file,
                                               read_seed_results_file)
from albert_tf.reproduction.published import published_architecture, published_model


@dataclasses.dataclass(frozen=True)
class DownstreamTask:
    """One column group of the table.

    name: the run subdirectory (and the key prefix of its cells), e.g. "squad1.1".
    label: the column title, e.g. "SQuAD1.1".
    cells: (cell key, result key, scale to percent) per cell; SQuAD has F1 then EM.
    """

    name: str
    label: str
    cells: tuple[tuple[str, str, float], ...]


def _glue(name: str, label: str, result_key: str = "eval_accuracy") -> DownstreamTask:
    return DownstreamTask(name, label, ((name, result_key, 100.0),))


DOWNSTREAM_TASKS: tuple[DownstreamTask, ...] = (
    _glue("mnli", "MNLI"), _glue("qnli", "QNLI"), _glue("qqp", "QQP"), _glue("rte", "RTE"),
    _glue("sst-2", "SST-2"), _glue("mrpc", "MRPC"), _glue("cola", "CoLA", "matthew_corr"),
    _glue("sts-b", "STS-B", "pearson"),
    DownstreamTask("squad1.1", "SQuAD1.1", (("squad1.1_f1", "f1", 1.0),
                                            ("squad1.1_em", "exact_match", 1.0))),
    DownstreamTask("squad2.0", "SQuAD2.0", (("squad2.0_f1", "reference_tuned_f1", 1.0),
                                            ("squad2.0_em", "reference_tuned_exact", 1.0))),
    _glue("race", "RACE"),
)
AVERAGE_KEY = "avg"
# The cells of the paper's average; each SQuAD version counts as the mean of its F1 and EM.
AVERAGE_CELLS = ("squad1.1_f1", "squad1.1_em", "squad2.0_f1", "squad2.0_em", "mnli", "sst-2",
                 "race")


def _results_file(directory: str) -> str | None:
    """The results file a run directory holds (run_seeds' summary first), or None."""
    for name in (SEED_RESULTS_FILE, BEST_RESULTS_FILE):
        if tf.io.gfile.exists(os.path.join(directory, name)):
            return os.path.join(directory, name)
    return None


def read_task_scores(task_dir: str, task: DownstreamTask) -> dict[str, Any] | None:
    """The task's cells from its run directory: ``{"cells": {key: percent}, "runs": seeds or 1,
    "source": file}``; None when the directory holds neither results file (not run yet).

    RunResultsError (a ValueError) naming the file (and the key) when it is not a results file of
    albert_tf (a value of another type, a score that is not a finite number) or lacks a result
    the task needs (a run of another task)."""
    path = _results_file(task_dir)
    if path is None:
        return None
    if os.path.basename(path) == SEED_RESULTS_FILE:
        summary = read_seed_results_file(path)
        metrics, runs = summary["median"], len(summary["seeds"])
    else:
        metrics, runs = read_best_results_file(path)["metrics"], 1
    cells = {}
    for cell, result_key, scale in task.cells:
        if result_key not in metrics:
            raise RunResultsError(f"{path} has no {result_key!r} (it has {sorted(metrics)}): is "
                                  f"it a run of {task.label}?")
        cells[cell] = float(metrics[result_key]) * scale
    return {"cells": cells, "runs": runs, "source": path}


def paper_average(cells: Mapping[str, float]) -> float | None:
    """The paper's Avg: (SQuAD1.1 (F1+EM)/2 + SQuAD2.0 (F1+EM)/2 + MNLI + SST-2 + RACE) / 5; None
    unless all seven cells are there."""
    if any(key not in cells for key in AVERAGE_CELLS):
        return None
    squad = sum((cells[f"{version}_f1"] + cells[f"{version}_em"]) / 2
                for version in ("squad1.1", "squad2.0"))
    return (squad + cells["mnli"] + cells["sst-2"] + cells["race"]) / 5


def unread_directories(runs_dir: str) -> list[str]:
    """The subdirectories of ``runs_dir`` that hold results under a name that is no task of the
    table (``RTE`` for ``rte``, ``squad_v1``): the table leaves them out, so it names them."""
    if not tf.io.gfile.isdir(runs_dir):
        return []
    tasks = {task.name for task in DOWNSTREAM_TASKS}
    names = (name.rstrip("/") for name in tf.io.gfile.listdir(runs_dir))
    return sorted(name for name in names
                  if name not in tasks and _results_file(os.path.join(runs_dir, name)))


def downstream_scores(runs_dir: str) -> dict[str, Any]:
    """Every task's cells found under ``runs_dir`` and the average: ``{"cells": {key: percent},
    "runs": {task: seeds}, "sources": {task: file}, "unread": [subdirectory]}`` (tasks not run
    are absent; ``unread_directories``).

    RunResultsError when ``runs_dir`` itself holds a run's results: it is one task's directory,
    not the directory of a subdirectory per task (its table would be all dashes)."""
    own = _results_file(runs_dir)
    if own is not None:
        raise RunResultsError(
            f"{runs_dir} holds the results of one task's runs ({own}): the runs directory holds "
            f"a subdirectory per task ({', '.join(task.name for task in DOWNSTREAM_TASKS)}); "
            "give the directory above it")
    cells: dict[str, float] = {}
    runs: dict[str, int] = {}
    sources: dict[str, str] = {}
    for task in DOWNSTREAM_TASKS:
        scores = read_task_scores(os.path.join(runs_dir, task.name), task)
        if scores is not None:
            cells.update(scores["cells"])
            runs[task.name], sources[task.name] = scores["runs"], scores["source"]
    average = paper_average(cells)
    if average is not None:
        cells[AVERAGE_KEY] = average
    return {"cells": cells, "runs": runs, "sources": sources,
            "unread": unread_directories(runs_dir)}


def cell_keys() -> list[str]:
    """Every cell key in table order, the average last."""
    return [cell for task in DOWNSTREAM_TASKS for cell, _, _ in task.cells] + [AVERAGE_KEY]


def downstream_table(runs_dir: str, model: str) -> dict[str, Any]:
    """The table of ``runs_dir`` beside the published numbers of the released ``model``
    (``v2_base``, ...): ``{"runs_dir", "model", "ours", "published", "difference", "runs",
    "sources", "unread"}``, cells keyed by ``cell_keys()``; a difference only where both exist."""
    scores = downstream_scores(runs_dir)
    published = published_model(model)
    for task in scores["sources"]:
        check_runs_are_of(model, os.path.join(runs_dir, task))
    ours = scores["cells"]
    difference = {key: ours[key] - published[key] for key in cell_keys()
                  if key in ours and key in published}
    return {"runs_dir": runs_dir, "model": model, "ours": ours,
            "published": {key: published[key] for key in cell_keys() if key in published},
            "difference": difference, "runs": scores["runs"], "sources": scores["sources"],
            "unread": scores["unread"]}


def check_runs_are_of(model: str, task_dir: str) -> None:
    """RunResultsError naming the config when a run of ``task_dir`` (the task's own run, or a
    run_seeds seed's ``seed_<S>``) recorded a config of another architecture than the released
    ``model``'s (layers, hidden size, embedding size): its scores are not that model's. Runs that
    recorded no config (fine-tuning runs of versions before 2026-11-27) are not checked."""
    expected = published_architecture(model)
    seeds = tf.io.gfile.glob(os.path.join(task_dir, SEED_DIRECTORY_PREFIX + "*"))
    for directory in [task_dir, *sorted(seeds)]:
        config = recorded_config(directory)
        if config is None:
            continue
        differing = {key: getattr(config, key) for key, value in expected.items()
                     if getattr(config, key) != value}
        if differing:
            found = ", ".join(f"{key} {value}" for key, value in differing.items())
            wanted = ", ".join(f"{key} {expected[key]}" for key in differing)
            raise RunResultsError(
                f"{run_config_path(directory)}: {found}, but --model={model} has {wanted}: the "
                "run is of another model; give --model its size, or move the run out of "
                "--runs_dir")


def format_difference(difference: float) -> str:
    """A difference to the published number, signed, to 0.1 as the tables print scores: "+0.0"
    for a difference that rounds to nothing from below (Python prints "-0.0")."""
    return f"{round(difference, 1) + 0.0:+.1f}"


def _value(cells: Mapping[str, float], key: str, signed: bool = False) -> str:
    if key not in cells:
        return "–"
    return format_difference(cells[key]) if signed else f"{cells[key]:.1f}"


def _row(title: str, cells: Mapping[str, float], signed: bool = False) -> str:
    parts = [title]
    for task in DOWNSTREAM_TASKS:
        parts.append("/".join(_value(cells, cell, signed) for cell, _, _ in task.cells))
    parts.append(_value(cells, AVERAGE_KEY, signed))
    return "| " + " | ".join(parts) + " |"


def format_downstream_markdown(table: Mapping[str, Any]) -> str:
    """The table in the paper's layout (a column per task, SQuAD cells F1/EM): our row, the
    published row and their difference, then how many runs each of our cells is the median of and
    the directories of results the table did not read (named so that no task's is missing by a
    misspelt directory name unnoticed)."""
    labels = [task.label for task in DOWNSTREAM_TASKS] + ["Avg"]
    lines = ["| | " + " | ".join(labels) + " |", "|---" * (len(labels) + 1) + "|",
             _row(f"albert_tf ({table['runs_dir']})", table["ours"]),
             _row(f"published ({table['model']})", table["published"]),
             _row("difference", table["difference"], signed=True)]
    runs = ", ".join(f"{task} {count}" for task, count in table["runs"].items())
    lines += ["", f"Runs per cell (median over seeds where more than 1): {runs or 'none found'}.",
              "– : not run here, or not published for this model."]
    if table["unread"]:
        lines.append(f"Not read: {', '.join(table['unread'])} in {table['runs_dir']} (results "
                     "under a name that is no task of the table; the tasks' directories are "
                     f"{', '.join(task.name for task in DOWNSTREAM_TASKS)}).")
    return "\n".join(lines)
