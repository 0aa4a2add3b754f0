"""Run as a subprocess by test_distributed_training: one device vs MirroredStrategy on 2 logical CPUs
(also with every replica's batch split by length into parts, ``LengthSplit``), and a mirrored run
with dropout resumed from its checkpoint vs the same run uninterrupted.

Usage: python -m tests.mirrored_equivalence <output_dir> <pretraining records (S 128, M 20)>

Logical devices must be configured before TensorFlow initialises, hence a separate process. Prints
one JSON line: per-step losses and the max-abs weight difference after training (one device vs
mirrored, vs mirrored with split batches, and vs one device trained with a defect, with the
weights' largest size), the two replicas' dropout seeds of one step, and the max-abs difference of
every variable between the resumed and the uninterrupted mirrored run with dropout.
"""

import glob
import json
import os
import shutil
import sys

from albert_tf.training import distribute

distribute.configure_logical_cpus(2)

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from albert_tf.tasks.pretraining.task import PretrainingTask, pretraining_dataset_fn  # noqa: E402
from albert_tf.training import optimization  # noqa: E402
from albert_tf.training.length_buckets import LengthBuckets, LengthSplit  # noqa: E402
from albert_tf.training.trainer import RunConfig, Trainer, dropout_seed  # noqa: E402
from tests.shared_setup import (DROPOUT, REFERENCE_MAX_PREDICTIONS,  # noqa: E402
                                REFERENCE_SEQ_LENGTH, tiny_config)


# Every replica's batch of 4 split into 2 parts by length, whatever the work saved.
ALWAYS_SPLIT = LengthSplit(LengthBuckets.of(REFERENCE_SEQ_LENGTH,
                                            ("input_ids", "input_mask", "segment_ids"), exact=True),
                           parts=2, min_part_examples=2, work_fraction=1.0)


def make_trainer(strategy, output_dir, model_config=None, length_split=None, **run_config):
    config = RunConfig(output_dir=output_dir, **{
        "train_batch_size": 8, "num_train_steps": 4, "save_checkpoints_steps": 4,
        "iterations_per_loop": 1, **run_config})
    return Trainer(strategy, PretrainingTask(model_config or tiny_config()),
                   lambda: optimization.create_optimizer("lamb", 5e-3, 4, 1), config,
                   log=lambda message: None, length_split=length_split)


def train_data(records, defect=False):
    """The records' training batches; with ``defect``, the second example of every batch replaced
    by the first (one dropped, one counted twice): the move of a real defect, which the others'
    differences are held against (tests/tolerances.py)."""
    batches = pretraining_dataset_fn([records], REFERENCE_SEQ_LENGTH, REFERENCE_MAX_PREDICTIONS,
                                     True)
    if not defect:
        return batches
    return lambda batch_size, skip: batches(batch_size, skip).map(
        lambda batch: {name: tf.concat([value[:1], value[:1], value[2:]], 0)
                       for name, value in batch.items()})


def run(strategy, output_dir, records, initial, length_split=None, defect=False):
    trainer = make_trainer(strategy, output_dir, length_split=length_split)
    if initial is not None:
        for variable, value in zip(trainer.model.trainable_variables, initial):
            variable.assign(value)
    weights = [v.numpy() for v in trainer.model.trainable_variables]
    trainer.train(train_data(records, defect))
    return trainer, weights


def replica_dropout_seeds(strategy):
    """The dropout seeds (int32 [2] as lists) each replica derives for step 0, micro-batch 0."""
    seeds = strategy.run(lambda: dropout_seed(
        tf.constant(7, tf.int64), tf.constant(0, tf.int64),
        tf.distribute.get_replica_context().replica_id_in_sync_group, 0))
    return [seed.numpy().tolist() for seed in strategy.experimental_local_results(seeds)]


def resumed_difference(strategy, output_dir, records):
    """Dropout 0.1: 4 steps in one Trainer vs a new Trainer resuming from the first one's checkpoint
    at step 2 (copied alone to a new directory); (number of variables, max-abs difference)."""
    config = tiny_config(**DROPOUT)
    settings = dict(save_checkpoints_steps=2, iterations_per_loop=2, seed=7)
    full = make_trainer(strategy, output_dir + "/full", config, **settings)
    full.train(train_data(records))
    os.makedirs(output_dir + "/resumed")
    for path in glob.glob(output_dir + "/full/model.ckpt-2.*"):
        shutil.copy(path, output_dir + "/resumed")
    resumed = make_trainer(strategy, output_dir + "/resumed", config, **settings)
    assert resumed.initialize().startswith("Resumed from") and resumed.global_step == 2
    resumed.train(train_data(records))
    pairs = list(zip(full.model.weights + full.optimizer.variables,
                     resumed.model.weights + resumed.optimizer.variables))
    return len(pairs), max(float(np.max(np.abs(a.numpy() - b.numpy()))) for a, b in pairs)


def main(output_dir, records):
    single, initial = run(distribute.create_strategy("one_device"), output_dir + "/one", records, None)
    mirrored_strategy = distribute.create_strategy("mirrored")
    mirrored, _ = run(mirrored_strategy, output_dir + "/mirrored", records, initial)
    split, _ = run(mirrored_strategy, output_dir + "/split", records, initial, ALWAYS_SPLIT)
    defective, _ = run(distribute.create_strategy("one_device"), output_dir + "/defective",
                       records, initial, defect=True)
    weight_diff, split_diff, defect_diff = (
        max(float(np.max(np.abs(a.numpy() - b.numpy())))
            for a, b in zip(single.model.trainable_variables, other.model.trainable_variables))
        for other in (mirrored, split, defective))
    resumed_variables, resumed_diff = resumed_difference(mirrored_strategy, output_dir, records)
    print(json.dumps({
        "replicas": mirrored_strategy.num_replicas_in_sync,
        "one_device": [h["loss"] for h in single.history],
        "mirrored": [h["loss"] for h in mirrored.history],
        "weight_max_abs_diff": weight_diff,
        "split": [h["loss"] for h in split.history],
        "split_weight_max_abs_diff": split_diff,
        "defect_weight_max_abs_diff": defect_diff,
        "weight_scale": max(float(np.max(np.abs(v.numpy())))
                            for v in single.model.trainable_variables),
        "replica_dropout_seeds": replica_dropout_seeds(mirrored_strategy),
        "resumed_variables": resumed_variables,
        "resumed_max_abs_diff": resumed_diff,
        "devices": [d.name for d in tf.config.list_logical_devices("CPU")],
    }))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
