"""The shared training loop on pretraining: learning, accumulation, warm start (and its report),
resume (and a config edited in between), non-finite stop."""

import os

import keras
import numpy as np
import pytest
import tensorflow as tf

from albert_tf.checkpoints.report import CheckpointMismatchError
from albert_tf.checkpoints.run_directory import RunDirectoryError
from albert_tf.checkpoints.tf1_format import load_tf1_checkpoint
from albert_tf.checkpoints.tf1_names import tf1_variable_map
from albert_tf.checkpoints.warm_start import CheckpointSource, resolve_checkpoint_source
from albert_tf.evaluation.checkpoint_sweep import SweepPolicy, sweep_checkpoints
from albert_tf.files.run_manifest import read_manifest
from albert_tf.tasks.classification.model import AlbertClassifierModel
from albert_tf.tasks.classification.task import ClassifierTask
from albert_tf.tasks.pretraining.model import AlbertPretrainingModel
from albert_tf.tasks.pretraining.task import PretrainingTask, pretraining_dataset_fn
from albert_tf.training import optimization
from albert_tf.training.task import EvalSet
from albert_tf.training.trainer import (NonFiniteLossError, RunConfig, TrainedModelError,
                                        Trainer)
from tests import numpy_albert
from tests.shared_setup import (REFERENCE_MAX_PREDICTIONS, REFERENCE_RECORDS, REFERENCE_SEQ_LENGTH,
                                tiny_config)
from tests.tf1_fixtures import write_reference_checkpoint
from tests.tolerances import assert_trained_alike, sum_tolerance

SEQ, PREDICTIONS = REFERENCE_SEQ_LENGTH, REFERENCE_MAX_PREDICTIONS


def make_trainer(tmp_path, config=None, optimizer="lamb", learning_rate=5e-3, steps=40, log=None,
                 strategy=None, **run):
    run_config = RunConfig(output_dir=str(tmp_path), **{
        "train_batch_size": 16, "num_train_steps": steps, "save_checkpoints_steps": steps,
        "iterations_per_loop": 10, **run})
    optimizer_fn = lambda: optimization.create_optimizer(  # noqa: E731
        optimizer, learning_rate=learning_rate, num_train_steps=steps, num_warmup_steps=5)
    return Trainer(strategy or tf.distribute.get_strategy(),
                   PretrainingTask(config or tiny_config()), optimizer_fn, run_config,
                   log=log or (lambda message: None))


def reference_data(is_training, records=REFERENCE_RECORDS):
    return pretraining_dataset_fn([records], SEQ, PREDICTIONS, is_training=is_training)


def test_on_one_device_the_trainer_reads_the_pipelines_own_dataset_and_trains_and_predicts_alike(
        tmp_path, pretraining_records):
    """OneDeviceStrategy's distributed dataset adds a per-device iterator with tf.data's autotuning
    on, whose deletion at the end of every pass waits up to a minute for the autotuning thread:
    on one device the Trainer iterates the pipeline's own dataset (autotuning off), and trains
    and predicts as under the default strategy."""
    train = pretraining_dataset_fn([pretraining_records], SEQ, PREDICTIONS, is_training=True)
    evaluate = pretraining_dataset_fn([pretraining_records], SEQ, PREDICTIONS, is_training=False)
    default = make_trainer(tmp_path / "default", steps=3, iterations_per_loop=3)
    one = make_trainer(tmp_path / "one", steps=3, iterations_per_loop=3,
                       strategy=tf.distribute.OneDeviceStrategy("/cpu:0"))
    one.model.set_weights(default.model.get_weights())
    assert one._distributed(evaluate(8, 0)).options().autotune.enabled is False
    default.train(train)
    one.train(train)
    # The same ops on the same batches in the same process: equal bit for bit (measured), so
    # any difference is another batch, order or step, not rounding.
    for got, want in zip(one.model.get_weights(), default.model.get_weights()):
        np.testing.assert_array_equal(got, want)
    predicted, expected = one.predict(evaluate(8, 0)), default.predict(evaluate(8, 0))
    assert predicted.keys() == expected.keys()
    for key in expected:
        np.testing.assert_array_equal(predicted[key], expected[key])


