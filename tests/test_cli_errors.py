"""The error boundary of every script (albert_tf/cli/error_boundary.py) and the checks before work.

A user's mistake (a ``UserError``, a usage or flag error, a corrupt record, out of memory) ends in
one line, ``<program>: error: <culprit>``, with exit status 1 and no traceback, before any work
where it can be seen then: empty, corrupt or mismatched TFRecords (records of another length met
in a training or prediction loop too), a config whose vocabulary is smaller than the data's,
output paths that are files. A bug (any other exception) keeps its traceback, followed by a line
asking to report it, exit status 1. Also: the sweep's wait honours --max_eval_wait_secs,
TensorFlow's INFO lines stay out of the output, and TensorBoard (a requirement) reads the scalars
the Trainer writes.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import sys

import numpy as np
import pytest
import tensorflow as tf
from absl import app, flags

from albert_tf.cli import error_boundary
from albert_tf.errors.user_error import MissingFileError, UserError, opening_user_path
from albert_tf.evaluation.checkpoint_sweep import SweepPolicy, sweep_checkpoints
from albert_tf.files import json_objects
from albert_tf.files.records import (RecordFileError, reading_records, record_file_error,
                                     require_records)
from albert_tf.models.config import AlbertConfig, ConfigError
from albert_tf.tasks.pretraining.records import (PretrainingDataError, check_pretraining_files,
                                                 parse_pretraining_example)
from albert_tf.tasks.pretraining.task import PretrainingTask, pretraining_dataset_fn
from albert_tf.training.input_pipeline import record_eval_dataset, record_train_dataset_fn
from albert_tf.training.optimization import create_optimizer
from albert_tf.training.trainer import NonFiniteLossError, RunConfig, Trainer
from tests import spm_fixtures
from tests.command_runner import run_command, run_subprocess
from tests.shared_setup import (REFERENCE_MAX_PREDICTIONS, REFERENCE_SEQ_LENGTH, REPO_ROOT,
                                tiny_config)

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

def missing_file_error(tmp_path):
    """The error ``opening_user_path`` makes of an OSError on a user's path."""
    with pytest.raises(MissingFileError) as error:
        with opening_user_path(str(tmp_path / "gone.txt"), "--train_file"):
            open(tmp_path / "gone.txt", encoding="utf-8")
    return error.value


def assert_bug_report(err, error):
    """stderr of a bug: Python's traceback of ``error``, then the one line asking to report it."""
    lines = err.strip().splitlines()
    assert lines[0] == "Traceback (most recent call last):", err
    assert lines[-2].endswith(f"{type(error).__name__}: {error}"), err
    assert lines[-1] == f"run_thing: {error_boundary.BUG_LINE}"


@pytest.mark.parametrize("error", [
    ConfigError("config.json: 'hidden_size' must be divisible"),
    MissingFileError("input pattern 'x*' matches no file"),
    RecordFileError("data.tfrecord: no record (an empty file)"),
    UserError("any mistake of the user's"),
    app.UsageError("Nothing to do: set --do_train"),
    flags.ValidationError("--tflite_file needs --dtype=float32"),
    NonFiniteLossError("Non-finite loss (nan) in 2 of the steps 1..2"),
])
def test_user_errors_end_in_one_line_with_status_1(error, monkeypatch, capsys):
    code, err = run_guarded(raising(error), monkeypatch, capsys)
    assert code == 1
    assert err == f"run_thing: error: {error}\n"


def test_an_os_error_on_a_users_path_is_one_line_naming_it(monkeypatch, capsys, tmp_path):
    error = missing_file_error(tmp_path)
    assert isinstance(error, FileNotFoundError)  # callers catching the builtin still do
    code, err = run_guarded(raising(error), monkeypatch, capsys)
    assert code == 1
    assert err == (f"run_thing: error: --train_file {tmp_path}/gone.txt: No such file or "
                   "directory\n")
    with pytest.raises(UserError, match=f"{tmp_path}: Is a directory"):  # tf.io.gfile's errors
        with opening_user_path(str(tmp_path)):
            tf.io.gfile.GFile(str(tmp_path)).read()


