"""The contract every task keeps, checked for each entry of the task table (``TASKS``,
tests/task_cases.py: one entry per task, or variant of one, that a training script runs).

A task model (``AlbertTaskModel``: the encoder in ``albert`` plus a head) must

1. round-trip under the reference's TF1 names: ``export_tf1_checkpoint`` writes exactly
   ``tf1_variable_map(model)`` (the encoder's names and the head's ``tf1_head_variables()``, which
   together name every weight of the model once), and ``load_tf1_checkpoint`` into a fresh model
   of the same task loads every one of them back, bit for bit, with nothing missing or unused;
2. warm-start from a pretraining checkpoint of either format (the reference's TF1 names and
   albert_tf's own object-based one): the report's ``missing`` is exactly the head's TF1 names
   (nothing of the encoder), its ``unused`` exactly the pretraining heads, the encoder takes the
   pretraining model's values and the head keeps its own;
3. (tasks with a SavedModel export) serve from ``<export_dir>/ids_only`` in a fresh process that
   imports TensorFlow and NumPy only, never albert_tf: ``serving_default`` on token ids gives the
   Keras model's outputs (within 1e-5, absolute and relative; integer outputs equal); it takes any
   length from 1 (SQuAD 2.0: its beam) to max_position_embeddings (S), and a request of length
   L gives the outputs of the same ids padded to S at its real positions;
4. run through its script (the harness, tests/task_harness.py, in this process, on the entry's
   tiny config and data): train two steps, sweep both checkpoints (model.ckpt-best,
   eval_results.txt, best_results.json), predict, export (SavedModel; TFLite where the task has
   it; pretraining: export_hub of its best checkpoint), with its features in --cached_dir; and
   write, change or remove only files it declared in its pre-flight check;
5. give the same outputs on a batch cut to its length bucket (albert_tf/training/length_buckets.py)
   as on the batch padded further: every output on the cut positions within 1e-5, for both
   cross-layer sharing extremes and both precisions (float32, mixed bfloat16).

A new task is one entry in ``TASKS``; section 0 (``test_every_task_is_in_the_table``,
``test_every_script_is_in_the_harness``, ``test_every_task_has_the_files_the_walkthrough_lists``)
fails until every task model, script, task folder and spec has one. For 1-3 the models are
``tiny_config()`` ones with random weights, perturbed so that every value is distinctive (a zero
bias or a unit LayerNorm gamma would load "correctly" under a wrong name), and the inputs are random
ids: no data files are read.
"""

from __future__ import annotations

import ast
import dataclasses
import importlib
import importlib.util
import json
import os
import pkgutil
import re
import subprocess
import sys
from typing import Mapping

import keras
import numpy as np
import pytest
import tensorflow as tf

import albert_tf.tasks
import task_specs
from albert_tf.checkpoints.object_format import checkpoint_root, object_variable_paths
from albert_tf.checkpoints.tf1_format import export_tf1_checkpoint, load_tf1_checkpoint
from albert_tf.checkpoints.tf1_names import tf1_variable_map
from albert_tf.checkpoints.warm_start import load_checkpoint, resolve_checkpoint_source
from albert_tf.models.task_model import AlbertTaskModel
from albert_tf.serving.saved_model import IDS_ONLY
from albert_tf.tasks.pretraining.task import PretrainingTask
from albert_tf.tasks.question_answering.model import AlbertSquadModel
from albert_tf.tasks.question_answering.serving import min_positions
from albert_tf.training.length_buckets import LengthBuckets, example_lengths
from albert_tf.training.trainer import DTYPE_POLICIES
from tests.shared_setup import REPO_ROOT, subprocess_env, tiny_config
from tests.task_cases import SEQ, TASKS, TASKS_BY_NAME, Inputs, Outputs
from tests.task_harness import declared

ATOL = 1e-5

SERVED = [case for case in TASKS if case.model.export is not None]

FORMATS = ("reference", "albert_tf")  # LoadReport.kind of a TF1-named / an object-based checkpoint


def by_name(cases):
    return pytest.mark.parametrize("case", cases, ids=[case.name for case in cases])


# -- helpers --------------------------------------------------------------------------------------

