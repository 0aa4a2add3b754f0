"""Training batches of mixed lengths run as parts sorted by length (``LengthSplit``,
albert_tf/training/length_buckets.py; ``Trainer._batch_gradients``).

- the parts of a hand-made batch: its examples sorted by length, nearly equal sizes, each cut to
  its own longest example, every feature gathered alike; how many parts a batch size makes;
- when a batch is worth splitting: mixed lengths yes, one length no (the work counted on the
  lengths the buckets cut to);
- training: a classifier (per-example loss) and a token classifier (per-word loss, normalised by
  the batch's words) trained with the split give the weights, losses and logs of the batches run
  whole, with gradient accumulation too; a batch of one length is run whole.

Under MirroredStrategy (each replica splits its own batch; no collective inside the choice) the
split run equals the one-device run: tests/test_distributed_training.py.
"""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from albert_tf.tasks.classification.task import ClassifierTask
from albert_tf.tasks.token_classification.task import TokenClassifierTask
from albert_tf.training import optimization
from albert_tf.training.length_buckets import LengthBuckets, LengthSplit, example_lengths
from albert_tf.training.trainer import RunConfig, Trainer
from tests.shared_setup import tiny_config
from tests.tolerances import assert_trained_alike, sum_tolerance

S = 48
SEQUENCE = ("input_ids", "input_mask", "segment_ids", "label_ids", "label_weights")
EXACT = LengthBuckets.of(S, SEQUENCE, exact=True)


def batch(lengths, seed: int = 0) -> dict[str, np.ndarray]:
    """Token-classification features [B, S] of the given lengths (labels on every real token)
    plus a per-example ``label`` [B]."""
    rng = np.random.default_rng(seed)
    mask = (np.arange(S) < np.asarray(lengths)[:, None]).astype(np.int32)
    return {"input_ids": (rng.integers(5, 8000, mask.shape) * mask).astype(np.int32),
            "input_mask": mask, "segment_ids": np.zeros_like(mask),
            "label_ids": (rng.integers(0, 3, mask.shape) * mask).astype(np.int32),
            "label_weights": mask.astype(np.float32),
            "label": rng.integers(0, 2, len(lengths)).astype(np.int32)}


MIXED = [3, 40, 7, 12, 30, 5, 9, 48, 16, 4, 22, 6, 11, 35, 8, 14]


def test_a_batch_is_dealt_into_parts_sorted_by_length_each_cut_to_its_longest_example():
    features = {name: tf.constant(value) for name, value in batch(MIXED).items()}
    parts = LengthSplit(EXACT, parts=4, min_part_examples=4).plan(features)[1]()
    ranked = sorted(range(len(MIXED)), key=lambda i: MIXED[i])
    assert [part["input_ids"].shape for part in parts] == [
        (4, max(MIXED[i] for i in ranked[start:start + 4])) for start in range(0, 16, 4)]
    for start, part in zip(range(0, 16, 4), parts):
        rows = ranked[start:start + 4]
        width = part["input_ids"].shape[1]
        np.testing.assert_array_equal(part["input_ids"], features["input_ids"].numpy()[rows, :width])
        np.testing.assert_array_equal(part["label"], features["label"].numpy()[rows])
        assert example_lengths(part).numpy().tolist() == [MIXED[i] for i in rows]


@pytest.mark.parametrize("batch_size, parts", [(32, 4), (16, 2), (15, 1), (8, 1), (None, 4)])
def test_parts_hold_at_least_eight_examples_and_are_at_most_four(batch_size, parts):
    assert LengthSplit(EXACT).parts_of(batch_size) == parts
    if batch_size:
        assert f"runs as up to {parts} parts" in LengthSplit(EXACT).describe(batch_size)


def test_only_a_batch_of_mixed_lengths_is_worth_splitting():
    split = LengthSplit(EXACT, parts=4, min_part_examples=4)
    mixed = {name: tf.constant(value) for name, value in batch(MIXED).items()}
    assert bool(split.plan(mixed)[0])
    even = {name: tf.constant(value) for name, value in batch([20] * 15 + [24]).items()}
    assert not bool(split.plan(even)[0])
    # The work is counted at the lengths the buckets cut to: 15 examples of 20 and one of 24 are
    # one bucket (24) for the fixed set, so the parts save nothing there either.
    assert not bool(LengthSplit(LengthBuckets.of(S, SEQUENCE), parts=4,
                                min_part_examples=4).plan(even)[0])


