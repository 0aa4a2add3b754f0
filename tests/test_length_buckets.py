"""Batches cut to their length bucket (albert_tf/training/length_buckets.py) and grouped by length.

- the bucket lengths of a few --max_seq_length values, an example's length read from its mask,
  a batch cut to the shortest bucket that holds its longest example (only the sequence features),
  or without XLA to its longest example exactly; which of the two (or none) a run gets;
- the training input: with buckets, the batches of the padded stream, cut (same examples, same
  order); with --group_by_length, each chunk of 50 batches is a permutation of the same chunk of the
  ungrouped stream, its batches hold examples of neighbouring lengths, a resumed stream (inside a
  chunk and at a chunk's start) equals the rest of the uninterrupted one, and another seed gives
  another order;
- evaluation: each chunk of 50 batches of the file sorted by length, every batch cut, every
  example carrying its place in the file;
- every pipeline (fine-tuning and pretraining) shards by element, without tf.data's autotuning;
- the scripts: every cut task's prediction files (SQuAD v2: and metrics) equal those of
  --nolength_buckets from the same checkpoint (Trainer.predict restores the file order); SQuAD
  v1.1 keeps length S; the flags that cannot go together are refused before TensorFlow loads.

That a task model's outputs do not depend on the padding cut away is contract 5 of
tests/test_task_contract.py (every task, sharing strategy and dtype).
"""

from __future__ import annotations

import os
import re
import shutil


import numpy as np
import pytest
import tensorflow as tf

from albert_tf.cli import driver
from albert_tf.cli.task_spec import Training
from albert_tf.cli.settings import RunSettings
from albert_tf.files.records import tfrecord_dataset
from albert_tf.tasks.pretraining.task import pretraining_dataset_fn
from albert_tf.training.input_pipeline import (RECORD_INDEX, record_eval_dataset,
                                               record_train_dataset_fn)
from albert_tf.training.length_buckets import (GROUP_CHUNK_BATCHES, LengthBuckets, bucket_lengths,
                                               example_lengths)
from tests.command_runner import run_command
from tests.shared_setup import REFERENCE_MAX_PREDICTIONS, REFERENCE_SEQ_LENGTH
from tests.task_harness import arguments

S = 64
SEQUENCE = ("input_ids", "input_mask")


@pytest.mark.parametrize("max_seq_length, expected", [
    (128, (8, 16, 24, 32, 40, 48, 56, 64, 80, 96, 112, 128)),
    (512, (8, 16, 24, 32, 40, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320, 384, 448,
           512)),
    (100, (8, 16, 24, 32, 40, 48, 56, 64, 80, 96, 100)),
    (20, (8, 16, 20)),
    (5, (5,)),
])
def test_bucket_lengths_grow_by_at_most_a_quarter_and_end_at_the_sequence_length(max_seq_length,
                                                                                 expected):
    lengths = bucket_lengths(max_seq_length)
    assert lengths == expected
    assert all(longer <= max(1.25 * shorter, 8 + shorter)
               for shorter, longer in zip(lengths, lengths[1:]))


def test_an_example_is_as_long_as_its_last_real_position_and_a_batch_is_cut_to_its_bucket():
    mask = np.zeros((3, S), np.int32)
    mask[0, :9] = 1
    mask[1, :3] = 1
    mask[2, :30] = 1
    mask[2, 12] = 0  # a hole does not shorten the example
    features = {"input_ids": tf.constant(np.arange(3 * S).reshape(3, S)),
                "input_mask": tf.constant(mask), "label_ids": tf.constant([4, 5, 6])}
    assert example_lengths(features).numpy().tolist() == [9, 3, 30]
    cut = LengthBuckets.of(S, SEQUENCE).trim(features)
    assert cut["input_ids"].shape == (3, 32) and cut["input_mask"].shape == (3, 32)
    np.testing.assert_array_equal(cut["input_ids"], features["input_ids"][:, :32])
    np.testing.assert_array_equal(cut["label_ids"], [4, 5, 6])
    # RACE: [B, 4, S], an example as long as its longest choice; an all-padding example is 0 long.
    choices = np.zeros((2, 4, S), np.int32)
    choices[0, 2, :17] = 1
    assert example_lengths({"input_mask": tf.constant(choices)}).numpy().tolist() == [17, 0]
    assert LengthBuckets.of(S, SEQUENCE).trim(
        {"input_mask": tf.constant(choices)})["input_mask"].shape == (2, 4, 24)


