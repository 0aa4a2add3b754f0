"""run_squad.py end to end on the real SQuAD samples: train, sweep, predict (the harness's v2 run,
tests/task_harness.py); the files' formats; a tiny model memorising the v2 sample (slow); mistakes
caught before any work; run_squad.sh."""

from __future__ import annotations

import json
import os
import re
import sys

import pytest

from albert_tf.checkpoints import tf1_format
from albert_tf.tasks.question_answering.model import AlbertSquadModel
from tests.command_runner import run_command, run_subprocess
from tests.shared_setup import EN8K_MODEL, SHARED_DATA_DIR, tiny_config

V1_SAMPLE = os.path.join(SHARED_DATA_DIR, "squad", "dev-v1.1-sample.json")
V2_SAMPLE = os.path.join(SHARED_DATA_DIR, "squad", "dev-v2.0-sample.json")


def run_squad(*args):
    return run_command("run_squad.py", *args)


def common_flags(tmp_path, **config_overrides):
    config = tmp_path / "config.json"
    config.write_text(tiny_config(**config_overrides).to_json_string())
    return [f"--albert_config_file={config}", f"--spm_model_file={EN8K_MODEL}",
            f"--output_dir={tmp_path / 'out'}"]


def read_json(path):
    return json.loads(path.read_text())


def eval_blocks(path) -> list[dict[str, float]]:
    blocks = []
    for block in path.read_text().split("=" * 50):
        pairs = [line.split(" = ") for line in block.strip().splitlines()
                 if " = " in line and not line.startswith("best ")]
        if pairs:
            blocks.append({key: float(value) for key, value in pairs})
    return blocks


@pytest.mark.requires_shared_data
def test_v2_train_sweep_predict_files(task_runs):
    """The harness's v2 run: --num_train_epochs=2 at batch 14, a checkpoint every step."""
    run = task_runs.get("squad_v2")
    output_dir = run.output_dir
    # 14 questions / batch 14 * 2 epochs = 2 steps (questions, not windows, as the reference).
    assert re.search(r"SQuAD train: 14 questions, \d+ windows, batch 14, 2 steps",
                     run.result.stdout), run.result.stdout[:2000]
    blocks = eval_blocks(output_dir / "eval_results.txt")
    assert [block["global_step"] for block in blocks] == [1, 2]
    for block in blocks:
        assert {"exact", "f1", "total", "HasAns_f1", "NoAns_f1", "best_f1", "best_f1_thresh",
                "reference_tuned_f1", "reference_tuned_threshold"} <= set(block)
        assert block["total"] == 14 and block["HasAns_total"] + block["NoAns_total"] == 14
    best = max(blocks, key=lambda block: block["reference_tuned_f1"])
    assert (output_dir / "model.ckpt-best.index").exists()

    predictions = read_json(output_dir / "predictions.json")
    nbest = read_json(output_dir / "nbest_predictions.json")
    null_odds = read_json(output_dir / "null_odds.json")
    with open(V2_SAMPLE, encoding="utf-8") as handle:
        question_ids = [qa["id"] for article in json.load(handle)["data"]
                        for paragraph in article["paragraphs"] for qa in paragraph["qas"]]
    assert list(predictions) == list(nbest) == list(null_odds) == question_ids
    for qid, entries in nbest.items():
        assert 1 <= len(entries) <= 20
        assert set(entries[0]) == {"text", "probability", "start_log_prob", "end_log_prob"}
        assert sum(entry["probability"] for entry in entries) == pytest.approx(1.0, abs=1e-5)
        # predictions.json is the reference's: tuned threshold of the best checkpoint.
        expected = "" if null_odds[qid] >= best["reference_tuned_threshold"] else entries[0]["text"]
        assert predictions[qid] == expected


@pytest.mark.requires_shared_data
def test_v1_predict_only_from_a_reference_checkpoint_never_waits(tmp_path):
    init = tf1_format.export_tf1_checkpoint(AlbertSquadModel(tiny_config()),
                                            str(tmp_path / "ref" / "model.ckpt"))
    result = run_squad(*common_flags(tmp_path), f"--init_checkpoint={init}",
                       f"--predict_file={V1_SAMPLE}", "--do_predict", "--max_seq_length=128",
                       "--doc_stride=64", "--max_query_length=32")
    assert result.returncode == 0, result.stderr[-4000:]
    assert "missing from the checkpoint (0): none" in result.stdout
    blocks = eval_blocks(tmp_path / "out" / "eval_results.txt")
    assert len(blocks) == 1 and blocks[0]["global_step"] == 0
    assert set(blocks[0]) == {"exact_match", "f1", "global_step"}
    predictions = read_json(tmp_path / "out" / "predictions.json")
    assert len(predictions) == 8 and all(isinstance(text, str) for text in predictions.values())
    assert not (tmp_path / "out" / "null_odds.json").exists()


@pytest.mark.requires_shared_data
def test_mistakes_are_caught_before_any_work(tmp_path):
    flags = common_flags(tmp_path)
    result = run_squad(*flags, "--do_predict", f"--predict_file={V1_SAMPLE}")
    assert result.returncode == 1 and "no checkpoint in" in result.stderr
    result = run_squad(*flags, "--do_train")
    assert result.returncode == 1 and "--train_file is required" in result.stderr
    result = run_squad(*flags, "--do_train", f"--train_file={V1_SAMPLE}", "--max_seq_length=60",
                       "--max_query_length=64")
    assert result.returncode == 1 and "must exceed" in result.stderr
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


