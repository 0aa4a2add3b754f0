"""GLUE fine-tuning: the classifier head, the reference's checkpoint sweep, run_classifier.py end to
end on real GLUE samples (train, sweep, predict, export: RTE is the harness's run,
tests/task_harness.py) and its fail-fast checks, run_glue.sh."""

import functools
import os
import pathlib
import sys

import numpy as np
import pytest
import tensorflow as tf

from albert_tf.checkpoints.tf1_format import export_tf1_checkpoint, load_tf1_checkpoint
from albert_tf.checkpoints.tf1_names import tf1_variable_map
from albert_tf.checkpoints.files import checkpoint_fingerprint
from albert_tf.evaluation.checkpoint_sweep import SweepPolicy, sweep_checkpoints
from albert_tf.files.run_manifest import read_manifest
from albert_tf.models.config import AlbertConfig
from albert_tf.serving.text_packing import pair_lengths
from albert_tf.tasks.classification.model import AlbertClassifierModel
from albert_tf.tasks.classification.task import ClassifierTask, write_predictions
from albert_tf.tasks.pretraining.model import AlbertPretrainingModel
from albert_tf.tokenization.full_tokenizer import FullTokenizer
from albert_tf.tokenization.normalization import preprocess_text
from data_prep.classification.features import convert_examples_to_features
from data_prep.classification.glue_tasks import get_processor
from data_prep.classification.processors import InputExample
from data_prep.common.pair_truncation import truncate_seq_pair
from tests import numpy_albert, shared_setup
from tests.command_runner import run_command, run_command_checked, run_subprocess
from tests.shared_setup import EN8K_MODEL, GLUE_DIR
from tests.task_cases import RTE_SEQ, glue_sample

SEQ = RTE_SEQ


def tiny_config(**overrides) -> AlbertConfig:
    """The shared tiny ALBERT with positions up to ``SEQ``; ``overrides`` replace config values."""
    return shared_setup.tiny_config(**{"max_position_embeddings": SEQ, **overrides})


def random_inputs(batch=3, seq=10, vocab=8000, seed=0):
    rng = np.random.default_rng(seed)
    mask = np.ones((batch, seq), np.int32)
    mask[0, 6:] = 0
    segments = np.zeros((batch, seq), np.int32)
    segments[:, 5:] = 1
    return {"input_ids": rng.integers(0, vocab, (batch, seq)).astype(np.int32),
            "input_mask": mask, "segment_ids": segments * mask}


# -- the head -------------------------------------------------------------------------------------

def test_classifier_logits_are_pooled_times_weights_plus_bias():
    config = tiny_config()
    model = AlbertClassifierModel(config, num_labels=3)
    model.classifier.output_bias.assign([0.1, -0.2, 0.3])
    inputs = random_inputs()
    logits = model(inputs, training=False)["logits"].numpy()
    weights = {name: variable.numpy() for name, variable in
               tf1_variable_map(model).items()}
    pooled = numpy_albert.forward(weights, config, inputs["input_ids"], inputs["input_mask"],
                                  inputs["segment_ids"])["pooled_output"]
    expected = pooled @ weights["output_weights"].T + weights["output_bias"]
    assert logits.shape == (3, 3)
    np.testing.assert_allclose(logits, expected, atol=2e-5)


def test_classifier_initialisation_and_fixed_dropout():
    model = AlbertClassifierModel(tiny_config(), num_labels=2)
    weights = model.classifier.output_weights.numpy()
    assert weights.shape == (2, 32) and model.classifier.output_bias.shape == (2,)
    assert np.all(model.classifier.output_bias.numpy() == 0)
    assert 0 < np.abs(weights).max() <= 2 * 0.02  # truncated normal, stddev initializer_range
    # Identity weights expose the dropped-out pooled vector: 10% zeros, the rest scaled by 1/0.9.
    head = AlbertClassifierModel(tiny_config(hidden_size=200), num_labels=200).classifier
    head.output_weights.assign(np.eye(200, dtype=np.float32))
    dropped = head(tf.ones([200, 200]), training=True).numpy()
    assert 0.08 < np.mean(dropped == 0) < 0.12
    np.testing.assert_allclose(dropped[dropped != 0], 1 / 0.9, rtol=1e-6)
    np.testing.assert_array_equal(head(tf.ones([2, 200]), training=False).numpy(), np.ones((2, 200)))


def test_head_reference_names_round_trip_and_warm_start_from_pretraining(tmp_path):
    config = tiny_config()
    model = AlbertClassifierModel(config, num_labels=2)
    model.classifier.output_bias.assign([0.5, -0.5])
    prefix = export_tf1_checkpoint(model, str(tmp_path / "cls" / "model.ckpt"))
    shapes = dict(tf.train.list_variables(prefix))
    assert shapes["output_weights"] == [2, 32] and shapes["output_bias"] == [2]
    restored = AlbertClassifierModel(config, num_labels=2)
    report = load_tf1_checkpoint(restored, prefix)
    assert report.missing == [] and report.unused == []
    np.testing.assert_array_equal(restored.classifier.output_weights.numpy(),
                                  model.classifier.output_weights.numpy())
    np.testing.assert_array_equal(restored.classifier.output_bias.numpy(), [0.5, -0.5])
    # A pretraining checkpoint: the encoder loads, only the new head is missing.
    pretrained = export_tf1_checkpoint(AlbertPretrainingModel(config),
                                       str(tmp_path / "pre" / "model.ckpt"))
    report = load_tf1_checkpoint(AlbertClassifierModel(config, 2), pretrained)
    assert sorted(report.missing) == ["output_bias", "output_weights"]
    report.require_complete_encoder()
    assert any(name.startswith("cls/") for name in report.unused)