@pytest.mark.requires_shared_data
def test_training_on_reference_records_learns(tmp_path):
    trainer = make_trainer(tmp_path, steps=60)
    eval_data = reference_data(is_training=False)
    eval_set = EvalSet("", lambda: eval_data(32, 0), max_steps=4)
    before = trainer.evaluate(eval_set)
    trainer.train(reference_data(is_training=True))
    after = trainer.evaluate(eval_set)
    assert trainer.global_step == 60
    assert after["masked_lm_loss"] < before["masked_lm_loss"] - 0.5
    assert after["masked_lm_accuracy"] > before["masked_lm_accuracy"] + 0.01
    first, last = trainer.history[0], trainer.history[-1]
    assert last["loss"] < first["loss"]
    assert [h["step"] for h in trainer.history] == [10, 20, 30, 40, 50, 60]
    assert 0 < last["gradient_norm"] and last["learning_rate"] == 0.0  # linear decay ends at 0
    assert os.path.exists(tmp_path / "model.ckpt-60.index")
    assert os.listdir(tmp_path / "train")  # TensorBoard event file


def synthetic_dataset_fn(num_batches=4, nan_after=None, seed=0):
    """Fixed batches with the same number of masked positions per example (equal MLM weights)."""
    rng = np.random.default_rng(seed)

    def dataset_fn(batch_size, skip):
        examples = num_batches * 16
        ids = rng.integers(5, 8000, (examples, SEQ)).astype(np.int32)
        weights = np.ones((examples, PREDICTIONS), np.float32)
        if nan_after is not None:
            weights[nan_after * batch_size:] = np.nan
        features = {
            "input_ids": ids, "input_mask": np.ones_like(ids), "segment_ids": np.zeros_like(ids),
            "masked_lm_positions": np.tile(np.arange(1, PREDICTIONS + 1, dtype=np.int32),
                                           (examples, 1)),
            "masked_lm_ids": ids[:, 1:PREDICTIONS + 1],
            "masked_lm_weights": weights,
            "next_sentence_labels": rng.integers(0, 2, (examples, 1)).astype(np.int32),
        }
        dataset = tf.data.Dataset.from_tensor_slices(features)
        if nan_after is None:
            dataset = dataset.repeat()
        return dataset.batch(batch_size, drop_remainder=True).skip(skip)

    return dataset_fn


def with_a_defect(dataset_fn):
    """``dataset_fn`` with the second example of every batch replaced by the first (one example
    dropped, one counted twice)."""
    def defective(batch_size, skip):
        return dataset_fn(batch_size, skip).map(
            lambda batch: {name: tf.concat([value[:1], value[:1], value[2:]], 0)
                           for name, value in batch.items()})
    return defective


def test_gradient_accumulation_equals_the_full_batch(tmp_path):
    full = make_trainer(tmp_path / "full", steps=3, iterations_per_loop=3)
    accumulated = make_trainer(tmp_path / "acc", steps=3, iterations_per_loop=3,
                               gradient_accumulation_steps=2)
    defective = make_trainer(tmp_path / "defective", steps=3, iterations_per_loop=3)
    for src, *copies in zip(full.model.trainable_variables, accumulated.model.trainable_variables,
                            defective.model.trainable_variables):
        for dst in copies:
            dst.assign(src)
    full.train(synthetic_dataset_fn())
    accumulated.train(synthetic_dataset_fn())
    defective.train(with_a_defect(synthetic_dataset_fn()))
    assert accumulated.global_step == 3
    # The logged loss: a mean over the 3 steps of sums of 16 x 20 positive MLM terms (and 16 NSP
    # ones) in another order: within sum_tolerance of their number, relative (measured 2e-7).
    np.testing.assert_allclose(accumulated.history[-1]["loss"], full.history[-1]["loss"],
                               rtol=sum_tolerance(3 * 16 * (PREDICTIONS + 1), 1.0))
    # The weights: LAMB magnifies the rounding of gradients near 0 (tests/tolerances.py; measured
    # 1.2e-7), so held against the move of a real defect (0.02).
    assert_trained_alike([v.numpy() for v in accumulated.model.trainable_variables],
                         [v.numpy() for v in full.model.trainable_variables],
                         [v.numpy() for v in defective.model.trainable_variables])


