"""TPU-ready evaluation inputs: with ``static_batches`` (what the scripts ask for under a
TPUStrategy) every batch of every task has the full static batch size, the last one filled with
padding records marked ``is_real_example`` 0, and the metrics and prediction files are those of
the dynamic path (a partial last batch), on the CPU.

Each task runs one model over an evaluation set whose size is not a multiple of the batch, once per
path: GLUE (classification and regression) and RACE on records written here with data_prep's
writers, SQuAD v1.1 and v2.0 on the shared samples' windows (the padding windows must stay out of
the post-processing), and pretraining evaluation, which drops its remainder as the reference does.
"""

from __future__ import annotations

import json
import os
import shutil

import numpy as np
import pytest
import tensorflow as tf

from albert_tf.checkpoints.tf1_format import export_tf1_checkpoint
from albert_tf.tasks.classification.records import parse_glue_example
from albert_tf.cli import driver, task_spec
from albert_tf.tasks.classification.task import ClassifierTask, write_predictions
from albert_tf.tasks.multiple_choice.records import NUM_CHOICES, parse_race_record
from albert_tf.tasks.multiple_choice.task import (MultipleChoiceContext, MultipleChoiceTask,
                                                  write_choice_predictions)
from albert_tf.tasks.pretraining.task import pretraining_dataset_fn
from albert_tf.tasks.question_answering.model import AlbertSquadModel
from albert_tf.tasks.question_answering.records import parse_squad_record
from albert_tf.tasks.question_answering.task import SquadEvalContext, SquadSettings, SquadTask
from albert_tf.training import input_pipeline as pipeline
from albert_tf.training.input_pipeline import needs_static_batches, record_eval_dataset
from albert_tf.training.optimization import create_optimizer
from albert_tf.training.per_example import real_examples
from albert_tf.training.task import Task
from albert_tf.training.trainer import RunConfig, Trainer
from data_prep.classification.features import build_features, serialize_glue_features
from data_prep.classification.glue_tasks import glue_task
from data_prep.multiple_choice.features import RaceFeatures, choice_row, serialize_race_features
from data_prep.question_answering.feature_file import write_squad_feature_file
from data_prep.question_answering.features import SquadFeatureSettings
from tests.command_runner import run_command
from tests.shared_setup import (EN8K_MODEL, REFERENCE_MAX_PREDICTIONS, REFERENCE_SEQ_LENGTH,
                                SHARED_DATA_DIR, tiny_config)

BATCH = 4
SEQ = 16
CLS_ID, SEP_ID = 2, 3


# -- helpers --------------------------------------------------------------------------------------

def write_records(path, records) -> str:
    with tf.io.TFRecordWriter(str(path)) as writer:
        for record in records:
            writer.write(record)
    return str(path)


def assert_static(dataset: tf.data.Dataset, batch_size: int) -> None:
    """Every tensor of every element has the leading dimension ``batch_size`` in the spec."""
    for name, spec in dataset.element_spec.items():
        assert spec.shape[0] == batch_size, (name, spec)


def trainer_of(task: Task, output_dir) -> Trainer:
    """A Trainer on the default strategy with the task's model at a fixed random initialisation."""
    return Trainer(tf.distribute.get_strategy(), task,
                   lambda: create_optimizer("adamw", 1e-4, 10, 0),
                   RunConfig(output_dir=str(output_dir), seed=0), log=lambda message: None)


