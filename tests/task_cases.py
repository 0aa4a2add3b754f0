"""Every task's test battery, in one table: ``TASKS``, one ``TaskCase`` per variant of a task that
a training script runs (GLUE RTE, its early exit, regression on the user's own files, NER, SQuAD
v1.1 and v2.0, RACE, pretraining).

An entry holds everything the task-level tests need to know about the task, so that adding a task
is one spec (task_specs/), one data folder (data_prep/) and one entry here:

- its script and its spec builder (task_specs/; the script's main hands it the settings);
- for the end-to-end harness (tests/task_harness.py, which runs the script once per test session;
  the per-script tests read that run) and the run-state test (tests/run_states.py): ``make``,
  which makes its inputs and returns the flags of its data, model and training length, the
  prediction files it leaves, its actions, and whether it writes TFLite, exports through
  export_hub, reads the shared data and has its run directory's states tested;
- for the task contract (tests/test_task_contract.py): its model (``TaskModel``: the ``Task``
  whose model the script trains, its SavedModel export, the ids it serves and what it must
  answer);
- for the pre-flight test (tests/test_preflight.py): ``preflight``, the flags of its data and
  model on placeholder files (the pre-flight check comes before anything reads them), which
  ``preflight_flags`` completes with --output_dir, the actions and the flag outputs.

The guards (test_task_contract.py section 0) fail until every script, every task folder, every
task model and every spec module has its entry.
"""

from __future__ import annotations

import dataclasses
import json
import os
import pathlib
from typing import Callable

import keras
import numpy as np

from albert_tf.cli.task_spec import TaskSpec
from albert_tf.models.config import AlbertConfig
from albert_tf.models.task_model import AlbertTaskModel
from albert_tf.tasks.classification.serving import export_classifier
from albert_tf.tasks.classification.task import ClassifierTask
from albert_tf.tasks.multiple_choice.serving import export_multiple_choice
from albert_tf.tasks.multiple_choice.task import MultipleChoiceTask
from albert_tf.tasks.pretraining.task import PretrainingTask
from albert_tf.tasks.question_answering.serving import export_squad
from albert_tf.tasks.question_answering.task import SquadSettings, SquadTask
from albert_tf.tasks.token_classification.serving import export_token_classifier
from albert_tf.tasks.token_classification.task import TokenClassifierTask
from albert_tf.training.task import Task
from task_specs.classification import classification_spec
from task_specs.early_exit import early_exit_spec
from task_specs.multiple_choice import race_spec
from task_specs.pretraining import pretraining_spec
from task_specs.question_answering import squad_spec
from task_specs.token_classification import ner_spec
from tests import spm_fixtures
from tests.shared_setup import EN8K_MODEL, GLUE_DIR, REPO_ROOT, SHARED_DATA_DIR, tiny_config

Flags = dict[str, str]  # flag name -> value ("" for a boolean flag that is set)
Inputs = dict[str, np.ndarray]
Outputs = dict[str, np.ndarray]


# -- the entry ------------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class TaskModel:
    """The task's model under the contract (tests/test_task_contract.py; random weights on
    ``tiny_config()``, no data files).

    task(config): the ``training.Task`` whose ``build_model`` the script trains.
    export(model, export_dir): the task's SavedModel export without a tokenizer (only
    ``ids_only`` is written), called as its script calls it; None for a task without one
    (pretraining's export is the hub module, which needs a SentencePiece model).
    inputs(config): the ids ``serving_default`` takes, int32 arrays.
    expected(model, inputs): what ``serving_default`` must return, from the Keras model.
    head_in_pretraining: the head is the pretraining checkpoint's own (the pretraining model),
    so a warm start loads it instead of reporting it new.
    """

    task: Callable[[AlbertConfig], Task]
    export: Callable[[keras.Model, str], object] | None = None
    inputs: Callable[[AlbertConfig], Inputs] | None = None
    expected: Callable[[keras.Model, Inputs], Outputs] | None = None
    head_in_pretraining: bool = False

    def build(self, config: AlbertConfig) -> AlbertTaskModel:
        return self.task(config).build_model()


