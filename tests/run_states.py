"""Rerunning a command never undoes its work: each command of a task, run on its run directory in
each state that directory can be in, keeps the work the directory holds. The machinery of
tests/test_run_states_classifier.py, test_run_states_pretraining.py and test_run_states_tasks.py;
every entry of the task table ``TASKS`` (tests/task_cases.py) gets the test unless it sets
``states=False``.

The contract (one run manifest per output directory):

- every run's --output_dir holds ``run_manifest.json``: {"trained": {"step": the last trained
  step, "checkpoint": the prefix, inside the directory, of that step's weights and optimizer},
  "best": {"step", "selection_metric", "metrics", "fingerprint"} once a sweep selected one}, and
  ``albert_tf.checkpoints.files.checkpoint_fingerprint(<output_dir>/model.ckpt-best)`` is always
  the best's fingerprint (best_results.json says the same step and metrics);
- a directory of an earlier version (no manifest; label_list.json, albert_config.json,
  classifier_heads.json, sentence_objective.json, eval_data.json, best_trial.txt,
  best_results.json, .albert_tf_outputs.json, and a ``checkpoint`` state file naming model.ckpt-2,
  which the renaming sweeps renamed to model.ckpt-best) is read as the same state and upgraded by
  its next run of the script.

The states (``STATES``), each built once per entry by the entry's script with the harness's flags
and copied for every command (with ``shutil.copytree``):

- empty: no --output_dir yet (the full command on it is the newest state's build);
- killed: one of the two steps trained (model.ckpt-1; the flags with one step and --do_train
  alone), no sweep;
- newest: the full run (train two steps, sweep, predict), the best being step 2;
- older: the same, the best being step 1;
- evaluated: trained and swept, no prediction;
- earlier: newest rewritten into the earlier version's layout (``earlier_layout``).

The sweeps that build newest, older and evaluated are steered: the real
``Trainer.evaluate_checkpoint``, plus ``STEERING`` on every metric of the checkpoint to select.
Every state's directory also holds the user's files ``USER_FILES``, which no command may touch.

The commands (``ACTIONS``), each on a fresh copy, exports to new directories outside it:

- same: the full command again; longer: the same with a third training step;
- eval: the sweep alone (run_squad: --do_predict, its sweep), --max_eval_wait_secs short;
- predict: --do_predict alone (where it is not the sweep; pretraining has none);
- export: --export_dir alone (pretraining: ``-m albert_tf.export_hub --checkpoint=<run dir>``);
- convert: ``-m albert_tf.convert_checkpoint --checkpoint=<run dir> --to=reference``.

``Outcome.check`` asserts the contract's outcome of a command in a state, and lists every broken
expectation of the cell at once.

Time (the suite's budget is tight): "the full command" here is train, sweep and predict; the
exports (SavedModel, TFLite), written outside --output_dir from model.ckpt-best, cost as much as
the rest of a tiny run and are checked by the export cells. Each entry gets the cells of
``CELLS_OF`` (default ``CORE``): the state logic whole on run_classifier's cheapest entry
(own_regression, no shared data; ``FULL``), and on every other entry the cells where its script's
own code decides: its sweep's finish on the newest and earlier states, its sweep alone (the
waiting policies differ), its refusals, the conversion of its head.
"""

from __future__ import annotations

import dataclasses
import json
import numbers
import os
import pathlib
import re
import shutil
from typing import Callable

import pytest

from tests.command_runner import CommandResult, run_command
from tests.shared_setup import require_shared_data
from tests.task_cases import TASKS, Flags, TaskCase
from tests.task_harness import (arguments, convert_command, export_command, only_actions, snapshot,
                                task_flags, with_steps)

STATES = ("empty", "killed", "newest", "older", "evaluated", "earlier")
ACTIONS = ("same", "longer", "eval", "predict", "export", "convert")
REFUSED = ("eval", "predict", "export", "convert")  # on no directory

# {state: commands} of an entry.
FULL = {"empty": ("same", *REFUSED),
        "killed": ("same", "longer", "eval", "predict", "export", "convert"),
        "newest": ACTIONS,
        "older": ("same", "eval"),
        "evaluated": ("same", "predict"),
        "earlier": ("same", "longer", "eval", "predict", "convert")}