def test_in_graph_pair_truncation_equals_the_reference_loop():
    cases = [(a, b, m) for a in range(13) for b in range(13) for m in range(11)]
    expected = []
    for a, b, m in cases:
        tokens_a, tokens_b = list(range(a)), list(range(b))
        tokens_a, tokens_b = truncate_seq_pair(tokens_a, tokens_b, m)
        expected.append((len(tokens_a), len(tokens_b)))
    new_a, new_b = pair_lengths(tf.constant([c[0] for c in cases], tf.int64),
                                tf.constant([c[1] for c in cases], tf.int64),
                                tf.constant([c[2] for c in cases], tf.int64))
    assert list(zip(new_a.numpy().tolist(), new_b.numpy().tolist())) == expected


def test_padding_examples_weigh_nothing_and_are_not_written(tmp_path):
    task = ClassifierTask(tiny_config(), ("accuracy", "f1"), num_labels=2)
    outputs = {"predictions": np.array([1, 0, 1, 1]), "label_ids": np.array([1, 1, 1, 0]),
               "per_example_loss": np.array([0.1, 2.0, 0.3, 99.0]),
               "is_real_example": np.array([1, 1, 1, 0]),
               "probabilities": np.array([[0.2, 0.8], [0.6, 0.4], [0.3, 0.7], [0.5, 0.5]])}
    metrics = task.reduce(outputs)
    # Real examples: 2 of 3 right; class 1: tp 2, fp 0, fn 1 -> F1 = 4/5.
    assert metrics == pytest.approx({"eval_accuracy": 2 / 3, "f1": 0.8, "eval_loss": 0.8,
                                     "loss": 0.8})
    paths = (str(tmp_path / "test_results.tsv"), str(tmp_path / "submit_results.tsv"))
    write_predictions(*paths, ["a", "b", "c"], outputs, ["0", "1"])
    assert (tmp_path / "test_results.tsv").read_text() == "0.2\t0.8\n0.6\t0.4\n0.3\t0.7\n"
    assert (tmp_path / "submit_results.tsv").read_text() == "index\tprediction\na\t1\nb\t0\nc\t1\n"
    with pytest.raises(ValueError, match="3 real predictions for 2 examples"):
        write_predictions(*paths, ["a", "b"], outputs, ["0", "1"])


# -- the sweep ------------------------------------------------------------------------------------

def fake_checkpoint(directory, step):
    for suffix in (".data-00000-of-00001", ".index"):
        (directory / f"model.ckpt-{step}{suffix}").write_text(f"step {step}")


def blocks_of(path):
    return [block.strip().splitlines() for block in path.read_text().split("=" * 50 + "\n")
            if block.strip()]


