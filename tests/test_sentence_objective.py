"""The sentence-level objective of pretraining (sop, nsp, none): what each trains, how evaluation
names the sentence accuracy by its records, and run_pretraining's record of the objective."""

import json
import re

import numpy as np
import pytest
import tensorflow as tf

from albert_tf.checkpoints.run_config import CONFIG, RUN_CONFIG_FILE, recorded_config
from albert_tf.files.run_manifest import (RunManifestError, add_facts, read_manifest,
                                          require_fact, update_manifest)
from albert_tf.models.config import AlbertConfig
from albert_tf.tasks.pretraining.objective import (OBJECTIVE, SENTENCE_OBJECTIVES,
                                                   SentenceObjectiveError, recorded_objective)
from albert_tf.tasks.pretraining.task import PretrainingTask, model_inputs, pretraining_dataset_fn
from albert_tf.training import optimization
from albert_tf.training.task import EvalSet
from albert_tf.training.trainer import RunConfig, Trainer
from tests.command_runner import run_command
from tests.shared_setup import REFERENCE_MAX_PREDICTIONS, REFERENCE_SEQ_LENGTH, tiny_config
from tests.tolerances import sum_tolerance

SEQ, PREDICTIONS = REFERENCE_SEQ_LENGTH, REFERENCE_MAX_PREDICTIONS


def make_trainer(tmp_path, objective, steps=6):
    run_config = RunConfig(output_dir=str(tmp_path), train_batch_size=8, num_train_steps=steps,
                           save_checkpoints_steps=steps, iterations_per_loop=steps, seed=1)
    optimizer_fn = lambda: optimization.create_optimizer(  # noqa: E731
        "lamb", learning_rate=5e-3, num_train_steps=steps, num_warmup_steps=0)
    return Trainer(tf.distribute.get_strategy(), PretrainingTask(tiny_config(), objective),
                   optimizer_fn, run_config, log=lambda message: None)


def sentence_head_and_pooler(model):
    return [*model.sop_head.weights, *model.albert.pooler.weights]


def snapshot(variables):
    return [v.numpy().copy() for v in variables]


def first_batch(records, batch_size=8):
    data = pretraining_dataset_fn([records], SEQ, PREDICTIONS, is_training=False)
    return next(iter(data(batch_size, 0)))


def test_none_trains_the_encoder_on_the_mlm_loss_alone(tmp_path, pretraining_records):
    trainer = make_trainer(tmp_path, "none")
    model, task = trainer.model, trainer.task
    features = first_batch(pretraining_records)
    normalizers = task.loss_normalizers(features)
    loss, logs = task.train_loss(model, features, normalizers)
    assert sorted(logs) == ["masked_lm_accuracy", "masked_lm_loss"]
    sop_loss, sop_logs = PretrainingTask(tiny_config(), "sop").train_loss(model, features,
                                                                          normalizers)
    assert float(loss) == float(logs["masked_lm_loss"])
    # sop_loss is the same MLM loss plus the sentence loss, one float32 addition: undone in
    # float64 it is off by that addition's rounding, at most EPS / 2 of the sum.
    np.testing.assert_allclose(float(sop_loss) - float(sop_logs["sentence_order_loss"]),
                               float(loss), rtol=0, atol=sum_tolerance(1, abs(float(sop_loss))))
    assert float(sop_logs["sentence_order_loss"]) > 0.1  # so the sentence loss is really left out

    head = snapshot(sentence_head_and_pooler(model))
    encoder = snapshot(model.albert.transformer.weights)
    trainer.train(pretraining_dataset_fn([pretraining_records], SEQ, PREDICTIONS,
                                         is_training=True))
    assert trainer.global_step == 6
    for before, variable in zip(head, sentence_head_and_pooler(model)):
        assert np.array_equal(before, variable.numpy()), variable.path  # bit for bit
    assert all(not np.array_equal(before, v.numpy())
               for before, v in zip(encoder, model.albert.transformer.weights))
    assert trainer.history[-1]["loss"] == trainer.history[-1]["masked_lm_loss"]