def distinctive(model: AlbertTaskModel, seed: int) -> AlbertTaskModel:
    """Gives every weight values of its own: noise (stddev 0.02) on every variable, and unit
    variance for the head's matrices, so that outputs differ between examples well beyond float
    rounding (arg-max and top-k are then stable)."""
    rng = np.random.default_rng(seed)
    head_matrices = {id(v) for v in model.tf1_head_variables().values() if len(v.shape) == 2}
    for variable in model.weights:
        if id(variable) in head_matrices:
            values = rng.normal(size=variable.shape)
        else:
            values = variable.numpy() + rng.normal(scale=0.02, size=variable.shape)
        variable.assign(values.astype(np.float32))
    return model


def values(named: Mapping[str, keras.Variable]) -> dict[str, np.ndarray]:
    return {name: variable.numpy() for name, variable in named.items()}


def encoder_values(model: AlbertTaskModel) -> dict[str, np.ndarray]:
    return values(tf1_variable_map(model.albert))


# -- 0. the table covers every task ----------------------------------------------------------------

def test_every_task_is_in_the_table():
    """Every task model and every Task defined under albert_tf/tasks/ is an entry's: a new task
    cannot skip the contract."""
    models, tasks = set(), set()
    for package in pkgutil.iter_modules(albert_tf.tasks.__path__):
        for module_name in ("model", "task"):
            full_name = f"albert_tf.tasks.{package.name}.{module_name}"
            if importlib.util.find_spec(full_name) is None:
                continue
            module = importlib.import_module(full_name)
            for value in vars(module).values():
                if isinstance(value, type) and value.__module__ == module.__name__:
                    if issubclass(value, AlbertTaskModel):
                        models.add(value)
                    elif callable(getattr(value, "build_model", None)):
                        tasks.add(value)
    config = tiny_config()
    assert models and tasks
    assert {type(case.model.build(config)) for case in TASKS} == models
    assert {type(case.model.task(config)) for case in TASKS} == tasks


def test_every_script_is_in_the_harness():
    """Every training script at the repository's top is an entry's (so the harness runs it), and
    the entries' names are unique."""
    scripts = {name for name in os.listdir(REPO_ROOT)
               if name.startswith("run_") and name.endswith(".py")}
    assert {case.script for case in TASKS} == scripts
    assert len(TASKS_BY_NAME) == len(TASKS)


def imported_names(path: str) -> set[tuple[str, str]]:
    """(module, name) of every ``from module import name`` in the Python file ``path``."""
    with open(path, encoding="utf-8") as handle:
        tree = ast.parse(handle.read())
    return {(node.module, alias.name) for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom) and node.module for alias in node.names}


WALKTHROUGH = "## Adding a task: a walkthrough"
# The files of a task, as the walkthrough names them.
TASK_FILES = ("albert_tf/tasks/<task>/", "data_prep/<task>/", "task_specs/<task>.py",
              "run_<task>.py", "tests/task_cases.py")


def test_every_task_has_the_files_the_walkthrough_lists():
    """docs/layout.md's walkthrough ("a task is one folder in each package, one spec, one script,
    one entry of the task table") holds for every task: each folder of albert_tf/tasks/ has the
    data_prep/ folder and the task_specs/ module of its name and at least one entry whose Task is
    the folder's (a variant a script runs, as early exit or SQuAD v2.0, is one more entry); each
    entry's script imports the module of the entry's spec builder, which uses the entry's task
    folder; every task_specs/ module but common.py is an entry's spec; and the walkthrough names
    each of those files."""
    config = tiny_config()
    folders = {package.name for package in pkgutil.iter_modules(albert_tf.tasks.__path__)
               if package.ispkg}
    entries_of: dict[str, list[str]] = {}
    for case in TASKS:
        folder = type(case.model.task(config)).__module__.split(".")[2]
        entries_of.setdefault(folder, []).append(case.name)
        spec_module = case.spec.__module__
        assert spec_module in {module for module, _ in imported_names(
            os.path.join(REPO_ROOT, case.script))}, (case.name, case.script)
        spec_imports = imported_names(os.path.join(REPO_ROOT, *spec_module.split(".")) + ".py")
        assert any(module.startswith(f"albert_tf.tasks.{folder}.")
                   for module, _ in spec_imports), (case.name, spec_module, folder)
    assert set(entries_of) == folders
    for folder in folders:
        assert os.path.isdir(os.path.join(REPO_ROOT, "data_prep", folder)), folder
        assert os.path.isfile(os.path.join(REPO_ROOT, "task_specs", f"{folder}.py")), folder
    specs = {module.name for module in pkgutil.iter_modules(task_specs.__path__)} - {"common"}
    assert {case.spec.__module__.split(".")[1] for case in TASKS} == specs
    with open(os.path.join(REPO_ROOT, "docs", "layout.md"), encoding="utf-8") as handle:
        layout = handle.read()
    walkthrough = layout[layout.index(WALKTHROUGH):].split("\n## ")[0]
    assert [name for name in TASK_FILES if f"`{name}`" not in walkthrough] == []