def test_non_finite_loss_stops_and_keeps_last_good_checkpoint(tmp_path):
    trainer = make_trainer(tmp_path, steps=10, save_checkpoints_steps=2, iterations_per_loop=2)
    with pytest.raises(NonFiniteLossError, match=r"steps 5\.\.6.*model\.ckpt-4"):
        trainer.train(synthetic_dataset_fn(num_batches=8, nan_after=4))
    assert tf.train.latest_checkpoint(str(tmp_path)).endswith("model.ckpt-4")


def test_divergence_before_the_first_checkpoint_says_none_is_kept(tmp_path):
    trainer = make_trainer(tmp_path, steps=10, save_checkpoints_steps=4, iterations_per_loop=2)
    with pytest.raises(NonFiniteLossError) as raised:
        trainer.train(synthetic_dataset_fn(num_batches=8, nan_after=0))
    message = str(raised.value)
    assert "None" not in message
    assert "No checkpoint was saved yet (the first is at step 4)" in message
    assert tf.train.latest_checkpoint(str(tmp_path)) is None


def test_tf1_init_checkpoint_gives_the_directly_loaded_models_metrics(tmp_path, pretraining_records):
    config = tiny_config()
    write_reference_checkpoint(str(tmp_path / "ref" / "model.ckpt"),
                               numpy_albert.reference_variable_shapes(config))
    trainer = make_trainer(tmp_path / "run", config=config)
    message = trainer.initialize(init_checkpoint=resolve_checkpoint_source(str(tmp_path / "ref")))
    assert "reference checkpoint" in message
    eval_data = reference_data(is_training=False, records=pretraining_records)
    via_trainer = trainer.evaluate(EvalSet("", lambda: eval_data(32, 0), max_steps=3))

    direct = AlbertPretrainingModel(config)
    report = load_tf1_checkpoint(direct, str(tmp_path / "ref"))
    assert not report.missing
    task = PretrainingTask(config)
    outputs = [task.predict_outputs(direct, batch) for batch in eval_data(32, 0).take(3)]
    concatenated = {k: np.concatenate([o[k].numpy() for o in outputs]) for k in outputs[0]}
    direct_metrics = task.reduce(concatenated)
    for key, value in direct_metrics.items():
        assert via_trainer[key] == pytest.approx(value, rel=1e-6), key


def test_albert_tf_checkpoint_as_init_and_missing_init_is_an_error(tmp_path):
    first = make_trainer(tmp_path / "a", steps=2, iterations_per_loop=2)
    first.train(synthetic_dataset_fn())
    second = make_trainer(tmp_path / "b", steps=2)
    assert "albert_tf checkpoint" in second.initialize(
        resolve_checkpoint_source(str(tmp_path / "a")))
    # Every variable, including those the checkpoint stores under the optimizer's object path.
    for ours, theirs in zip(second.model.weights, first.model.weights):
        np.testing.assert_array_equal(ours.numpy(), theirs.numpy())
    assert second.global_step == 0  # warm start: weights only, fresh optimizer
    with pytest.raises(FileNotFoundError, match="nowhere"):
        resolve_checkpoint_source(str(tmp_path / "nowhere" / "model.ckpt"))