def test_glue_sweep_deletes_renames_and_resumes(tmp_path):
    values = {100: 0.5, 200: 0.7, 300: 0.6, 400: 0.65, 500: 0.8, 600: 0.75, 700: 0.7}
    evaluated = []

    def evaluate(prefix):
        step = int(prefix.rsplit("-", 1)[1])
        evaluated.append(step)
        assert os.path.exists(prefix + ".index")
        return {"eval_accuracy": values[step], "eval_loss": 1.0 - values[step]}

    for step in (100, 200, 300, 400, 500):
        fake_checkpoint(tmp_path, step)
    best_step, best = sweep_checkpoints(str(tmp_path), evaluate, "eval_accuracy", log=lambda m: None,
                                        policy=SweepPolicy.glue(train_step=500))
    assert (best_step, best["eval_accuracy"]) == (500, 0.8)
    assert evaluated == [100, 200, 300, 400, 500]
    # Non-best evaluated checkpoints with more than one newer checkpoint are gone; 400 has only 500
    # after it and stays; 500 became model.ckpt-best.
    remaining = sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("model.ckpt"))
    assert remaining == ["model.ckpt-400.data-00000-of-00001", "model.ckpt-400.index",
                         "model.ckpt-best.data-00000-of-00001", "model.ckpt-best.index"]
    assert (tmp_path / "model.ckpt-best.index").read_text() == "step 500"
    assert (tmp_path / "best_trial.txt").read_text() == "500:500:0.8"
    blocks = blocks_of(tmp_path / "eval_results.txt")
    assert blocks[0] == ["eval_accuracy = 0.5", "eval_loss = 0.5", "global_step = 100", "best = -1"]
    # "best" is the best value before each checkpoint, as in the reference.
    assert [block[-1] for block in blocks] == ["best = -1", "best = 0.5", "best = 0.7", "best = 0.7",
                                               "best = 0.7"]

    # The sweep's state is the run manifest's (best_trial.txt is the reference's output only).
    manifest = read_manifest(str(tmp_path))
    assert manifest.sweep() == {"eval_data": None, "last_step": 500, "best_step": 500,
                                "best_value": 0.8, "best_metrics": {
                                    "eval_accuracy": 0.8, "eval_loss": 1.0 - 0.8,
                                    "global_step": 500}}
    assert manifest.best["step"] == 500 and manifest.best["fingerprint"] == (
        checkpoint_fingerprint(str(tmp_path / "model.ckpt-best")))

    # Training goes on (as with train_step raised): a resumed sweep evaluates only the new ones and,
    # while the training run holds the directory, waits for the last, which appears while it
    # sleeps.
    fake_checkpoint(tmp_path, 600)
    sleeps = []

    def sleep(seconds):
        sleeps.append(seconds)
        fake_checkpoint(tmp_path, 700)

    evaluated.clear()
    best_step, _ = sweep_checkpoints(str(tmp_path), evaluate, "eval_accuracy", log=lambda m: None,
                                     policy=SweepPolicy.glue(train_step=700, poll_seconds=5),
                                     sleep=sleep, training_alive=lambda: True)
    assert evaluated == [600, 700] and sleeps == [5] and best_step == 500
    assert (tmp_path / "best_trial.txt").read_text() == "700:500:0.8"
    assert read_manifest(str(tmp_path)).sweep()["last_step"] == 700
    assert len(blocks_of(tmp_path / "eval_results.txt")) == 7  # earlier results kept
    remaining = sorted(p.name for p in tmp_path.glob("*.index"))
    assert remaining == ["model.ckpt-600.index", "model.ckpt-700.index", "model.ckpt-best.index"]
    assert (tmp_path / "model.ckpt-best.index").read_text() == "step 500"


def test_a_resumed_sweep_whose_best_came_earlier_returns_all_its_metrics(tmp_path):
    """A rerun after the sweep ended (or a resumed one whose best came earlier) returns the best's
    metrics as that sweep recorded them, every one, not just the selection metric:
    they become best_results.json, TensorBoard's and run_classifier's early-exit results again.
    They are kept in the run manifest with the sweep's state."""
    metrics = {10: {"eval_accuracy": 0.75, "eval_loss": 0.1 + 0.2, "class/a = b/f1": 0.5},
               20: {"eval_accuracy": 0.5, "eval_loss": 0.9, "class/a = b/f1": 0.25}}
    for step in metrics:
        fake_checkpoint(tmp_path, step)
    sweep = functools.partial(sweep_checkpoints, str(tmp_path),
                              lambda prefix: metrics[int(prefix.rsplit("-", 1)[1])],
                              "eval_accuracy", log=lambda m: None,
                              policy=SweepPolicy.glue(train_step=20, max_wait_seconds=0))
    first = sweep()
    assert first == (10, {**metrics[10], "global_step": 10})
    assert sweep() == first
    fake_checkpoint(tmp_path, 30)  # a later checkpoint, not better
    metrics[30] = metrics[20]
    assert sweep(policy=SweepPolicy.glue(train_step=30, max_wait_seconds=0)) == first
    # The best's metrics are the run manifest's: eval_results.txt lost, they are all still there.
    (tmp_path / "eval_results.txt").write_text("")
    assert sweep() == first


def test_glue_sweep_gives_up_waiting_and_default_sweep_is_one_pass(tmp_path):
    fake_checkpoint(tmp_path, 10)
    sleeps = []
    best_step, _ = sweep_checkpoints(
        str(tmp_path), lambda prefix: {"pearson": 0.3}, "pearson", log=lambda m: None,
        policy=SweepPolicy.glue(train_step=50, poll_seconds=60, max_wait_seconds=120),
        sleep=sleeps.append, training_alive=lambda: True)
    assert best_step == 10 and sleeps == [60, 60]
    assert (tmp_path / "model.ckpt-best.index").exists()
    # Pretraining's flavour: one pass, best copied, its own summary line.
    other = tmp_path / "pretraining"
    other.mkdir()
    for step in (1, 2):
        fake_checkpoint(other, step)
    sweep_checkpoints(str(other), lambda prefix: {"acc": 1.0 / int(prefix[-1])}, "acc",
                      log=lambda m: None)
    assert (other / "model.ckpt-1.index").exists() and (other / "model.ckpt-2.index").exists()
    assert (other / "model.ckpt-best.index").read_text() == "step 1"
    assert blocks_of(other / "eval_results.txt")[1][-1] == "best acc = 1.0 (step 1)"
    with pytest.raises(FileNotFoundError, match="No model.ckpt"):
        sweep_checkpoints(str(tmp_path / "pretraining" / "empty"), lambda p: {}, "acc")