def predict_both_ways(trainer: Trainer, path: str, parse, batch_size: int):
    """(outputs of the dynamic path, outputs of the static path), the static dataset checked for
    full batches and the static outputs' real rows checked equal to the dynamic outputs. The float
    outputs of the static path's padding rows are then replaced by noise: whatever the padding
    computes must not reach a metric or a file."""
    static = record_eval_dataset(path, parse, batch_size, static_batches=True)
    assert_static(static, batch_size)
    dynamic_outputs = trainer.predict(record_eval_dataset(path, parse, batch_size))
    static_outputs = trainer.predict(static)
    count = len(dynamic_outputs["is_real_example"])
    assert count % batch_size  # the dynamic path ends with a partial batch
    assert len(static_outputs["is_real_example"]) == -(-count // batch_size) * batch_size
    for name, values in dynamic_outputs.items():
        np.testing.assert_allclose(real_examples(static_outputs, name)[0], values, rtol=1e-6,
                                   atol=1e-6, err_msg=name)
    padding = static_outputs["is_real_example"] == 0
    rng = np.random.default_rng(1)
    for values in static_outputs.values():
        if values.dtype.kind == "f":
            values[padding] = rng.normal(scale=100.0, size=values[padding].shape)
    return dynamic_outputs, static_outputs


def same_values(actual, expected, where: str = "") -> None:
    """Equal structures, strings and integers; floats within float32 rounding (an example computed
    in a batch of another size may differ in its last bits)."""
    assert type(actual) is type(expected), where
    if isinstance(expected, dict):
        assert list(actual) == list(expected), where
        for key in expected:
            same_values(actual[key], expected[key], f"{where}/{key}")
    elif isinstance(expected, list):
        assert len(actual) == len(expected), where
        for index, (value, reference) in enumerate(zip(actual, expected)):
            same_values(value, reference, f"{where}[{index}]")
    elif isinstance(expected, float):
        assert actual == pytest.approx(expected, rel=1e-5, abs=1e-6), where
    else:
        assert actual == expected, where


def file_values(path):
    """A written file as values: JSON parsed; TSV rows of tab-separated fields, text files rows of
    ``key = value`` fields (numbers as floats)."""
    text = path.read_text()
    if path.suffix == ".json":
        return json.loads(text)

    def value(field: str):
        try:
            return float(field)
        except ValueError:
            return field

    separator = "\t" if path.suffix == ".tsv" else " = "
    return [[value(field) for field in line.split(separator)] for line in text.splitlines()]


def same_files(directory, reference_directory) -> None:
    names = sorted(os.listdir(reference_directory))
    assert sorted(os.listdir(directory)) == names
    for name in names:
        same_values(file_values(directory / name), file_values(reference_directory / name), name)


# -- the pipeline ---------------------------------------------------------------------------------

def numbered_records(path, count: int, is_real=None) -> str:
    """``count`` records holding ``x`` = 0, 1, ... (and ``is_real_example`` when given)."""
    records = []
    for index in range(count):
        feature = {"x": tf.train.Feature(int64_list=tf.train.Int64List(value=[index]))}
        if is_real is not None:
            feature["is_real_example"] = tf.train.Feature(
                int64_list=tf.train.Int64List(value=[is_real[index]]))
        records.append(tf.train.Example(
            features=tf.train.Features(feature=feature)).SerializeToString())
    return write_records(path, records)


def parse_numbered(with_flag: bool):
    spec = {"x": tf.io.FixedLenFeature([], tf.int64)}
    if with_flag:
        spec["is_real_example"] = tf.io.FixedLenFeature([], tf.int64)
    return lambda records: tf.io.parse_example(records, spec)


def batches(dataset) -> list[tuple[list[int], list[int]]]:
    return [(batch["x"].numpy().tolist(), batch["is_real_example"].numpy().tolist())
            for batch in dataset]


@pytest.mark.parametrize("count, batch_size, expected", [
    (5, 4, [([0, 1, 2, 3], [1, 1, 1, 1]), ([4, 0, 0, 0], [1, 0, 0, 0])]),
    (8, 4, [([0, 1, 2, 3], [1, 1, 1, 1]), ([4, 5, 6, 7], [1, 1, 1, 1])]),  # no padding batch
    (3, 8, [([0, 1, 2, 0, 0, 0, 0, 0], [1, 1, 1, 0, 0, 0, 0, 0])]),  # fewer records than a batch
    (1, 1, [([0], [1])]),
])
def test_static_batches_are_full_and_mark_their_padding(tmp_path, count, batch_size, expected):
    path = numbered_records(tmp_path / "records.tfrecord", count)
    static = record_eval_dataset(path, parse_numbered(False), batch_size, static_batches=True)
    assert_static(static, batch_size)
    assert static.element_spec["is_real_example"].dtype == tf.int32
    assert batches(static) == expected
    # The dynamic path: the same records, a partial last batch, every record real.
    dynamic = record_eval_dataset(path, parse_numbered(False), batch_size)
    assert dynamic.element_spec["x"].shape[0] is None
    assert batches(dynamic) == [(list(range(start, min(start + batch_size, count))),
                                 [1] * min(batch_size, count - start))
                                for start in range(0, count, batch_size)]


def test_a_records_own_padding_flag_is_kept(tmp_path):
    """GLUE files written with the reference's padding records (is_real_example 0) stay padding."""
    path = numbered_records(tmp_path / "records.tfrecord", 5, is_real=[1, 1, 1, 0, 0])
    for static_batches in (False, True):
        dataset = record_eval_dataset(path, parse_numbered(True), 4, static_batches)
        assert batches(dataset) == [([0, 1, 2, 3], [1, 1, 1, 0]),
                                    ([4, 0, 0, 0] if static_batches else [4],
                                     [0, 0, 0, 0] if static_batches else [0])]


def test_static_batches_are_asked_for_on_tpu_only():
    assert not needs_static_batches(tf.distribute.get_strategy())
    assert not needs_static_batches(tf.distribute.OneDeviceStrategy("/cpu:0"))
    # A TPUStrategy cannot be built without a TPU; the switch looks at its type only.
    assert needs_static_batches(tf.distribute.TPUStrategy.__new__(tf.distribute.TPUStrategy))


# -- GLUE -----------------------------------------------------------------------------------------

def glue_records(path, count: int, is_regression: bool, seed: int = 0) -> str:
    rng = np.random.default_rng(seed)
    features = []
    for _ in range(count):
        ids_a = rng.integers(5, 8000, rng.integers(2, 7)).tolist()
        ids_b = rng.integers(5, 8000, rng.integers(1, 6)).tolist()
        label = float(rng.uniform(0, 5)) if is_regression else int(rng.integers(0, 2))
        features.append(build_features(ids_a, ids_b, SEQ, CLS_ID, SEP_ID, label))
    return write_records(path, [serialize_glue_features(feature, is_regression)
                                for feature in features])


@pytest.mark.parametrize("task_name", ["mrpc", "sts-b"])
def test_glue_metrics_and_prediction_files_are_unchanged(tmp_path, task_name):
    glue = glue_task(task_name)
    path = glue_records(tmp_path / "dev.tfrecord", 7, glue.is_regression)
    task = ClassifierTask(tiny_config(), glue.metric_kinds, glue.num_labels, glue.is_regression)
    parse = lambda records: parse_glue_example(records, SEQ, glue.is_regression)  # noqa: E731
    dynamic, static = predict_both_ways(trainer_of(task, tmp_path / "run"), path, parse, BATCH)
    assert task.reduce(static) == pytest.approx(task.reduce(dynamic), rel=1e-6, abs=1e-9)
    guids = [f"dev-{index}" for index in range(7)]
    for name, outputs in (("dynamic", dynamic), ("static", static)):
        (tmp_path / name).mkdir()
        write_predictions(str(tmp_path / name / "test_results.tsv"),
                          str(tmp_path / name / "submit_results.tsv"), guids, outputs,
                          glue.labels)
    same_files(tmp_path / "static", tmp_path / "dynamic")


# -- RACE -----------------------------------------------------------------------------------------

def race_records(path, count: int, seed: int = 0) -> str:
    rng = np.random.default_rng(seed)
    records = []
    for _ in range(count):
        rows = [choice_row(rng.integers(5, 8000, 9).tolist(), rng.integers(5, 8000, 4).tolist(),
                           SEQ, 6, CLS_ID, SEP_ID) for _ in range(NUM_CHOICES)]
        ids, mask, segments = (list(column) for column in zip(*rows))
        records.append(serialize_race_features(RaceFeatures(ids, mask, segments,
                                                            int(rng.integers(0, 4)))))
    return write_records(path, records)


def test_race_metrics_and_predictions_are_unchanged(tmp_path):
    path = race_records(tmp_path / "dev.tfrecord", 7)
    context = MultipleChoiceContext(levels=["middle", "high"] * 3 + ["middle"],
                                    example_ids=[f"q{index}" for index in range(7)])
    task = MultipleChoiceTask(tiny_config())
    parse = lambda records: parse_race_record(records, SEQ)  # noqa: E731
    dynamic, static = predict_both_ways(trainer_of(task, tmp_path / "run"), path, parse, BATCH)
    metrics = task.reduce(dynamic, context)
    assert {"middle_accuracy", "high_accuracy"} <= set(metrics)
    assert task.reduce(static, context) == pytest.approx(metrics, rel=1e-6)
    for name, outputs in (("dynamic", dynamic), ("static", static)):
        (tmp_path / name).mkdir()
        write_choice_predictions(str(tmp_path / name / "predictions.json"), context.example_ids,
                                 outputs)
    same_files(tmp_path / "static", tmp_path / "dynamic")


# -- SQuAD ----------------------------------------------------------------------------------------

@pytest.mark.requires_shared_data
@pytest.mark.parametrize("version_2", [False, True], ids=["v1.1", "v2.0"])
def test_squad_padding_windows_stay_out_of_the_predictions(tmp_path, en8k, version_2):
    """The sample's windows (S 64, stride 16: v1.1 101, v2.0 179, neither a multiple of 8): the
    same scores and predictions.json, nbest_predictions.json (and null_odds.json) either way."""
    source = os.path.join(SHARED_DATA_DIR, "squad",
                          "dev-v2.0-sample.json" if version_2 else "dev-v1.1-sample.json")
    feature_file = write_squad_feature_file(source, str(tmp_path / "eval.tfrecord"), en8k,
                                            SquadFeatureSettings(64, 16, 16))
    task = SquadTask(tiny_config(), SquadSettings(version_2=version_2))
    parse = lambda records: parse_squad_record(records, 64, is_training=False)  # noqa: E731
    dynamic, static = predict_both_ways(trainer_of(task, tmp_path / "run"), feature_file.path,
                                        parse, 8)
    assert len(dynamic["unique_ids"]) == len(feature_file.metadata["features"])
    results = {}
    for name, outputs in (("dynamic", dynamic), ("static", static)):
        (tmp_path / name).mkdir()
        context = SquadEvalContext.from_metadata(feature_file.metadata, str(tmp_path / name))
        results[name] = task.reduce(outputs, context)
    assert results["static"] == pytest.approx(results["dynamic"], rel=1e-6)
    assert set(os.listdir(tmp_path / "static")) == ({"predictions.json", "nbest_predictions.json"}
                                                    | ({"null_odds.json"} if version_2 else set()))
    same_files(tmp_path / "static", tmp_path / "dynamic")


# -- pretraining ----------------------------------------------------------------------------------

def test_pretraining_evaluation_batches_are_full(pretraining_records):
    """Pretraining evaluation drops its remainder (the reference's input): no partial batch."""
    dataset_fn = pretraining_dataset_fn([pretraining_records], REFERENCE_SEQ_LENGTH,
                                        REFERENCE_MAX_PREDICTIONS, is_training=False)
    count = sum(1 for _ in tf.data.TFRecordDataset(pretraining_records))
    batch_size = 7 if count % 7 else 6
    dataset = dataset_fn(batch_size, 0)
    assert_static(dataset, batch_size)
    assert sum(len(batch["input_ids"]) for batch in dataset) == count // batch_size * batch_size


# -- the scripts ----------------------------------------------------------------------------------

def run_script(script: str, path_kind: str, *args: str) -> set[str]:
    """Runs ``script`` (in this process) on the ``path_kind`` ("static" / "dynamic") input path,
    the TPU's forced or not; returns the batch dimensions of every evaluation dataset it built."""
    build, dimensions = pipeline.record_eval_dataset, set()

    def record_eval_dataset(*args, **kwargs):
        dataset = build(*args, **kwargs)
        dimensions.add(str(sorted({str(spec.shape[0])
                                   for spec in dataset.element_spec.values()})))
        return dataset

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(task_spec, "record_eval_dataset", record_eval_dataset)
        if path_kind == "static":
            patch.setattr(task_spec, "needs_static_batches", lambda strategy: True)
            patch.setattr(driver, "needs_static_batches", lambda strategy: True)
        result = run_command(script, *args)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-4000:]
    assert dimensions, result.stdout[-2000:]
    return dimensions