def test_nsp_trains_the_sentence_head_on_nsp_records(tmp_path, nsp_pretraining_records):
    trainer = make_trainer(tmp_path, "nsp")
    model, task = trainer.model, trainer.task
    features = first_batch(nsp_pretraining_records)
    loss, logs = task.train_loss(model, features, task.loss_normalizers(features))
    assert sorted(logs) == ["masked_lm_accuracy", "masked_lm_loss", "next_sentence_accuracy",
                            "next_sentence_loss"]
    # The loss and the logs' float32 sum: each one addition of the same two terms, so within
    # the rounding of two additions of the sum's size.
    np.testing.assert_allclose(float(loss), float(logs["masked_lm_loss"] +
                                                  logs["next_sentence_loss"]),
                               rtol=0, atol=sum_tolerance(2, abs(float(loss))))
    head = snapshot(model.sop_head.weights)
    trainer.train(pretraining_dataset_fn([nsp_pretraining_records], SEQ, PREDICTIONS,
                                         is_training=True))
    assert all(not np.array_equal(before, v.numpy())
               for before, v in zip(head, model.sop_head.weights))
    assert "next_sentence_accuracy" in trainer.history[-1]


def direct_sentence_accuracy(model, records, batches, batch_size):
    """Accuracy of the 2-way head on the first ``batches`` batches, computed here from the logits."""
    data = pretraining_dataset_fn([records], SEQ, PREDICTIONS, is_training=False)
    correct = []
    for features in data(batch_size, 0).take(batches):
        logits = model(model_inputs(features), training=False)["sop_logits"]
        labels = tf.reshape(features["next_sentence_labels"], [-1]).numpy()
        correct.extend(np.argmax(logits.numpy(), axis=-1) == labels)
    return float(np.mean(correct))


def test_evaluation_names_the_sentence_accuracy_by_its_records(
        tmp_path, pretraining_records, nsp_pretraining_records):
    trainer = make_trainer(tmp_path, "none")
    metrics = {}
    for task_name, records in (("sop", pretraining_records), ("nsp", nsp_pretraining_records)):
        data = pretraining_dataset_fn([records], SEQ, PREDICTIONS, is_training=False)
        eval_set = EvalSet("", lambda: data(16, 0), context=task_name, max_steps=3)
        metrics[task_name] = trainer.evaluate(eval_set)
        # An MLM-only model's loss is the MLM loss; its untrained head is still measured.
        assert metrics[task_name]["loss"] == metrics[task_name]["masked_lm_loss"]
    assert sorted(metrics["sop"]) == ["loss", "masked_lm_accuracy", "masked_lm_loss",
                                      "sentence_order_accuracy", "sentence_order_loss"]
    assert sorted(metrics["nsp"]) == ["loss", "masked_lm_accuracy", "masked_lm_loss",
                                      "next_sentence_accuracy", "next_sentence_loss"]
    assert metrics["sop"]["sentence_order_accuracy"] == pytest.approx(
        direct_sentence_accuracy(trainer.model, pretraining_records, 3, 16))
    assert metrics["nsp"]["next_sentence_accuracy"] == pytest.approx(
        direct_sentence_accuracy(trainer.model, nsp_pretraining_records, 3, 16))
    with pytest.raises(ValueError, match="name their sentence task"):
        trainer.task.reduce({}, None)
    sop_task = PretrainingTask(tiny_config(), "sop")
    outputs = trainer.predict(pretraining_dataset_fn([nsp_pretraining_records], SEQ, PREDICTIONS,
                                                     is_training=False)(16, 0), max_steps=3)
    with_sentence = sop_task.reduce(outputs, "nsp")
    assert with_sentence["loss"] == pytest.approx(with_sentence["masked_lm_loss"]
                                                  + with_sentence["next_sentence_loss"])