CORE = {"empty": ("same", *REFUSED),
        "killed": ("eval", "predict", "export", "convert"),
        "newest": ("same", "eval", "convert"),
        "earlier": ("same", "eval", "convert")}
CELLS_OF = {
    "own_regression": FULL,
    # run_pretraining has its own main (training, its sweep) and its export is export_hub's.
    # (Its export from model.ckpt-best, export_hub's with the preprocessing model, costs 25 s:
    # the refusal on the killed state only.)
    "pretraining": {**CORE, "killed": ("same", *CORE["killed"]),
                    "newest": ("same", "longer", "eval", "convert")},
    # run_classifier again, with early-exit heads: its records and its conversion.
    "glue_early_exit": {"empty": ("same",), "newest": ("same", "eval"),
                        "earlier": ("same", "convert")},
}

MANIFEST = "run_manifest.json"
BEST = "model.ckpt-best"
USER_FILES = {"notes.txt": b"my notes on this run\n", os.path.join("mine", "data.txt"): b"mine\n"}
# The scripts whose sweep (SweepPolicy.glue) keeps best_trial.txt and renames the best checkpoint
# to model.ckpt-best, leaving the state file naming a checkpoint that is gone.
RENAMING_SWEEPS = ("run_classifier.py", "run_ner.py")
STEERING = 1000.0
EVAL_WAIT_SECONDS = "10"  # --max_eval_wait_secs of the sweep alone; no command may wait at all
WAITING = ("Waiting for", "No new checkpoint", "waiting for")
RANDOM_START = "random initialisation"
BUG = "this is a bug"


@dataclasses.dataclass(frozen=True)
class Cell:
    case: TaskCase
    state: str
    action: str

    def __str__(self) -> str:
        return f"{self.case.name}-{self.state}-{self.action}"


def cells(select: Callable[[TaskCase], bool]) -> list:
    """The cells of the entries of TASKS that ``select`` takes (and whose ``states`` is set), as
    pytest parameters named entry-state-command."""
    found = []
    for case in TASKS:
        if not (case.states and select(case)):
            continue
        for state, actions in CELLS_OF.get(case.name, CORE).items():
            for action in actions:
                if action == "predict" and case.predict_action is None:
                    continue
                cell = Cell(case, state, action)
                found.append(pytest.param(cell, id=str(cell)))
    return found


# -- the states ------------------------------------------------------------------------------------

@dataclasses.dataclass
class State:
    """A state's run directory (None: empty) and the command that built it."""

    output_dir: pathlib.Path | None
    build: CommandResult | None = None


def shown(result: CommandResult) -> str:
    """The tails of a command's output, for a failure's message (stderr without absl's INFO
    lines)."""
    stderr = "".join(line for line in result.stderr.splitlines(keepends=True)
                     if not re.match(r"I\d{4} ", line))
    return (f"\n--- exit status {result.returncode}; stdout (tail):\n{result.stdout[-3000:]}"
            f"\n--- stderr (tail):\n{stderr[-3000:]}")


def steered(step: int):
    """(object, name, value) of a patch of ``Trainer.evaluate_checkpoint`` adding STEERING to
    every metric of the checkpoint ``model.ckpt-<step>``, so that the sweep selects it."""
    from albert_tf.training import trainer

    real = trainer.Trainer.evaluate_checkpoint

    def evaluate_checkpoint(self, prefix, eval_sets):
        metrics = real(self, prefix, eval_sets)
        if prefix.endswith(f"-{step}"):
            metrics = {name: value + STEERING if isinstance(value, numbers.Real) else value
                       for name, value in metrics.items()}
        return metrics

    return trainer.Trainer, "evaluate_checkpoint", evaluate_checkpoint


def run(command: str, flags: Flags, patch=None) -> CommandResult:
    with pytest.MonkeyPatch.context() as monkeypatch:
        if patch is not None:
            monkeypatch.setattr(*patch)
        return run_command(command, *arguments(flags))