# -- 1. the reference names round-trip -------------------------------------------------------------

@by_name(TASKS)
def test_reference_names_round_trip(case, tmp_path):
    """export_tf1_checkpoint writes exactly tf1_variable_map (encoder + head names, one per weight
    of the model) and load_tf1_checkpoint restores every value into a fresh model of the task."""
    config = tiny_config()
    model = distinctive(case.model.build(config), seed=1)
    names = tf1_variable_map(model)
    encoder, head = tf1_variable_map(model.albert), model.tf1_head_variables()
    assert head and not encoder.keys() & head.keys()
    assert names.keys() == encoder.keys() | head.keys()
    assert len({id(v) for v in names.values()}) == len(names) == len(model.weights)
    assert {id(v) for v in names.values()} == {id(v) for v in model.weights}

    prefix = export_tf1_checkpoint(model, str(tmp_path / "model.ckpt"))
    written = {name for name, _ in tf.train.list_variables(prefix)} - {"global_step"}
    assert written == names.keys()

    fresh = case.model.build(config)
    for name, value in values(tf1_variable_map(fresh)).items():
        assert not np.array_equal(value, names[name].numpy()), f"{name} equal before loading"
    report = load_tf1_checkpoint(fresh, prefix)
    assert (report.missing, report.unused) == ([], [])
    assert report.loaded == {name: name for name in names}
    restored = values(tf1_variable_map(fresh))
    for name, variable in names.items():
        np.testing.assert_array_equal(restored[name], variable.numpy(), err_msg=name)


# -- 2. warm start from pretraining ----------------------------------------------------------------

@dataclasses.dataclass
class Pretrained:
    """A pretraining model and its checkpoint in each format."""

    model: AlbertTaskModel
    prefixes: dict[str, str]  # {format: checkpoint prefix}
    head_entries: dict[str, list[str]]  # {format: the heads' names in that checkpoint, sorted}


@pytest.fixture(scope="module")
def pretrained(tmp_path_factory) -> Pretrained:
    root = tmp_path_factory.mktemp("pretrained")
    model = distinctive(PretrainingTask(tiny_config()).build_model(), seed=2)
    heads = {id(v) for v in model.tf1_head_variables().values()}
    object_root = checkpoint_root(model)
    object_heads = sorted("/".join(path) for path, variable in
                          object_variable_paths(object_root).items() if id(variable) in heads)
    assert len(object_heads) == len(heads)
    return Pretrained(
        model,
        {"reference": export_tf1_checkpoint(model, str(root / "tf1" / "model.ckpt")),
         "albert_tf": object_root.write(str(root / "albert_tf" / "model.ckpt"))},
        {"reference": sorted(model.tf1_head_variables()), "albert_tf": object_heads})