def test_exact_lengths_cut_a_batch_to_its_longest_example():
    assert bucket_lengths(6, exact=True) == (1, 2, 3, 4, 5, 6)
    mask = np.zeros((2, S), np.int32)
    mask[0, :9] = 1
    mask[1, :27] = 1
    features = {"input_ids": tf.constant(np.arange(2 * S).reshape(2, S)),
                "input_mask": tf.constant(mask)}
    buckets = LengthBuckets.of(S, SEQUENCE, exact=True)
    assert buckets.exact and not LengthBuckets.of(S, SEQUENCE).exact
    cut = buckets.trim(features)
    assert cut["input_ids"].shape == (2, 27)
    np.testing.assert_array_equal(cut["input_ids"], features["input_ids"][:, :27])
    assert buckets.describe() == f"Batches padded to their longest example (at most {S} positions)"


def _buckets_of_a_run(**settings) -> tuple[LengthBuckets | None, str]:
    """What the driver gives a run of a length-invariant task on this (non-TPU) machine: its
    buckets and the line the run prints about them."""
    return driver._length_buckets(
        RunSettings(output_dir="out", cached_dir="out", max_seq_length=S, **settings),
        Training(task=None, sequence_features=SEQUENCE), tf.distribute.get_strategy())


def test_a_run_cuts_batches_exactly_without_xla_and_to_the_fixed_set_with_it():
    exact, exact_line = _buckets_of_a_run()
    fixed, fixed_line = _buckets_of_a_run(use_xla=True)
    none, none_line = _buckets_of_a_run(length_buckets=False)
    assert exact.lengths == bucket_lengths(S, exact=True)
    assert fixed.lengths == bucket_lengths(S)
    assert none is None
    assert [exact_line, fixed_line, none_line] == [
        f"Batches padded to their longest example (at most {S} positions)",
        "Batches padded to the shortest of these lengths that holds them: " + ", ".join(
            map(str, bucket_lengths(S))),
        f"Batches padded to --max_seq_length={S} (--nolength_buckets)."]


def test_buckets_need_the_mask_among_the_sequence_features():
    with pytest.raises(ValueError, match="input_mask"):
        LengthBuckets.of(S, ("input_ids",))


# -- the training input ---------------------------------------------------------------------------

RECORDS = 1000
BATCH = 4


def write_records(path, count: int = RECORDS, seed: int = 0) -> str:
    """``count`` records of length S: ``index``, and an ``input_mask`` of 1..S ones."""
    lengths = np.random.default_rng(seed).integers(1, S + 1, size=count)
    with tf.io.TFRecordWriter(str(path)) as writer:
        for index, length in enumerate(lengths):
            mask = [1] * int(length) + [0] * (S - int(length))
            writer.write(tf.train.Example(features=tf.train.Features(feature={
                "index": tf.train.Feature(int64_list=tf.train.Int64List(value=[index])),
                "input_ids": tf.train.Feature(int64_list=tf.train.Int64List(
                    value=[index * value for value in mask])),
                "input_mask": tf.train.Feature(int64_list=tf.train.Int64List(value=mask)),
            })).SerializeToString())
    return str(path)


def parse(records: tf.Tensor) -> dict[str, tf.Tensor]:
    spec = {"index": tf.io.FixedLenFeature([], tf.int64),
            "input_ids": tf.io.FixedLenFeature([S], tf.int64),
            "input_mask": tf.io.FixedLenFeature([S], tf.int64)}
    return tf.io.parse_example(records, spec)


@pytest.fixture(scope="module")
def record_file(tmp_path_factory) -> str:
    return write_records(tmp_path_factory.mktemp("buckets") / "records.tfrecord")


def take(dataset_fn, count: int, skip: int = 0) -> list[dict[str, np.ndarray]]:
    return [{name: value.numpy() for name, value in batch.items()}
            for batch in dataset_fn(BATCH, skip).take(count)]


BUCKETS = LengthBuckets.of(S, SEQUENCE)


def test_cut_training_batches_are_the_padded_ones_cut(record_file):
    padded = take(record_train_dataset_fn(record_file, parse, seed=3), 300)
    cut = take(record_train_dataset_fn(record_file, parse, seed=3, buckets=BUCKETS), 300)
    lengths = set()
    for full, short in zip(padded, cut):
        length = short["input_ids"].shape[1]
        lengths.add(length)
        assert length in BUCKETS.lengths and length >= full["input_mask"].sum(1).max()
        assert length - 8 < full["input_mask"].sum(1).max() or length == 8
        np.testing.assert_array_equal(short["index"], full["index"])
        np.testing.assert_array_equal(short["input_ids"], full["input_ids"][:, :length])
        assert not full["input_mask"][:, length:].any()
    assert len(lengths) > 3  # batches of several lengths