class RunStates:
    """The states of each entry's run directory, each built once when first asked for, and the
    commands run on copies of them."""

    def __init__(self, factory: pytest.TempPathFactory):
        self._factory = factory
        self._flags: dict[str, Flags] = {}
        self._states: dict[tuple[str, str], State | Exception] = {}

    def full_flags(self, case: TaskCase) -> Flags:
        """The full command of ``case``: train, sweep, predict (its inputs made once; its
        --output_dir to be set)."""
        if case.name not in self._flags:
            self._flags[case.name] = task_flags(case, self._factory.mktemp(case.name),
                                                exports=False)
        return self._flags[case.name]

    def state(self, case: TaskCase, name: str) -> State:
        """The state ``name`` of ``case``, built at the first call (a build that failed fails
        again at once)."""
        key = (case.name, name)
        if key not in self._states:
            try:
                self._states[key] = self._build(case, name)
            except Exception as error:  # noqa: BLE001 (kept to fail the state's other cells)
                self._states[key] = error
        if isinstance(self._states[key], Exception):
            raise self._states[key]
        return self._states[key]

    def _build(self, case: TaskCase, name: str) -> State:
        full = self.full_flags(case)
        if name == "empty":
            return State(None)
        output_dir = self._factory.mktemp(f"{case.name}_{name}") / "out"
        if name == "earlier":
            shutil.copytree(self.state(case, "newest").output_dir, output_dir, symlinks=True)
            earlier_layout(case, full, output_dir)
            return State(output_dir)
        flags, patch, best_step = {
            "killed": (with_steps(only_actions(case, full, "do_train"), 1), None, None),
            "newest": (full, steered(2), 2),
            "older": (full, steered(1), 1),
            "evaluated": (only_actions(case, full, "do_train", case.sweep_action), steered(2), 2),
        }[name]
        result = run(case.script, {**flags, "output_dir": str(output_dir)}, patch)
        assert result.returncode == 0, f"building the {name} state of {case.name}" + shown(result)
        if best_step is not None:
            best = json.loads((output_dir / "best_results.json").read_text())
            assert best["best_step"] == best_step, (f"the {name} state of {case.name}", best)
        for path, data in USER_FILES.items():
            (output_dir / path).parent.mkdir(parents=True, exist_ok=True)
            (output_dir / path).write_bytes(data)
        return State(output_dir, result)

    def check(self, cell: Cell) -> None:
        """Runs the cell's command on a copy of its state and asserts the contract's outcome."""
        case = cell.case
        if case.shared_data:
            require_shared_data()
        if cell.state == "empty" and cell.action == "same":
            check_built_from_scratch(cell, self.state(case, "newest"))
            return
        state = self.state(case, cell.state)
        root = self._factory.mktemp("cell")
        output_dir = root / "out"
        if state.output_dir is not None:
            shutil.copytree(state.output_dir, output_dir, symlinks=True)
        command, flags = action_command(case, {**self.full_flags(case),
                                               "output_dir": str(output_dir)}, cell.action, root)
        before = snapshot(output_dir) if output_dir.exists() else {}
        result = run(command, flags)
        after = snapshot(output_dir) if output_dir.exists() else {}
        Outcome(cell, command, flags, result, output_dir, root, before, after).check()


def action_command(case: TaskCase, full: Flags, action: str,
                   root: pathlib.Path) -> tuple[str, Flags]:
    """The command of ``action`` on the run directory of the full command ``full``; exports and
    conversions go to new directories below ``root``."""
    if action == "same":
        return case.script, full
    if action == "longer":
        return case.script, with_steps(full, 3)
    if action == "eval":
        return case.script, {**only_actions(case, full, case.sweep_action),
                             "max_eval_wait_secs": EVAL_WAIT_SECONDS}
    if action == "predict":
        return case.script, only_actions(case, full, case.predict_action)
    if action == "export":
        return export_command(case, full, root / "export")
    if action == "convert":
        return convert_command(full, root / "converted")
    raise ValueError(action)


# -- an earlier version's layout --------------------------------------------------------------------

