"""Run directories of earlier versions, read as a run manifest (albert_tf/files/run_manifest.py).

Before the manifest, a run directory kept each fact in a file of its own:

- ``label_list.json`` ``{"task_type", "labels", "task"}``, ``albert_config.json`` (the config the
  run trained with), ``classifier_heads.json`` ``{"early_exit"}``, ``sentence_objective.json``
  ``{"sentence_objective"}``, ``seed_recipe.json`` ``{"recipe"}``: the facts;
- ``.albert_tf_outputs.json`` ``{"fixed_names"}``: the names albert_tf wrote there;
- ``eval_data[_<name>].json`` ``{"eval_sets"}``, ``best_trial.txt`` ``<last step>:<best step>:
  <best value>`` (run_classifier's and run_ner's sweep) and ``eval_results[_<name>].txt`` (every
  sweep's "name = value" blocks): the sweeps' states;
- ``best_results[_<name>].json`` ``{"selection_metric", "best_step", "metrics"}``: the best.

``read_earlier_layout`` turns what a directory holds of those into the manifest's sections (in a
directory that holds one of ``_MARKERS``: elsewhere names such as best_results.json are the
user's files); the files stay where they are (the manifest written by the directory's next run supersedes them). The
best's fingerprint is not known (None): the first run of the new version takes model.ckpt-best as
it finds it. The last trained step is read from the checkpoints themselves
(albert_tf/checkpoints/run_directory.py).
"""

from __future__ import annotations

import json
import os
import re
from typing import Any

import tensorflow as tf

from albert_tf.errors.user_error import UserError

_FACT_FILES = {  # fact key: (file, the key inside it; None: the whole object)
    "label_set": ("label_list.json", None),
    "config": ("albert_config.json", None),
    "classifier_heads": ("classifier_heads.json", "early_exit"),
    "sentence_objective": ("sentence_objective.json", "sentence_objective"),
    "seed_recipe": ("seed_recipe.json", "recipe"),
}
OUTPUTS_LIST = ".albert_tf_outputs.json"
BEST_TRIAL_FILE = "best_trial.txt"
# What every run directory of an earlier version holds one of: the list of its outputs, TF's
# checkpoint state file (every training run), or a fact's file no user's file is named like.
_MARKERS = {OUTPUTS_LIST, "checkpoint", BEST_TRIAL_FILE,
            *(_FACT_FILES[key][0] for key in ("classifier_heads", "sentence_objective",
                                                "seed_recipe"))}
_NAMED = re.compile(r"^(eval_data|best_results|eval_results)(?:_(?P<name>.+))?\.(json|txt)$")
_STEP_LINE = re.compile(r"^global_step = ([0-9.eE+-]+)$", re.MULTILINE)


class EarlierLayoutError(UserError, ValueError):
    """A file of an earlier version's run directory that is not what that version wrote."""


def _read_json(path: str) -> Any:
    with tf.io.gfile.GFile(path) as handle:
        text = handle.read()
    try:
        return json.loads(text)
    except ValueError as error:
        raise EarlierLayoutError(f"{path} is not valid JSON ({error}); albert_tf wrote it in this "
                                 "run directory: restore it or use another directory") from None


def fact_file(key: str) -> str:
    """The file an earlier version kept the fact ``key`` in."""
    return _FACT_FILES[key][0]


# The files earlier versions wrote in a run directory that this one writes no more: declared by the
# commands all the same, so that no output named by a flag lands on one.
EARLIER_FILE_NAMES = (*(name for name, _ in _FACT_FILES.values() if name != "albert_config.json"),
                     OUTPUTS_LIST, "eval_data*.json")


def eval_data_file(evaluation: str = "") -> str:
    """The file an earlier version kept the evaluation data of the sweep ``evaluation`` in."""
    return f"eval_data_{evaluation}.json" if evaluation else "eval_data.json"


def _facts(directory: str, present: set[str]) -> dict[str, Any]:
    facts = {}
    for key, (name, inner) in _FACT_FILES.items():
        if name not in present:
            continue
        path = os.path.join(directory, name)
        value = _read_json(path)
        if inner is not None:
            if not isinstance(value, dict) or inner not in value:
                raise EarlierLayoutError(f"{path}: expected {{\"{inner}\": ...}}; albert_tf wrote "
                                         "it in this run directory")
            value = value[inner]
        elif not isinstance(value, dict):
            raise EarlierLayoutError(f"{path} must hold a JSON object; albert_tf wrote it in this "
                                     "run directory")
        facts[key] = value
    return facts


def _evaluated_steps(path: str) -> list[int]:
    with tf.io.gfile.GFile(path) as handle:
        return [int(float(step)) for step in _STEP_LINE.findall(handle.read())]


def _sweeps(directory: str, present: set[str]) -> tuple[dict, dict | None]:
    """(the sweeps' states by evaluation name, the best of the run's own evaluation)."""
    sweeps: dict[str, dict] = {}
    best = None
    for name in sorted(present):
        match = _NAMED.match(name)
        if match is None:
            continue
        evaluation = match["name"] or ""
        state = sweeps.setdefault(evaluation, {})
        path = os.path.join(directory, name)
        if match[1] == "eval_data":
            state["eval_data"] = (_read_json(path) or {}).get("eval_sets")
        elif match[1] == "eval_results":
            steps = _evaluated_steps(path)
            if steps:
                state["last_step"] = max(steps)
        else:
            results = _read_json(path)
            try:
                key, step = results["selection_metric"], int(results["best_step"])
                metrics = {name: float(value) for name, value in results["metrics"].items()}
            except (KeyError, TypeError, ValueError, AttributeError):
                raise EarlierLayoutError(f"{path}: expected {{\"selection_metric\", \"best_step\", "
                                         "\"metrics\"}; albert_tf wrote it") from None
            state.update(best_step=step, best_value=metrics.get(key), best_metrics=metrics)
            if not evaluation:
                best = {"step": step, "selection_metric": key, "metrics": metrics,
                        "fingerprint": None, "evaluation": ""}
    if BEST_TRIAL_FILE in present:
        path = os.path.join(directory, BEST_TRIAL_FILE)
        with tf.io.gfile.GFile(path) as handle:
            text = handle.read().strip()
        try:
            last, best_step, value = text.split(":")
            sweeps.setdefault("", {}).update(last_step=int(last), best_step=int(best_step),
                                             best_value=float(value))
        except ValueError:
            raise EarlierLayoutError(f"{path}: expected '<last step>:<best step>:<best value>', "
                                     f"got {text!r}; delete it to restart the sweep") from None
    return {name: state for name, state in sweeps.items() if state}, best


def read_earlier_layout(directory: str) -> dict[str, Any]:
    """The manifest sections an earlier version's files in ``directory`` hold (see the module
    doc); empty for a directory without them."""
    present = {name.rstrip("/") for name in tf.io.gfile.listdir(directory)}
    if not present & _MARKERS:
        return {}  # no run directory of albert_tf: its files are the user's
    content: dict[str, Any] = {"facts": _facts(directory, present)}
    if OUTPUTS_LIST in present:
        names = (_read_json(os.path.join(directory, OUTPUTS_LIST)) or {}).get("fixed_names")
        if not isinstance(names, list):
            raise EarlierLayoutError(f"{os.path.join(directory, OUTPUTS_LIST)}: expected "
                                     "{\"fixed_names\": [...]}; albert_tf wrote it")
        content["owned_names"] = names
    content["sweeps"], content["best"] = _sweeps(directory, present)
    return content
