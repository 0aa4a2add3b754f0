"""Exact resume with dropout on: seeded stateless dropout (its masks and statistics), the seeds the
Trainer derives per step, replica and micro-batch, and for every training script a run restarted
from its checkpoint at step k that ends with the same checkpoint, bit for bit, as the run that was
never interrupted (both runs in the test process, tests/command_runner.py: the resumed run starts
after the process's random state moved on). (A killed process resumed, and mirrored on 2 logical
CPUs: tests/test_distributed_training.py.)"""

from __future__ import annotations

import json
import os
import shutil

import numpy as np
import pytest
import tensorflow as tf

from albert_tf.files.run_manifest import MANIFEST_NAME
from albert_tf.models.layers import dropout, dropout_seed_scope
from albert_tf.training.trainer import dropout_seed
from tests.command_runner import run_command
from tests.shared_setup import (DROPOUT, EN8K_MODEL, GLUE_DIR, REFERENCE_MAX_PREDICTIONS,
                                REFERENCE_SEQ_LENGTH, SHARED_DATA_DIR, tiny_config)
from tests.test_training import make_trainer, synthetic_dataset_fn

LOOP = ["--iterations_per_loop=2", "--save_checkpoints_steps=3", "--seed=7"]


# -- the masks and their seeds --------------------------------------------------------------------

def test_seeded_dropout_keeps_one_minus_rate_scaled_and_depends_on_the_seed_alone():
    x, rate = tf.ones([200, 500]), 0.1
    seed = tf.constant([3, 4], tf.int32)
    with dropout_seed_scope(seed):
        first, second = dropout(x, rate, True).numpy(), dropout(x, rate, True).numpy()
        assert dropout(x, rate, False) is x and dropout(x, 0.0, True) is x
    tf.random.uniform([5])  # TF's stateful RNG moves on; the seeded masks do not depend on it
    with dropout_seed_scope(seed):
        again = dropout(x, rate, True).numpy()
    with dropout_seed_scope(tf.constant([3, 5], tf.int32)):
        other = dropout(x, rate, True).numpy()
    np.testing.assert_array_equal(again, first)
    for values in (first, second, other):
        # Kept elements scaled by 1 / (1 - rate); 100,000 draws: the kept share's std is 0.001.
        assert set(np.unique(values)) == {0.0, np.float32(1.0) / np.float32(1.0 - rate)}
        assert abs(np.mean(values != 0) - (1 - rate)) < 0.005
    # The next dropout call (the next layer) and another seed draw independent masks: they agree
    # on 0.9² + 0.1² = 82% of the elements.
    for masks in (second, other):
        assert abs(np.mean((first != 0) == (masks != 0)) - 0.82) < 0.01


def test_dropout_seed_differs_per_run_seed_step_replica_and_micro_batch():
    def seed(run_seed, step, replica, micro_batch):
        return tuple(dropout_seed(tf.constant(run_seed, tf.int64), tf.constant(step, tf.int64),
                                  tf.constant(replica), micro_batch).numpy())

    keys = [(s, step, r, m) for s in (7, 8) for step in (0, 1, 2) for r in (0, 1) for m in (0, 1)]
    seeds = {key: seed(*key) for key in keys}
    assert len(set(seeds.values())) == len(keys)
    assert seed(8, 2, 1, 1) == seeds[(8, 2, 1, 1)]


@pytest.mark.parametrize("use_xla", [False, True], ids=["graph", "xla"])
def test_trainer_dropout_is_on_and_a_function_of_the_run_seed(tmp_path, use_xla):
    """One Trainer (gradient accumulation) trains twice from the same state, weights and optimizer
    reset in between: the same run seed gives the same weights bit for bit (TF's stateful RNG would
    have moved on), another run seed other dropout masks, so other weights."""
    trainer = make_trainer(tmp_path, config=tiny_config(**DROPOUT), steps=2, iterations_per_loop=2,
                           gradient_accumulation_steps=2, seed=1, use_xla=use_xla)
    variables = trainer.model.trainable_variables + trainer.optimizer.variables
    initial = [v.numpy() for v in variables]

    def trained(run_seed):
        for variable, value in zip(variables, initial):
            variable.assign(value)
        trainer.dropout_seed.assign(run_seed)
        trainer.train(synthetic_dataset_fn())
        assert trainer.global_step == 2
        return [v.numpy() for v in trainer.model.trainable_variables]

    first, repeated, other = trained(1), trained(1), trained(2)
    for a, b in zip(first, repeated):
        np.testing.assert_array_equal(a, b)
    assert max(np.max(np.abs(a - c)) for a, c in zip(first, other)) > 1e-4