# The state file TensorFlow's CheckpointManager wrote after the second step.
STATE_FILE_TEXT = ('model_checkpoint_path: "model.ckpt-2"\n'
                   'all_model_checkpoint_paths: "model.ckpt-1"\n'
                   'all_model_checkpoint_paths: "model.ckpt-2"\n'
                   'all_model_checkpoint_timestamps: 1795829718.7538953\n'
                   'all_model_checkpoint_timestamps: 1795829718.798517\n'
                   'last_preserved_timestamp: 1795829713.9766333\n')
# The fixed names an earlier version's output record (.albert_tf_outputs.json) of a sweeping run
# listed (read by albert_tf/files/earlier_layouts.py).
RECORDED_NAMES = (".worker_tmp", "best_results*.json", "best_trial.txt", "checkpoint", "eval",
                  "eval_data*.json", "eval_results*.txt", "model.ckpt-*", "train")


def _found(value, key: str):
    """The first value under ``key`` anywhere in the JSON ``value`` (None: nowhere)."""
    if isinstance(value, dict):
        if key in value:
            return value[key]
        value = list(value.values())
    if isinstance(value, list):
        for item in value:
            found = _found(item, key)
            if found is not None:
                return found
    return None


def _json(path: pathlib.Path):
    return json.loads(path.read_text()) if path.exists() else None


def _write(path: pathlib.Path, text: str) -> None:
    path.write_text(text, encoding="utf-8")


def earlier_layout(case: TaskCase, flags: Flags, output_dir: pathlib.Path) -> None:
    """Rewrites a copy of the newest state as the version before the run manifest left it: no
    run_manifest.json; its records in that version's formats (albert_tf/checkpoints/label_set.py,
    checkpoints/run_config.py, tasks/classification/classifier_heads.py, tasks/pretraining/
    objective.py, evaluation/eval_data_record.py, evaluation/checkpoint_sweep.py (best_trial.txt),
    evaluation/best_checkpoint.py (best_results.json), files/output_record.py), with the values
    this run recorded (in those files, or in its manifest); the ``checkpoint`` state file naming
    model.ckpt-2, which a renaming sweep renamed to model.ckpt-best."""
    from albert_tf.models.config import AlbertConfig

    manifest = _json(output_dir / MANIFEST) or {}
    (output_dir / MANIFEST).unlink(missing_ok=True)

    if not case.hub_export:  # a fine-tuning run
        label_set = _json(output_dir / "label_list.json") or _found(manifest, "label_set") or {}
        if "task_type" not in label_set:
            label_set = {key: _found(manifest, key) for key in ("task_type", "labels", "task")}
        assert label_set.get("task_type"), f"{case.name}: no label set recorded in {output_dir}"
        recorded = {"task_type": label_set["task_type"], "labels": label_set.get("labels")}
        if label_set.get("task") is not None:
            recorded["task"] = label_set["task"]
        _write(output_dir / "label_list.json", json.dumps(recorded, indent=1) + "\n")

    AlbertConfig.from_json_file(flags["albert_config_file"]).to_json_file(
        str(output_dir / "albert_config.json"))
    if case.script == "run_classifier.py":
        heads = flags.get("early_exit_heads", "separate") if "early_exit" in flags else None
        _write(output_dir / "classifier_heads.json", json.dumps({"early_exit": heads}) + "\n")
    if case.script == "run_pretraining.py":
        _write(output_dir / "sentence_objective.json", json.dumps(
            {"sentence_objective": flags.get("sentence_objective", "sop")}) + "\n")

    eval_sets = (_found(_json(output_dir / "eval_data.json") or {}, "eval_sets")
                 or _found(manifest, "eval_sets"))
    if eval_sets:  # (pretraining's evaluation records none)
        _write(output_dir / "eval_data.json",
               json.dumps({"eval_sets": eval_sets}, indent=1, sort_keys=True) + "\n")

    best = _json(output_dir / "best_results.json") or {
        "selection_metric": manifest["best"]["selection_metric"],
        "best_step": manifest["best"]["step"], "metrics": manifest["best"]["metrics"]}
    best = {key: best[key] for key in ("selection_metric", "best_step", "metrics")}
    _write(output_dir / "best_results.json", json.dumps(best, indent=1, sort_keys=True) + "\n")

    if case.script in RENAMING_SWEEPS:
        value = _metric_text(output_dir / "eval_results.txt", best["best_step"],
                             best["selection_metric"])
        _write(output_dir / "best_trial.txt", f"2:{best['best_step']}:{value}")
        for path in output_dir.glob(f"model.ckpt-{best['best_step']}.*"):
            path.unlink()  # renamed to model.ckpt-best
    _write(output_dir / "checkpoint", STATE_FILE_TEXT)

    names = set((_json(output_dir / ".albert_tf_outputs.json") or {}).get("fixed_names", ())
                or manifest.get("owned_names") or ())
    names = {name for name in names if "manifest" not in name} | set(RECORDED_NAMES)
    _write(output_dir / ".albert_tf_outputs.json",
           json.dumps({"fixed_names": sorted(names)}, indent=1) + "\n")