@pytest.mark.parametrize("checkpoint_format", FORMATS)
@by_name(TASKS)
def test_warm_start_from_pretraining_reports_exactly_the_head_as_new(case, checkpoint_format,
                                                                     pretrained):
    """load_checkpoint of a pretraining checkpoint: the encoder loads completely with the
    pretraining values; missing is exactly the task head, unused exactly the pretraining heads
    (for the pretraining model itself: nothing), and the head keeps the values it had."""
    model = case.model.build(tiny_config())
    head_before = values(model.tf1_head_variables())
    source = resolve_checkpoint_source(pretrained.prefixes[checkpoint_format])
    report = load_checkpoint(model, source)
    assert report.kind == checkpoint_format
    assert report.missing_encoder() == []
    if case.model.head_in_pretraining:
        assert (report.missing, report.unused) == ([], [])
        expected_head = values(pretrained.model.tf1_head_variables())
    else:
        assert sorted(report.missing) == sorted(head_before)
        assert sorted(report.missing_heads()) == sorted(head_before)
        assert sorted(report.unused) == pretrained.head_entries[checkpoint_format]
        expected_head = head_before
    assert sorted(report.loaded) == sorted(set(tf1_variable_map(model)) - set(report.missing))
    loaded_encoder = encoder_values(model)
    for name, value in encoder_values(pretrained.model).items():
        np.testing.assert_array_equal(loaded_encoder[name], value, err_msg=name)
    for name, value in values(model.tf1_head_variables()).items():
        np.testing.assert_array_equal(value, expected_head[name], err_msg=name)


# -- 3. ids_only serves in a TensorFlow-only process -----------------------------------------------

# argv: a JSON list of {"export", "inputs" (.npz), "outputs" (.npz)} (each export loaded once), then
# the path of a JSON file that receives the project modules the process imported (must be none).
TENSORFLOW_ONLY_SERVER = r"""
import json, sys
import numpy as np
import tensorflow as tf
loaded = {}
for call in json.loads(sys.argv[1]):
    if call["export"] not in loaded:
        loaded[call["export"]] = tf.saved_model.load(call["export"])
    signature = loaded[call["export"]].signatures["serving_default"]
    inputs = {name: tf.constant(value) for name, value in np.load(call["inputs"]).items()}
    outputs = signature(**inputs)
    np.savez(call["outputs"], **{name: value.numpy() for name, value in outputs.items()})
project = sorted(name for name in sys.modules
                 if name.split(".")[0] in ("albert_tf", "data_prep", "tests"))
with open(sys.argv[2], "w") as handle:
    json.dump(project, handle)
"""


@dataclasses.dataclass
class Served:
    """The exports of the served cases and what their ids_only SavedModels returned."""

    root: str  # one export directory per case, named after it
    expected: dict[str, Outputs]  # {case: the Keras model's outputs}
    actual: dict[str, Outputs]  # {case: serving_default's outputs in the child}
    # {case: {L: the Keras model's outputs on the request of length L padded to S}}
    padded: dict[str, dict[int, Outputs]]
    by_length: dict[str, dict[int, Outputs]]  # {case: {L: serving_default's outputs on it}}
    project_modules: list[str]  # what the child imported of albert_tf, data_prep, tests


def request_of_length(inputs: Inputs, length: int) -> Inputs:
    """``inputs`` cut or padded (``padded_to``) to ``length`` positions."""
    return padded_to({name: value[..., :length] for name, value in inputs.items()}, length)


@pytest.fixture(scope="module")
def served(tmp_path_factory) -> Served:
    """Every served case exported once, then called in one fresh process on its inputs cut or
    padded to the shortest length it takes (1; SQuAD 2.0: its beam), to SEQ and to S, the
    config's max_position_embeddings."""
    root = tmp_path_factory.mktemp("exports")
    scratch = tmp_path_factory.mktemp("calls")
    config = tiny_config()
    longest = config.max_position_embeddings
    expected, padded, calls = {}, {}, []
    for seed, case in enumerate(SERVED):
        keras.utils.set_random_seed(10 + seed)  # the same weights in every run: no top-k near-ties
        model = distinctive(case.model.build(config), seed=10 + seed)
        case.model.export(model, str(root / case.name))
        inputs = case.model.inputs(config)
        expected[case.name] = case.model.expected(model, inputs)
        shortest = min_positions(model) if isinstance(model, AlbertSquadModel) else 1
        padded[case.name] = {}
        for length in (shortest, SEQ, longest):
            request = request_of_length(inputs, length)
            padded[case.name][length] = case.model.expected(model, padded_to(request, longest))
            call = {"export": str(root / case.name / IDS_ONLY),
                    "inputs": str(scratch / f"{case.name}_{length}_in.npz"),
                    "outputs": str(scratch / f"{case.name}_{length}_out.npz")}
            np.savez(call["inputs"], **request)
            calls.append((case.name, length, call))
    modules_file = scratch / "modules.json"
    result = subprocess.run([sys.executable, "-c", TENSORFLOW_ONLY_SERVER,
                             json.dumps([call for _, _, call in calls]), str(modules_file)],
                            capture_output=True, text=True, env=subprocess_env(), timeout=600)
    assert result.returncode == 0, result.stderr[-4000:]
    by_length = {case.name: {} for case in SERVED}
    for name, length, call in calls:
        # allow_pickle: string outputs (tag names) come back as object arrays of bytes.
        by_length[name][length] = dict(np.load(call["outputs"], allow_pickle=True))
    actual = {name: outputs[SEQ] for name, outputs in by_length.items()}
    return Served(str(root), expected, actual, padded, by_length,
                  json.loads(modules_file.read_text()))