def test_checks_run_before_main_and_stop_it(monkeypatch, capsys, tmp_path):
    broken = tmp_path / "albert_config.json"
    broken.write_text('{"vocab_size": 100,')
    calls = []
    code, err = run_guarded(lambda argv: calls.append("main"), monkeypatch, capsys,
                            checks=[lambda: AlbertConfig.from_json_file(str(broken))])
    assert code == 1 and calls == []
    assert err.startswith(f"run_thing: error: ALBERT config file {broken} is not valid JSON")
    assert err.count("\n") == 1


@pytest.mark.parametrize("error", [
    KeyError("input_ids"),
    TypeError("unsupported operand"),
    ValueError("num_labels must be >= 1 (1 = regression), got 0."),  # a guard of our own code
    FileNotFoundError("model.ckpt-3.index"),  # an OS error nowhere near a user's path
    RuntimeError("configure_logical_cpus(2) must be called before TensorFlow initializes"),
    tf.errors.InvalidArgumentError(None, None, "indices[1] = 12 is not in [0, 10)"),
    tf.errors.NotFoundError(None, None, "Resource localhost/x does not exist"),
])
def test_bugs_keep_their_traceback_and_ask_to_be_reported(error, monkeypatch, capsys):
    code, err = run_guarded(raising(error), monkeypatch, capsys)
    assert code == 1
    assert_bug_report(err, error)
    assert "error: " not in err.splitlines()[-1]


def test_a_bug_inside_a_library_function_is_reported_as_one(monkeypatch, capsys, tmp_path):
    """A real code path (the config reader every command uses) with a library function that fails
    as a bug would: the traceback runs through the library, the last line asks for a report."""
    config = tmp_path / "albert_config.json"
    config.write_text(tiny_config().to_json_string())

    def broken_read(path, error_type, described_as):
        return {}["vocab_size"]

    monkeypatch.setattr(json_objects, "read_json_object", broken_read)
    monkeypatch.setattr("albert_tf.models.config.read_json_object", broken_read)
    code, err = run_guarded(lambda argv: AlbertConfig.from_json_file(str(config)), monkeypatch,
                            capsys)
    assert code == 1
    assert "in from_json_file" in err and "in broken_read" in err
    assert err.strip().splitlines()[-2] == "KeyError: 'vocab_size'"
    assert err.strip().splitlines()[-1] == f"run_thing: {error_boundary.BUG_LINE}"


def test_the_traceback_variable_shows_the_traceback_of_user_errors(monkeypatch, capsys):
    monkeypatch.setattr(sys, "argv", ["run_thing.py"])
    monkeypatch.setenv(error_boundary.TRACEBACK_VARIABLE, "1")
    error = ConfigError("config.json: bad value")
    with pytest.raises(SystemExit) as exit_info:
        error_boundary.guarded(raising(error))(["run_thing.py"])
    err = capsys.readouterr().err
    assert exit_info.value.code == 1
    assert err.startswith("Traceback (most recent call last):")
    assert err.strip().splitlines()[-1] == "run_thing: error: config.json: bad value"
    with pytest.raises(SystemExit) as exit_info:  # a bug: the same report as without it
        error_boundary.guarded(raising(KeyError("x")))(["run_thing.py"])
    assert exit_info.value.code == 1
    assert_bug_report(capsys.readouterr().err, KeyError("x"))


