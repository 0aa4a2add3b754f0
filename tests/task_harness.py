"""The per-task harness: every task runs through its real script, in the test process
(tests/command_runner.py), on a tiny config and tiny data. One entry of ``RUNS`` per task.

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

A new task: one ``TaskRun`` in ``RUNS`` (its name, its script, a function making its inputs and
returning its flags, the prediction files it leaves in --output_dir); ``test_every_script_is_in_the_
harness`` fails until every run_*.py script has an entry.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
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
from tests.shared_setup import (EN8K_MODEL, GLUE_DIR, REPO_ROOT, SHARED_DATA_DIR,
                                require_shared_data, tiny_config)

Flags = dict[str, str]  # flag name -> value ("" for a boolean flag that is set)

SQUAD_V1_SAMPLE = os.path.join(SHARED_DATA_DIR, "squad", "dev-v1.1-sample.json")
SQUAD_V2_SAMPLE = os.path.join(SHARED_DATA_DIR, "squad", "dev-v2.0-sample.json")
RACE_DEV = os.path.join(SHARED_DATA_DIR, "race", "RACE", "dev")
OWN_DATA_EXAMPLES = os.path.join(REPO_ROOT, "docs", "examples", "own_data")

# What every fine-tuning run is asked to do; its script's flags for them.
TWO_STEPS = {"train_step": "2", "save_checkpoints_steps": "1"}


@dataclasses.dataclass(frozen=True)
class TaskRun:
    """One task run through its script.

    make(root): makes the task's inputs below ``root`` (or points at the shared data) and returns
    the flags of its data, model and training length (two steps, a checkpoint after each); the
    harness adds --output_dir, --cached_dir, the actions, --export_dir and --tflite_file.
    products: the files the run leaves in --output_dir besides the shared ones (its predictions).
    actions: the flags that train, sweep and predict (run_squad sweeps with --do_predict).
    tflite: the script writes a TFLite model (--tflite_file).
    hub_export: the export is ``-m albert_tf.export_hub`` of the run's model.ckpt-best (pretraining)
    instead of --export_dir.
    shared_data: the inputs come from the shared test data (skipped without it).
    states: the run-state test (tests/run_states.py) runs the script's commands on copies of this
    run's directory in each of its states (False: a variant of a script another entry covers).
    """

    name: str
    script: str
    make: Callable[[pathlib.Path], Flags]
    products: tuple[str, ...]
    actions: tuple[str, ...] = ("do_train", "do_eval", "do_predict")
    tflite: bool = False
    hub_export: bool = False
    shared_data: bool = False
    states: bool = True

    @property
    def sweep_action(self) -> str:
        """The flag of the task's sweep: --do_eval, or run_squad's --do_predict."""
        return "do_eval" if "do_eval" in self.actions else "do_predict"

    @property
    def predict_action(self) -> str | None:
        """The flag that predicts from model.ckpt-best without sweeping (None: the sweep is the
        prediction, as run_squad's, or the task has none, as pretraining)."""
        return ("do_predict" if "do_predict" in self.actions and self.sweep_action != "do_predict"
                else None)


# -- the inputs of each task ------------------------------------------------------------------------

def write(path: pathlib.Path, text: str) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return str(path)


def config_file(root: pathlib.Path, **overrides) -> str:
    return write(root / "in" / "albert_config.json", tiny_config(**overrides).to_json_string())


def glue_sample(root: pathlib.Path, task_dir: str, rows: int,
                files: tuple[str, ...] = ("train", "dev", "test"),
                source: dict[str, str] | None = None) -> pathlib.Path:
    """root/<task_dir>/<split>.tsv: the header and the first ``rows`` records of the shared GLUE
    files (``source``: another file's records for a split, e.g. {"test": "dev"})."""
    (root / task_dir).mkdir(parents=True)
    for name in files:
        source_name = (source or {}).get(name, name)
        with open(os.path.join(GLUE_DIR, task_dir, f"{source_name}.tsv"),
                  encoding="utf-8") as handle:
            lines = handle.readlines()[:rows + 1]
        (root / task_dir / f"{name}.tsv").write_text("".join(lines), encoding="utf-8")
    return root


# RTE: 40 rows of each split, from a pretraining checkpoint in the reference's names (the head is
# new), the SavedModel with a constant threshold output (--threshold_to_export).
RTE_SEQ = 64


def glue_rte(root: pathlib.Path) -> Flags:
    from albert_tf.checkpoints.tf1_format import export_tf1_checkpoint
    from albert_tf.tasks.pretraining.model import AlbertPretrainingModel

    config = tiny_config(max_position_embeddings=RTE_SEQ)
    pretrained = export_tf1_checkpoint(AlbertPretrainingModel(config),
                                       str(root / "in" / "pretrained" / "model.ckpt"))
    return {"task_name": "RTE", "data_dir": str(glue_sample(root / "in" / "glue", "RTE", 40)),
            "albert_config_file": config_file(root, max_position_embeddings=RTE_SEQ),
            "spm_model_file": EN8K_MODEL, "max_seq_length": str(RTE_SEQ),
            "learning_rate": "1e-3", "init_checkpoint": pretrained, "train_batch_size": "8",
            "eval_batch_size": "16", "predict_batch_size": "16", "threshold_to_export": "0.25",
            **TWO_STEPS}


# RTE with --early_exit (PABEE): a 3-layer encoder (the same pretraining checkpoint: all layers
# share one block), an internal classifier per layer.
EARLY_EXIT_LAYERS = 3


def glue_early_exit(root: pathlib.Path) -> Flags:
    return {**glue_rte(root), "early_exit": "", "albert_config_file": config_file(
        root, max_position_embeddings=RTE_SEQ, num_hidden_layers=EARLY_EXIT_LAYERS)}


# Regression on the user's own JSON Lines files: the documented example files (docs/own_data.md),
# the dev file predicted as the test file; a tokenizer of the bundled corpus.
def own_regression(root: pathlib.Path) -> Flags:
    files = {split: os.path.join(OWN_DATA_EXAMPLES, f"similarity_{split}.jsonl")
             for split in ("train", "dev")}
    return {"train_file": files["train"], "dev_file": files["dev"], "test_file": files["dev"],
            "task_type": "regression", "albert_config_file": config_file(
                root, vocab_size=500, max_position_embeddings=32),
            "spm_model_file": spm_fixtures.cached_tiny_spm(), "max_seq_length": "32",
            "train_batch_size": "2", "eval_batch_size": "2", "predict_batch_size": "2",
            **TWO_STEPS}


# NER: a CoNLL training file (4 sentences, the last one 3 windows long), its sentences in JSON
# Lines to evaluate and, with ids, to tag.
NER_SEQ, NER_STRIDE = 24, 8
TRAIN_CONLL = """-DOCSTART- -X- O O

John NNP B-PER
lives VBZ O
in IN O
Paris NNP B-LOC
. . O

Mary B-PER
Smith I-PER
works O
for O
the O
city O
of O
London B-LOC
. O

-DOCSTART- -X- O O
Acme B-ORG
hired O
Peter B-PER
in O
Berlin B-LOC

the O
river O
runs O
past O
Rome B-LOC
and O
Peter B-PER
walks O
along O
it O
with O
Mary B-PER
every O
morning O
before O
work O
at O
Acme B-ORG
. O
"""


def ner(root: pathlib.Path) -> Flags:
    from data_prep.token_classification.reader import read_sentences

    train = write(root / "in" / "train.conll", TRAIN_CONLL)
    sentences = read_sentences(train)
    evaluate = "".join(json.dumps({"tokens": list(s.words), "tags": list(s.tags)}) + "\n"
                       for s in sentences)
    predict = "".join(json.dumps({"tokens": list(s.words), "id": index}) + "\n"
                      for index, s in enumerate(sentences))
    return {"train_file": train, "eval_file": write(root / "in" / "dev.jsonl", evaluate),
            "predict_file": write(root / "in" / "test.jsonl", predict),
            "albert_config_file": config_file(root, vocab_size=500,
                                              max_position_embeddings=NER_SEQ),
            "spm_model_file": spm_fixtures.cached_tiny_spm(), "max_seq_length": str(NER_SEQ),
            "doc_stride": str(NER_STRIDE), "train_batch_size": "4", **TWO_STEPS}


# SQuAD: the shared samples, trained and predicted; the steps are int(questions / batch * epochs).
SQUAD_SETTINGS = {"max_seq_length": "128", "doc_stride": "64", "max_query_length": "32",
                  "learning_rate": "1e-3", "save_checkpoints_steps": "1"}


def squad_v1(root: pathlib.Path) -> Flags:
    # 8 questions, batch 4, one epoch: 2 steps.
    return {"train_file": SQUAD_V1_SAMPLE, "predict_file": SQUAD_V1_SAMPLE,
            "albert_config_file": config_file(root), "spm_model_file": EN8K_MODEL,
            "train_batch_size": "4", "num_train_epochs": "1", **SQUAD_SETTINGS}


def squad_v2(root: pathlib.Path) -> Flags:
    # 14 questions (more windows), batch 14, two epochs: 2 steps.
    return {"train_file": SQUAD_V2_SAMPLE, "predict_file": SQUAD_V2_SAMPLE,
            "version_2_with_negative": "", "albert_config_file": config_file(root),
            "spm_model_file": EN8K_MODEL, "train_batch_size": "14", "num_train_epochs": "2",
            **SQUAD_SETTINGS}


# RACE: the 31 questions of the shared dev sample as train, dev and test, from a checkpoint in the
# reference's names with the head (as a RACE run of the reference writes).
RACE_SEQ, RACE_QA = 96, 24
RACE_HEAD_BIAS = 0.25


def race(root: pathlib.Path) -> Flags:
    from albert_tf.checkpoints.tf1_format import export_tf1_checkpoint
    from albert_tf.tasks.multiple_choice.model import AlbertMultipleChoiceModel

    (root / "in" / "RACE").mkdir(parents=True)
    for split in ("train", "dev", "test"):
        os.symlink(RACE_DEV, root / "in" / "RACE" / split)
    reference = AlbertMultipleChoiceModel(tiny_config())
    reference.scorer.output_bias.assign([RACE_HEAD_BIAS])
    init = export_tf1_checkpoint(reference, str(root / "in" / "reference" / "model.ckpt"))
    return {"data_dir": str(root / "in"), "albert_config_file": config_file(root),
            "spm_model_file": EN8K_MODEL, "init_checkpoint": init,
            "max_seq_length": str(RACE_SEQ), "max_qa_length": str(RACE_QA),
            "warmup_step": "1", "train_batch_size": "4", "eval_batch_size": "8",
            "predict_batch_size": "8", "learning_rate": "1e-3", **TWO_STEPS}


# Pretraining: records of the bundled corpus (S 128, M 20; ids below 500) to train and evaluate.
def pretraining(root: pathlib.Path) -> Flags:
    records = spm_fixtures.write_pretraining_records(root / "in" / "train.tfrecord")
    return {"input_file": records, "eval_input_file": records,
            "albert_config_file": config_file(root, vocab_size=500), "max_seq_length": "128",
            "max_predictions_per_seq": "20", "train_batch_size": "4", "eval_batch_size": "4",
            "max_eval_steps": "2", "num_train_steps": "2", "save_checkpoints_steps": "1"}


RUNS = [
    TaskRun("glue_rte", "run_classifier.py", glue_rte,
            ("test_results.tsv", "submit_results.tsv"), tflite=True, shared_data=True,
            states=False),  # run_classifier's states: own_regression and glue_early_exit
    TaskRun("glue_early_exit", "run_classifier.py", glue_early_exit,
            ("test_results.tsv", "submit_results.tsv", "exit_layers.tsv",
             "early_exit_results.json"), tflite=True, shared_data=True),
    TaskRun("own_regression", "run_classifier.py", own_regression,
            ("test_results.tsv", "submit_results.tsv"), tflite=True),
    TaskRun("ner", "run_ner.py", ner, ("predictions.jsonl",)),
    TaskRun("squad_v1", "run_squad.py", squad_v1, ("predictions.json", "nbest_predictions.json"),
            actions=("do_train", "do_predict"), tflite=True, shared_data=True),
    TaskRun("squad_v2", "run_squad.py", squad_v2,
            ("predictions.json", "nbest_predictions.json", "null_odds.json"),
            actions=("do_train", "do_predict"), shared_data=True,
            states=False),  # run_squad's states: squad_v1
    TaskRun("race", "run_race.py", race, ("test_predictions.json", "predict_results.txt"),
            shared_data=True),
    TaskRun("pretraining", "run_pretraining.py", pretraining, (),
            actions=("do_train", "do_eval"), hub_export=True),
]
RUNS_BY_NAME = {run.name: run for run in RUNS}


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

    case: TaskRun
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

    def capture(files: RunFiles) -> None:
        seen.append(files)
        real_check(files)

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


def task_flags(case: TaskRun, root: pathlib.Path, exports: bool = True) -> Flags:
    """Makes the inputs of ``case`` below ``root`` and returns the flags of its script's run (see
    the module doc): --output_dir root/out, --cached_dir root/cache, the actions and (with
    ``exports``) --export_dir root/export and, where the task has one, --tflite_file
    root/model.tflite."""
    if case.shared_data:
        require_shared_data()
    flags = {**case.make(root), "output_dir": str(root / "out")}
    if not case.hub_export:  # a fine-tuning script (features cached)
        flags["cached_dir"] = str(root / "cache")
    flags.update({action: "" for action in case.actions})
    if not case.hub_export and exports:
        flags["export_dir"] = str(root / "export")
    if case.tflite and exports:
        flags["tflite_file"] = str(root / "model.tflite")
    return flags


def hub_export_flags(flags: Flags, checkpoint: str, export_path: str) -> Flags:
    """The flags of ``-m albert_tf.export_hub`` exporting ``checkpoint`` of a pretraining run of
    ``flags`` to ``export_path``."""
    return {"albert_config_file": flags["albert_config_file"],
            "spm_model_file": spm_fixtures.cached_tiny_spm(), "checkpoint": checkpoint,
            "export_path": export_path}


def run_task(case: TaskRun, root: pathlib.Path) -> TaskRunResult:
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


def only_actions(case: TaskRun, flags: Flags, *actions: str) -> Flags:
    """``flags`` doing ``actions`` only: the task's other actions set false (run_pretraining trains
    by default), no --export_dir or --tflite_file."""
    kept = {name: value for name, value in flags.items()
            if name not in (*case.actions, "export_dir", "tflite_file")}
    return {**kept, **{action: "" if action in actions else "false" for action in case.actions}}


def export_command(case: TaskRun, flags: Flags, export_dir: pathlib.Path) -> tuple[str, Flags]:
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
        """The run of the entry ``name`` of ``RUNS`` (skipped without the shared data when it
        needs it)."""
        case = RUNS_BY_NAME[name]
        if case.shared_data:
            require_shared_data()
        if name not in self._runs:
            self._runs[name] = run_task(case, self._make_directory(name))
        return self._runs[name]