def test_the_best_checkpoint_is_the_one_the_sweep_chose_or_refused(tmp_path):
    """model.ckpt-best is checked against the fingerprint the sweep recorded: replaced files are
    refused (its results would describe other weights); a best the sweep chose but a stop kept
    from reaching model.ckpt-best is found by its fingerprint and moved there."""
    from albert_tf.checkpoints.run_directory import RunDirectoryError, recorded_best, settled_best
    from albert_tf.files.run_manifest import read_manifest
    from albert_tf.evaluation.best_checkpoint import best_checkpoint_prefix

    for step in (1, 2):
        fake_checkpoint(tmp_path, step)
    sweep_checkpoints(str(tmp_path), lambda prefix: {"acc": 1.0 / int(prefix[-1])}, "acc",
                      log=lambda m: None)
    best = str(tmp_path / "model.ckpt-best")
    assert settled_best(str(tmp_path)) == best == best_checkpoint_prefix(read_manifest(str(tmp_path)))
    for path in tmp_path.glob("model.ckpt-best.*"):
        path.unlink()  # as if stopped between recording the best and copying it
    assert recorded_best(read_manifest(str(tmp_path))) == str(tmp_path / "model.ckpt-1")
    assert not (tmp_path / "model.ckpt-best.index").exists()  # read only
    assert settled_best(str(tmp_path)) == best
    assert (tmp_path / "model.ckpt-best.index").read_text() == "step 1"
    (tmp_path / "model.ckpt-best.index").write_text("step 2")  # replaced by hand
    assert best_checkpoint_prefix(read_manifest(str(tmp_path))) == str(tmp_path / "model.ckpt-1")  # the chosen
    for path in tmp_path.glob("model.ckpt-1.*"):
        path.unlink()
    with pytest.raises(RunDirectoryError, match=r"model.ckpt-best is not the checkpoint the sweep "
                                                r"of .* chose \(step 1, acc 1.0; "
                                                r"run_manifest.json\): its files were replaced"):
        best_checkpoint_prefix(read_manifest(str(tmp_path)))


def test_a_glue_sweep_waits_only_while_a_training_run_holds_the_directory(tmp_path):
    """--do_eval beside training polls for the checkpoints still to come; with no training run
    holding the directory none will come: the sweep evaluates what is there and ends (one more
    look first), and with no checkpoint at all it stops at once, saying why."""
    fake_checkpoint(tmp_path, 10)
    sleeps, lines, looks = [], [], []

    def training_alive():
        looks.append(1)
        return False

    best_step, _ = sweep_checkpoints(
        str(tmp_path), lambda prefix: {"pearson": 0.3}, "pearson", log=lines.append,
        policy=SweepPolicy.glue(train_step=50, poll_seconds=60), sleep=sleeps.append,
        training_alive=training_alive)
    assert best_step == 10 and sleeps == [] and looks
    assert (f"No training run holds {tmp_path}: evaluated its checkpoints up to step 10 (step 50 "
            "will not come).") in lines
    assert (tmp_path / "model.ckpt-best.index").read_text() == "step 10"
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(FileNotFoundError, match=r"No model.ckpt-<step> checkpoint in .*, and no "
                                                r"training run holds it"):
        sweep_checkpoints(str(empty), lambda p: {}, "acc", log=lambda m: None,
                          policy=SweepPolicy.glue(train_step=50), sleep=sleeps.append)
    assert sleeps == []
    # While a training run holds it, an empty directory is waited on (up to the limit).
    with pytest.raises(FileNotFoundError, match="No model.ckpt"):
        sweep_checkpoints(str(empty), lambda p: {}, "acc", log=lambda m: None,
                          policy=SweepPolicy.glue(train_step=50, poll_seconds=60,
                                                  max_wait_seconds=60),
                          sleep=sleeps.append, training_alive=lambda: True)
    assert sleeps == [60]


def test_a_finished_run_trains_nothing_and_a_longer_one_resumes_from_its_last_step(tmp_path):
    """A rerun of a finished run says so in one line (with its best checkpoint) and trains and
    evaluates nothing; a rerun with more steps resumes from the last trained step, also where the
    sweep renamed that checkpoint to model.ckpt-best."""
    from tests.test_early_exit import tiny_own_data_run

    _, output_dir, flags = tiny_own_data_run(tmp_path)
    run = functools.partial(run_command, "run_classifier.py", *flags, "--do_train", "--do_eval",
                            "--save_checkpoints_steps=1")
    first = run("--train_step=2")
    assert first.returncode == 0, first.stderr[-3000:]
    assert "Evaluated" in first.stdout + first.stderr
    manifest = read_manifest(str(output_dir))
    assert manifest.trained["step"] == 2
    best = manifest.best
    files = {path.name: path.read_bytes() for path in output_dir.iterdir() if path.is_file()
             and path.name != "run_manifest.json" and not path.name.startswith(".albert_tf")}
    again = run("--train_step=2")
    assert again.returncode == 0, again.stderr[-3000:]
    assert (f"The run in {output_dir} is finished at step 2 (of 2); its best checkpoint: step "
            f"{best['step']}, eval_accuracy {best['metrics']['eval_accuracy']:.4f} "
            "(model.ckpt-best). Nothing to train.") in again.stdout
    assert "Evaluated" not in again.stdout + again.stderr
    assert {path.name: path.read_bytes() for path in output_dir.iterdir() if path.is_file()
            and path.name != "run_manifest.json" and not path.name.startswith(".albert_tf")
            and path.name in files} == files
    assert not (output_dir / "model.ckpt-3.index").exists()
    longer = run("--train_step=3")
    assert longer.returncode == 0, longer.stderr[-3000:]
    trained = os.path.join(str(output_dir), manifest.trained["checkpoint"])
    assert f"Resumed from {trained} at step 2." in longer.stdout
    assert read_manifest(str(output_dir)).trained["step"] == 3