def dataset_fn(examples: dict[str, np.ndarray], buckets: LengthBuckets):
    def make(batch_size: int, skip: int) -> tf.data.Dataset:
        dataset = tf.data.Dataset.from_tensor_slices(examples).repeat()
        return dataset.batch(batch_size, drop_remainder=True).skip(skip).map(buckets.trim)
    return make


def trained(tmp_path, task, examples, buckets, length_split, **run):
    config = RunConfig(output_dir=str(tmp_path), train_batch_size=16, num_train_steps=3,
                       save_checkpoints_steps=3, iterations_per_loop=3, seed=1, **run)
    trainer = Trainer(tf.distribute.get_strategy(), task,
                      lambda: optimization.create_optimizer("adamw", 1e-2, 3, 0), config,
                      log=lambda message: None, length_split=length_split)
    for layer in trainer.model._flatten_layers():
        if hasattr(layer, "dropout_rate"):  # the heads' fixed dropout: no masks to draw
            layer.dropout_rate = 0.0
    trainer.train(dataset_fn(examples, buckets))
    return trainer


def classifier_case():
    """(task, examples: a label per example, sequence features)."""
    examples = batch(MIXED * 2 + MIXED[::-1], seed=3)
    examples["label_ids"] = examples.pop("label")
    examples["is_real_example"] = np.ones(len(examples["label_ids"]), np.int32)
    del examples["label_weights"]
    return (ClassifierTask(tiny_config(max_position_embeddings=S), ["accuracy"], 2), examples,
            ("input_ids", "input_mask", "segment_ids"))


def token_classifier_case():
    """(task, examples: a tag per real token, sequence features)."""
    examples = batch(MIXED * 2 + MIXED[::-1], seed=3)
    del examples["label"]
    return TokenClassifierTask(tiny_config(max_position_embeddings=S), 3, S), examples, SEQUENCE


def with_a_defect(examples: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The examples with the second of every batch of 16 replaced by the first: what a part left
    out or counted twice, or a wrong gather, would do to the training."""
    broken = {name: value.copy() for name, value in examples.items()}
    for start in range(0, len(broken["input_ids"]) - 1, 16):
        for value in broken.values():
            value[start + 1] = value[start]
    return broken


@pytest.mark.parametrize("case, accumulation", [
    (classifier_case, 1),  # the token classifier's cases (about 25 s each) are the same machinery
    pytest.param(token_classifier_case, 1, marks=pytest.mark.slow),
    pytest.param(token_classifier_case, 2, marks=pytest.mark.slow)])
def test_training_on_split_batches_equals_training_on_whole_ones(tmp_path, case, accumulation):
    task, examples, sequence = case()
    buckets = LengthBuckets.of(S, sequence, exact=True)
    split = LengthSplit(buckets, parts=4, min_part_examples=2)
    whole = trained(tmp_path / "whole", task, examples, buckets, None,
                    gradient_accumulation_steps=accumulation)
    task, _, _ = case()
    parts = trained(tmp_path / "parts", task, examples, buckets, split,
                    gradient_accumulation_steps=accumulation)
    task, _, _ = case()
    defective = trained(tmp_path / "defective", task, with_a_defect(examples), buckets, None,
                        gradient_accumulation_steps=accumulation)
    first = buckets.trim({name: tf.constant(value[:16 // accumulation])
                          for name, value in examples.items()})
    assert bool(split.plan(first)[0])  # the split did run
    assert whole.history[-1].keys() == parts.history[-1].keys()
    # The logs (loss, accuracy, gradient norm: means over the 3 steps) are sums of positive
    # per-example or per-token terms taken in another order: within sum_tolerance of the number
    # of terms, relative (measured: at most 5e-7 relative). A part left out or counted twice
    # changes the loss by its share (over 1e-2).
    terms = float(examples.get("label_weights", np.ones(48))[:48].sum())
    for key, value in whole.history[-1].items():
        if key != "examples_per_second":
            np.testing.assert_allclose(parts.history[-1][key], value,
                                       rtol=sum_tolerance(int(terms), 1.0), atol=0, err_msg=key)
    # The weights after three Adam steps: Adam magnifies the other order's rounding on the
    # weights whose gradient is near 0 (tests/tolerances.py; measured up to 1.2e-5 over seeds,
    # which failed fixed tolerances of 2e-6 and 1e-5), so the difference is held against the
    # one a real defect makes (0.1 or more).
    assert_trained_alike([v.numpy() for v in parts.model.trainable_variables],
                         [v.numpy() for v in whole.model.trainable_variables],
                         [v.numpy() for v in defective.model.trainable_variables])
