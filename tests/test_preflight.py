"""Every command x every output it declares: pointed at an input, at another output and at a file of
an earlier run, the command is refused before any work and nothing on disk changes.

Each command runs in this process (tests/command_runner.py) with valid flags on small inputs made
here; a training script's flags are its task's, from each entry of the task table
(tests/task_cases.py: ``TaskCase.preflight_flags``). Its declaration (albert_tf/files/run_files.py)
is first captured from the one pre-flight check it calls, so an output added to a command is
covered without touching this test: for every declared output (a family of files, e.g.
model.ckpt-*, through one of its members)

- an input flag of the command is pointed at it (a copy of a valid input placed there);
- each output the user names by a flag (--tflite_file, --export_dir, --output_file, ...) is
  pointed at it;

and each flag output is pointed at the files an earlier run left in the output directory (its
checkpoint, its 'checkpoint' state file, its results and label files) and at an earlier run's
checkpoint files in another directory. Every attempt must end in
one line and exit status 1 with every file below the test's directory unchanged (hashed before and
after).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
import shutil
from typing import Callable

import pytest

from albert_tf.checkpoints.run_config import RUN_CONFIG_FILE
from albert_tf.cli import driver
from albert_tf.files import run_files as run_files_module
from albert_tf.files.run_manifest import MANIFEST_NAME
from albert_tf.files.run_files import NewDirectory, Output, RunFiles, check_run_files
from tests.command_runner import run_command
from tests.task_cases import TASKS, TaskCase, model_files, race_data, rte_files, write
from tests.test_run_files import users_checkpoint


@dataclasses.dataclass(frozen=True)
class Case:
    """A command with valid flags (``build(root)`` makes its inputs under ``root`` and returns its
    flags), the input flag whose file the test moves onto an output, the flags naming outputs,
    and its name in test ids (default: its build's)."""

    command: str
    build: Callable[[str], dict[str, str]]
    relocatable_input: str | None
    flag_outputs: tuple[str, ...] = ()
    name: str = ""


def task_case(task: TaskCase) -> Case:
    """The case of an entry of the task table (tests/task_cases.py): its script on its pre-flight
    flags, the config moved onto each output (every training script reads one)."""
    return Case(task.script, task.preflight_flags, "albert_config_file", task.preflight_outputs,
                task.name)


def glue_data(root: str) -> dict[str, str]:
    return {"task_name": "rte", "data_dir": rte_files(root, ("train", "dev")),
            "cached_dir": f"{root}/cache", "spm_model_file": write(f"{root}/in/spm.model")}


def squad_data(root: str) -> dict[str, str]:
    return {"input_file": write(f"{root}/in/dev.json", "{}"),
            "output_file": f"{root}/out/dev.tf_record",
            "spm_model_file": write(f"{root}/in/spm.model")}


def race_records(root: str) -> dict[str, str]:
    return {"data_dir": race_data(root), "split": "dev",
            "output_file": f"{root}/out/dev.tf_record",
            "spm_model_file": write(f"{root}/in/spm.model")}


def sentencepiece(root: str) -> dict[str, str]:
    return {"input_file": write(f"{root}/in/corpus.txt", "A sentence.\n"),
            "model_prefix": f"{root}/out/30k"}


def pretraining_data(root: str) -> dict[str, str]:
    return {"input_file": write(f"{root}/in/corpus.txt", "A sentence.\n"),
            "output_file": f"{root}/out/a.tfrecord,{root}/out/b.tfrecord",
            "spm_model_file": write(f"{root}/in/spm.model")}


def hub_export(root: str) -> dict[str, str]:
    return {**model_files(root), "checkpoint": write(f"{root}/in/ckpt/model.ckpt-1.index"),
            "export_path": f"{root}/export", "preprocessing_export_path": f"{root}/prep"}


def conversion(root: str) -> dict[str, str]:
    return {**model_files(root), "tf1_checkpoint": f"{root}/in/ckpt/model.ckpt",
            "output_dir": f"{root}/out"}


def conversion_to_huggingface(root: str) -> dict[str, str]:
    write(f"{root}/out/config.json", "{}")  # an earlier conversion, replaced with --overwrite
    return {**conversion(root), "checkpoint": f"{root}/in/ckpt/model.ckpt-1",
            "tf1_checkpoint": None, "to": "huggingface", "overwrite": ""}


def model_report(root: str) -> dict[str, str]:
    return {"albert_config_file": model_files(root)["albert_config_file"]}


def seeds(root: str) -> dict[str, str]:
    return {"output_dir": f"{root}/out", "--": "run_classifier.py --task_name=rte --do_eval"}


def tables(root: str) -> dict[str, str]:
    write(f"{root}/runs/rte/best_results.json",
          json.dumps({"selection_metric": "eval_accuracy", "best_step": 1,
                      "metrics": {"eval_accuracy": 0.5}}))
    return {"runs_dir": f"{root}/runs", "model": "v2_base", "output": f"{root}/tables/out"}


TASK_CASES = [task_case(task) for task in TASKS]
CASES = [
    *TASK_CASES,
    Case("data_prep/glue.py", glue_data, "spm_model_file", ("cached_dir",)),
    Case("data_prep/squad.py", squad_data, "spm_model_file", ("output_file",)),
    Case("data_prep/race.py", race_records, "spm_model_file", ("output_file",)),
    Case("data_prep/train_sentencepiece.py", sentencepiece, "input_file", ("model_prefix",)),
    Case("data_prep/create_pretraining_data.py", pretraining_data, "spm_model_file",
         ("output_file",)),
    Case("-m albert_tf.export_hub", hub_export, "albert_config_file",
         ("export_path", "preprocessing_export_path")),
    Case("-m albert_tf.convert_checkpoint", conversion, "albert_config_file", ("output_dir",)),
    Case("-m albert_tf.convert_checkpoint", conversion_to_huggingface, "albert_config_file",
         ("output_dir",)),
    Case("-m albert_tf.model_report", model_report, "albert_config_file"),
    Case("-m albert_tf.run_seeds", seeds, None, ("output_dir",)),
    Case("-m albert_tf.paper_tables", tables, None, ("output",)),
]
CASE_IDS = [f"{case.command.split('/')[-1].split('.')[-1 if case.command.startswith('-m') else 0]}"
            f"-{case.name or case.build.__name__}" for case in CASES]


def arguments(flags: dict[str, str]) -> list[str]:
    """The command line of ``flags`` ("" = a boolean flag set; the key "--" = the rest)."""
    line = [f"--{name}" if value == "" else f"--{name}={value}"
            for name, value in flags.items() if name != "--" and value is not None]
    return line + (["--", *flags["--"].split()] if "--" in flags else [])


class Captured(BaseException):
    """Raised by the patched check after recording a declaration: the command stops there (a
    BaseException, so that the error boundary lets it through as it does Ctrl-C's)."""


def declaration(monkeypatch, case: Case, flags: dict[str, str]) -> RunFiles | None:
    """The RunFiles the command checks with these flags (it calls the check once), or None when
    it stops before (a mistake its flag checks find)."""
    seen = []

    def capture(files: RunFiles, record: bool = True) -> None:
        seen.append(files)
        raise Captured

    with monkeypatch.context() as patch:
        patch.setattr(run_files_module, "check_run_files", capture)
        patch.setattr(driver, "check_run_files", capture)
        try:
            result = run_command(case.command, *arguments(flags))
        except Captured:
            assert len(seen) == 1
            return seen[0]
    assert result.returncode == 1, result.stderr[-2000:]
    return None


def still_an_output(monkeypatch, case: Case, flags: dict[str, str], target: str) -> bool:
    """Whether ``target`` is still an output of another declaration item when a flag output is
    pointed at it (outputs derived from that flag, e.g. a sidecar, move along with it)."""
    declared = declaration(monkeypatch, case, flags)
    if declared is None:
        return True  # refused by its flag checks, before declaring: refused all the same
    paths = [os.path.abspath(member(item).rstrip("/"))
             for item in (*declared.outputs, *declared.new_directories, *declared.work_directories)]
    return paths.count(os.path.abspath(target.rstrip("/"))) > 1


def member(output: Output | NewDirectory) -> str:
    """A path of the output: itself, or for a family one of the files it names."""
    if isinstance(output, Output) and output.family:
        return re.sub(r"\[[^]]*\]", "0", output.path.replace("*", "7").replace("?", "a"))
    return output.path


def snapshot(root: str) -> dict[str, str]:
    """Every file and directory below ``root``: its sha256 (files) or "dir"."""
    found = {}
    for directory, subdirectories, files in os.walk(root):
        for name in subdirectories:
            found[os.path.join(directory, name)] = "dir"
        for name in files:
            path = os.path.join(directory, name)
            if os.path.islink(path):
                found[path] = "link:" + os.readlink(path)
                continue
            with open(path, "rb") as handle:
                found[path] = hashlib.sha256(handle.read()).hexdigest()
    return found


def assert_refused(case: Case, flags: dict[str, str], root: str, naming: str,
                   *or_naming: str) -> None:
    """The command is refused in one line naming ``naming`` (or one of ``or_naming``), and
    nothing below ``root`` changed."""
    before = snapshot(root)
    result = run_command(case.command, *arguments(flags))
    assert result.returncode == 1, (flags, result.stdout[-1500:], result.stderr[-1500:])
    line = result.error_line()
    assert any(os.path.basename(name.rstrip("/")) in line for name in (naming, *or_naming)), (
        naming, line)
    assert snapshot(root) == before, line


def earlier_checkpoint(output_dir: str) -> list[str]:
    """The checkpoint files a training run leaves in its output directory."""
    return [write(f"{output_dir}/checkpoint", 'model_checkpoint_path: "model.ckpt-3"\n'),
            write(f"{output_dir}/model.ckpt-3.index"),
            write(f"{output_dir}/model.ckpt-3.data-00000-of-00001"),
            write(f"{output_dir}/model.ckpt-best.index")]


def earlier_run(output_dir: str) -> list[str]:
    """Every file a training run leaves in its output directory (its run manifest, and the label
    file of an earlier version's run)."""
    return earlier_checkpoint(output_dir) + [
        write(f"{output_dir}/{MANIFEST_NAME}", '{"format": 1, "records": {"label_set": '
                                               '{"task_type": "x", "labels": null}}}\n'),
        write(f"{output_dir}/label_list.json", '{"task_type": "x", "labels": null}\n'),
        write(f"{output_dir}/eval_results.txt"), write(f"{output_dir}/best_results.json")]


@pytest.mark.parametrize("case", CASES, ids=CASE_IDS)
def test_every_declared_output_is_refused_over_an_input_another_output_or_a_runs_file(
        tmp_path, monkeypatch, case):
    root = str(tmp_path)
    flags = case.build(root)
    declared = declaration(monkeypatch, case, flags)
    assert declared is not None
    check_run_files(declared)  # the valid flags pass the real check
    outputs = [member(output) for output in (*declared.outputs, *declared.new_directories)]
    assert all(f"--{name}" in [output.what for output in declared.outputs] +
               [directory.what for directory in
                (*declared.new_directories, *declared.work_directories)]
               for name in case.flag_outputs), "every flag output is declared"
    tried = accepted = 0
    # A training run given its own recorded config as --albert_config_file resumes from it
    # (tests/test_config_beside.py).
    recorded_config = (os.path.join(flags["output_dir"], RUN_CONFIG_FILE)
                       if case.command.startswith("run_") else None)
    for target in outputs:
        if target == recorded_config:
            accepted += 1
        elif case.relocatable_input and target != flags.get(case.relocatable_input):
            moved = dict(flags)
            os.makedirs(os.path.dirname(target.rstrip("/")), exist_ok=True)
            existed = os.path.exists(target)
            if not existed:
                shutil.copy(flags[case.relocatable_input], target)
            moved[case.relocatable_input] = target
            assert_refused(case, moved, root, target)
            if not existed:
                os.remove(target)
            tried += 1
        for flag in case.flag_outputs:
            pointed = {**flags, flag: target}
            if still_an_output(monkeypatch, case, pointed, target):
                assert_refused(case, pointed, root, target)
                tried += 1
    assert tried + accepted >= len(outputs) or not case.relocatable_input
    output_dir = flags.get("output_dir")
    for flag in case.flag_outputs:
        # An earlier run's checkpoint anywhere; any file of an earlier run in this run's directory
        # (where the flag names the output itself, not a prefix of outputs derived from it).
        for path in earlier_checkpoint(os.path.join(root, "earlier")) + (
                earlier_run(output_dir) if output_dir and flag != "output_dir" else []):
            pointed = {**flags, flag: path}
            declared = declaration(monkeypatch, case, pointed)
            if declared is None or any(
                    os.path.abspath(member(item)) == os.path.abspath(path)
                    for item in (*declared.outputs, *declared.new_directories)):
                assert_refused(case, pointed, root, path)


def test_paper_tables_never_writes_over_the_results_it_reads(tmp_path):
    flags = tables(str(tmp_path))
    results = f"{flags['runs_dir']}/rte/best_results"
    case = Case("-m albert_tf.paper_tables", tables, None, ("output",))
    assert_refused(case, {**flags, "output": results}, str(tmp_path), results + ".json")


def users_file(path: str, is_directory: bool) -> None:
    """A file of the user's at ``path``, or a directory of the user's holding one."""
    write(os.path.join(path, "mine.txt") if is_directory else path, "the user's own\n")


# The files of each kind of checkpoint of the user's (tests/test_run_files.py's users_checkpoint).
USERS_CHECKPOINT_FILES = {None: (), "reference": ("checkpoint", "model.ckpt-123"),
                          "other program": ("checkpoint", "ckpt-1")}


@pytest.mark.parametrize("beside", USERS_CHECKPOINT_FILES)
@pytest.mark.parametrize("case", [*TASK_CASES, *(case for case in CASES if case.build in (
    conversion, seeds))], ids=lambda case: case.name or case.build.__name__)
def test_a_users_file_under_a_name_the_run_writes_in_its_directory_is_refused(
        tmp_path, monkeypatch, case, beside):
    """A file the user keeps in the directory given as --output_dir under a name the run writes
    there (a released model's model.ckpt-best.index, notes called eval_results.txt) was replaced,
    renamed or deleted as if an earlier run had written it. Every such name of every command with
    one: refused in one line naming it, nothing on disk changed (no run manifest either).
    ``beside``: the directory holds a checkpoint of the user's too, with its 'checkpoint' state
    file (a reference run's TF1 one, another program's): it was taken for a run directory of an
    earlier version, and every name there for the run's (run_pretraining --do_train --do_eval
    replaced the user's eval_results.txt and checkpoint)."""
    root = str(tmp_path)
    flags = case.build(root)
    declared = declaration(monkeypatch, case, flags)
    fixed = [output for output in declared.outputs
             if output.fixed and output.touched and output.listed_as_owned]
    assert fixed
    for output in fixed:
        path = member(output)
        users_file(path, output.is_directory)
        if beside:
            users_checkpoint(os.path.dirname(path), beside)
        assert_refused(case, flags, root, path, *USERS_CHECKPOINT_FILES[beside])
        shutil.rmtree(os.path.dirname(path))
    check_run_files(declared)  # without them the run goes ahead, and records its names
    assert MANIFEST_NAME in os.listdir(os.path.dirname(member(fixed[0])))
