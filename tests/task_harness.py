"""The per-task harness: every task runs through its real script, in the test process
(tests/command_runner.py), on a tiny config and tiny data. One run per entry of the task table
(``TASKS``, tests/task_cases.py: its inputs, actions and products).

A run trains two steps (a checkpoint after each), sweeps them (the best kept as model.ckpt-best),
predicts, exports the SavedModel and, where the task has one, the TFLite model; pretraining trains
and sweeps, then its export is ``-m albert_tf.export_hub`` of the run's best checkpoint. Each
command's declaration of what it reads and writes (albert_tf/files/run_files.py) is captured from
its pre-flight check (which still runs), and every file a command created, changed or removed below
the run's directory is compared with it: a file is accounted for when it is a declared output (one
file, or one of a family), lies in a declared output directory (the summaries' train/, eval/) or in
a directory the command declared it writes whole (an export). A fine-tuning run's --cached_dir
is apart from its --output_dir, so both declarations are exercised.

tests/test_task_contract.py asserts all that for every entry; the per-script test files read the
runs' outputs for their own assertions (``TaskRuns.get``: one run per task and test session).
tests/run_states.py runs each entry's commands (``task_flags``, ``with_steps``, ``only_actions``,
``export_command``, ``convert_command``) on its run directory in each state it can be in.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import pathlib
from typing import Callable

import pytest

from albert_tf.cli import driver
from albert_tf.files import run_files as run_files_module
from albert_tf.files.paths import path_identity
from albert_tf.files.run_files import RunFiles
from tests import spm_fixtures
from tests.command_runner import CommandResult, run_command
from tests.shared_setup import require_shared_data
from tests.task_cases import TASKS_BY_NAME, Flags, TaskCase


# -- running a task ---------------------------------------------------------------------------------

def arguments(flags: Flags) -> list[str]:
    """The command line of ``flags`` ("" = a boolean flag set)."""
    return [f"--{name}" if value == "" else f"--{name}={value}" for name, value in flags.items()]


@dataclasses.dataclass
class Command:
    """One command of a task run: its result, its declaration (captured from its pre-flight
    check) and what it did below the run's directory ({path: "created" / "changed" /
    "removed"})."""

    command: str
    flags: Flags
    result: CommandResult
    declared: RunFiles
    effects: dict[str, str]


@dataclasses.dataclass
class TaskRunResult:
    """A task's run: its directories and flags, and its commands (the script's, then for
    pretraining export_hub's)."""

    case: TaskCase
    root: pathlib.Path
    flags: Flags
    commands: list[Command]

    @property
    def output_dir(self) -> pathlib.Path:
        return pathlib.Path(self.flags["output_dir"])

    @property
    def cached_dir(self) -> pathlib.Path | None:
        """--cached_dir (None for pretraining, which reads records)."""
        return pathlib.Path(self.flags["cached_dir"]) if "cached_dir" in self.flags else None

    @property
    def export_dir(self) -> pathlib.Path:
        return self.root / "export"

    @property
    def tflite_file(self) -> pathlib.Path:
        return self.root / "model.tflite"

    @property
    def result(self) -> CommandResult:
        """The result of the task's script."""
        return self.commands[0].result


def snapshot(root: pathlib.Path) -> dict[str, str]:
    """Every file below ``root`` (links not followed): its sha256, or its link target."""
    found = {}
    for directory, _, files in os.walk(root):
        for name in files:
            path = os.path.join(directory, name)
            if os.path.islink(path):
                found[path] = "link:" + os.readlink(path)
            else:
                with open(path, "rb") as handle:
                    found[path] = hashlib.sha256(handle.read()).hexdigest()
    return found


def run_declared(root: pathlib.Path, command: str, flags: Flags) -> Command:
    """Runs ``command`` in this process, capturing the RunFiles its pre-flight check receives (the
    check still runs) and what it did below ``root``."""
    seen: list[RunFiles] = []
    real_check = run_files_module.check_run_files

    def capture(files: RunFiles, record: bool = True) -> None:
        seen.append(files)
        real_check(files, record)

    before = snapshot(root)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(run_files_module, "check_run_files", capture)
        patch.setattr(driver, "check_run_files", capture)
        result = run_command(command, *arguments(flags))
    after = snapshot(root)
    assert result.returncode == 0, (command, result.stdout[-3000:], result.stderr[-5000:])
    assert len(seen) == 1, f"{command} ran its pre-flight check {len(seen)} times"
    effects = {path: "created" for path in after.keys() - before.keys()}
    effects.update({path: "removed" for path in before.keys() - after.keys()})
    effects.update({path: "changed" for path in before.keys() & after.keys()
                    if before[path] != after[path]})
    return Command(command, flags, result, seen[0], effects)