# -- run_classifier.py ----------------------------------------------------------------------------

run_classifier = functools.partial(run_command_checked, "run_classifier.py")


def write_config(path, **overrides):
    path.write_text(tiny_config(**overrides).to_json_string())
    return str(path)


def common_flags(task, data_dir, config, output_dir):
    return [f"--task_name={task}", f"--data_dir={data_dir}", f"--albert_config_file={config}",
            f"--spm_model_file={EN8K_MODEL}", f"--output_dir={output_dir}",
            f"--max_seq_length={SEQ}", "--learning_rate=1e-3"]


def features_of(task, data_dir, split):
    """Inputs and labels of a split, converted here with data_prep (not through run_classifier)."""
    processor = get_processor(task)
    examples = processor.get_examples(str(data_dir), split)
    features = convert_examples_to_features(examples, processor.get_labels(), SEQ,
                                            FullTokenizer(spm_model_file=EN8K_MODEL))
    inputs = {name: np.array([getattr(f, name) for f in features], np.int32)
              for name in ("input_ids", "input_mask", "segment_ids")}
    return examples, inputs, np.array([f.label_id for f in features])


def restore_best(output_dir, num_labels):
    model = AlbertClassifierModel(tiny_config(), num_labels)
    status = tf.train.Checkpoint(model=model).read(str(output_dir / "model.ckpt-best"))
    status.expect_partial().assert_existing_objects_matched()
    return model


def softmax(logits):
    exp = np.exp(logits - logits.max(-1, keepdims=True))
    return exp / exp.sum(-1, keepdims=True)


@pytest.mark.requires_shared_data
def test_rte_train_sweep_predict_export(task_runs):
    """The harness's RTE run: 40 examples per split, from a pretraining checkpoint in the
    reference's names, two steps (a checkpoint after each), the sweep, the predictions and the
    SavedModels with --threshold_to_export=0.25."""
    run = task_runs.get("glue_rte")
    result, output_dir, export_dir = run.result, run.output_dir, run.export_dir
    data_dir = pathlib.Path(run.flags["data_dir"])
    assert "missing from the checkpoint (2): output_weights, output_bias" in result.stdout

    # eval_results.txt: one block per checkpoint, the reference's keys; best_trial.txt agrees.
    blocks = blocks_of(output_dir / "eval_results.txt")
    parsed = [dict(line.split(" = ") for line in block[:-1]) for block in blocks]
    assert [p["global_step"] for p in parsed] == ["1", "2"]
    assert all(sorted(p) == ["eval_accuracy", "eval_loss", "global_step", "loss"] for p in parsed)
    accuracies = [float(p["eval_accuracy"]) for p in parsed]
    best_index = int(np.argmax(accuracies))  # first maximum: later ties do not replace it
    best_step = best_index + 1
    last, step, value = (output_dir / "best_trial.txt").read_text().split(":")
    assert (int(last), int(step), float(value)) == (2, best_step, accuracies[best_index])
    assert (output_dir / "model.ckpt-best.index").exists()
    assert not (output_dir / f"model.ckpt-{best_step}.index").exists()

    # The best checkpoint's dev metrics, recomputed here with NumPy.
    model = restore_best(output_dir, 2)
    _, dev_inputs, dev_labels = features_of("rte", data_dir, "dev")
    logits = model(dev_inputs, training=False)["logits"].numpy().astype(np.float64)
    log_probs = np.log(softmax(logits))
    assert accuracies[best_index] == pytest.approx(np.mean(logits.argmax(-1) == dev_labels))
    assert float(parsed[best_index]["eval_loss"]) == pytest.approx(
        -np.mean(log_probs[np.arange(len(dev_labels)), dev_labels]), rel=1e-5)

    # test_results.tsv / submit_results.tsv: one line per real test example, in file order.
    examples, test_inputs, _ = features_of("rte", data_dir, "test")
    expected = softmax(model(test_inputs, training=False)["logits"].numpy().astype(np.float64))
    rows = (output_dir / "test_results.tsv").read_text().splitlines()
    probabilities = np.array([[float(v) for v in row.split("\t")] for row in rows])
    assert probabilities.shape == (40, 2)
    np.testing.assert_allclose(probabilities.sum(-1), 1.0, atol=1e-6)
    np.testing.assert_allclose(probabilities, expected, atol=1e-5)
    submit = (output_dir / "submit_results.tsv").read_text().splitlines()
    assert submit[0] == "index\tprediction" and len(submit) == 41
    test_guids = [line.split("\t")[0] for line in
                  (data_dir / "RTE" / "test.tsv").read_text().splitlines()[1:]]
    labels = ["entailment", "not_entailment"]
    assert submit[1:] == [f"{guid}\t{labels[i]}" for guid, i in
                          zip(test_guids, probabilities.argmax(-1))]
    assert [e.guid for e in examples] == test_guids

    # The SavedModels give the Keras model's numbers (the text signature needs tf-text's ops; the
    # ids-only one is loaded without them in tests/test_export_tasks.py).
    import tensorflow_text  # noqa: F401
    assert sorted(os.listdir(export_dir)) == ["ids_only", "with_text"]
    loaded = tf.saved_model.load(str(export_dir / "with_text"))
    serve = loaded.signatures["serving_default"]
    outputs = serve(**{k: tf.constant(v[:7, :30]) for k, v in test_inputs.items()})
    keras_logits = model({k: v[:7, :30] for k, v in test_inputs.items()}, training=False)["logits"]
    np.testing.assert_allclose(outputs["probabilities"].numpy(), softmax(keras_logits.numpy()),
                               atol=1e-6)
    np.testing.assert_array_equal(outputs["predictions"].numpy(), keras_logits.numpy().argmax(-1))
    assert float(outputs["threshold"]) == 0.25
    for variant in ("ids_only", "with_text"):
        assert (export_dir / variant / "assets.extra" / "labels.txt").read_text() == \
            "entailment\nnot_entailment\n"

    # serve_text: raw strings in, the numbers of data_prep's features (pairs truncated to S, and
    # single sentences where text_b is empty or blank).
    raw = [line.split("\t")[1:3] for line in
           (data_dir / "RTE" / "test.tsv").read_text().splitlines()[1:9]]
    raw[0][1], raw[1][1] = "", "  "
    text_examples = [InputExample(str(i), preprocess_text(a, lower=True),
                                  preprocess_text(b, lower=True) or None, None)
                     for i, (a, b) in enumerate(raw)]
    features = convert_examples_to_features(text_examples, labels, SEQ,
                                            FullTokenizer(spm_model_file=EN8K_MODEL))
    assert sum(f.input_mask[-1] for f in features) >= 3  # some pairs were truncated
    inputs = {name: np.array([getattr(f, name) for f in features], np.int32)
              for name in ("input_ids", "input_mask", "segment_ids")}
    from_text = loaded.signatures["serve_text"](text_a=tf.constant([a for a, _ in raw]),
                                                text_b=tf.constant([b for _, b in raw]))
    np.testing.assert_allclose(from_text["probabilities"].numpy(),
                               softmax(model(inputs, training=False)["logits"].numpy()), atol=1e-5)