def test_resume_keeps_the_saved_dropout_seed_and_says_when_a_checkpoint_has_none(tmp_path):
    make_trainer(tmp_path / "run", seed=9).manager.save(checkpoint_number=0)
    resumed = make_trainer(tmp_path / "run", seed=5)
    assert resumed.initialize() == f"Resumed from {tmp_path / 'run' / 'model.ckpt-0'} at step 0."
    assert int(resumed.dropout_seed.numpy()) == 9  # the run's seed, whatever --seed says now
    # A checkpoint without a dropout seed (model and optimizer only): the resume works, and says
    # that dropout goes on with this run's seed.
    older = make_trainer(tmp_path / "older", seed=3)
    older.optimizer.iterations.assign(2)
    tf.train.Checkpoint(model=older.model, optimizer=older.optimizer).write(
        str(tmp_path / "older" / "model.ckpt-2"))
    resumed = make_trainer(tmp_path / "older", seed=5)
    assert resumed.initialize().startswith(
        f"Resumed from {tmp_path / 'older' / 'model.ckpt-2'} at step 2. It holds no dropout seed")
    assert int(resumed.dropout_seed.numpy()) == 5


# -- every script, killed after a checkpoint and rerun --------------------------------------------

def checkpoint_tensors(prefix: str) -> dict[str, np.ndarray]:
    """Every saved value of a Trainer checkpoint (model, optimizer state, step, dropout seed) but
    the save counter, which counts the saves of one process."""
    reader = tf.train.load_checkpoint(prefix)
    return {name: reader.get_tensor(name) for name in reader.get_variable_to_shape_map()
            if name != "_CHECKPOINTABLE_OBJECT_GRAPH" and not name.startswith("save_counter")}


def run_script(script: str, args: list[str]):
    result = run_command(script, *args)
    assert result.returncode == 0, result.stderr[-4000:]
    return result


def copy_killed_run_manifest(full, resumed, step: int) -> None:
    """Writes in ``resumed`` the run manifest a run of ``full`` killed after its checkpoint at
    ``step`` left: its owned names and records (written before training), ``step`` as its last
    trained one, no sweep yet."""
    manifest = json.loads((full / MANIFEST_NAME).read_text())
    assert manifest["trained"]["checkpoint"] != f"model.ckpt-{step}"  # the full run went on
    manifest.update(trained={"step": step, "checkpoint": f"model.ckpt-{step}"}, sweeps={},
                    best=None)
    (resumed / MANIFEST_NAME).write_text(json.dumps(manifest))


def resume_difference(tmp_path, script: str, flags: list[str], last_step: int,
                      resume_step: int) -> float:
    """Trains ``script`` to ``last_step`` in one run, then again from a copy of that run's
    checkpoint at ``resume_step`` alone (what a run killed after it leaves) in a new run;
    returns the largest absolute difference between the two final checkpoints' values after
    checking that they hold the same names."""
    full, resumed = tmp_path / "full", tmp_path / "resumed"
    run_script(script, [*flags, f"--output_dir={full}"])
    resumed.mkdir()
    for path in full.glob(f"model.ckpt-{resume_step}.*"):
        shutil.copy(path, resumed / path.name)
    copy_killed_run_manifest(full, resumed, resume_step)
    output = run_script(script, [*flags, f"--output_dir={resumed}"]).stdout
    assert f"model.ckpt-{resume_step} at step {resume_step}." in output
    want = checkpoint_tensors(str(full / f"model.ckpt-{last_step}"))
    got = checkpoint_tensors(str(resumed / f"model.ckpt-{last_step}"))
    assert want.keys() == got.keys() and len(want) > 20
    return max(float(np.max(np.abs(want[name].astype(np.float64) - got[name])))
               for name in want)