def test_bfloat16_with_xla_trains(tmp_path):
    trainer = make_trainer(tmp_path, steps=4, iterations_per_loop=2, dtype="bfloat16",
                           use_xla=True)
    try:
        trainer.train(synthetic_dataset_fn())
        assert trainer.model.albert.transformer.groups[0][0].compute_dtype == "bfloat16"
        assert all(v.dtype == "float32" for v in trainer.model.trainable_variables)
        assert np.isfinite(trainer.history[-1]["loss"])
    finally:
        keras.mixed_precision.set_global_policy("float32")


def test_resume_continues_from_the_last_trained_checkpoint_the_sweep_renamed(tmp_path):
    """The GLUE sweep renames its best checkpoint to model.ckpt-best; where that was the last
    trained one, a rerun resumed from an older checkpoint (the TF state file named the renamed
    one), losing the steps after it. The run manifest records the checkpoint under its new name."""
    first = make_trainer(tmp_path, steps=4, save_checkpoints_steps=2, iterations_per_loop=2)
    first.train(synthetic_dataset_fn())
    assert read_manifest(str(tmp_path)).trained == {"step": 4, "checkpoint": "model.ckpt-4"}
    sweep_checkpoints(str(tmp_path), lambda prefix: {"acc": 0.9 if prefix.endswith("4") else 0.5},
                      "acc", log=lambda m: None, policy=SweepPolicy.glue(train_step=4))
    assert not (tmp_path / "model.ckpt-4.index").exists()
    assert read_manifest(str(tmp_path)).trained == {"step": 4, "checkpoint": "model.ckpt-best"}
    resumed = make_trainer(tmp_path, steps=6, save_checkpoints_steps=2)
    assert resumed.latest_checkpoint().endswith("model.ckpt-best")
    assert "Resumed from" in resumed.initialize() and resumed.global_step == 4


def test_an_earlier_versions_renamed_last_checkpoint_is_resumed_and_a_lost_one_refused(tmp_path):
    """A directory of an earlier version (no manifest): its best_trial.txt says which step
    model.ckpt-best is, the TF state file which step was trained last. A checkpoint renamed by
    hand (not by the sweep) is refused: no silent restart from an older checkpoint."""
    first = make_trainer(tmp_path, steps=4, save_checkpoints_steps=2, iterations_per_loop=2)
    first.train(synthetic_dataset_fn())
    for suffix in (".index", ".data-00000-of-00001"):  # what the GLUE sweep's rename does
        os.rename(tmp_path / f"model.ckpt-4{suffix}", tmp_path / f"model.ckpt-best{suffix}")
    with pytest.raises(RunDirectoryError, match=r"was trained to step 4 \(run_manifest.json\), "
                                                r"but its checkpoint .*model.ckpt-4 is gone"):
        make_trainer(tmp_path, steps=4, save_checkpoints_steps=2).latest_checkpoint()
    (tmp_path / "run_manifest.json").unlink()  # as an earlier version left it
    (tmp_path / "best_trial.txt").write_text("4:4:0.9")
    resumed = make_trainer(tmp_path, steps=6, save_checkpoints_steps=2)
    assert resumed.latest_checkpoint().endswith("model.ckpt-best")
    assert "Resumed from" in resumed.initialize() and resumed.global_step == 4


def test_training_from_scratch_over_a_trained_model_is_refused(tmp_path):
    """A directory holding a best checkpoint but nothing to resume from (its numbered checkpoints
    gone): training there would start again from other weights beside it."""
    first = make_trainer(tmp_path, steps=2, save_checkpoints_steps=2, iterations_per_loop=2)
    first.train(synthetic_dataset_fn())
    for suffix in (".index", ".data-00000-of-00001"):
        os.rename(tmp_path / f"model.ckpt-2{suffix}", tmp_path / f"model.ckpt-best{suffix}")
    (tmp_path / "run_manifest.json").unlink()
    (tmp_path / "checkpoint").unlink()
    again = make_trainer(tmp_path, steps=2)
    assert again.latest_checkpoint() is None
    with pytest.raises(TrainedModelError, match=rf"{tmp_path} holds its best checkpoint "
                                                r".*model.ckpt-best, but no checkpoint to continue "
                                                r"its training from"):
        again.initialize()


