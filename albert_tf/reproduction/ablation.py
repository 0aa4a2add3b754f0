"""The paper's pretraining ablation tables from run_pretraining output directories: Table 3
(embedding size, not-shared vs all-shared), Table 4 (cross-layer sharing strategy) and Table 5
(sentence-level objective), each cell beside the published one.

What a run directory gives (``read_pretraining_run``):

- the architecture from the config its run manifest records (or its ``albert_config.json``):
  embedding size E, ``cross_layer_sharing`` and the parameter count as the paper counts it
  (embeddings + transformer, no pooler, no heads);
- the sentence objective its run manifest (or an earlier version's ``sentence_objective.json``)
  records (none: sop, the only objective before albert_tf recorded it);
- the intrinsic accuracies (percent) from the sweeps' ``best_results*.json``: the masked LM and the
  sentence task of the run's own evaluation (``best_results.json``), and the other sentence task
  from the named evaluation (``best_results_nsp.json`` / ``best_results_sop.json``, written by
  ``run_pretraining --do_eval --eval_sentence_task=...`` on the other kind of records);
- the downstream cells and their average when the run's fine-tuning runs are in
  ``<run>/downstream`` (reproduction/downstream.py; the plan's default place for them).

Which runs each table takes: Table 3 the SOP runs with sharing ``all`` or ``none``; Table 4 every
SOP run; Table 5 the runs whose architecture is that of the NSP / MLM-only runs (none: no Table 5).
Two runs in one cell of a table are refused, naming both.
"""

from __future__ import annotations

import glob
import os
from typing import Any, Iterable, Mapping

import tensorflow as tf

from albert_tf.checkpoints.run_config import RUN_CONFIG_FILE, recorded_config
from albert_tf.errors.user_error import MissingFileError
from albert_tf.evaluation.best_checkpoint import results_file_names
from albert_tf.evaluation.seed_results import RunResultsError, read_best_results_file
from albert_tf.models.parameters import paper_parameter_count
from albert_tf.reproduction.downstream import AVERAGE_KEY, downstream_scores, format_difference
from albert_tf.reproduction.published import published_rows
from albert_tf.tasks.pretraining.objective import SENTENCE_TASKS, recorded_objective

DOWNSTREAM_DIR = "downstream"
# The paper's ablations are of ALBERT-base; other architectures get no published cells.
_ALBERT_BASE = {"vocab_size": 30000, "hidden_size": 768, "num_hidden_layers": 12,
                "num_attention_heads": 12, "intermediate_size": 3072}
INTRINSIC_KEYS = ("masked_lm_accuracy", "next_sentence_accuracy", "sentence_order_accuracy")
# Table 5's downstream columns (the paper's five tasks) and their titles.
TABLE5_CELLS = (("squad1.1", "SQuAD1.1"), ("squad2.0", "SQuAD2.0"), ("mnli", "MNLI"),
                ("sst-2", "SST-2"), ("race", "RACE"))


def intrinsic_accuracies(run_dir: str) -> dict[str, float]:
    """MLM / NSP / SOP accuracy in percent from the run's sweeps: its own evaluation first (the MLM
    accuracy comes from it), then the named ones (``best_results_<task>.json``)."""
    paths = [os.path.join(run_dir, results_file_names(name)[1])
             for name in ("", *SENTENCE_TASKS)]
    accuracies: dict[str, float] = {}
    for path in paths:
        if tf.io.gfile.exists(path):
            for key, value in read_best_results_file(path)["metrics"].items():
                if key in INTRINSIC_KEYS and key not in accuracies:
                    accuracies[key] = 100.0 * float(value)
    return accuracies