def write_config(tmp_path, **overrides) -> str:
    path = tmp_path / "albert_config.json"
    path.write_text(tiny_config(**{**DROPOUT, **overrides}).to_json_string())
    return str(path)


@pytest.mark.slow  # three pretraining runs, about 15 s
def test_run_pretraining_resumes_exactly_with_accumulation_and_no_seed(tmp_path,
                                                                       pretraining_records):
    """Without --seed the run's dropout seed is random, and the checkpoint keeps it. (A killed
    run_pretraining with --seed: tests/test_distributed_training.py.)"""
    flags = [f"--albert_config_file={write_config(tmp_path)}",
             f"--input_file={pretraining_records}",
             f"--max_seq_length={REFERENCE_SEQ_LENGTH}",
             f"--max_predictions_per_seq={REFERENCE_MAX_PREDICTIONS}", "--train_batch_size=8",
             "--gradient_accumulation_steps=2", "--learning_rate=0.005", "--num_warmup_steps=2",
             "--num_train_steps=7", "--iterations_per_loop=2", "--save_checkpoints_steps=3"]
    assert resume_difference(tmp_path, "run_pretraining.py", flags, 7, 3) == 0.0


@pytest.mark.requires_shared_data
def test_run_classifier_resumes_exactly(tmp_path):
    data_dir = tmp_path / "glue" / "RTE"
    data_dir.mkdir(parents=True)
    for split in ("train", "dev", "test"):
        with open(os.path.join(GLUE_DIR, "RTE", f"{split}.tsv"), encoding="utf-8") as handle:
            (data_dir / f"{split}.tsv").write_text("".join(handle.readlines()[:33]))
    flags = ["--task_name=RTE", f"--data_dir={data_dir.parent}",
             f"--albert_config_file={write_config(tmp_path, max_position_embeddings=64)}",
             f"--spm_model_file={EN8K_MODEL}", "--max_seq_length=64", "--do_train",
             "--train_step=7", "--train_batch_size=8", "--learning_rate=1e-3", *LOOP]
    assert resume_difference(tmp_path, "run_classifier.py", flags, 7, 3) == 0.0


@pytest.mark.slow  # run_classifier's resume (fast) is the same machinery; about 20 s
@pytest.mark.requires_shared_data
def test_run_squad_v2_resumes_exactly(tmp_path):
    sample = os.path.join(SHARED_DATA_DIR, "squad", "dev-v2.0-sample.json")
    # 14 questions, batch 2, one epoch: 7 steps; --dropout_prob is the answer classifier's.
    flags = [f"--albert_config_file={write_config(tmp_path)}", f"--spm_model_file={EN8K_MODEL}",
             f"--train_file={sample}", "--version_2_with_negative", "--do_train",
             "--max_seq_length=128", "--doc_stride=64", "--max_query_length=32",
             "--train_batch_size=2", "--num_train_epochs=1", "--learning_rate=1e-3",
             "--dropout_prob=0.3", *LOOP]
    assert resume_difference(tmp_path, "run_squad.py", flags, 7, 3) == 0.0


@pytest.mark.slow  # run_classifier's resume (fast) is the same machinery; about 20 s
@pytest.mark.requires_shared_data
def test_run_race_resumes_exactly(tmp_path):
    data_dir = tmp_path / "race"
    (data_dir / "RACE").mkdir(parents=True)
    for split in ("train", "dev", "test"):
        os.symlink(os.path.join(SHARED_DATA_DIR, "race", "RACE", "dev"), data_dir / "RACE" / split)
    flags = [f"--data_dir={data_dir}", f"--albert_config_file={write_config(tmp_path)}",
             f"--spm_model_file={EN8K_MODEL}", "--max_seq_length=96", "--max_qa_length=24",
             "--do_train", "--train_step=7", "--warmup_step=1", "--train_batch_size=4",
             "--learning_rate=1e-3", "--dropout_prob=0.3", *LOOP]
    assert resume_difference(tmp_path, "run_race.py", flags, 7, 3) == 0.0