@pytest.mark.requires_shared_data
@pytest.mark.slow
def test_a_tiny_model_memorises_the_v2_sample(tmp_path):
    """Labels, head and post-processing agree end to end: F1 >= 90 on the training questions with
    every unanswerable one predicted "" at the fixed threshold 0."""
    flags = common_flags(tmp_path, max_position_embeddings=256, embedding_size=32,
                         hidden_size=64, intermediate_size=128)
    result = run_squad(*flags, f"--train_file={V2_SAMPLE}", f"--predict_file={V2_SAMPLE}",
                       "--version_2_with_negative", "--do_train", "--do_predict",
                       "--max_seq_length=256", "--train_batch_size=8", "--num_train_epochs=150",
                       "--learning_rate=2e-3", "--save_checkpoints_steps=100000", "--seed=1",
                       "--null_score_diff_threshold=0")
    assert result.returncode == 0, result.stderr[-4000:]
    (block,) = eval_blocks(tmp_path / "out" / "eval_results.txt")
    print(f"fixed-threshold F1 {block['f1']:.2f}, reference-tuned F1 "
          f"{block['reference_tuned_f1']:.2f}")
    assert block["f1"] >= 90 and block["NoAns_exact"] == 100
    predictions = read_json(tmp_path / "out" / "predictions.json")
    with open(V2_SAMPLE, encoding="utf-8") as handle:
        unanswerable = [qa["id"] for article in json.load(handle)["data"]
                        for paragraph in article["paragraphs"] for qa in paragraph["qas"]
                        if qa.get("is_impossible")]
    assert unanswerable and all(predictions[qid] == "" for qid in unanswerable)


@pytest.mark.subprocess  # a shell script
@pytest.mark.parametrize("version, recipe", [
    ("v1.1", ["--learning_rate=5e-05", "--train_batch_size=48", "--num_train_epochs=2",
              "--max_seq_length=384"]),
    ("v2.0", ["--learning_rate=3e-05", "--train_batch_size=48", "--num_train_epochs=3",
              "--max_seq_length=512", "--version_2_with_negative"]),
])
def test_run_squad_sh_passes_the_papers_recipe(tmp_path, version, recipe):
    """run_squad.sh with a stand-in python that runs --print_recipe and records run_squad's
    other arguments: the recipe comes from run_squad.py --print_recipe."""
    log = tmp_path / "calls.txt"
    stub = tmp_path / "python"
    stub.write_text(f"#!/bin/bash\nif [[ \" $* \" == *' --print_recipe '* ]]; then "
                    f"exec {sys.executable} \"$@\"; fi\necho \"$*\" >> {log}\n")
    stub.chmod(0o755)
    done = run_subprocess("scripts/run_squad.sh", version, "ckpt", "cfg.json", "sp.model",
                          "train.json", "dev.json", "out", timeout=120, PYTHON=str(stub),
                          EXTRA_FLAGS="--dtype=bfloat16")
    assert done.returncode == 0, done.stderr
    assert log.read_text().split() == ["run_squad.py"] + recipe + [
        "--doc_stride=128", "--max_query_length=64", "--warmup_proportion=0.1",
        "--save_checkpoints_steps=1000", "--do_lower_case", "--init_checkpoint=ckpt",
        "--albert_config_file=cfg.json",
        "--spm_model_file=sp.model", "--train_file=train.json", "--predict_file=dev.json",
        "--output_dir=out", "--do_train", "--do_predict", "--dtype=bfloat16"]
    bad = run_subprocess("scripts/run_squad.sh", "v3", *"abcdef", timeout=60, PYTHON=str(stub))
    assert bad.returncode == 2 and "v1.1 or v2.0" in bad.stderr


@pytest.mark.requires_shared_data
@pytest.mark.parametrize("predict_file_problem", ["missing", "truncated"])
def test_a_bad_predict_file_stops_the_run_before_training(tmp_path, predict_file_problem):
    """--do_train --do_predict reads and converts --predict_file first: a missing or truncated
    one ends the run naming it, with no training step taken (no checkpoint written)."""
    predict_file = tmp_path / "dev.json"
    if predict_file_problem == "truncated":
        text = open(V1_SAMPLE, encoding="utf-8").read()
        predict_file.write_text(text[:len(text) // 2], encoding="utf-8")
    result = run_squad(*common_flags(tmp_path), "--do_train", "--do_predict",
                       f"--train_file={V1_SAMPLE}", f"--predict_file={predict_file}",
                       "--max_seq_length=128", "--doc_stride=64", "--max_query_length=32",
                       "--train_batch_size=4", "--save_checkpoints_steps=1")
    assert result.returncode == 1
    message = result.stderr.strip().splitlines()[-1]
    assert message.startswith("run_squad: error: ") and str(predict_file) in message
    assert not list((tmp_path / "out").glob("model.ckpt-*"))


@pytest.mark.requires_shared_data
def test_export_without_do_predict_and_no_best_checkpoint_stops_before_training(tmp_path):
    result = run_squad(*common_flags(tmp_path), "--do_train", f"--train_file={V1_SAMPLE}",
                       f"--export_dir={tmp_path / 'export'}")
    assert result.returncode == 1
    assert "model.ckpt-best does not exist" in result.stderr
    assert not list((tmp_path / "out").glob("model.ckpt-*"))


@pytest.mark.requires_shared_data
def test_squad_2_data_without_the_flag_stops_before_training_naming_file_question_and_flag(
        tmp_path):
    result = run_squad(*common_flags(tmp_path), "--do_train", f"--train_file={V2_SAMPLE}",
                       "--max_seq_length=128", "--doc_stride=64", "--max_query_length=32",
                       "--train_batch_size=4", "--save_checkpoints_steps=1")
    assert result.returncode == 1
    message = result.stderr.strip().splitlines()[-1]
    assert message.startswith("run_squad: error: ") and V2_SAMPLE in message
    assert "question " in message and "--version_2_with_negative" in message
    assert not list((tmp_path / "out").glob("model.ckpt-*"))