def read_pretraining_run(run_dir: str) -> dict[str, Any]:
    """One run's row: name, embedding_size, cross_layer_sharing, sentence_objective, params,
    intrinsic accuracies and downstream cells (see the module docstring). MissingFileError (a
    FileNotFoundError) naming the file when the directory records no config."""
    config = recorded_config(run_dir)
    if config is None:
        raise MissingFileError(f"{os.path.join(run_dir, RUN_CONFIG_FILE)} does not exist: is "
                               f"{run_dir} a run_pretraining --output_dir? (runs before albert_tf "
                               "recorded the config: copy its --albert_config_file there)")
    downstream = downstream_scores(os.path.join(run_dir, DOWNSTREAM_DIR))
    return {"run_dir": run_dir, "name": os.path.basename(os.path.normpath(run_dir)),
            "embedding_size": config.embedding_size,
            "cross_layer_sharing": config.cross_layer_sharing,
            "sentence_objective": recorded_objective(run_dir) or "sop",
            "params": paper_parameter_count(config),
            "albert_base": all(getattr(config, key) == value
                               for key, value in _ALBERT_BASE.items()),
            "intrinsic": intrinsic_accuracies(run_dir),
            "downstream": downstream["cells"]}


def expand_run_dirs(patterns: Iterable[str]) -> list[str]:
    """The run directories named by comma-separated globs, in order, each once; RunResultsError (a
    ValueError) naming a pattern that matches no directory."""
    run_dirs: list[str] = []
    for pattern in patterns:
        matches = sorted(path for path in tf.io.gfile.glob(pattern) if tf.io.gfile.isdir(path))
        if not matches and not glob.has_magic(pattern) and tf.io.gfile.isdir(pattern):
            matches = [pattern]
        if not matches:
            raise RunResultsError(f"--pretraining_runs: {pattern!r} matches no directory.")
        run_dirs.extend(path for path in matches if path not in run_dirs)
    return run_dirs


def _by_key(runs: Iterable[Mapping[str, Any]], keys: tuple[str, ...], table: str
            ) -> dict[tuple, Mapping[str, Any]]:
    """The runs keyed by the values of ``keys``; RunResultsError naming both runs of a repeated
    key."""
    keyed: dict[tuple, Mapping[str, Any]] = {}
    for run in runs:
        key = tuple(run[name] for name in keys)
        if key in keyed:
            setting = ", ".join(f"{name} {value}" for name, value in zip(keys, key))
            raise RunResultsError(f"{table}: {keyed[key]['run_dir']} and {run['run_dir']} are "
                                  f"both runs of {setting}; give one run per cell.")
        keyed[key] = run
    return keyed


def _published(table: str, run: Mapping[str, Any] | None, **match: Any
               ) -> dict[str, Any] | None:
    """The published row of ``table`` matching ``match``; None when there is none or the run is
    not of ALBERT-base's architecture (the paper's ablations are all ALBERT-base)."""
    if run is None or not run["albert_base"]:
        return None
    rows = [row for row in published_rows(table)
            if all(row.get(key) == value for key, value in match.items())]
    return rows[0] if rows else None


def _compare(ours: float | None, published: float | None) -> dict[str, float | None]:
    difference = None if ours is None or published is None else ours - published
    return {"ours": ours, "published": published, "difference": difference}


def _params_cell(run: Mapping[str, Any], published: Mapping[str, Any] | None) -> dict:
    return _compare(run["params"] / 1e6, published["params_m"] if published else None)


def _avg_cell(run: Mapping[str, Any], published: Mapping[str, Any] | None) -> dict:
    return _compare(run["downstream"].get(AVERAGE_KEY), published["avg"] if published else None)


