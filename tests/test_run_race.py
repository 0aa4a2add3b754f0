"""run_race.py end to end on the real RACE sample: train, the sweep with per-level accuracy, predict
(the harness's run, tests/task_harness.py); its mistakes; run_race.sh."""

from __future__ import annotations

import json
import os
import shutil
import sys

import numpy as np
import pytest

from tests.command_runner import run_command, run_subprocess
from tests.shared_setup import EN8K_MODEL, SHARED_DATA_DIR, tiny_config
from tests.task_harness import arguments

RACE_DEV = os.path.join(SHARED_DATA_DIR, "race", "RACE", "dev")
SEQ, QA = 96, 24


@pytest.fixture(scope="module")
def race_dir(tmp_path_factory):
    """<root>/RACE/{train,dev,test} all holding the 31 questions of the shared dev sample."""
    root = tmp_path_factory.mktemp("race_data")
    (root / "RACE").mkdir()
    for split in ("train", "dev", "test"):
        os.symlink(RACE_DEV, root / "RACE" / split)
    return root


def gold_answers() -> dict[str, str]:
    """Question id -> answer letter, read from the sample's JSON files here (not by data_prep)."""
    answers = {}
    for level in ("middle", "high"):
        for name in sorted(os.listdir(os.path.join(RACE_DEV, level))):
            with open(os.path.join(RACE_DEV, level, name), encoding="utf-8") as handle:
                article = json.load(handle)
            for index, answer in enumerate(article["answers"]):
                answers[f"{article['id']}-{index}"] = (level, answer)
    return answers


def run_race(*args):
    return run_command("run_race.py", *args)


def common_flags(tmp_path, race_dir):
    config = tmp_path / "config.json"
    config.write_text(tiny_config().to_json_string())
    return [f"--data_dir={race_dir}", f"--albert_config_file={config}",
            f"--spm_model_file={EN8K_MODEL}", f"--output_dir={tmp_path / 'out'}",
            f"--max_seq_length={SEQ}", f"--max_qa_length={QA}"]


@pytest.mark.requires_shared_data
def test_train_sweep_predict_with_a_reference_checkpoint(task_runs):
    """The harness's RACE run: from a checkpoint in the reference's names with the head (as a
    RACE run of the reference writes), two steps, the sweep, the predictions."""
    run = task_runs.get("race")
    assert "missing from the checkpoint (0): none" in run.result.stdout  # the head loaded too
    output_dir = run.output_dir

    text = (output_dir / "eval_results.txt").read_text()
    blocks = [dict(line.split(" = ") for line in block.strip().splitlines()
                   if " = " in line and not line.startswith("best"))
              for block in text.split("=" * 50) if "global_step" in block]
    assert [b["global_step"] for b in blocks] == ["1", "2"]
    for block in blocks:
        assert {"eval_accuracy", "middle_accuracy", "high_accuracy", "eval_loss"} <= set(block)
        # 14 middle and 17 high questions: "all" is their weighted mean.
        overall = (14 * float(block["middle_accuracy"]) + 17 * float(block["high_accuracy"])) / 31
        assert float(block["eval_accuracy"]) == pytest.approx(overall)
    assert (output_dir / "model.ckpt-best.index").exists()

    predictions = json.loads((output_dir / "test_predictions.json").read_text())
    gold = gold_answers()
    assert set(predictions) == set(gold) and len(gold) == 31
    for entry in predictions.values():
        assert np.sum(entry["probabilities"]) == pytest.approx(1.0, abs=1e-5)
        chosen = entry["probabilities"]["ABCD".index(entry["answer"])]
        assert chosen >= max(entry["probabilities"]) - 1e-6  # the most probable (up to ties)
    results = dict(line.split(" = ") for line in
                   (output_dir / "predict_results.txt").read_text().splitlines())
    correct = [predictions[qid]["answer"] == answer for qid, (_, answer) in gold.items()]
    assert float(results["eval_accuracy"]) == pytest.approx(np.mean(correct))
    middle = [c for c, (level, _) in zip(correct, gold.values()) if level == "middle"]
    assert float(results["middle_accuracy"]) == pytest.approx(np.mean(middle))
    # The test split is the dev sample here, so the best dev accuracy is the test accuracy.
    assert float(results["best"]) == pytest.approx(np.mean(correct))


@pytest.mark.requires_shared_data
def test_do_predict_alone_on_a_finished_run_predicts_and_trains_no_further(tmp_path, task_runs):
    """--do_train and --do_eval are off by default, as in every script: --do_predict alone on a
    copy of the harness's finished run predicts the test split with its model.ckpt-best; no
    training toward --train_step, no sweep (the reference's defaults would do both)."""
    run = task_runs.get("race")
    output_dir, cached_dir = tmp_path / "out", tmp_path / "cache"
    shutil.copytree(run.output_dir, output_dir)
    shutil.copytree(run.cached_dir, cached_dir)
    (output_dir / "test_predictions.json").unlink()
    before = sorted(path.name for path in output_dir.iterdir())
    flags = {name: value for name, value in run.flags.items()
             if name not in ("do_train", "do_eval", "do_predict", "export_dir", "init_checkpoint")}
    flags.update(output_dir=str(output_dir), cached_dir=str(cached_dir), train_step="4")
    result = run_race(*arguments(flags), "--do_predict")
    assert result.returncode == 0, result.stderr[-3000:]
    assert sorted(path.name for path in output_dir.iterdir()) == sorted(
        [*before, "test_predictions.json"])
    assert json.loads((output_dir / "test_predictions.json").read_text()) == json.loads(
        (run.output_dir / "test_predictions.json").read_text())