def _metric_text(results: pathlib.Path, step: int, key: str) -> str:
    """The value of ``key`` as eval_results.txt spells it in the block of checkpoint ``step``
    (best_trial.txt held the same text)."""
    for block in results.read_text().split("=" * 50 + "\n"):
        values = dict(line.rpartition(" = ")[::2] for line in block.splitlines())
        if values.get("global_step") == str(step):
            return values[key]
    raise AssertionError(f"no block of step {step} in {results}")


# -- the outcomes ----------------------------------------------------------------------------------

def checkpoint_fingerprint(prefix: str) -> str:
    try:
        from albert_tf.checkpoints.files import checkpoint_fingerprint as fingerprint
    except ImportError:
        raise AssertionError("albert_tf.checkpoints.files.checkpoint_fingerprint(prefix) does "
                             "not exist") from None
    return fingerprint(prefix)


def steps_of(files: dict[str, str]) -> set[int]:
    """The steps of the model.ckpt-<step> checkpoints among ``files`` (snapshot paths)."""
    return {int(match.group(1)) for path in files
            for match in [re.fullmatch(r"model\.ckpt-(\d+)\.index", os.path.basename(path))]
            if match}


def best_files(files: dict[str, str]) -> dict[str, str]:
    return {path: digest for path, digest in files.items()
            if os.path.basename(path).startswith(BEST + ".")}


def eval_steps(output_dir: pathlib.Path) -> list[int]:
    """The steps of the blocks of eval_results.txt."""
    path = output_dir / "eval_results.txt"
    text = path.read_text() if path.exists() else ""
    return [int(step) for step in re.findall(r"^global_step = (\d+)$", text, re.MULTILINE)]


def _metrics(metrics: dict) -> dict[str, float]:
    """The metrics but global_step (the step, compared as such)."""
    return {name: float(value) for name, value in metrics.items() if name != "global_step"}


def manifest_problems(output_dir: pathlib.Path, trained_step: int | None = None,
                      best_step: int | None = None) -> list[str]:
    """What is wrong with the directory's manifest: it must say the last trained step
    (``trained_step``, when given) and a checkpoint of the directory holding it, and, when there
    is a model.ckpt-best (or ``best_step`` is given), a best that is model.ckpt-best's files and
    best_results.json's step and metrics."""
    path = output_dir / MANIFEST
    if not path.exists():
        return [f"no {MANIFEST}"]
    manifest = json.loads(path.read_text())
    trained = manifest.get("trained")
    if not isinstance(trained, dict):
        return [f"{MANIFEST} has no 'trained': {manifest}"]
    problems = []
    if trained_step is not None and trained.get("step") != trained_step:
        problems.append(f"{MANIFEST}'s trained step is {trained.get('step')}, not {trained_step}")
    if not (output_dir / f"{trained.get('checkpoint')}.index").exists():
        problems.append(f"{MANIFEST}'s trained checkpoint {trained.get('checkpoint')!r} is not "
                        "in the directory")
    has_best = (output_dir / f"{BEST}.index").exists()
    if best_step is None and not has_best:
        return problems
    best = manifest.get("best")
    if not isinstance(best, dict):
        return [*problems, f"{MANIFEST} has no 'best': {manifest}"]
    if best_step is not None and best.get("step") != best_step:
        problems.append(f"{MANIFEST}'s best step is {best.get('step')}, not {best_step}")
    if not has_best:
        return [*problems, f"{MANIFEST} has a best, the directory no {BEST}"]
    results = json.loads((output_dir / "best_results.json").read_text())
    if (results["best_step"], results["selection_metric"], _metrics(results["metrics"])) != (
            best.get("step"), best.get("selection_metric"), _metrics(best.get("metrics", {}))):
        problems.append(f"best_results.json {results} is not {MANIFEST}'s best {best}")
    try:
        fingerprint = checkpoint_fingerprint(str(output_dir / BEST))
    except AssertionError as error:
        return [*problems, str(error)]
    if best.get("fingerprint") != fingerprint:
        problems.append(f"{BEST}'s files (fingerprint {fingerprint}) are not {MANIFEST}'s best "
                        f"({best.get('fingerprint')})")
    return problems