def table3(runs: list[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Rows per embedding size: params and Avg of the not-shared and the all-shared run."""
    chosen = [run for run in runs if run["sentence_objective"] == "sop"
              and run["cross_layer_sharing"] in ("all", "none")]
    keyed = _by_key(chosen, ("embedding_size", "cross_layer_sharing"), "Table 3")
    rows = []
    for size in sorted({size for size, _ in keyed}):
        row: dict[str, Any] = {"embedding_size": size}
        for sharing, column in (("none", "not_shared"), ("all", "all_shared")):
            run = keyed.get((size, sharing))
            published = _published("table3", run, embedding_size=size,
                                   cross_layer_sharing=sharing)
            row[column] = None if run is None else {
                "run_dir": run["run_dir"], "params_m": _params_cell(run, published),
                "avg": _avg_cell(run, published)}
        rows.append(row)
    return rows


def table4(runs: list[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Rows per sharing strategy (the paper's order): params and Avg for each embedding size."""
    chosen = [run for run in runs if run["sentence_objective"] == "sop"]
    keyed = _by_key(chosen, ("cross_layer_sharing", "embedding_size"), "Table 4")
    sizes = sorted({size for _, size in keyed})
    rows = []
    for sharing in ("all", "attention", "ffn", "none"):
        if not any(strategy == sharing for strategy, _ in keyed):
            continue
        row: dict[str, Any] = {"cross_layer_sharing": sharing}
        for size in sizes:
            run = keyed.get((sharing, size))
            published = _published("table4", run, embedding_size=size,
                                   cross_layer_sharing=sharing)
            row[f"E={size}"] = None if run is None else {
                "run_dir": run["run_dir"], "params_m": _params_cell(run, published),
                "avg": _avg_cell(run, published)}
        rows.append(row)
    return rows


def table5(runs: list[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Rows per sentence objective (none, nsp, sop) of one architecture: intrinsic accuracies,
    the downstream cells and Avg. Empty when no run trains another objective than SOP."""
    others = [run for run in runs if run["sentence_objective"] != "sop"]
    if not others:
        return []
    architectures = {(run["embedding_size"], run["cross_layer_sharing"]) for run in others}
    if len(architectures) > 1:
        raise RunResultsError("Table 5: the NSP / MLM-only runs have different architectures "
                              f"({', '.join(run['run_dir'] for run in others)}); give one of "
                              "each objective, all of one architecture.")
    size, sharing = architectures.pop()
    chosen = [run for run in runs
              if (run["embedding_size"], run["cross_layer_sharing"]) == (size, sharing)]
    keyed = _by_key(chosen, ("sentence_objective",), "Table 5")
    rows = []
    for objective in ("none", "nsp", "sop"):
        run = keyed.get((objective,))
        if run is None:
            continue
        published = _published("table5", run, sentence_objective=objective) or {}
        cells = {key: _compare(run["intrinsic"].get(key), published.get(key))
                 for key in INTRINSIC_KEYS}
        for key in ("squad1.1_f1", "squad1.1_em", "squad2.0_f1", "squad2.0_em", "mnli", "sst-2",
                    "race", AVERAGE_KEY):
            cells[key] = _compare(run["downstream"].get(key), published.get(key))
        rows.append({"sentence_objective": objective, "run_dir": run["run_dir"],
                     "embedding_size": size, "cross_layer_sharing": sharing, **cells})
    return rows


def ablation_tables(run_dirs: Iterable[str]) -> dict[str, Any]:
    """Every run's row and Tables 3, 4 and 5 built from them."""
    runs = [read_pretraining_run(run_dir) for run_dir in run_dirs]
    return {"runs": runs, "table3": table3(runs), "table4": table4(runs), "table5": table5(runs)}


def _cell(cell: Mapping[str, Any] | None, unit: str = "") -> str:
    """"ours (published, ±difference)" with what exists; "–" for nothing."""
    if cell is None or cell["ours"] is None:
        published = None if cell is None else cell["published"]
        return "–" if published is None else f"– ({published:g}{unit})"
    text = f"{cell['ours']:.2f}{unit}" if unit else f"{cell['ours']:.1f}"
    if cell["published"] is not None:
        text += f" ({cell['published']:g}{unit}, {format_difference(cell['difference'])})"
    return text


_SHARING_TITLES = {"all": "all-shared", "attention": "shared-attention", "ffn": "shared-FFN",
                   "none": "not-shared"}


def format_ablation_markdown(tables: Mapping[str, Any]) -> str:
    """Tables 3, 4 and 5 as Markdown (those with runs), each cell "ours (paper, difference)", then
    every run's row."""
    sections = []
    if tables["table3"]:
        lines = ["Table 3 (embedding size E): params in M, Avg downstream",
                 "| E | not-shared params | not-shared Avg | all-shared params | all-shared Avg |",
                 "|---|---|---|---|---|"]
        for row in tables["table3"]:
            cells = [str(row["embedding_size"])]
            for column in ("not_shared", "all_shared"):
                entry = row[column]
                cells += [_cell(entry and entry["params_m"], "M"), _cell(entry and entry["avg"])]
            lines.append("| " + " | ".join(cells) + " |")
        sections.append("\n".join(lines))
    if tables["table4"]:
        sizes = [key for key in tables["table4"][0] if key.startswith("E=")]
        header = " | ".join(f"params {size} | Avg {size}" for size in sizes)
        lines = ["Table 4 (cross-layer sharing): params in M, Avg downstream",
                 f"| strategy | {header} |", "|---" * (1 + 2 * len(sizes)) + "|"]
        for row in tables["table4"]:
            cells = [_SHARING_TITLES[row["cross_layer_sharing"]]]
            for size in sizes:
                entry = row[size]
                cells += [_cell(entry and entry["params_m"], "M"), _cell(entry and entry["avg"])]
            lines.append("| " + " | ".join(cells) + " |")
        sections.append("\n".join(lines))
    if tables["table5"]:
        titles = ["MLM acc", "NSP acc", "SOP acc"] + [title for _, title in TABLE5_CELLS] + ["Avg"]
        lines = ["Table 5 (sentence-level objective): intrinsic accuracies on held-out data, "
                 "downstream", "| objective | " + " | ".join(titles) + " |",
                 "|---" * (1 + len(titles)) + "|"]
        for row in tables["table5"]:
            cells = [row["sentence_objective"].upper() if row["sentence_objective"] != "none"
                     else "none"]
            cells += [_cell(row[key]) for key in INTRINSIC_KEYS]
            for name, _ in TABLE5_CELLS:
                if name.startswith("squad"):
                    cells.append(f"{_cell(row[name + '_f1'])} / {_cell(row[name + '_em'])}")
                else:
                    cells.append(_cell(row[name]))
            cells.append(_cell(row[AVERAGE_KEY]))
            lines.append("| " + " | ".join(cells) + " |")
        sections.append("\n".join(lines))
    sections.append(format_runs_markdown(tables["runs"]))
    return "\n\n".join(sections)


def format_runs_markdown(runs: list[Mapping[str, Any]]) -> str:
    """Every run's row: its settings, parameters, intrinsic accuracies and downstream Avg (the
    intrinsic accuracies compare runs that have no downstream results yet)."""
    lines = ["Runs (intrinsic accuracies in percent on the held-out records of each evaluation; "
             "published cells only for ALBERT-base runs):",
             "| run | E | sharing | objective | params | MLM acc | SOP acc | NSP acc | Avg |",
             "|---|---|---|---|---|---|---|---|---|"]
    for run in runs:
        accuracies = [run["intrinsic"].get(key) for key in
                      ("masked_lm_accuracy", "sentence_order_accuracy", "next_sentence_accuracy")]
        average = run["downstream"].get(AVERAGE_KEY)
        cells = [run["name"], str(run["embedding_size"]), run["cross_layer_sharing"],
                 run["sentence_objective"], f"{run['params'] / 1e6:.2f}M",
                 *["–" if value is None else f"{value:.1f}" for value in (*accuracies, average)]]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n\n" + "\n".join(f"- {run['name']}: {run['run_dir']}"
                                                 for run in runs)