@pytest.mark.requires_shared_data
def test_level_flags_and_mistakes_are_clear_errors(tmp_path, race_dir):
    flags = [*common_flags(tmp_path, race_dir), "--do_train"]
    result = run_race(*flags, "--middle_only", "--high_only")
    assert result.returncode == 1 and "exclude each other" in result.stderr
    result = run_race(*flags, "--task_name=mnli")
    assert result.returncode == 1 and "only runs race" in result.stderr
    result = run_race(*flags, "--max_seq_length=1024")
    assert result.returncode != 0 and "max_position_embeddings" in result.stderr


@pytest.mark.requires_shared_data
@pytest.mark.parametrize("missing_split", ["dev", "test"])
def test_a_missing_split_stops_the_run_before_training(tmp_path, missing_split):
    """Every split the flags need (dev for --do_eval, test for --do_predict) is read before the
    first training step: a missing one ends the run naming it, with no checkpoint written."""
    data_dir = tmp_path / "data"
    (data_dir / "RACE").mkdir(parents=True)
    for split in ("train", "dev", "test"):
        if split != missing_split:
            os.symlink(RACE_DEV, data_dir / "RACE" / split)
    result = run_race(*common_flags(tmp_path, data_dir), "--do_train", "--do_eval",
                      "--do_predict", "--train_step=2",
                      "--save_checkpoints_steps=1", "--train_batch_size=4")
    assert result.returncode == 1
    message = result.stderr.strip().splitlines()[-1]
    assert message.startswith("run_race: error: ") and missing_split in message
    assert not list((tmp_path / "out").glob("model.ckpt-*"))


@pytest.mark.requires_shared_data
def test_predict_without_eval_and_no_best_checkpoint_stops_before_training(tmp_path, race_dir):
    result = run_race(*common_flags(tmp_path, race_dir), "--do_train", "--do_predict",
                      "--train_step=2")
    assert result.returncode == 1 and "model.ckpt-best does not exist" in result.stderr
    assert not list((tmp_path / "out").glob("model.ckpt-*"))


@pytest.mark.subprocess  # a shell script
@pytest.mark.parametrize("model_version, learning_rate", [(None, "1e-05"), ("v1", "2e-05")])
def test_run_race_sh_passes_the_papers_recipe(tmp_path, model_version, learning_rate):
    """run_race.sh with a stand-in python that runs --print_recipe and records run_race's other
    arguments: the recipe comes from run_race.py --print_recipe, v2's unless MODEL_VERSION=v1."""
    log = tmp_path / "calls.txt"
    stub = tmp_path / "python"
    stub.write_text(f"#!/bin/bash\nif [[ \" $* \" == *' --print_recipe '* ]]; then "
                    f"exec {sys.executable} \"$@\"; fi\necho \"$*\" >> {log}\n")
    stub.chmod(0o755)
    script = "scripts/run_race.sh"
    version = {"MODEL_VERSION": model_version} if model_version else {}
    done = run_subprocess(script, "ckpt", "cfg.json", "sp.model", "data", "out", timeout=120,
                          PYTHON=str(stub), EXTRA_FLAGS="--strategy=mirrored", **version)
    assert done.returncode == 0, done.stderr
    assert log.read_text().split() == [
        "run_race.py", f"--learning_rate={learning_rate}", "--train_batch_size=32",
        "--train_step=12000", "--warmup_step=1000", "--max_seq_length=512", "--max_qa_length=128",
        "--save_checkpoints_steps=100", "--dropout_prob=0.1", "--optimizer=adamw",
        "--do_lower_case", "--do_train", "--do_eval", "--init_checkpoint=ckpt",
        "--albert_config_file=cfg.json", "--spm_model_file=sp.model", "--data_dir=data",
        "--output_dir=out", "--do_predict", "--strategy=mirrored"]
    bad = run_subprocess(script, "ckpt", timeout=60, PYTHON=str(stub))
    assert bad.returncode == 2 and "INIT_CHECKPOINT" in bad.stderr
    if model_version is None:  # an unknown version stops the script before any run
        bad = run_subprocess(script, "ckpt", "cfg.json", "sp.model", "data", "out", timeout=120,
                             PYTHON=str(stub), MODEL_VERSION="v3")
        assert bad.returncode == 1 and "recipe_model_version" in bad.stderr
        assert len(log.read_text().splitlines()) == 1


@pytest.mark.requires_shared_data
@pytest.mark.slow
def test_a_tiny_model_memorises_the_sample(tmp_path, race_dir):
    """Labels, features, head and loss agree: a random model learns the 31 questions (chance 0.25)."""
    config = tmp_path / "config.json"
    config.write_text(tiny_config(embedding_size=32, hidden_size=64, intermediate_size=128,
                                  max_position_embeddings=128).to_json_string())
    result = run_race(f"--data_dir={race_dir}", f"--albert_config_file={config}",
                      f"--spm_model_file={EN8K_MODEL}", f"--output_dir={tmp_path / 'out'}",
                      "--max_seq_length=128", "--max_qa_length=32", "--train_step=200",
                      "--warmup_step=10", "--save_checkpoints_steps=200", "--train_batch_size=8",
                      "--learning_rate=2e-3", "--dropout_prob=0", "--seed=1", "--do_train",
                      "--do_eval")
    assert result.returncode == 0, result.stderr[-4000:]
    (block,) = [line for line in (tmp_path / "out" / "eval_results.txt").read_text().splitlines()
                if line.startswith("eval_accuracy")]
    accuracy = float(block.split(" = ")[1])
    print(f"dev (= train) accuracy after 200 steps: {accuracy:.3f}")
    assert accuracy >= 0.9