def test_grouped_chunks_are_permutations_of_the_ungrouped_chunks_sorted_into_batches(record_file):
    chunks = 3
    count = chunks * GROUP_CHUNK_BATCHES
    plain = take(record_train_dataset_fn(record_file, parse, seed=3, buckets=BUCKETS), count)
    grouped = take(record_train_dataset_fn(record_file, parse, seed=3, buckets=BUCKETS,
                                           grouped=True), count)
    plain_lengths = [batch["input_ids"].shape[1] for batch in plain]
    grouped_lengths = [batch["input_ids"].shape[1] for batch in grouped]
    for chunk in range(chunks):
        window = slice(chunk * GROUP_CHUNK_BATCHES, (chunk + 1) * GROUP_CHUNK_BATCHES)
        indices = np.concatenate([batch["index"] for batch in grouped[window]])
        assert sorted(indices) == sorted(np.concatenate([b["index"] for b in plain[window]]))
        # Every batch holds neighbours in the chunk's length order: no batch's shortest example
        # is shorter than another batch's longest unless that batch is shorter as a whole.
        spans = sorted((batch["input_mask"].sum(1).min(), batch["input_mask"].sum(1).max())
                       for batch in grouped[window])
        assert all(low_next >= high for (_, high), (low_next, _) in zip(spans, spans[1:]))
    assert sum(grouped_lengths) < 0.7 * sum(plain_lengths)  # far fewer padded positions
    # The batches of a chunk are not emitted shortest first.
    assert grouped_lengths[:GROUP_CHUNK_BATCHES] != sorted(grouped_lengths[:GROUP_CHUNK_BATCHES])


@pytest.mark.parametrize("skip", [7, GROUP_CHUNK_BATCHES, GROUP_CHUNK_BATCHES + 13])
def test_a_resumed_grouped_stream_is_the_rest_of_the_uninterrupted_one(record_file, skip):
    dataset_fn = record_train_dataset_fn(record_file, parse, seed=5, buckets=BUCKETS, grouped=True)
    whole = take(dataset_fn, skip + 20)
    resumed = take(dataset_fn, 20, skip=skip)
    for expected, got in zip(whole[skip:], resumed):
        np.testing.assert_array_equal(got["index"], expected["index"])
        np.testing.assert_array_equal(got["input_ids"], expected["input_ids"])


def test_another_seed_groups_in_another_order(record_file):
    first = take(record_train_dataset_fn(record_file, parse, seed=5, buckets=BUCKETS,
                                         grouped=True), 10)
    second = take(record_train_dataset_fn(record_file, parse, seed=6, buckets=BUCKETS,
                                          grouped=True), 10)
    assert any((a["index"] != b["index"]).any() for a, b in zip(first, second))


def test_grouping_needs_buckets(record_file):
    with pytest.raises(ValueError, match="buckets"):
        record_train_dataset_fn(record_file, parse, grouped=True)