def test_warm_start_from_another_tasks_checkpoint_reports_the_heads_left_random(tmp_path):
    config = tiny_config()
    classifier = AlbertClassifierModel(config, 3)
    prefix = tf.train.Checkpoint(model=classifier).write(str(tmp_path / "cls" / "model.ckpt-7"))
    logged = []
    trainer = make_trainer(tmp_path / "run", config=config, log=logged.append)
    message = trainer.initialize(resolve_checkpoint_source(prefix))
    assert message == f"Initialised the model from albert_tf checkpoint {prefix}."
    report = "\n".join(logged)
    assert f"WARNING: 7 head variable(s) are not in {prefix}" in report
    assert "cls/predictions/output_bias" in report
    assert "cls/seq_relationship/output_weights" in report
    assert "unused checkpoint variables (2): model/classifier/output_bias" in report
    loaded = tf1_variable_map(trainer.model)
    for name, variable in tf1_variable_map(classifier.albert).items():
        np.testing.assert_array_equal(loaded[name].numpy(), variable.numpy())


def test_warm_start_missing_encoder_variables_is_an_error_unless_grown_from_group0(tmp_path):
    one_group = AlbertPretrainingModel(tiny_config())
    prefix = tf.train.Checkpoint(model=one_group).write(str(tmp_path / "one" / "model.ckpt-1"))
    two_groups = tiny_config(num_hidden_groups=2)
    with pytest.raises(CheckpointMismatchError, match=r"lacks \d+ encoder variable.*group_1"):
        make_trainer(tmp_path / "a", config=two_groups).initialize(
            resolve_checkpoint_source(prefix))
    grown = make_trainer(tmp_path / "b", config=two_groups)
    grown.initialize(resolve_checkpoint_source(prefix), init_from_group0=True)
    groups = grown.model.albert.transformer.groups
    np.testing.assert_array_equal(groups[1][0].query.kernel.numpy(),
                                  one_group.albert.transformer.groups[0][0].query.kernel.numpy())
    np.testing.assert_array_equal(groups[0][0].query.kernel.numpy(),
                                  groups[1][0].query.kernel.numpy())


def test_warm_start_from_a_checkpoint_of_more_groups_than_the_config_is_an_error(tmp_path):
    """A config of fewer groups reads the pretrained encoder only in part, without a missing
    variable: refused, naming the config, not fine-tuned on group_0 alone."""
    two_groups = AlbertPretrainingModel(tiny_config(num_hidden_groups=2))
    prefix = tf.train.Checkpoint(model=two_groups).write(str(tmp_path / "two" / "model.ckpt-1"))
    with pytest.raises(CheckpointMismatchError,
                       match=r"encoder variable\(s\) that the model of one_group\.json has no "
                             r"place for, e\.g\. .*group_1"):
        make_trainer(tmp_path / "run", config=tiny_config()).initialize(
            resolve_checkpoint_source(prefix), config_file="one_group.json")