@dataclasses.dataclass(frozen=True)
class TaskCase:
    """One task (or variant of one) of a training script, as every task-level test sees it.

    name: the entry's name (test ids, ``TaskRuns.get``, run-state cells).
    script: the training script that runs it; spec: the task_specs/ function its main calls.
    make(root): makes the task's inputs below ``root`` (or points at the shared data) and returns
    the flags of its data, model and training length (two steps, a checkpoint after each); the
    harness adds ``command_flags`` and --cached_dir.
    products: the files the run leaves in --output_dir besides the shared ones (its predictions).
    model: the task's model under the contract.
    preflight(root): the flags of its data and model on placeholder files made below ``root``, for
    the pre-flight test (``preflight_flags`` adds the rest, as ``command_flags`` does to
    ``make``'s for the harness).
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
    spec: Callable[..., TaskSpec]
    make: Callable[[pathlib.Path], Flags]
    products: tuple[str, ...]
    model: TaskModel
    preflight: Callable[[str], Flags]
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

    @property
    def flag_outputs(self) -> tuple[str, ...]:
        """The flags naming an output of the script apart from --output_dir: --export_dir (not
        pretraining's, exported by export_hub) and --tflite_file where the task writes one."""
        if self.hub_export:
            return ()
        return ("export_dir", "tflite_file") if self.tflite else ("export_dir",)

    def command_flags(self, inputs: Flags, root: str | os.PathLike, exports: bool = True) -> Flags:
        """The script's flags: ``inputs`` (its data and model), --output_dir root/out, the actions
        and (with ``exports``) the flag outputs, --export_dir root/export and --tflite_file
        root/model.tflite."""
        flags = {**inputs, "output_dir": os.path.join(root, "out"),
                 **{action: "" for action in self.actions}}
        if exports:
            flags.update({flag: os.path.join(root, FLAG_OUTPUT_NAMES[flag])
                          for flag in self.flag_outputs})
        return flags

    @property
    def preflight_outputs(self) -> tuple[str, ...]:
        """The flag outputs the pre-flight test points at other files: ``flag_outputs`` and, for
        a script with a TFLite export, --onnx_file (the harness's runs leave the ONNX export to
        tests/test_onnx_export.py, which converts it with tf2onnx)."""
        return self.flag_outputs + (("onnx_file",) if self.tflite else ())

    def preflight_flags(self, root: str) -> Flags:
        """The script's valid flags for the pre-flight test, on placeholder files below
        ``root``."""
        flags = self.command_flags(self.preflight(root), root)
        if self.tflite:
            flags["onnx_file"] = os.path.join(root, FLAG_OUTPUT_NAMES["onnx_file"])
        return flags


# The names of the flag outputs below a run's root directory.
FLAG_OUTPUT_NAMES = {"export_dir": "export", "tflite_file": "model.tflite",
                     "onnx_file": "model.onnx"}


# -- files ----------------------------------------------------------------------------------------

def write(path: str | os.PathLike, text: str = "x\n") -> str:
    """Writes ``text`` to ``path`` (its folder made) and returns the path."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(text)
    return str(path)


def config_file(root: str | os.PathLike, **overrides) -> str:
    """root/in/albert_config.json: ``tiny_config(**overrides)``."""
    return write(os.path.join(root, "in", "albert_config.json"),
                 tiny_config(**overrides).to_json_string())


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


# -- the harness's inputs (two training steps, a checkpoint after each) ----------------------------

SQUAD_V1_SAMPLE = os.path.join(SHARED_DATA_DIR, "squad", "dev-v1.1-sample.json")
SQUAD_V2_SAMPLE = os.path.join(SHARED_DATA_DIR, "squad", "dev-v2.0-sample.json")
RACE_DEV = os.path.join(SHARED_DATA_DIR, "race", "RACE", "dev")
OWN_DATA_EXAMPLES = os.path.join(REPO_ROOT, "docs", "examples", "own_data")

# What every fine-tuning run is asked to do; its script's flags for them.
TWO_STEPS = {"train_step": "2", "save_checkpoints_steps": "1"}

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
# share one block), an internal classifier per layer, trained jointly (one run of the script, as
# the harness wants; two-stage training runs the ordinary run first, and has its own tests in
# tests/test_early_exit.py).
EARLY_EXIT_LAYERS = 3


def glue_early_exit(root: pathlib.Path) -> Flags:
    return {**glue_rte(root), "early_exit": "", "early_exit_training": "joint",
            "albert_config_file": config_file(
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


# -- the pre-flight test's flags (placeholder files: the check comes before anything reads them) --

def model_files(root: str) -> Flags:
    """A config and a tokenizer file (never loaded: the check comes first)."""
    return {"albert_config_file": config_file(root),
            "spm_model_file": write(f"{root}/in/spm.model")}


def rte_files(root: str, splits: tuple[str, ...] = ("train", "dev", "test")) -> str:
    """root/in/RTE/<split>.tsv (a header alone); returns root/in, the --data_dir."""
    for split in splits:
        write(f"{root}/in/RTE/{split}.tsv", "index\tsentence1\tsentence2\tlabel\n")
    return f"{root}/in"


def preflight_glue(root: str) -> Flags:
    return {**model_files(root), "task_name": "rte", "data_dir": rte_files(root)}


def preflight_early_exit(root: str) -> Flags:
    return {**preflight_glue(root), "early_exit": ""}


def preflight_own_files(root: str) -> Flags:
    files = {split: write(f"{root}/in/{split}.csv", "text,label\na b,0.5\nc d,1.5\n")
             for split in ("train", "dev", "test")}
    return {**model_files(root), "train_file": files["train"], "dev_file": files["dev"],
            "test_file": files["test"], "task_type": "regression"}


def preflight_ner(root: str) -> Flags:
    files = {split: write(f"{root}/in/{split}.conll", "EU B-ORG\nrejects O\n")
             for split in ("train", "dev", "test")}
    return {**model_files(root), "train_file": files["train"], "eval_file": files["dev"],
            "predict_file": files["test"]}


def preflight_squad_v1(root: str) -> Flags:
    return {**model_files(root), "train_file": write(f"{root}/in/train.json", "{}"),
            "predict_file": write(f"{root}/in/dev.json", "{}")}


def preflight_squad_v2(root: str) -> Flags:
    return {**preflight_squad_v1(root), "version_2_with_negative": ""}


def race_data(root: str) -> str:
    """root/in/RACE/{train,dev,test}/{middle,high}/1.txt (placeholders); returns root/in."""
    for split in ("train", "dev", "test"):
        for level in ("middle", "high"):
            write(f"{root}/in/RACE/{split}/{level}/1.txt", "{}")
    return f"{root}/in"


def preflight_race(root: str) -> Flags:
    return {**model_files(root), "data_dir": race_data(root)}


def preflight_pretraining(root: str) -> Flags:
    return {"albert_config_file": config_file(root),
            "input_file": write(f"{root}/in/train.tfrecord"),
            "eval_input_file": write(f"{root}/in/eval.tfrecord")}


# -- the contract's models: served inputs and expected outputs -------------------------------------

BATCH, SEQ = 3, 24  # the served inputs: 3 examples (RACE: of 4 choices) of 24 positions
QUESTION = 8  # SQuAD inputs: [CLS] and the question take the first 8 positions (segment 0)
# The classifiers' label count: more than RTE's 2, so that a count fixed at 2 anywhere fails.
CLASSES = 3


def token_ids(config: AlbertConfig, *leading: int, p_mask: bool = False, seed: int = 0) -> Inputs:
    """Random ``input_ids``, ``input_mask``, ``segment_ids`` int32 [*leading, SEQ]: each row holds
    SEQ // 2 to SEQ real tokens (mask 1) of which the first QUESTION have segment 0, the rest 1.
    ``p_mask``: also SQuAD 2.0's ``p_mask``, 0 at [CLS] and on the segment-1 tokens (the context),
    1 elsewhere."""
    rng = np.random.default_rng(seed)
    shape = (*leading, SEQ)
    lengths = rng.integers(SEQ // 2, SEQ + 1, size=(*leading, 1))
    position = np.arange(SEQ)
    mask = (position < lengths).astype(np.int32)
    segments = ((position >= QUESTION) & (mask == 1)).astype(np.int32)
    inputs = {"input_ids": (rng.integers(5, config.vocab_size, size=shape) * mask).astype(np.int32),
              "input_mask": mask, "segment_ids": segments}
    if p_mask:
        inputs["p_mask"] = np.where((segments == 1) | (position == 0), 0, 1).astype(np.int32)
    return inputs


def batch_ids(config: AlbertConfig) -> Inputs:
    """``token_ids`` of BATCH examples."""
    return token_ids(config, BATCH)


def softmax(logits: np.ndarray) -> np.ndarray:
    exp = np.exp(logits - logits.max(-1, keepdims=True))
    return exp / exp.sum(-1, keepdims=True)


def scored_outputs(model: keras.Model, inputs: Inputs) -> Outputs:
    """A classifier's or a choice scorer's serving outputs: ``probabilities`` (softmax of the
    logits) and ``predictions`` (their int32 arg-max); for a regression the raw output [B, 1] and
    the score [B]."""
    logits = model(inputs, training=False)["logits"].numpy()
    if model.is_regression:
        return {"probabilities": logits, "predictions": logits[:, 0]}
    return {"probabilities": softmax(logits), "predictions": logits.argmax(-1).astype(np.int32)}


def early_exit_outputs(model: keras.Model, inputs: Inputs) -> Outputs:
    """An early-exit classifier's serving outputs under its default policy (all its layers): the
    ordinary classifier's, and ``layers_used`` L for every example."""
    outputs = scored_outputs(model, inputs)
    layers = model.config.num_hidden_layers
    return {**outputs, "layers_used": np.full(len(outputs["predictions"]), layers, np.int32)}


def model_outputs(model: keras.Model, inputs: Inputs) -> Outputs:
    """Every output of the model in inference (SQuAD serves them all)."""
    return {name: value.numpy() for name, value in model(inputs, training=False).items()}


NER_TAGS = ("O", "B-PER", "I-PER")


def tagged_outputs(model: keras.Model, inputs: Inputs) -> Outputs:
    """The token classifier's serving outputs: per position the tag probabilities, the arg-max id
    and its tag name."""
    logits = model(inputs, training=False)["logits"].numpy()
    predictions = logits.argmax(-1).astype(np.int32)
    names = np.array([tag.encode() for tag in NER_TAGS], dtype=object)
    return {"probabilities": softmax(logits), "predictions": predictions,
            "tags": names[predictions]}


# -- the table ------------------------------------------------------------------------------------

TASKS = [
    TaskCase("glue_rte", "run_classifier.py", classification_spec, glue_rte,
             ("test_results.tsv", "submit_results.tsv"),
             TaskModel(lambda c: ClassifierTask(c, ("accuracy",), num_labels=CLASSES),
                       export_classifier, batch_ids, scored_outputs),
             preflight_glue, tflite=True, shared_data=True,
             states=False),  # run_classifier's states: own_regression and glue_early_exit
    TaskCase("glue_early_exit", "run_classifier.py", early_exit_spec, glue_early_exit,
             ("test_results.tsv", "submit_results.tsv", "exit_layers.tsv",
              "early_exit_results.json"),
             TaskModel(lambda c: ClassifierTask(c, ("accuracy",), num_labels=CLASSES,
                                                early_exit="separate"),
                       export_classifier, batch_ids, early_exit_outputs),
             preflight_early_exit, tflite=True, shared_data=True),
    TaskCase("own_regression", "run_classifier.py", classification_spec, own_regression,
             ("test_results.tsv", "submit_results.tsv"),
             TaskModel(lambda c: ClassifierTask(c, ("pearson",), 1, is_regression=True),
                       export_classifier, batch_ids, scored_outputs),
             preflight_own_files, tflite=True),
    TaskCase("ner", "run_ner.py", ner_spec, ner, ("predictions.jsonl",),
             TaskModel(lambda c: TokenClassifierTask(c, num_tags=len(NER_TAGS), max_seq_length=SEQ),
                       lambda m, d: export_token_classifier(m, d, NER_TAGS), batch_ids,
                       tagged_outputs),
             preflight_ner),
    TaskCase("squad_v1", "run_squad.py", squad_spec, squad_v1,
             ("predictions.json", "nbest_predictions.json"),
             TaskModel(lambda c: SquadTask(c, SquadSettings(version_2=False)), export_squad,
                       batch_ids, model_outputs),
             preflight_squad_v1, actions=("do_train", "do_predict"), tflite=True,
             shared_data=True),
    TaskCase("squad_v2", "run_squad.py", squad_spec, squad_v2,
             ("predictions.json", "nbest_predictions.json", "null_odds.json"),
             TaskModel(lambda c: SquadTask(c, SquadSettings(version_2=True)), export_squad,
                       lambda c: token_ids(c, BATCH, p_mask=True), model_outputs),
             preflight_squad_v2, actions=("do_train", "do_predict"), shared_data=True,
             states=False),  # run_squad's states: squad_v1
    TaskCase("race", "run_race.py", race_spec, race,
             ("test_predictions.json", "predict_results.txt"),
             TaskModel(lambda c: MultipleChoiceTask(c, num_choices=4),
                       lambda m, d: export_multiple_choice(m, d, None, max_seq_length=SEQ,
                                                           max_qa_length=QUESTION),
                       lambda c: token_ids(c, BATCH, 4), scored_outputs),
             preflight_race, shared_data=True),
    TaskCase("pretraining", "run_pretraining.py", pretraining_spec, pretraining, (),
             TaskModel(PretrainingTask, head_in_pretraining=True),
             preflight_pretraining, actions=("do_train", "do_eval"), hub_export=True),
]
TASKS_BY_NAME = {case.name: case for case in TASKS}