def test_the_recorded_objective_refuses_another(tmp_path):
    source = "--sentence_objective"
    add_facts(str(tmp_path), {OBJECTIVE: ("nsp", source)})
    assert read_manifest(str(tmp_path)).fact("sentence_objective") == "nsp"
    assert recorded_objective(str(tmp_path)) == "nsp"
    require_fact(read_manifest(str(tmp_path)), OBJECTIVE, "nsp", source)
    add_facts(str(tmp_path), {OBJECTIVE: ("nsp", source)})  # the same objective again: kept
    for refuse in (lambda: require_fact(read_manifest(str(tmp_path)), OBJECTIVE, "sop", source),
                   lambda: add_facts(str(tmp_path), {OBJECTIVE: ("sop", source)})):
        with pytest.raises(RunManifestError) as raised:
            refuse()
        assert str(raised.value) == (
            f"--output_dir={tmp_path} holds checkpoints trained with --sentence_objective=nsp "
            "(run_manifest.json); this run has --sentence_objective=sop (--sentence_objective). "
            "Give the run's own settings to continue it, or use another --output_dir")
    assert recorded_objective(str(tmp_path)) == "nsp"
    update_manifest(str(tmp_path),
                    lambda content: content["facts"].update(sentence_objective="mlm"))
    with pytest.raises(SentenceObjectiveError) as raised:
        recorded_objective(str(tmp_path))
    assert str(raised.value) == (f"{tmp_path / 'run_manifest.json'}: the recorded sentence "
                                 "objective 'mlm' is not one of sop, nsp, none")


def test_an_earlier_versions_objective_file_is_read_and_checked(tmp_path):
    """sentence_objective.json of a directory an earlier version trained (it holds TF's checkpoint
    state file) is its objective."""
    (tmp_path / "checkpoint").write_text('model_checkpoint_path: "model.ckpt-2"\n')
    (tmp_path / "sentence_objective.json").write_text('{"sentence_objective": "nsp"}')
    assert recorded_objective(str(tmp_path)) == "nsp"
    with pytest.raises(RunManifestError, match=r"holds checkpoints trained with "
                                               r"--sentence_objective=nsp"):
        require_fact(read_manifest(str(tmp_path)), OBJECTIVE, "sop", "--sentence_objective")
    (tmp_path / "sentence_objective.json").write_text('{"sentence_objective": "mlm"}')
    with pytest.raises(SentenceObjectiveError) as raised:
        recorded_objective(str(tmp_path))
    assert str(raised.value) == (f"{tmp_path / 'sentence_objective.json'}: the recorded sentence "
                                 "objective 'mlm' is not one of sop, nsp, none")


def test_the_recorded_config_refuses_another_architecture_but_not_other_dropout(tmp_path):
    add_facts(str(tmp_path), {CONFIG: (tiny_config().to_dict(), "first.json")})
    add_facts(str(tmp_path), {CONFIG: (tiny_config(hidden_dropout_prob=0.1,
                                                     attention_probs_dropout_prob=0.1).to_dict(),
                                         "drop.json")})
    assert recorded_config(str(tmp_path)).hidden_dropout_prob == 0.0  # kept
    with pytest.raises(RunManifestError) as raised:
        require_fact(read_manifest(str(tmp_path)), CONFIG,
                       tiny_config(cross_layer_sharing="ffn", vocab_size=9).to_dict(),
                       "other.json")
    assert str(raised.value) == (
        f"--output_dir={tmp_path} holds checkpoints trained with the config "
        "cross_layer_sharing='all', vocab_size=8000 (run_manifest.json); this run has "
        "cross_layer_sharing='ffn', vocab_size=9 (other.json). Give the run's own settings to "
        "continue it, or use another --output_dir")


def run_pretraining(tmp_path, records, *extra):
    config_file = tmp_path / "albert_config.json"
    config_file.write_text(tiny_config().to_json_string())
    return run_command("run_pretraining.py", f"--albert_config_file={config_file}",
                       f"--input_file={records}", f"--output_dir={tmp_path / 'out'}",
                       f"--max_seq_length={SEQ}", f"--max_predictions_per_seq={PREDICTIONS}",
                       "--train_batch_size=4", "--eval_batch_size=8", "--max_eval_steps=2",
                       "--num_warmup_steps=0", "--save_checkpoints_steps=2",
                       "--iterations_per_loop=2", *extra)