def task_flags(case: TaskCase, root: pathlib.Path, exports: bool = True) -> Flags:
    """Makes the inputs of ``case`` below ``root`` and returns the flags of its script's run (see
    the module doc): ``TaskCase.command_flags`` (--output_dir root/out, the actions and, with
    ``exports``, --export_dir root/export and, where the task has one, --tflite_file
    root/model.tflite) and a fine-tuning script's --cached_dir root/cache."""
    if case.shared_data:
        require_shared_data()
    flags = case.command_flags(case.make(root), root, exports)
    if not case.hub_export:  # a fine-tuning script (features cached)
        flags["cached_dir"] = str(root / "cache")
    return flags


def hub_export_flags(flags: Flags, checkpoint: str, export_path: str) -> Flags:
    """The flags of ``-m albert_tf.export_hub`` exporting ``checkpoint`` of a pretraining run of
    ``flags`` to ``export_path``."""
    return {"albert_config_file": flags["albert_config_file"],
            "spm_model_file": spm_fixtures.cached_tiny_spm(), "checkpoint": checkpoint,
            "export_path": export_path}


def run_task(case: TaskCase, root: pathlib.Path) -> TaskRunResult:
    """Makes the inputs of ``case`` below ``root`` and runs it (see the module doc)."""
    flags = task_flags(case, root)
    commands = [run_declared(root, case.script, flags)]
    if case.hub_export:
        commands.append(run_declared(root, "-m albert_tf.export_hub", hub_export_flags(
            flags, str(root / "out" / "model.ckpt-best"), str(root / "export"))))
    return TaskRunResult(case, root, flags, commands)


# -- other commands of a task's run directory (tests/run_states.py) ------------------------------

def with_steps(flags: Flags, steps: int) -> Flags:
    """``flags`` training ``steps`` steps instead of two: --train_step, --num_train_steps, or
    (run_squad: int(questions / batch * epochs) steps, two at the entry's epochs)
    --num_train_epochs scaled by steps / 2."""
    if "train_step" in flags:
        return {**flags, "train_step": str(steps)}
    if "num_train_steps" in flags:
        return {**flags, "num_train_steps": str(steps)}
    return {**flags, "num_train_epochs": str(float(flags["num_train_epochs"]) * steps / 2)}


def only_actions(case: TaskCase, flags: Flags, *actions: str) -> Flags:
    """``flags`` doing ``actions`` only: the task's other actions set false (run_pretraining trains
    by default), no --export_dir, --tflite_file or --onnx_file."""
    kept = {name: value for name, value in flags.items()
            if name not in (*case.actions, "export_dir", "tflite_file", "onnx_file")}
    return {**kept, **{action: "" if action in actions else "false" for action in case.actions}}


def export_command(case: TaskCase, flags: Flags, export_dir: pathlib.Path) -> tuple[str, Flags]:
    """The command exporting the best model of the run of ``flags`` to ``export_dir`` alone: the
    script with --export_dir (no other action), or export_hub of the run's directory."""
    if case.hub_export:
        return "-m albert_tf.export_hub", hub_export_flags(flags, flags["output_dir"],
                                                           str(export_dir))
    return case.script, {**only_actions(case, flags), "export_dir": str(export_dir)}


def convert_command(flags: Flags, output_dir: pathlib.Path) -> tuple[str, Flags]:
    """convert_checkpoint of the run directory of ``flags`` (--checkpoint=<its --output_dir>) to
    the reference's format in ``output_dir``."""
    return "-m albert_tf.convert_checkpoint", {
        "checkpoint": flags["output_dir"], "to": "reference", "output_dir": str(output_dir),
        "albert_config_file": flags["albert_config_file"]}


def ancestors(path: str, root: pathlib.Path) -> list[str]:
    """``path`` and the directories above it, up to (without) ``root``."""
    found, stop = [], os.path.abspath(root)
    while path != stop and path != os.path.dirname(path):
        found.append(path)
        path = os.path.dirname(path)
    return found


def declared(files: RunFiles, path: str, root: pathlib.Path) -> bool:
    """Whether ``path`` (below ``root``) is an output ``files`` declares: a declared file, one of a
    declared family, inside a declared output directory or inside a directory written whole."""
    written_whole = {path_identity(directory.path) for directory in files.new_directories}
    for candidate in ancestors(os.path.abspath(path), root):
        if path_identity(candidate) in written_whole:
            return True
        try:
            files.declared(candidate)
            return True
        except KeyError:
            continue
    return False


class TaskRuns:
    """The harness's runs of one test session, each made once, when first asked for."""

    def __init__(self, make_directory: Callable[[str], pathlib.Path]):
        self._make_directory = make_directory
        self._runs: dict[str, TaskRunResult] = {}

    def get(self, name: str) -> TaskRunResult:
        """The run of the entry ``name`` of ``TASKS`` (skipped without the shared data when it
        needs it)."""
        case = TASKS_BY_NAME[name]
        if case.shared_data:
            require_shared_data()
        if name not in self._runs:
            self._runs[name] = run_task(case, self._make_directory(name))
        return self._runs[name]