def test_graph_errors_are_bugs_unless_records_caused_them(monkeypatch, capsys, tmp_path,
                                                          pretraining_records):
    @tf.function
    def embed(ids):
        return tf.gather(tf.zeros([10, 2]), ids)

    with pytest.raises(tf.errors.InvalidArgumentError) as gather_error:
        embed(tf.constant([3, 12]))
    assert record_file_error(gather_error.value) is None  # no record caused it
    with pytest.raises(tf.errors.InvalidArgumentError):
        with reading_records():
            embed(tf.constant([3, 12]))
    code, err = run_guarded(raising(gather_error.value), monkeypatch, capsys)
    assert code == 1 and err.startswith("Traceback") and "indices[1] = 12" in err
    assert err.strip().splitlines()[-1] == f"run_thing: {error_boundary.BUG_LINE}"

    # A parse error inside a tf.data map, met where the records are iterated, names the file, the
    # record, the feature and both lengths.
    records = shutil.copy(pretraining_records, tmp_path / "part-0.tfrecord")
    dataset = pretraining_dataset_fn([str(records)], S // 2, M, is_training=False)(8, 0)
    with pytest.raises(RecordFileError) as parse_error:
        with reading_records():
            next(iter(dataset))
    message = str(parse_error.value)
    assert message.startswith(f"{records}, record 1: Key: ")
    assert f"Values size: {S} but output shape: [{S // 2}]" in message
    assert "user-defined function" not in message and "\n" not in message
    code, err = run_guarded(raising(parse_error.value), monkeypatch, capsys)
    assert code == 1 and err == f"run_thing: error: {message}\n"


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


def records_of_another_length(source, target, good, short):
    """``good`` records of ``source`` (length S), then ``short`` records cut to length S // 2."""
    with tf.io.TFRecordWriter(str(target)) as writer:
        for index, record in enumerate(tf.data.TFRecordDataset(source).take(good + short)):
            example = tf.train.Example.FromString(record.numpy())
            if index >= good:
                for feature in example.features.feature.values():
                    if len(feature.int64_list.value) == S:
                        del feature.int64_list.value[S // 2:]
            writer.write(example.SerializeToString())
    return str(target)


def test_records_of_another_length_met_in_a_loop_name_their_file(monkeypatch, capsys, tmp_path,
                                                                 pretraining_records):
    """The first records fit (the checks before work pass); record 6 is shorter: training and
    evaluation stop with one line naming the file and the record, not a graph error."""
    mixed = records_of_another_length(pretraining_records, tmp_path / "mixed.tfrecord", 5, 4)
    trainer = Trainer(tf.distribute.get_strategy(), PretrainingTask(tiny_config()),
                      lambda: create_optimizer("lamb", 1e-3, 4, 0),
                      RunConfig(output_dir=str(tmp_path / "run"), train_batch_size=4,
                                num_train_steps=4, save_checkpoints_steps=4,
                                iterations_per_loop=4, seed=1), log=lambda message: None)
    trainer.initialize()
    expected = (f"{mixed}, record 6: Key: ", f"Values size: {S // 2} but output shape: [{S}]",
                "the records do not fit this run")
    with pytest.raises(RecordFileError) as evaluating:
        trainer.predict(pretraining_dataset_fn([mixed], S, M, is_training=False)(3, 0))
    with pytest.raises(RecordFileError) as training:
        trainer.train(pretraining_dataset_fn([mixed], S, M, is_training=True, seed=3))
    for error in (evaluating.value, training.value):
        assert str(error).startswith(expected[0]) and all(part in str(error) for part in expected)
        code, err = run_guarded(raising(error), monkeypatch, capsys)
        assert code == 1 and err == f"run_thing: error: {error}\n"
    # A fine-tuning pipeline checks its file's first record when it is built.
    short = records_of_another_length(pretraining_records, tmp_path / "short.tfrecord", 0, 2)
    parse = functools.partial(parse_pretraining_example, max_seq_length=S,
                              max_predictions_per_seq=M)
    for build in (lambda: record_eval_dataset(short, parse, 2),
                  lambda: record_train_dataset_fn(short, parse)):
        with pytest.raises(RecordFileError, match=re.escape(f"{short}, record 1: Key: ")):
            build()


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


def test_a_file_without_records_is_named_empty_only_when_it_is(tmp_path):
    """A file shorter than a TFRecord header (e.g. a word of text) reads as no record at all, as a
    0-byte file does: the message says which of the two it is."""
    empty, short = tmp_path / "empty.tfrecord", tmp_path / "words.txt"
    empty.write_bytes(b"")
    short.write_text("hello\n")
    with pytest.raises(RecordFileError, match=re.escape(f"{empty}: no record (an empty file)")):
        require_records([str(empty)], 1)
    with pytest.raises(RecordFileError, match=re.escape(
            f"{short}: no record (too short to be a TFRecord file)")):
        require_records([str(short)], 1)


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
        sleep=sleeps.append, training_alive=lambda: True)
    assert best_step == 10 and sum(sleeps) == 5 and sleeps == [5]


def test_the_sweep_says_when_no_checkpoint_exists_yet_and_how_long_it_waits(tmp_path):
    # An eval job on a mistyped --output_dir said "Waiting for checkpoints after step -1" and
    # waited an hour (the default --max_eval_wait_secs) without saying so.
    # While a training run holds the directory, the sweep waits for its checkpoints and says so.
    lines = []
    with pytest.raises(FileNotFoundError, match="No model.ckpt-<step> checkpoint"):
        sweep_checkpoints(str(tmp_path), lambda prefix: {"acc": 0.5}, "acc", log=lines.append,
                          policy=SweepPolicy(until_step=100, poll_seconds=60,
                                             max_wait_seconds=90), sleep=lambda seconds: None,
                          training_alive=lambda: True)
    waiting = (f"No model.ckpt-<step> checkpoint in {tmp_path} yet: waiting for the training run "
               "there to write them (until step 100); giving up after {} s more without one "
               "(--max_eval_wait_secs).")
    assert lines[:2] == [waiting.format(90), waiting.format(30)]
    assert not any("step -1" in line for line in lines)
    # With no training run there, none will come: it stops at once, without waiting.
    lines.clear()
    sleeps = []
    with pytest.raises(FileNotFoundError) as raised:
        sweep_checkpoints(str(tmp_path), lambda prefix: {"acc": 0.5}, "acc", log=lines.append,
                          policy=SweepPolicy(until_step=100, poll_seconds=60,
                                             max_wait_seconds=90), sleep=sleeps.append)
    assert str(raised.value) == (
        f"No model.ckpt-<step> checkpoint in {tmp_path} to evaluate, and no training run holds "
        "it; train first (--do_train), or start this evaluation job after the training job.")
    assert sleeps == [] and not any("waiting" in line for line in lines)


# -- the scripts, as a user runs them (in this process: tests/command_runner.py) ------------------

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
    assert not output_dir.exists()  # no checkpoint, and not the directory it made either


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


@pytest.mark.parametrize("script, train_file, train_text", [
    ("run_classifier.py", "train.csv", "text,label\nA short sentence.,a\n"),
    ("run_ner.py", "train.txt", "EU B-ORG\n"),
])
def test_a_missing_sentencepiece_model_is_the_only_thing_a_run_prints(tmp_path, config_file,
                                                                       script, train_file,
                                                                       train_text):
    # The run's informative lines (e.g. how its batches are padded) come after the quick checks of
    # the config and the SentencePiece model, so a mistaken path is the whole output.
    (tmp_path / train_file).write_text(train_text)
    missing = tmp_path / "missing.model"
    result = run_command(script, f"--albert_config_file={config_file}",
                         f"--spm_model_file={missing}", "--do_train", "--max_seq_length=32",
                         f"--output_dir={tmp_path / 'out'}",
                         f"--train_file={tmp_path / train_file}")
    assert_one_line_error(result, script[:-3], f"SentencePiece model file not found: {missing}")
    assert result.stdout.strip() == "", result.stdout


@pytest.mark.parametrize("module, args, culprit", [
    ("albert_tf.model_report", ["--albert_config_file={tmp}/missing.json"],
     "ALBERT config file not found: {tmp}/missing.json"),
    ("albert_tf.model_report", ["--albert_config_file={tmp}/malformed.json"],
     "ALBERT config file {tmp}/malformed.json is not valid JSON"),
    ("data_prep.glue", ["--task_name=rte", "--data_dir={tmp}/glue", "--cached_dir={tmp}/cache",
                        "--spm_model_file={spm}"], "{tmp}/glue/RTE/train.tsv"),
])
def test_library_command_lines_share_the_boundary(tmp_path, module, args, culprit):
    (tmp_path / "malformed.json").write_text('{"vocab_size": 30000,\n "hidden_size": }')
    spm_model = spm_fixtures.cached_tiny_spm()
    result = run_command(f"-m {module}",
                         *[arg.format(tmp=tmp_path, spm=spm_model) for arg in args])
    assert_one_line_error(result, module.split(".")[-1], culprit.format(tmp=tmp_path))


def test_a_bug_in_a_command_prints_its_traceback_and_the_report_line(tmp_path, config_file,
                                                                     monkeypatch):
    """model_report as a user runs it, with a library function it calls broken as a bug would
    be: Python's traceback through the library, then the report line, exit status 1."""
    import albert_tf.models.parameters as parameters

    def broken(*args, **kwargs):
        raise KeyError("embedding_size")

    monkeypatch.setattr(parameters, "parameter_report", broken)
    result = run_command("-m albert_tf.model_report", f"--albert_config_file={config_file}",
                         "--max_seq_length=128")
    assert result.returncode == 1, result.stderr[-3000:]
    lines = result.stderr.strip().splitlines()
    assert "Traceback (most recent call last):" in lines, result.stderr[-3000:]
    assert lines[-2] == "KeyError: 'embedding_size'", result.stderr[-3000:]
    assert lines[-1] == f"model_report: {error_boundary.BUG_LINE}"


@pytest.mark.subprocess  # the logging set-up of a fresh process, as a user's tool has it
def test_tensorflow_info_lines_stay_out_of_the_output(tmp_path):
    tool = tmp_path / "my_tool.py"
    tool.write_text(
        "import sys\n"
        "import tensorflow as tf\n"
        "from absl import logging\n"
        "from albert_tf.cli import error_boundary\n"
        "from albert_tf.errors.user_error import UserError\n\n"
        "def main(argv):\n"
        "    logging.info('own progress line')\n"
        f"    tf.train.Checkpoint(v=tf.Variable(1.0)).write({str(tmp_path / 'ckpt')!r})\n"
        "    raise UserError('the culprit')\n\n"
        "error_boundary.run(main)\n")
    result = run_subprocess(str(tool))
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


@pytest.mark.parametrize("script", ["run_classifier.py", "run_pretraining.py"])
def test_a_refused_run_leaves_no_directory_of_its_own_behind(tmp_path, config_file, script):
    # The pre-flight check creates --output_dir (here three levels deep) to prove it can be
    # written; the missing SentencePiece model (the config's too few positions for the default
    # --max_seq_length) is found after it. The run removes what it created
    # and left empty, and nothing that existed before.
    kept = tmp_path / "kept"
    kept.mkdir()
    output_dir = kept / "new" / "deeper" / "out"
    if script == "run_classifier.py":
        (tmp_path / "train.csv").write_text("text,label\nA short sentence.,a\n")
        args = [f"--spm_model_file={tmp_path / 'missing.model'}", "--do_train",
                f"--train_file={tmp_path / 'train.csv'}", "--max_seq_length=32"]
        culprit = "SentencePiece model file not found"
    else:
        (tmp_path / "empty.tfrecord").write_bytes(b"")
        args = [f"--input_file={tmp_path / 'empty.tfrecord'}", "--do_train"]
        culprit = "--max_seq_length=512 exceeds max_position_embeddings"
    result = run_command(script, f"--albert_config_file={config_file}", *args,
                         f"--output_dir={output_dir}")
    assert_one_line_error(result, script[:-3], culprit)
    assert os.listdir(kept) == []
