"""Every task records its label (or tag) set in --output_dir at its first run and checks it on
every later run (albert_tf/checkpoints/label_set.py, through the driver): a prediction can never
name classes or tags the checkpoints were not trained for, and a run that only evaluates,
predicts or exports needs no training file."""

from __future__ import annotations

import json
import os

import pytest

from albert_tf.checkpoints.label_set import (LabelSet, LabelSetMismatch, check_label_set,
                                             read_label_set, write_label_set)
from albert_tf.tasks.classification.heads_record import heads_path, record_heads
from tests import shared_setup, spm_fixtures
from tests.command_runner import run_command
from tests.test_run_ner import SEQ, STRIDE, TRAIN_CONLL


def test_a_label_set_is_written_once_and_checked(tmp_path):
    assert read_label_set(str(tmp_path)) is None
    tags = LabelSet("token_classification", ("O", "B-LOC"))
    write_label_set(str(tmp_path), tags)
    assert read_label_set(str(tmp_path)) == tags
    check_label_set(str(tmp_path), tags, "the tags of train.conll")
    for other in (LabelSet("token_classification", ("O", "B-PER")), LabelSet("classification",
                                                                              ("O", "B-LOC"))):
        with pytest.raises(LabelSetMismatch, match=r"label_list.json: the run in this directory "
                                                   r"was trained as a token_classification with "
                                                   r"labels \['O', 'B-LOC'\]; this run has .* "
                                                   r"\(the tags of x\)"):
            check_label_set(str(tmp_path), other, "the tags of x")
    (tmp_path / "label_list.json").write_text("[1, 2]")
    with pytest.raises(LabelSetMismatch, match="expected"):
        read_label_set(str(tmp_path))


def test_a_label_set_records_its_task_and_refuses_another_with_the_same_labels(tmp_path):
    """SST-2 and WNLI both have the labels 0 and 1: without the task recorded, a WNLI run in an
    SST-2 directory resumed SST-2's checkpoints, reported SST-2's dev score as its own and
    predicted WNLI with SST-2's model."""
    sst2 = LabelSet("classification", ("0", "1"), "sst-2")
    write_label_set(str(tmp_path), sst2)
    assert json.loads((tmp_path / "label_list.json").read_text())["task"] == "sst-2"
    assert read_label_set(str(tmp_path)) == sst2
    check_label_set(str(tmp_path), sst2, "--task_name=sst-2")
    with pytest.raises(LabelSetMismatch, match=r"trained as a classification with labels "
                                               r"\['0', '1'\] \(task sst-2\); this run has a "
                                               r"classification with labels \['0', '1'\] \(task "
                                               r"wnli\) \(--task_name=wnli\)"):
        check_label_set(str(tmp_path), LabelSet("classification", ("0", "1"), "wnli"),
                        "--task_name=wnli")
    # A label file written before the task was recorded is checked on its labels only.
    (tmp_path / "label_list.json").write_text('{"task_type": "classification", "labels": ["0", '
                                              '"1"]}')
    check_label_set(str(tmp_path), LabelSet("classification", ("0", "1"), "wnli"), "x")
    (tmp_path / "label_list.json").write_text('{"task_type": "classification", "labels": null, '
                                              '"task": 3}')
    with pytest.raises(LabelSetMismatch, match="task must be a string"):
        read_label_set(str(tmp_path))


def test_glue_tasks_that_share_a_model_record_one_task():
    from data_prep.classification.glue_tasks import glue_task
    assert {glue_task(name).model_task for name in ("mnli", "mismnli", "ax")} == {"mnli"}
    assert glue_task("sst-2").model_task != glue_task("wnli").model_task