def saved_checkpoint(task: Task, directory) -> str:
    """``model.ckpt-1`` of the task's model at a fixed random initialisation, in ``directory``."""
    trainer_of(task, directory).manager.save(checkpoint_number=1)
    return str(directory)


def tiny_config_file(tmp_path) -> str:
    path = tmp_path / "config.json"
    path.write_text(tiny_config().to_json_string())
    return str(path)


def squad_run(tmp_path) -> tuple[str, list[str], str | None, list[str]]:
    """(script, flags but --output_dir, a directory of checkpoints to start from or None, the files
    to compare): v2.0 predict-only from a TF1 checkpoint, 179 windows in batches of 8."""
    init = export_tf1_checkpoint(AlbertSquadModel(tiny_config(), version_2=True),
                                 str(tmp_path / "init" / "model.ckpt"))
    source = os.path.join(SHARED_DATA_DIR, "squad", "dev-v2.0-sample.json")
    flags = [f"--albert_config_file={tiny_config_file(tmp_path)}",
             f"--spm_model_file={EN8K_MODEL}", f"--init_checkpoint={init}", "--do_lower_case",
             f"--predict_file={source}", "--version_2_with_negative", "--do_predict",
             "--max_seq_length=64", "--doc_stride=16", "--max_query_length=16",
             "--predict_batch_size=8"]
    return "run_squad.py", flags, None, ["eval_results.txt", "predictions.json",
                                         "nbest_predictions.json", "null_odds.json"]


