"""The error boundary of every script (albert_tf/cli/error_boundary.py) and the checks before work.

A user's mistake ends in one line, ``<program>: error: <culprit>``, with exit status 1 and no
traceback, before any work: empty, corrupt or mismatched TFRecords, a config whose vocabulary is
smaller than the data's, output paths that are files. Also: the sweep's wait honours
--max_eval_wait_secs, TensorFlow's INFO lines stay out of the output, and TensorBoard (a
requirement) reads the scalars the Trainer writes.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf
from absl import app

from albert_tf.cli import error_boundary
from albert_tf.evaluation.checkpoint_sweep import SweepPolicy, sweep_checkpoints
from albert_tf.files.records import RecordFileError
from albert_tf.models.config import AlbertConfig
from albert_tf.tasks.pretraining.records import (PretrainingDataError, check_pretraining_files,
                                                 parse_pretraining_example)
from albert_tf.tasks.pretraining.task import pretraining_dataset_fn
from albert_tf.training.input_pipeline import record_eval_dataset, record_train_dataset_fn
from albert_tf.training.trainer import NonFiniteLossError
from tests import spm_fixtures
from tests.shared_setup import (REFERENCE_MAX_PREDICTIONS, REFERENCE_SEQ_LENGTH, REPO_ROOT,
                                subprocess_env, tiny_config)

S, M = REFERENCE_SEQ_LENGTH, REFERENCE_MAX_PREDICTIONS


def run_guarded(main, monkeypatch, capsys, checks=()):
    """Runs ``main`` behind the boundary as the program ``run_thing.py``: (exit code, stderr)."""
    monkeypatch.setattr(sys, "argv", ["run_thing.py"])
    monkeypatch.delenv(error_boundary.TRACEBACK_VARIABLE, raising=False)
    with pytest.raises(SystemExit) as exit_info:
        error_boundary.guarded(main, checks)(["run_thing.py"])
    return exit_info.value.code, capsys.readouterr().err


def raising(error):
    def main(argv):
        raise error
    return main


def corrupt_copy(source, target, flip_at=None, keep=None):
    """A copy of ``source`` with one byte flipped at ``flip_at`` or cut to ``keep`` bytes."""
    data = bytearray(open(source, "rb").read())
    if flip_at is not None:
        data[flip_at] ^= 0xFF
    target.write_bytes(bytes(data[:keep]))
    return str(target)


def first_record_ids(path):
    record = next(iter(tf.data.TFRecordDataset(path)))
    return parse_pretraining_example(record, S, M)


# -- the boundary ---------------------------------------------------------------------------------

@pytest.mark.parametrize("error", [
    ValueError("config.json: 'hidden_size' must be divisible"),
    FileNotFoundError("input pattern 'x*' matches no file"),
    app.UsageError("Nothing to do: set --do_train"),
    NonFiniteLossError("Non-finite loss (nan) in 2 of the steps 1..2"),
])
def test_user_errors_end_in_one_line_with_status_1(error, monkeypatch, capsys):
    code, err = run_guarded(raising(error), monkeypatch, capsys)
    assert code == 1
    assert err == f"run_thing: error: {error}\n"


def test_checks_run_before_main_and_stop_it(monkeypatch, capsys, tmp_path):
    broken = tmp_path / "albert_config.json"
    broken.write_text('{"vocab_size": 100,')
    calls = []
    code, err = run_guarded(lambda argv: calls.append("main"), monkeypatch, capsys,
                            checks=[lambda: AlbertConfig.from_json_file(str(broken))])
    assert code == 1 and calls == []
    assert err.startswith(f"run_thing: error: ALBERT config file {broken} is not valid JSON")
    assert err.count("\n") == 1


def test_bugs_and_the_traceback_variable_keep_the_traceback(monkeypatch, capsys):
    monkeypatch.setattr(sys, "argv", ["run_thing.py"])
    with pytest.raises(TypeError):  # not a user error: a bug keeps its traceback
        error_boundary.guarded(raising(TypeError("unsupported operand")))(["run_thing.py"])
    monkeypatch.setenv(error_boundary.TRACEBACK_VARIABLE, "1")
    with pytest.raises(ValueError, match="bad value"):
        error_boundary.guarded(raising(ValueError("bad value")))(["run_thing.py"])
    assert capsys.readouterr().err == ""


def test_graph_errors_are_cut_to_their_cause(monkeypatch, capsys, pretraining_records):
    @tf.function
    def embed(ids):
        return tf.gather(tf.zeros([10, 2]), ids)

    with pytest.raises(tf.errors.InvalidArgumentError) as gather_error:
        embed(tf.constant([3, 12]))
    assert "Detected at node" in gather_error.value.message  # what the boundary cuts away
    code, err = run_guarded(raising(gather_error.value), monkeypatch, capsys)
    assert code == 1 and err.count("\n") == 1
    assert err.startswith("run_thing: error: indices[1] = 12 is not in [0, 10)")
    assert "[[" not in err and "Detected" not in err and "function_node" not in err

    # A parse error inside a tf.data map names the feature and both lengths.
    dataset = pretraining_dataset_fn([pretraining_records], S // 2, M, is_training=False)(8, 0)
    with pytest.raises(tf.errors.InvalidArgumentError) as parse_error:
        next(iter(dataset))
    message = error_boundary.user_error_message(parse_error.value)
    assert f"Values size: {S} but output shape: [{S // 2}]" in message
    assert "user-defined function" not in message and "\n" not in message


def test_out_of_memory_names_the_settings_that_help(monkeypatch, capsys):
    error = tf.errors.ResourceExhaustedError(
        None, None, "{{function_node __wrapped__MatMul_device_/job:localhost/replica:0/task:0/"
        "device:GPU:0}} OOM when allocating tensor with shape[4096,512,4096] [Op:MatMul] name: ")
    code, err = run_guarded(raising(error), monkeypatch, capsys)
    assert code == 1
    assert err.startswith("run_thing: error: OOM when allocating tensor with shape[4096,512,4096] "
                          "(out of memory: lower the batch size")
    assert "--gradient_accumulation_steps" in err and "function_node" not in err


def test_a_corrupt_record_met_during_a_run_names_its_file(tmp_path, pretraining_records):
    size = os.path.getsize(pretraining_records)
    good = shutil.copy(pretraining_records, tmp_path / "part-0.tfrecord")
    flipped = corrupt_copy(pretraining_records, tmp_path / "part-1.tfrecord", flip_at=size // 2)
    truncated = corrupt_copy(pretraining_records, tmp_path / "part-2.tfrecord", keep=size // 2)
    for bad in (flipped, truncated):
        # The first records are fine (the checks before work pass); the damage is met mid-run.
        check_pretraining_files([bad], S, M)
        dataset = pretraining_dataset_fn([str(good), bad], S, M, is_training=False)(64, 0)
        with pytest.raises(tf.errors.DataLossError) as error:
            for _ in dataset:
                pass
        assert bad not in error.value.message  # TensorFlow names no file
        message = error_boundary.user_error_message(error.value)
        assert message.startswith(f"{bad}: ") and "truncated or corrupt" in message
        assert re.search(r"(corrupted|truncated) record at \d+", message)


# -- checks of record files before work -----------------------------------------------------------

def test_a_dataset_without_records_is_an_error_naming_the_file(tmp_path):
    empty = tmp_path / "empty.tfrecord"
    empty.write_bytes(b"")
    # Training repeats the file list: without a record it would search it forever.
    train = pretraining_dataset_fn([str(empty)], S, M, is_training=True)
    with pytest.raises(RecordFileError, match=f"{empty}: no record"):
        train(4, 0)
    with pytest.raises(RecordFileError, match=f"{empty}: no record"):
        pretraining_dataset_fn([str(empty)], S, M, is_training=False)(4, 0)
    with pytest.raises(RecordFileError, match=f"{empty}: no record"):
        record_train_dataset_fn(str(empty), parse=lambda records: {"x": records})
    with pytest.raises(RecordFileError, match=f"{empty}: no record"):
        record_eval_dataset(str(empty), parse=lambda records: {"x": records}, batch_size=8)


def test_evaluation_that_drops_the_remainder_needs_one_batch(tmp_path, pretraining_records):
    three = tmp_path / "three.tfrecord"
    with tf.io.TFRecordWriter(str(three)) as writer:
        for record in tf.data.TFRecordDataset(pretraining_records).take(3):
            writer.write(record.numpy())
    with pytest.raises(RecordFileError, match=r"3 record\(s\), fewer than one batch of 8"):
        pretraining_dataset_fn([str(three)], S, M, is_training=False)(8, 0)
    # A fine-tuning evaluation pads its last batch instead (static_batches, on TPU).
    for static_batches, size in ((False, 3), (True, 8)):
        batches = list(record_eval_dataset(str(three), lambda r: {"x": r}, 8, static_batches))
        assert [len(batch["x"]) for batch in batches] == [size]


def test_pretraining_files_are_checked_against_the_flags_and_the_config(pretraining_records):
    check_pretraining_files([pretraining_records], S, M, vocab_size=8000)  # the right settings
    with pytest.raises(PretrainingDataError) as error:
        check_pretraining_files([pretraining_records], 512, M)
    assert str(error.value).startswith(f"--max_seq_length=512, but 'input_ids' in "
                                       f"{pretraining_records}, record 1 has {S} values")
    assert f"set --max_seq_length={S}" in str(error.value)
    with pytest.raises(PretrainingDataError, match=f"--max_predictions_per_seq=30, but "
                                                   f"'masked_lm_positions' .* has {M} values"):
        check_pretraining_files([pretraining_records], S, 30)

    largest = int(tf.reduce_max(first_record_ids(pretraining_records)["input_ids"]))
    with pytest.raises(PretrainingDataError) as error:
        check_pretraining_files([pretraining_records], S, M, vocab_size=largest,
                                config_file="small_config.json")
    assert (f"{pretraining_records}, record 1: 'input_ids' holds token id {largest}, but "
            f"vocab_size={largest} in small_config.json") in str(error.value)


def test_files_that_are_not_pretraining_records_are_named(tmp_path, pretraining_records):
    text = tmp_path / "corpus.txt"
    text.write_text("One sentence per line.\nNot a TFRecord file.\n" * 20)
    with pytest.raises(RecordFileError, match=f"{text} cannot be read as a TFRecord file: "
                                              "corrupted record at 0"):
        check_pretraining_files([str(text)], S, M)
    other = tmp_path / "glue.tf_record"
    with tf.io.TFRecordWriter(str(other)) as writer:
        example = tf.train.Example(features=tf.train.Features(feature={
            name: tf.train.Feature(int64_list=tf.train.Int64List(value=[1] * S))
            for name in ("input_ids", "input_mask", "segment_ids")}))
        writer.write(example.SerializeToString())
    with pytest.raises(PretrainingDataError, match=f"{other}, record 1: no feature "
                                                   "'token_boundary', so not a pretraining record"):
        check_pretraining_files([pretraining_records, str(other)], S, M)
    empty = tmp_path / "empty.tfrecord"
    empty.write_bytes(b"")
    with pytest.raises(PretrainingDataError, match=f"{empty}: no record"):
        check_pretraining_files([pretraining_records, str(empty)], S, M)
    with pytest.raises(RecordFileError, match=f"{tmp_path}/gone.tfrecord does not exist"):
        check_pretraining_files([str(tmp_path / "gone.tfrecord")], S, M)


# -- the sweep's wait -----------------------------------------------------------------------------

def test_the_sweep_waits_no_longer_than_max_wait_seconds(tmp_path):
    for suffix in (".index", ".data-00000-of-00001"):
        (tmp_path / f"model.ckpt-10{suffix}").write_text("step 10")
    sleeps = []
    best_step, _ = sweep_checkpoints(
        str(tmp_path), lambda prefix: {"acc": 0.5}, "acc", log=lambda message: None,
        policy=SweepPolicy(until_step=100, poll_seconds=60, max_wait_seconds=5),
        sleep=sleeps.append)
    assert best_step == 10 and sum(sleeps) == 5 and sleeps == [5]


# -- the scripts, as a user runs them -------------------------------------------------------------

def run_command(*args, timeout=180):
    return subprocess.run([sys.executable, *args], capture_output=True, text=True,
                          env=subprocess_env(), cwd=REPO_ROOT, timeout=timeout)


def assert_one_line_error(result, program, *culprits):
    """Exit status 1, no traceback, the last line ``<program>: error: ...`` naming each culprit."""
    assert result.returncode == 1, result.stderr[-3000:]
    assert "Traceback" not in result.stderr, result.stderr[-3000:]
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith(f"{program}: error: "), last
    for culprit in culprits:
        assert culprit in last, last


@pytest.fixture
def config_file(tmp_path):
    path = tmp_path / "albert_config.json"
    path.write_text(tiny_config().to_json_string())
    return str(path)


def test_run_pretraining_on_an_empty_tfrecord_stops_at_once(tmp_path, config_file):
    empty = tmp_path / "empty.tfrecord"
    empty.write_bytes(b"")
    output_dir = tmp_path / "out"
    result = run_command("run_pretraining.py", f"--albert_config_file={config_file}",
                         f"--input_file={empty}", f"--output_dir={output_dir}",
                         f"--max_seq_length={S}", "--train_batch_size=2", "--num_train_steps=2")
    assert_one_line_error(result, "run_pretraining", f"{empty}: no record")
    assert not [name for name in os.listdir(output_dir) if name.startswith("model.ckpt")]


def test_run_pretraining_names_the_flag_the_file_and_the_length(tmp_path, config_file,
                                                                pretraining_records):
    result = run_command("run_pretraining.py", f"--albert_config_file={config_file}",
                         f"--input_file={pretraining_records}", f"--output_dir={tmp_path / 'out'}",
                         f"--max_seq_length={S // 2}", "--do_eval")
    assert_one_line_error(result, "run_pretraining", f"--max_seq_length={S // 2}",
                          pretraining_records, f"has {S} values")


@pytest.mark.parametrize("script, flag", [("run_classifier.py", "--output_dir"),
                                          ("run_squad.py", "--export_dir")])
def test_an_output_directory_that_is_a_file_stops_the_script(tmp_path, script, flag):
    a_file = tmp_path / "results"
    a_file.write_text("an existing file")
    data = tmp_path / "data.json"
    data.write_text("{}")
    data_flag = {"run_classifier.py": "--test_file", "run_squad.py": "--predict_file"}[script]
    result = run_command(script, f"--albert_config_file={tmp_path / 'c.json'}",
                         f"--spm_model_file={tmp_path / 's'}", "--do_predict",
                         f"{data_flag}={data}", f"--output_dir={tmp_path / 'out'}",
                         f"{flag}={a_file}")
    assert_one_line_error(result, script[:-3], f"{flag}: {a_file} is a file, not a directory")


@pytest.mark.parametrize("module, args, culprit", [
    ("albert_tf.model_report", ["--albert_config_file={tmp}/missing.json"],
     "ALBERT config file not found: {tmp}/missing.json"),
    ("data_prep.glue", ["--task_name=rte", "--data_dir={tmp}/glue", "--cached_dir={tmp}/cache",
                        "--spm_model_file={spm}"], "{tmp}/glue/RTE/train.tsv"),
])
def test_library_command_lines_share_the_boundary(tmp_path, module, args, culprit):
    spm_model = spm_fixtures.cached_tiny_spm()
    result = run_command("-m", module, *[arg.format(tmp=tmp_path, spm=spm_model) for arg in args])
    assert_one_line_error(result, module.split(".")[-1], culprit.format(tmp=tmp_path))


def test_tensorflow_info_lines_stay_out_of_the_output(tmp_path):
    tool = tmp_path / "my_tool.py"
    tool.write_text(
        "import sys\n"
        "import tensorflow as tf\n"
        "from absl import logging\n"
        "from albert_tf.cli import error_boundary\n\n"
        "def main(argv):\n"
        "    logging.info('own progress line')\n"
        f"    tf.train.Checkpoint(v=tf.Variable(1.0)).write({str(tmp_path / 'ckpt')!r})\n"
        "    raise ValueError('the culprit')\n\n"
        "error_boundary.run(main)\n")
    result = run_command(str(tool))
    assert_one_line_error(result, "my_tool", "the culprit")
    assert "own progress line" in result.stderr
    assert "Sharding callback duration" not in result.stderr
    assert tf.io.gfile.exists(str(tmp_path / "ckpt.index"))  # the save that logs it did happen


# -- TensorBoard ----------------------------------------------------------------------------------

def test_tensorboard_is_a_requirement_and_reads_the_trainer_scalars(tmp_path):
    from importlib import metadata

    from tensorboard import context
    from tensorboard.backend.event_processing import data_provider, plugin_event_multiplexer

    from albert_tf.tasks.pretraining.task import PretrainingTask
    from albert_tf.training.optimization import create_optimizer
    from albert_tf.training.trainer import RunConfig, Trainer

    with open(os.path.join(REPO_ROOT, "requirements.txt"), encoding="utf-8") as handle:
        pins = dict(line.strip().split("==") for line in handle if "==" in line)
    assert pins["tensorboard"] == metadata.version("tensorboard")
    assert pins["tensorflow"] == tf.__version__

    trainer = Trainer(tf.distribute.get_strategy(), PretrainingTask(tiny_config()),
                      lambda: create_optimizer("lamb", 1e-3, 10, 1),
                      RunConfig(output_dir=str(tmp_path)))
    metrics = {"masked_lm_accuracy": 0.25, "loss": 7.5}
    trainer.write_eval_summaries(metrics, step=3)
    multiplexer = plugin_event_multiplexer.EventMultiplexer()
    multiplexer.AddRunsFromDirectory(str(tmp_path))
    multiplexer.Reload()
    provider = data_provider.MultiplexerDataProvider(multiplexer, str(tmp_path))
    scalars = provider.read_scalars(context.RequestContext(), experiment_id="",
                                    plugin_name="scalars", downsample=10)
    assert {tag: [(point.step, point.value) for point in points]
            for tag, points in scalars["eval"].items()} == {
        tag: [(3, np.float32(value))] for tag, value in metrics.items()}