def test_evaluation_batches_are_sorted_by_length_chunk_by_chunk_and_say_where_they_stand(
        record_file):
    batch = 16
    padded = list(record_eval_dataset(record_file, parse, batch))
    cut = list(record_eval_dataset(record_file, parse, batch, buckets=BUCKETS))
    assert len(padded) == -(-RECORDS // batch)
    np.testing.assert_array_equal(np.concatenate([b["index"] for b in padded]), range(RECORDS))
    chunk = GROUP_CHUNK_BATCHES * batch
    seen = []
    for short in cut:
        length = short["input_ids"].shape[1]
        assert length == BUCKETS.bucket_of(short["input_mask"].numpy().sum(1).max())
        np.testing.assert_array_equal(short[RECORD_INDEX], short["index"])
        np.testing.assert_array_equal(short["is_real_example"], 1)
        seen.append(short["index"].numpy())
    seen = np.concatenate(seen)
    assert sorted(seen) == list(range(RECORDS))
    lengths = np.concatenate([b["input_mask"].numpy().sum(1) for b in padded])
    for start in range(0, RECORDS, chunk):  # each chunk of the file, sorted (stable) by length
        in_chunk = seen[start:start + chunk]
        assert sorted(in_chunk) == list(range(start, min(start + chunk, RECORDS)))
        np.testing.assert_array_equal(in_chunk, sorted(in_chunk, key=lambda i: (lengths[i], i)))
    total = sum(b["input_ids"].shape[1] * len(b["index"]) for b in cut)
    assert total < 0.6 * RECORDS * S  # far fewer padded positions than the file order's


def test_no_length_buckets_with_static_batches(record_file):
    with pytest.raises(ValueError, match="static batches"):
        record_eval_dataset(record_file, parse, 16, static_batches=True, buckets=BUCKETS)


def test_every_pipeline_shards_by_element_and_runs_without_tf_data_autotuning(record_file,
                                                                              pretraining_records):
    """With tf.data's autotuning on, deleting an iterator waits for the autotuning thread's next
    tick (up to 60 s): every evaluation pass and training run ends with that deletion, and the
    garbage collector may delete a file check's iterator in the middle of a pass. Every record
    dataset has it off; every pipeline the Trainer reads also shards by element."""
    records = tfrecord_dataset(record_file)
    assert records.options().autotune.enabled is False
    datasets = {
        "train": record_train_dataset_fn(record_file, parse, seed=3)(BATCH, 0),
        "train, cut": record_train_dataset_fn(record_file, parse, seed=3,
                                              buckets=BUCKETS)(BATCH, 0),
        "train, grouped": record_train_dataset_fn(record_file, parse, seed=3, buckets=BUCKETS,
                                                  grouped=True)(BATCH, 0),
        "eval": record_eval_dataset(record_file, parse, BATCH),
        "eval, static": record_eval_dataset(record_file, parse, BATCH, static_batches=True),
        "eval, cut": record_eval_dataset(record_file, parse, BATCH, buckets=BUCKETS),
    }
    for is_training in (True, False):
        datasets[f"pretraining, training {is_training}"] = pretraining_dataset_fn(
            [pretraining_records], REFERENCE_SEQ_LENGTH, REFERENCE_MAX_PREDICTIONS,
            is_training=is_training)(BATCH, 0)
    for name, dataset in datasets.items():
        options = dataset.options()
        assert options.autotune.enabled is False, name
        assert (options.experimental_distribute.auto_shard_policy
                == tf.data.experimental.AutoShardPolicy.DATA), name


# -- the scripts ----------------------------------------------------------------------------------

NUMBER = re.compile(r"-?\d+\.\d+(?:[eE][-+]?\d+)?|-?\d+(?:[eE][-+]?\d+)")


def assert_same_up_to_rounding(got: str, want: str, name: str) -> None:
    """The texts equal but for their decimal numbers, which agree within 1e-5 (absolute or
    relative)."""
    assert NUMBER.sub("#", got) == NUMBER.sub("#", want), name
    np.testing.assert_allclose([float(n) for n in NUMBER.findall(got)],
                               [float(n) for n in NUMBER.findall(want)], rtol=1e-5, atol=1e-5,
                               err_msg=name)


# The harness runs whose batches were cut (every fine-tuning task but SQuAD v1.1).
CUT_RUNS = ("glue_rte", "own_regression", "ner", "squad_v2", "race")


@pytest.mark.parametrize("name", CUT_RUNS)
def test_predictions_and_their_metrics_equal_those_of_batches_padded_to_the_sequence_length(
        name, task_runs, tmp_path):
    """The harness's run (batches cut to their buckets) predicted from its model.ckpt-best; the
    same prediction with --nolength_buckets, from a copy of its --output_dir, writes the same
    prediction files (SQuAD: its sweep's metrics too) up to float rounding."""
    run = task_runs.get(name)
    assert "Batches padded to their longest example" in run.result.stdout
    copy = tmp_path / "out"
    shutil.copytree(run.output_dir, copy)
    for product in run.case.products:
        os.remove(copy / product)
    actions = {"do_predict": ""}
    flags = {key: value for key, value in run.flags.items()
             if key not in ("do_train", "do_eval", "do_predict", "export_dir", "tflite_file")}
    result = run_command(run.case.script, *arguments(
        {**flags, **actions, "output_dir": str(copy), "nodo_train": "", "nolength_buckets": ""}))
    assert result.returncode == 0, result.stderr[-3000:]
    assert "Batches padded to --max_seq_length" in result.stdout
    for product in run.case.products:
        assert_same_up_to_rounding((copy / product).read_text(),
                                   (run.output_dir / product).read_text(), product)


def test_squad_v1_keeps_its_batches_at_the_sequence_length(task_runs):
    """Its loss and n-best lists rank every position, padding included (the reference's), so
    its batches are not cut; --group_by_length is refused before TensorFlow loads."""
    run = task_runs.get("squad_v1")
    assert "(SQuAD v1.1's loss and n-best lists rank the padding positions too" in run.result.stdout
    flags = {key: value for key, value in run.flags.items() if key != "export_dir"}
    result = run_command(run.case.script, *arguments({**flags, "group_by_length": ""}))
    assert result.returncode == 1
    assert ("--group_by_length needs batches of several lengths, which this run does not have "
            "(SQuAD v1.1's loss and n-best lists rank the padding positions too, as the "
            "reference's; v2.0's (--version_2_with_negative) do not)") in result.stderr
    assert "Traceback" not in result.stderr


def test_group_by_length_without_buckets_is_refused_before_tensorflow_loads(tmp_path):
    result = run_command("run_classifier.py", "--task_name=rte", f"--data_dir={tmp_path}",
                         f"--output_dir={tmp_path / 'out'}", "--albert_config_file=c.json",
                         "--spm_model_file=m.model", "--do_train", "--group_by_length",
                         "--nolength_buckets")
    assert result.returncode == 1
    assert ("--group_by_length needs batches of several lengths, which this run does not have "
            "(--nolength_buckets)") in result.stderr
    assert not os.path.exists(tmp_path / "out")