def race_run(tmp_path) -> tuple[str, list[str], str | None, list[str]]:
    """The sweep over one checkpoint on dev, then the test split: 31 questions in batches of 8."""
    race_dir = tmp_path / "race"
    (race_dir / "RACE").mkdir(parents=True)
    for split in ("dev", "test"):  # the shared sample's 31 questions
        os.symlink(os.path.join(SHARED_DATA_DIR, "race", "RACE", "dev"),
                   race_dir / "RACE" / split)
    checkpoints = saved_checkpoint(MultipleChoiceTask(tiny_config()), tmp_path / "checkpoints")
    flags = [f"--data_dir={race_dir}", f"--albert_config_file={tiny_config_file(tmp_path)}",
             f"--spm_model_file={EN8K_MODEL}", "--do_lower_case", "--max_seq_length=64",
             "--max_qa_length=16", "--nodo_train", "--do_eval", "--do_predict", "--train_step=1",
             "--eval_batch_size=8", "--predict_batch_size=8"]
    return "run_race.py", flags, checkpoints, ["eval_results.txt", "predict_results.txt",
                                               "test_predictions.json"]


def glue_run(tmp_path) -> tuple[str, list[str], str | None, list[str]]:
    """RTE: the sweep over one checkpoint and the test predictions, 30 rows in batches of 8."""
    data_dir = tmp_path / "glue" / "RTE"
    data_dir.mkdir(parents=True)
    for split in ("dev", "test"):  # the header and the first 30 rows of the shared files
        with open(os.path.join(SHARED_DATA_DIR, "glue", "RTE", f"{split}.tsv"),
                  encoding="utf-8") as handle:
            (data_dir / f"{split}.tsv").write_text("".join(handle.readlines()[:31]),
                                                   encoding="utf-8")
    rte = glue_task("rte")
    checkpoints = saved_checkpoint(ClassifierTask(tiny_config(), rte.metric_kinds, rte.num_labels),
                                   tmp_path / "checkpoints")
    flags = ["--task_name=rte", f"--data_dir={data_dir.parent}",
             f"--albert_config_file={tiny_config_file(tmp_path)}",
             f"--spm_model_file={EN8K_MODEL}", "--max_seq_length=64", "--nodo_train",
             "--do_eval", "--do_predict", "--train_step=1", "--eval_batch_size=8",
             "--predict_batch_size=8"]
    return "run_classifier.py", flags, checkpoints, ["eval_results.txt", "test_results.tsv",
                                                     "submit_results.tsv"]


@pytest.mark.slow
@pytest.mark.requires_shared_data
@pytest.mark.parametrize("setup", [squad_run, race_run, glue_run],
                         ids=["run_squad", "run_race", "run_classifier"])
def test_each_script_writes_the_same_files_on_the_static_path(tmp_path, setup):
    """The script on the TPU input path (forced on the CPU) and on today's: full batches of 8
    there, a partial last batch here, the same metrics and prediction files; the feature files it
    caches are the same bytes."""
    script, flags, checkpoints, names = setup(tmp_path)
    written = {}
    for path_kind, expected_dimensions in (("dynamic", {"['None']"}), ("static", {"['8']"})):
        output_dir = tmp_path / path_kind
        if checkpoints:
            shutil.copytree(checkpoints, output_dir)
        assert run_script(script, path_kind, *flags,
                          f"--output_dir={output_dir}") == expected_dimensions
        written[path_kind] = {name: file_values(output_dir / name) for name in names}
        written[path_kind]["cache"] = {
            name: (output_dir / name).read_bytes() for name in sorted(os.listdir(output_dir))
            if ".tf_record" in name or ".tfrecord" in name}  # records and sidecars
    assert written["static"]["cache"]
    same_values(written["static"], written["dynamic"])