@pytest.mark.requires_shared_data
def test_sts_b_regression(tmp_path):
    data_dir = glue_sample(tmp_path / "glue", "STS-B", rows=9, source={"test": "dev"})
    output_dir = tmp_path / "out"
    run_classifier(*common_flags("sts-b", data_dir, write_config(tmp_path / "config.json"),
                                 output_dir),
                   "--do_train", "--do_eval", "--do_predict", "--train_step=4",
                   "--save_checkpoints_steps=2", "--train_batch_size=4", "--eval_batch_size=4")
    blocks = [dict(line.split(" = ") for line in block[:-1])
              for block in blocks_of(output_dir / "eval_results.txt")]
    assert sorted(blocks[0]) == ["MSE", "eval_loss", "global_step", "loss", "pearson", "spearman"]
    pearsons = [float(b["pearson"]) for b in blocks]
    assert (output_dir / "best_trial.txt").read_text().split(":")[1] == str(2 * (np.argmax(pearsons) + 1))
    for block in blocks:  # the loss is the mean squared error
        assert float(block["MSE"]) == pytest.approx(float(block["eval_loss"]), rel=1e-5)

    model = restore_best(output_dir, 1)
    examples, test_inputs, _ = features_of("sts-b", data_dir, "test")
    scores = model(test_inputs, training=False)["logits"].numpy()[:, 0]
    results = [float(line) for line in (output_dir / "test_results.tsv").read_text().splitlines()]
    np.testing.assert_allclose(results, scores, atol=1e-5)
    submit = (output_dir / "submit_results.tsv").read_text().splitlines()
    assert submit[0] == "index\tprediction" and len(submit) == 10
    for line, example, score in zip(submit[1:], examples, scores):
        guid, value = line.split("\t")
        assert guid == example.guid and float(value) == pytest.approx(score, abs=1e-5)