def check_built_from_scratch(cell: Cell, newest: State) -> None:
    """empty x same: the full command on no directory (the newest state's build) trains from the
    start, sweeps, and leaves a manifest of step 2 whose best is model.ckpt-best."""
    result = newest.build
    problems = manifest_problems(newest.output_dir, trained_step=2, best_step=2)
    if "Resumed from" in result.stdout:
        problems.append("resumed on no directory")
    assert not problems, (f"{cell}:\n - " + "\n - ".join(problems)
                          + f"\n[the newest state's build: {cell.case.script}]" + shown(result))


@dataclasses.dataclass
class Outcome:
    """A command run on a copy of a state: its result, and the files of its --output_dir before
    and after ({path: sha256})."""

    cell: Cell
    command: str
    flags: Flags
    result: CommandResult
    output_dir: pathlib.Path
    root: pathlib.Path
    before: dict[str, str]
    after: dict[str, str]
    problems: list[str] = dataclasses.field(default_factory=list)

    def expect(self, condition: bool, problem: str) -> bool:
        if not condition:
            self.problems.append(problem)
        return condition

    @property
    def output(self) -> str:
        """stdout and stderr, the test's directories left out (a path could hold any word)."""
        return (self.result.stdout + "\n" + self.result.stderr).replace(
            str(self.root), "<cell>").replace(str(self.root.parent), "<tmp>")

    def check(self) -> None:
        cell, result = self.cell, self.result
        self.expect(BUG not in result.stderr, "a bug ('this is a bug' in stderr)")
        for path, data in USER_FILES.items():
            if self.before:
                self.expect(str(self.output_dir / path) in self.after
                            and (self.output_dir / path).read_bytes() == data,
                            f"the user's {path} changed or is gone")
        if cell.state == "empty":
            self.refused()
        elif cell.state == "killed":
            self.check_killed()
        else:
            self.check_finished()
        assert not self.problems, (
            f"{cell}:\n - " + "\n - ".join(self.problems)
            + f"\n[{self.command} {' '.join(arguments(self.flags))}]" + shown(result))

    # -- what is expected
    def exit_status(self, expected: int) -> bool:
        return self.expect(self.result.returncode == expected,
                           f"exit status {self.result.returncode}, expected {expected}")

    def refused(self, *naming: str) -> None:
        """Exit 1 with one short line (naming one of ``naming``), no traceback, no waiting."""
        self.exit_status(1)
        self.expect("Traceback" not in self.result.stderr, "a traceback")
        self.no_waiting()
        lines = self.result.stderr.strip().splitlines()
        last = lines[-1] if lines else ""
        if self.expect(": error: " in last and len(last) <= 500,
                       f"the last line is not one short error line: {last[:500]!r}") and naming:
            self.expect(any(name in last for name in naming),
                        f"the refusal names none of {naming}: {last!r}")

    def no_waiting(self) -> None:
        for line in WAITING:
            if not self.expect(line not in self.output, f"waited ({line!r} in the output)"):
                return

    def no_random_start(self) -> None:
        self.expect(RANDOM_START not in self.output, "trained from a random initialisation")

    def resumed_at(self, step: int) -> None:
        self.expect(re.search(rf"Resumed from [^\n]* at step {step}\b", self.result.stdout),
                    f"no 'Resumed from ... at step {step}'")

    def best_unchanged(self) -> None:
        if self.expect(best_files(self.before), f"no {BEST} before"):
            self.expect(best_files(self.after) == best_files(self.before), f"{BEST} changed")

    def unchanged(self, name: str) -> None:
        path = str(self.output_dir / name)
        if self.expect(path in self.before, f"no {name} before"):
            self.expect(self.after.get(path) == self.before[path], f"{name} changed")

    def manifest(self, trained_step: int | None = None, best_step: int | None = None) -> None:
        upgrade = " (the earlier version's directory is not upgraded)" \
            if self.cell.state == "earlier" else ""
        self.problems += [problem + (upgrade if problem == f"no {MANIFEST}" else "")
                          for problem in manifest_problems(self.output_dir, trained_step,
                                                           best_step)]

    def products_written(self, created: bool) -> None:
        for product in self.cell.case.products:
            path = self.output_dir / product
            self.expect(path.exists() and path.stat().st_size > 0, f"no {product}")
            if created:
                self.expect(str(path) not in self.before, f"{product} was there before")

    def export_written(self) -> None:
        export = self.root / "export"
        self.expect(export.is_dir() and any(export.rglob("saved_model.pb")),
                    f"nothing exported to {export}")

    def saved_steps(self) -> set[int]:
        """The steps of the checkpoints the command said it saved (a renaming sweep may have
        renamed one to model.ckpt-best since)."""
        return {int(step) for step in
                re.findall(r"Saved checkpoint \S*model\.ckpt-(\d+)\b", self.result.stdout)}

    def script_run(self) -> bool:
        return self.command == self.cell.case.script

    # -- the states
    def check_killed(self) -> None:
        action, case = self.cell.action, self.cell.case
        if action in ("same", "longer"):
            self.exit_status(0)
            self.resumed_at(1)
            self.no_random_start()
            self.expect((self.output_dir / f"{BEST}.index").exists(), f"no {BEST}")
            self.products_written(created=True)
            self.manifest(trained_step=2 if action == "same" else 3)
        elif action == "eval":
            self.exit_status(0)
            self.no_waiting()
            self.expect(1 in eval_steps(self.output_dir), "model.ckpt-1 not evaluated")
            self.manifest(trained_step=1, best_step=1)
        elif action == "predict" or (action == "export" and not case.hub_export):
            self.refused(f"--{case.sweep_action}", BEST)
        else:  # convert_checkpoint, export_hub: the run directory's last trained checkpoint
            self.exit_status(0)
            self.expect(re.search(r"last trained|step 1\b|model\.ckpt-1\b", self.output),
                        "the command does not say it read the last trained checkpoint")

    def check_finished(self) -> None:
        action, state = self.cell.action, self.cell.state
        best_step = 1 if state == "older" else 2
        self.exit_status(0)
        if action == "same":
            self.expect("finished at step 2" in self.result.stdout, "no 'finished at step 2'")
            self.no_random_start()
            new = (steps_of(self.after) | self.saved_steps()) - steps_of(self.before)
            self.expect(not new, f"wrote checkpoints of steps {sorted(new)}")
            self.best_unchanged()
            self.unchanged("best_results.json")
            self.unchanged("eval_results.txt")
            self.products_written(created=state == "evaluated")
            self.manifest(trained_step=2, best_step=best_step)
        elif action == "longer":
            self.resumed_at(2)
            self.no_random_start()
            self.manifest(trained_step=3)
            if best_files(self.after) != best_files(self.before):
                manifest = _json(self.output_dir / MANIFEST) or {}
                self.expect(_found(manifest, "best") and manifest["best"].get("step") == 3
                            and 3 in eval_steps(self.output_dir),
                            f"{BEST} changed, to another checkpoint than step 3 evaluated here")
        elif action == "eval":
            self.no_waiting()
            self.best_unchanged()
            self.unchanged("best_results.json")
            self.manifest(trained_step=2, best_step=best_step)
        else:  # predict, export, convert
            self.best_unchanged()
            if action == "predict":
                self.products_written(created=state == "evaluated")
            elif action == "export":
                self.export_written()
            else:
                self.expect("best" in self.output,
                            f"the conversion does not say it converted {BEST}")
            if self.script_run():
                self.manifest(trained_step=2, best_step=best_step)