def test_resume_or_evaluation_after_editing_the_config_is_one_clear_error(tmp_path):
    make_trainer(tmp_path, steps=4).manager.save(checkpoint_number=2)
    wider = make_trainer(tmp_path, config=tiny_config(hidden_size=48), steps=4)
    with pytest.raises(CheckpointMismatchError,
                       match=r"model\.ckpt-2 does not fit the model of albert_config\.json: "
                             r"bert/encoder/embedding_hidden_mapping_in/kernel has shape "
                             r"\(16, 32\) in the checkpoint, the model expects \(16, 48\)"):
        wider.initialize(config_file="albert_config.json")
    with pytest.raises(CheckpointMismatchError, match=r"model\.ckpt-2 .*\(16, 32\).*\(16, 48\)"):
        wider.restore_weights(str(tmp_path / "model.ckpt-2"))  # what the evaluation sweep calls
    regrouped = make_trainer(tmp_path, config=tiny_config(num_hidden_groups=2), steps=4)
    # An --init_checkpoint (never read: the run resumes from its own checkpoint).
    elsewhere = CheckpointSource("elsewhere", str(tmp_path / "elsewhere"))
    with pytest.raises(CheckpointMismatchError, match=r"another model .* lacks \d+ .*group_1"):
        regrouped.initialize(elsewhere)
    try:  # another --dtype: a LossScaleOptimizer's state, not LAMB's
        float16 = make_trainer(tmp_path, steps=4, dtype="float16")
        with pytest.raises(CheckpointMismatchError, match=r"model\.ckpt-2 holds the state of "
                                                          r"another optimizer .*--dtype"):
            float16.initialize()
    finally:
        keras.mixed_precision.set_global_policy("float32")
    assert wider.global_step == 0 and regrouped.global_step == 0 and float16.global_step == 0
    same = make_trainer(tmp_path, steps=4)
    assert same.initialize(elsewhere).startswith(
        "Resumed from " + str(tmp_path / "model.ckpt-2"))


def _classification_data(num_examples=256, seq=16, seed=0):
    """int features of a quickly learnable two-class task: the label says whether the first token
    (the one the pooled output reads) is below 20 (tokens 5..34); the other tokens are noise."""
    rng = np.random.default_rng(seed)
    ids = rng.integers(5, 8000, (num_examples, seq)).astype(np.int32)
    ids[:, 0] = rng.integers(5, 35, num_examples)
    return {"input_ids": ids, "input_mask": np.ones_like(ids), "segment_ids": np.zeros_like(ids),
            "label_ids": (ids[:, 0] < 20).astype(np.int32),
            "is_real_example": np.ones(num_examples, np.int32)}


def _fine_tune_and_evaluate(tmp_path, dtype):
    """Metrics of a tiny classifier fine-tuned 20 steps (batch 32) under ``dtype``, seed fixed."""
    train, evaluation = _classification_data(), _classification_data(128, seed=1)
    run_config = RunConfig(output_dir=str(tmp_path / dtype), train_batch_size=32,
                           num_train_steps=20, save_checkpoints_steps=20, iterations_per_loop=20,
                           dtype=dtype, seed=3)
    trainer = Trainer(tf.distribute.get_strategy(), ClassifierTask(tiny_config(), ["accuracy"], 2),
                      lambda: optimization.create_optimizer("adamw", 1e-3, 20, 2), run_config,
                      log=lambda message: None)
    try:
        trainer.train(lambda batch_size, skip: tf.data.Dataset.from_tensor_slices(train)
                      .repeat().batch(batch_size, drop_remainder=True))
        eval_set = EvalSet("", lambda: tf.data.Dataset.from_tensor_slices(evaluation).batch(64))
        return trainer.evaluate(eval_set)
    finally:
        keras.mixed_precision.set_global_policy("float32")


@pytest.mark.slow  # two fine-tuning runs, bfloat16 emulated on CPU, about 25 s
def test_bfloat16_fine_tuning_on_cpu_matches_float32(tmp_path):
    """bfloat16 (mixed policy, no XLA) fine-tunes and evaluates on CPU to float32's metrics: the
    same accuracy within 0.05 and an eval loss within 0.02 (measured: 0.0998 vs 0.1003)."""
    float32 = _fine_tune_and_evaluate(tmp_path, "float32")
    bfloat16 = _fine_tune_and_evaluate(tmp_path, "bfloat16")
    assert float32["eval_accuracy"] > 0.9 and float32["eval_loss"] < 0.3  # the task was learned
    assert abs(bfloat16["eval_accuracy"] - float32["eval_accuracy"]) <= 0.05
    assert abs(bfloat16["eval_loss"] - float32["eval_loss"]) <= 0.02