def assert_outputs_equal(got: np.ndarray, want: np.ndarray, name: str) -> None:
    """Integers (and tag names) equal, floats within 1e-5 (absolute, and relative to large
    values)."""
    if np.issubdtype(want.dtype, np.integer) or want.dtype == object:
        np.testing.assert_array_equal(got, want, err_msg=name)
    else:
        np.testing.assert_allclose(got, want, rtol=ATOL, atol=ATOL, err_msg=name)


@pytest.mark.subprocess  # a TensorFlow-only process
@by_name(SERVED)
def test_ids_only_export_serves_the_keras_outputs_with_tensorflow_alone(case, served):
    """Without a tokenizer only ids_only is written; in a process that never imported albert_tf
    its serving_default gives the Keras model's outputs: same names, dtypes and shapes, integers
    equal, floats within 1e-5 (absolute, and relative to large values)."""
    assert served.project_modules == []
    assert os.listdir(os.path.join(served.root, case.name)) == [IDS_ONLY]
    expected, actual = served.expected[case.name], served.actual[case.name]
    assert sorted(actual) == sorted(expected)
    for name, want in expected.items():
        got = actual[name]
        assert (got.dtype, got.shape) == (want.dtype, want.shape), name
        assert_outputs_equal(got, want, name)


@pytest.mark.subprocess  # the same TensorFlow-only process
@by_name(SERVED)
def test_ids_only_export_takes_any_length_and_answers_as_if_padded(case, served):
    """serving_default takes a request of the shortest length (1; SQuAD 2.0: its beam, 5), of SEQ
    and of S = max_position_embeddings (128), and on each gives the Keras model's outputs on the
    same ids padded to S, at the request's positions: a per-position output (NER's, SQuAD v1.1's
    logits) has L positions where the padded one has S; the others are equal whole."""
    longest = max(served.padded[case.name])
    for length, actual in served.by_length[case.name].items():
        padded = served.padded[case.name][length]
        assert sorted(actual) == sorted(padded), length
        for name, want in padded.items():
            got = actual[name]
            shape = tuple(length if size == longest else size for size in want.shape)
            assert (got.dtype, got.shape) == (want.dtype, shape), (name, length)
            at_positions = want[tuple(slice(size) for size in shape)]
            assert_outputs_equal(got, at_positions, f"{name} at length {length}")


# -- 5. the outputs of a batch cut to its length bucket are those of the padded batch ------------

CUT_FROM = 64  # the inputs padded to 64 positions, then cut back to their bucket (24)
SHARING = ("all", "none")
# Within 1e-5 in both precisions (on this project's CPU they are equal bit for bit: a real row's
# products do not depend on the padded rows and columns cut away, whose attention weights are 0).
DTYPES = ("float32", "bfloat16")


def padded_to(inputs: Inputs, length: int) -> Inputs:
    """``inputs`` padded after their last position to ``length``: ids, mask and segments with 0,
    SQuAD's ``p_mask`` with 1 (padding is never an answer)."""
    def pad(name, value):
        width = [(0, 0)] * (value.ndim - 1) + [(0, length - value.shape[-1])]
        return np.pad(value, width, constant_values=1 if name == "p_mask" else 0)
    return {name: pad(name, value) for name, value in inputs.items()}