def test_run_classifier_refuses_another_glue_task_with_the_same_labels(tmp_path):
    """A --do_predict run of WNLI in a directory trained on SST-2 stops before any work, naming
    both tasks; nothing there changes."""
    config = shared_setup.tiny_config(vocab_size=500, max_position_embeddings=32)
    (tmp_path / "config.json").write_text(config.to_json_string())
    data = tmp_path / "glue" / "WNLI"
    data.mkdir(parents=True)
    (data / "test.tsv").write_text("index\tsentence1\tsentence2\n0\tA b.\tC d.\n")
    out = tmp_path / "out"
    out.mkdir()
    write_label_set(str(out), LabelSet("classification", ("0", "1"), "sst-2"))
    record_heads(heads_path(str(out)), None)  # an ordinary classifier's run
    (out / "model.ckpt-best.index").write_bytes(b"")
    before = {name: (out / name).read_bytes() for name in os.listdir(out)}
    refused = run_command("run_classifier.py", "--task_name=wnli",
                          f"--data_dir={tmp_path / 'glue'}",
                          f"--albert_config_file={tmp_path / 'config.json'}",
                          f"--spm_model_file={spm_fixtures.cached_tiny_spm()}",
                          f"--output_dir={out}", "--max_seq_length=32", "--do_predict")
    assert refused.error_line() == (
        f"run_classifier: error: {out / 'label_list.json'}: the run in this directory was trained "
        "as a classification with labels ['0', '1'] (task sst-2); this run has a classification "
        "with labels ['0', '1'] (task wnli) (--task_name=wnli). Use another --output_dir, or the "
        "same labels and task")
    after = {name: (out / name).read_bytes() for name in os.listdir(out)
             if not name.startswith(".albert_tf")}
    assert after == before


def ner_flags(tmp_path) -> list[str]:
    config = shared_setup.tiny_config(vocab_size=500, max_position_embeddings=SEQ)
    (tmp_path / "config.json").write_text(config.to_json_string())
    return [f"--albert_config_file={tmp_path / 'config.json'}",
            f"--spm_model_file={spm_fixtures.cached_tiny_spm()}", f"--output_dir={tmp_path / 'out'}",
            f"--max_seq_length={SEQ}", f"--doc_stride={STRIDE}", "--train_batch_size=4"]


def test_run_ner_records_its_tags_and_later_runs_use_them_without_a_training_file(tmp_path):
    train = tmp_path / "train.conll"
    train.write_text(TRAIN_CONLL)
    flags = ner_flags(tmp_path)
    trained = run_command("run_ner.py", *flags, f"--train_file={train}", f"--eval_file={train}",
                          "--do_train", "--do_eval", "--train_step=2", "--save_checkpoints_steps=2")
    assert trained.returncode == 0, trained.stderr[-3000:]
    recorded = json.loads((tmp_path / "out" / "label_list.json").read_text())
    assert recorded == {"task_type": "token_classification",
                        "labels": ["O", "B-LOC", "B-ORG", "B-PER", "I-PER"]}
    predicted = run_command("run_ner.py", *flags, f"--predict_file={train}", "--do_predict")
    assert predicted.returncode == 0, predicted.stderr[-3000:]
    lines = (tmp_path / "out" / "predictions.conll").read_text().splitlines()
    assert len(lines) == len(TRAIN_CONLL.splitlines())
    # A training file whose tags differ (here one tag renamed) is refused before any work.
    renamed = tmp_path / "renamed.conll"
    renamed.write_text(TRAIN_CONLL.replace("B-LOC", "B-GPE"))
    before = sorted(os.listdir(tmp_path / "out"))
    refused = run_command("run_ner.py", *flags, f"--train_file={renamed}",
                          f"--predict_file={train}", "--do_predict")
    assert refused.error_line().startswith(
        f"run_ner: error: {tmp_path / 'out' / 'label_list.json'}: the run in this directory was "
        "trained as a token_classification with labels ['O', 'B-LOC', ")
    assert f"(the tags of {renamed})" in refused.error_line()
    assert sorted(os.listdir(tmp_path / "out")) == before


def test_run_ner_without_a_tag_set_asks_for_a_training_file(tmp_path):
    predict = tmp_path / "test.conll"
    predict.write_text(TRAIN_CONLL)
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "model.ckpt-best.index").write_bytes(b"")
    result = run_command("run_ner.py", *ner_flags(tmp_path), f"--predict_file={predict}",
                         "--do_predict")
    assert result.error_line() == (
        f"run_ner: error: no tag set: {tmp_path / 'out' / 'label_list.json'} does not hold the "
        "tags of a tagger (the run with --do_train writes it); give --train_file")