def test_run_pretraining_records_the_objective_and_refuses_a_resume_with_another(
        tmp_path, pretraining_records, nsp_pretraining_records):
    output_dir = tmp_path / "out"
    first = run_pretraining(tmp_path, pretraining_records, "--sentence_objective=none",
                            "--num_train_steps=2", "--do_eval", "--eval_sentence_task=sop")
    assert first.returncode == 0, first.stderr
    manifest = read_manifest(str(output_dir))
    assert manifest.fact("sentence_objective") == "none"
    assert not (output_dir / "sentence_objective.json").exists()
    assert (AlbertConfig.from_dict(manifest.fact("config")).to_dict()
            == tiny_config().to_dict())
    # The config is also written beside the checkpoints, as a released model's directory has it.
    assert (AlbertConfig.from_json_file(str(output_dir / RUN_CONFIG_FILE)).to_dict()
            == tiny_config().to_dict())
    # An MLM-only run has no sentence task of its own: its evaluations are named by their records.
    assert not (output_dir / "eval_results.txt").exists()
    results = open(output_dir / "eval_results_sop.txt").read()
    assert "sentence_order_accuracy = " in results and "next_sentence" not in results
    sop_best = json.load(open(output_dir / "best_results_sop.json"))
    assert sop_best["metrics"]["sentence_order_accuracy"] == float(
        re.findall(r"sentence_order_accuracy = (\S+)", results)[-1])

    resumed = run_pretraining(tmp_path, nsp_pretraining_records, "--sentence_objective=nsp",
                              "--num_train_steps=4")
    assert resumed.returncode == 1
    assert resumed.stderr.strip().splitlines() == [
        f"run_pretraining: error: --output_dir={output_dir} holds checkpoints trained with "
        "--sentence_objective=none (run_manifest.json); this run has --sentence_objective=nsp "
        "(--sentence_objective). Give the run's own settings to continue it, or use another "
        "--output_dir"]
    assert tf.train.latest_checkpoint(str(output_dir)).endswith("model.ckpt-2")  # no step taken

    wider = tmp_path / "wider.json"
    wider.write_text(tiny_config(hidden_size=48, hidden_dropout_prob=0.1).to_json_string())
    other_config = run_pretraining(tmp_path, pretraining_records, "--sentence_objective=none",
                                   "--num_train_steps=4", f"--albert_config_file={wider}")
    assert other_config.returncode == 1
    assert other_config.stderr.strip().splitlines() == [
        f"run_pretraining: error: --output_dir={output_dir} holds checkpoints trained with the "
        "config hidden_size=32 (run_manifest.json); this run has hidden_size=48 "
        f"({wider}). Give the run's own settings to continue it, or use another --output_dir"]

    evaluated = run_pretraining(tmp_path, pretraining_records, "--sentence_objective=none",
                                "--num_train_steps=2", "--nodo_train", "--do_eval",
                                "--eval_sentence_task=nsp",
                                f"--eval_input_file={nsp_pretraining_records}",
                                "--max_eval_wait_secs=0")
    assert evaluated.returncode == 0, evaluated.stderr
    results = open(output_dir / "eval_results_nsp.txt").read()
    assert "next_sentence_accuracy = " in results and "sentence_order" not in results
    assert json.load(open(output_dir / "best_results_sop.json")) == sop_best  # kept beside


def run_command_line(output_dir, *arguments):
    return run_command("run_pretraining.py", "--albert_config_file=x.json",
                       "--input_file=x.tfrecord", f"--output_dir={output_dir}", *arguments)


def test_objective_flag_mistakes_are_one_line_before_any_work(tmp_path):
    output_dir = tmp_path / "out"
    unknown = run_command_line(output_dir, "--sentence_objective=mlm")
    assert unknown.returncode == 1
    assert unknown.stderr.strip().splitlines() == [
        "run_pretraining: error: flag --sentence_objective=mlm: value should be one of "
        f"<{'|'.join(SENTENCE_OBJECTIVES)}> (--help lists the flags)"]
    unnamed = run_command_line(output_dir, "--sentence_objective=none", "--do_eval")
    assert unnamed.returncode == 1
    [message] = unnamed.stderr.strip().splitlines()
    assert message.startswith("run_pretraining: error: ")
    assert ("--sentence_objective=none trains no sentence head, so --do_eval needs "
            "--eval_sentence_task=sop or nsp") in message
    assert not output_dir.exists()  # refused before the output checks create it
