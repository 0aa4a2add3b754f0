"""Run as a subprocess by test_distributed_training: one device vs MirroredStrategy on 2 logical CPUs.

Usage: python -m tests.mirrored_equivalence <output_dir> <pretraining records (S 128, M 20)>

Logical devices must be configured before TensorFlow initialises, hence a separate process. Prints
one JSON line: per-step losses and the max-abs weight difference after training.
"""

import json
import sys

from albert_tf.training import distribute

distribute.configure_logical_cpus(2)

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from albert_tf.tasks.pretraining.task import PretrainingTask, pretraining_dataset_fn  # noqa: E402
from albert_tf.training import optimization  # noqa: E402
from albert_tf.training.trainer import RunConfig, Trainer  # noqa: E402
from tests.shared_setup import (REFERENCE_MAX_PREDICTIONS, REFERENCE_SEQ_LENGTH,  # noqa: E402
                                tiny_config)


def run(strategy, output_dir, records, initial):
    config = RunConfig(output_dir=output_dir, train_batch_size=8, num_train_steps=4,
                       save_checkpoints_steps=4, iterations_per_loop=1)
    trainer = Trainer(strategy, PretrainingTask(tiny_config()),
                      lambda: optimization.create_optimizer("lamb", 5e-3, 4, 1), config,
                      log=lambda message: None)
    if initial is not None:
        for variable, value in zip(trainer.model.trainable_variables, initial):
            variable.assign(value)
    weights = [v.numpy() for v in trainer.model.trainable_variables]
    trainer.train(pretraining_dataset_fn([records], REFERENCE_SEQ_LENGTH,
                                         REFERENCE_MAX_PREDICTIONS, True))
    return trainer, weights


def main(output_dir, records):
    single, initial = run(distribute.create_strategy("one_device"), output_dir + "/one", records, None)
    mirrored_strategy = distribute.create_strategy("mirrored")
    mirrored, _ = run(mirrored_strategy, output_dir + "/mirrored", records, initial)
    weight_diff = max(float(np.max(np.abs(a.numpy() - b.numpy())))
                      for a, b in zip(single.model.trainable_variables,
                                      mirrored.model.trainable_variables))
    print(json.dumps({
        "replicas": mirrored_strategy.num_replicas_in_sync,
        "one_device": [h["loss"] for h in single.history],
        "mirrored": [h["loss"] for h in mirrored.history],
        "weight_max_abs_diff": weight_diff,
        "devices": [d.name for d in tf.config.list_logical_devices("CPU")],
    }))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