def write_mnli(root):
    """A tiny MNLI folder in MNLI's column layout, sentences taken from the real RTE sample."""
    with open(os.path.join(GLUE_DIR, "RTE", "train.tsv"), encoding="utf-8") as handle:
        pairs = [line.rstrip("\n").split("\t")[1:3] for line in handle.readlines()[1:25]]
    labels = ["contradiction", "entailment", "neutral"]
    labelled_header = "\t".join([f"c{i}" for i in range(8)] + ["sentence1", "sentence2",
                                                               "gold_label"])
    test_header = "\t".join([f"c{i}" for i in range(8)] + ["sentence1", "sentence2"])
    mnli = root / "MNLI"
    mnli.mkdir(parents=True)

    def lines(selected, labelled):
        out = []
        for index, (a, b) in selected:
            extra = [labels[index % 3]] if labelled else []
            out.append("\t".join([str(index)] + ["x"] * 7 + [a, b] + extra))
        return out

    numbered = list(enumerate(pairs))
    files = {"train.tsv": (numbered, True), "dev_matched.tsv": (numbered[:8], True),
             "dev_mismatched.tsv": (numbered[8:14], True),
             "test_matched.tsv": (numbered[14:19], False),
             "test_mismatched.tsv": (numbered[19:], False)}
    for name, (selected, labelled) in files.items():
        header = labelled_header if labelled else test_header
        (mnli / name).write_text("\n".join([header] + lines(selected, labelled)) + "\n")
    return root


@pytest.mark.requires_shared_data
def test_mnli_evaluates_matched_and_mismatched(tmp_path):
    data_dir = write_mnli(tmp_path / "glue")
    output_dir = tmp_path / "out"
    run_classifier(*common_flags("mnli", data_dir, write_config(tmp_path / "config.json"),
                                 output_dir),
                   "--do_train", "--do_eval", "--do_predict", "--train_step=2",
                   "--save_checkpoints_steps=2", "--train_batch_size=4")
    block = dict(line.split(" = ") for line in blocks_of(output_dir / "eval_results.txt")[0][:-1])
    assert sorted(block) == ["eval_accuracy", "eval_loss", "global_step", "loss",
                             "mismatched_eval_accuracy", "mismatched_eval_loss", "mismatched_loss"]
    # 8 matched and 6 mismatched dev examples: accuracies are multiples of 1/8 and 1/6.
    assert float(block["eval_accuracy"]) * 8 == pytest.approx(round(float(block["eval_accuracy"]) * 8))
    assert float(block["mismatched_eval_accuracy"]) * 6 == pytest.approx(
        round(float(block["mismatched_eval_accuracy"]) * 6))
    for suffix, count, first_guid in (("", 5, "14"), ("_mismatched", 5, "19")):
        results = (output_dir / f"test_results{suffix}.tsv").read_text().splitlines()
        assert len(results) == count and all(len(r.split("\t")) == 3 for r in results)
        submit = (output_dir / f"submit_results{suffix}.tsv").read_text().splitlines()
        assert submit[1].split("\t")[0] == first_guid and len(submit) == count + 1


@pytest.fixture(scope="module")
def rte_dir(tmp_path_factory):
    return glue_sample(tmp_path_factory.mktemp("glue"), "RTE", rows=8)


@pytest.mark.requires_shared_data
def test_vocab_size_mismatch_is_an_error(tmp_path, rte_dir):
    result = run_classifier(*common_flags("rte", rte_dir, write_config(tmp_path / "c.json",
                                                                       vocab_size=30000),
                                          tmp_path / "out"), "--do_train", check=False)
    assert result.returncode != 0
    assert "vocab_size=30000" in result.stderr and "8000 pieces" in result.stderr
    assert "en8k.model" in result.stderr


@pytest.mark.requires_shared_data
def test_missing_init_checkpoint_is_an_error(tmp_path, rte_dir):
    result = run_classifier(*common_flags("rte", rte_dir, write_config(tmp_path / "c.json"),
                                          tmp_path / "out"), "--do_train",
                            f"--init_checkpoint={tmp_path}/nowhere/model.ckpt", check=False)
    assert result.returncode != 0 and "nowhere/model.ckpt does not exist" in result.stderr
    assert not (tmp_path / "out" / "model.ckpt-1.index").exists()


@pytest.mark.requires_shared_data
def test_predict_without_best_checkpoint_and_hub_handle_are_errors(tmp_path, rte_dir):
    flags = common_flags("rte", rte_dir, write_config(tmp_path / "c.json"), tmp_path / "out")
    result = run_classifier(*flags, "--do_predict", check=False)
    assert result.returncode != 0 and "model.ckpt-best does not exist" in result.stderr
    result = run_classifier(*flags, "--do_train", "--albert_hub_module_handle=https://tfhub.dev/x",
                            check=False)
    assert result.returncode != 0 and "TF-Hub modules" in result.stderr