@pytest.mark.parametrize("exact", [False, True], ids=["bucket", "exact"])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("sharing", SHARING)
@by_name([case for case in TASKS if case.model.inputs is not None])
def test_a_batch_cut_to_its_length_bucket_gives_the_outputs_of_the_padded_batch(case, sharing,
                                                                                dtype, exact):
    """The model on inputs padded to 64 positions and on the same inputs cut by ``LengthBuckets``
    (to the bucket 24, or exactly to the batch's longest example): every output equal on the cut
    batch's positions (floats within 1e-5, integers such as SQuAD v2's top-k indices equal),
    whatever the cross-layer sharing and the precision."""
    previous = keras.mixed_precision.global_policy()
    keras.mixed_precision.set_global_policy(DTYPE_POLICIES[dtype])
    try:
        config = tiny_config(cross_layer_sharing=sharing, max_position_embeddings=CUT_FROM)
        model = distinctive(case.model.build(config), seed=5)
        padded = padded_to(case.model.inputs(config), CUT_FROM)
        padded = {name: tf.constant(value) for name, value in padded.items()}
        cut = LengthBuckets.of(CUT_FROM, tuple(padded), exact=exact).trim(padded)
        longest = int(tf.reduce_max(example_lengths(padded)))
        assert cut["input_ids"].shape[-1] == (longest if exact else SEQ)
        full_outputs = tf.nest.flatten(model(padded, training=False))
        cut_outputs = tf.nest.flatten(model(cut, training=False))
    finally:
        keras.mixed_precision.set_global_policy(previous)
    for full, short in zip(full_outputs, cut_outputs):
        full, short = np.asarray(full), np.asarray(short)
        if full.shape != short.shape:  # a per-position output: compare the cut positions
            axis = next(i for i, (a, b) in enumerate(zip(full.shape, short.shape)) if a != b)
            full = np.take(full, np.arange(short.shape[axis]), axis=axis)
        if np.issubdtype(full.dtype, np.integer):
            np.testing.assert_array_equal(short, full)
        else:
            np.testing.assert_allclose(short.astype(np.float32), full.astype(np.float32),
                                       rtol=ATOL, atol=ATOL)


# -- 4. every task through its script: two steps, the sweep, predict, export; declared files only --

@by_name(TASKS)
def test_a_task_trains_two_steps_sweeps_predicts_and_exports_through_its_script(case, task_runs):
    run = task_runs.get(case.name)
    output_dir, stdout = run.output_dir, run.result.stdout
    results = (output_dir / "eval_results.txt").read_text()
    assert re.findall(r"^global_step = (\d+)$", results, re.MULTILINE) == ["1", "2"], results
    best = json.loads((output_dir / "best_results.json").read_text())
    assert best["best_step"] in (1, 2)
    assert (output_dir / "model.ckpt-best.index").exists()
    for product in case.products:
        assert (output_dir / product).stat().st_size > 0, product
    # The features are built in --cached_dir (a record and its sidecar per split read), none in
    # --output_dir.
    if run.cached_dir is not None:
        cached = sorted(os.listdir(run.cached_dir))
        assert len(cached) >= 4 and len(cached) % 2 == 0, cached
        assert all(name.endswith((".tf_record", ".tf_record.json")) for name in cached), cached
    assert not [name for name in os.listdir(output_dir) if ".tf_record" in name]
    if case.hub_export:
        assert (run.export_dir / "saved_model.pb").exists()
        assert f"to {run.export_dir}" in run.commands[1].result.stdout
    else:
        assert sorted(os.listdir(run.export_dir)) == ["ids_only", "with_text"]
        assert f"Exported the SavedModel of model.ckpt-best to {run.export_dir}" in stdout
    if case.tflite:
        assert run.tflite_file.stat().st_size > 0
        assert "Wrote the TFLite model of model.ckpt-best (none, S=" in stdout


@by_name(TASKS)
def test_a_task_run_writes_only_what_it_declared(case, task_runs):
    """Every file a command of the run created, changed or removed below the run's directory is
    one of its declared outputs (families and output directories included); its inputs are
    untouched."""
    run = task_runs.get(case.name)
    for command in run.commands:
        assert command.effects, command.command
        strays = {path: effect for path, effect in command.effects.items()
                  if not declared(command.declared, path, run.root)}
        assert strays == {}, (command.command, strays)
        inputs = {os.path.abspath(item.path) for item in command.declared.inputs}
        assert not inputs & set(command.effects), command.command