@pytest.mark.subprocess  # a shell script
def test_run_glue_sh_uses_the_recipe_in_two_phases(tmp_path):
    """run_glue.sh with a stand-in python that records run_classifier's arguments."""
    log = tmp_path / "calls.txt"
    stub = tmp_path / "python"
    stub.write_text(f"#!/bin/bash\nif [[ $1 == -m ]]; then exec {sys.executable} \"$@\"; fi\n"
                    f"echo \"$*\" >> {log}\n")
    stub.chmod(0o755)
    done = run_subprocess("scripts/run_glue.sh", "ckpt", "cfg.json", "sp.model", "glue",
                          str(tmp_path / "results"), "rte", timeout=120, PYTHON=str(stub),
                          EXTRA_FLAGS="--strategy=mirrored")
    assert done.returncode == 0, done.stderr
    train, evaluate = log.read_text().splitlines()
    recipe = ["--task_name=rte", "--warmup_step=200", "--learning_rate=3e-05", "--train_step=800",
              "--save_checkpoints_steps=100", "--train_batch_size=32", "--max_seq_length=512",
              "--optimizer=adamw", "--do_lower_case", "--data_dir=glue",
              f"--output_dir={tmp_path}/results/rte", "--init_checkpoint=ckpt",
              "--albert_config_file=cfg.json", "--spm_model_file=sp.model"]
    assert train.split() == ["run_classifier.py"] + recipe + [
        "--do_train", "--nodo_eval", "--nodo_predict", "--strategy=mirrored"]
    assert evaluate.split() == ["run_classifier.py"] + recipe + [
        "--nodo_train", "--do_eval", "--do_predict", "--strategy=mirrored"]


# -- inputs checked before the first step ----------------------------------------------------------

def assert_stopped_before_training(result, output_dir, *culprits):
    """Exit status 1, one message naming each culprit (no traceback), no training step taken (no
    checkpoint written); returns the names of the files in output_dir."""
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr[-3000:]
    for culprit in culprits:
        assert culprit in result.stderr
    assert "End of sequence" not in result.stderr
    written = os.listdir(output_dir) if os.path.isdir(output_dir) else []
    assert not [name for name in written if name.startswith(("model.ckpt", "checkpoint"))]
    return written


@pytest.mark.requires_shared_data
def test_header_only_train_file_stops_before_training(tmp_path):
    data_dir = glue_sample(tmp_path / "glue", "RTE", rows=0, files=("train",))
    output_dir = tmp_path / "out"
    result = run_classifier(*common_flags("rte", data_dir, write_config(tmp_path / "c.json"),
                                          output_dir), "--do_train", "--train_step=2", check=False)
    assert_stopped_before_training(
        result, output_dir, f"{data_dir}/RTE/train.tsv: no examples (the file has only its header line)")


@pytest.mark.requires_shared_data
def test_missing_dev_file_stops_before_training(tmp_path):
    data_dir = glue_sample(tmp_path / "glue", "RTE", rows=8, files=("train", "test"))
    output_dir = tmp_path / "out"
    result = run_classifier(*common_flags("rte", data_dir, write_config(tmp_path / "c.json"),
                                          output_dir),
                            "--do_train", "--do_eval", "--do_predict", "--train_step=2", check=False)
    written = assert_stopped_before_training(result, output_dir, f"not found: {data_dir}/RTE/dev.tsv")
    assert not [name for name in written if ".tf_record" in name]  # no split was built either


@pytest.mark.requires_shared_data
def test_malformed_test_file_stops_before_training(tmp_path):
    """--do_predict reads test.tsv only after training and the sweep: its rows are checked first."""
    data_dir = glue_sample(tmp_path / "glue", "RTE", rows=8)
    test_file = data_dir / "RTE" / "test.tsv"
    lines = test_file.read_bytes().split(b"\n")
    lines[5] = lines[5].replace(b" ", b" \xff", 1)
    test_file.write_bytes(b"\n".join(lines))
    output_dir = tmp_path / "out"
    result = run_classifier(*common_flags("rte", data_dir, write_config(tmp_path / "c.json"),
                                          output_dir),
                            "--do_train", "--do_eval", "--do_predict", "--train_step=2", check=False)
    assert_stopped_before_training(result, output_dir, f"{test_file}:6: not valid UTF-8")


@pytest.mark.requires_shared_data
def test_stsb_nan_score_stops_before_training(tmp_path):
    data_dir = glue_sample(tmp_path / "glue", "STS-B", rows=9, files=("train", "dev"))
    train_file = data_dir / "STS-B" / "train.tsv"
    lines = train_file.read_text(encoding="utf-8").split("\n")
    lines[3] = lines[3].rsplit("\t", 1)[0] + "\tnan"
    train_file.write_text("\n".join(lines), encoding="utf-8")
    output_dir = tmp_path / "out"
    result = run_classifier(*common_flags("sts-b", data_dir, write_config(tmp_path / "c.json"),
                                          output_dir), "--do_train", "--do_eval", "--train_step=2",
                            check=False)
    assert_stopped_before_training(result, output_dir,
                                   f"{train_file}:4: expected a score from 0 to 5, found 'nan'")


@pytest.mark.requires_shared_data
def test_predict_without_eval_or_best_checkpoint_stops_before_training(tmp_path, rte_dir):
    output_dir = tmp_path / "out"
    result = run_classifier(*common_flags("rte", rte_dir, write_config(tmp_path / "c.json"),
                                          output_dir), "--do_train", "--do_predict", "--train_step=2",
                            check=False)
    assert_stopped_before_training(result, output_dir, f"{output_dir}/model.ckpt-best does not exist",
                                   "--do_eval")
