"""Every task records its label (or tag) set in the run manifest of --output_dir at its first run
and checks it on every later run (albert_tf/checkpoints/label_set.py, through the driver): a
prediction can never name classes or tags the checkpoints were not trained for, and a run that only
evaluates, predicts or exports needs no training file. A directory of an earlier version keeps its
label set in label_list.json, which is read the same way."""

from __future__ import annotations

import json
import os
import re

import pytest

from albert_tf.checkpoints.label_set import LABEL_SET, LabelSet, recorded_label_set
from albert_tf.files.earlier_layouts import EarlierLayoutError
from albert_tf.files.run_manifest import (RunManifestError, add_facts, read_manifest,
                                          require_fact, update_manifest)
from albert_tf.tasks.classification.classifier_heads import HEADS
from tests import shared_setup, spm_fixtures
from tests.command_runner import run_command
from tests.test_run_ner import SEQ, STRIDE, TRAIN_CONLL


def _recorded(directory) -> LabelSet | None:
    return recorded_label_set(read_manifest(str(directory)))


def _check(directory, label_set: LabelSet, source: str) -> None:
    require_fact(read_manifest(str(directory)), LABEL_SET, label_set.to_fact(), source)


def test_a_label_set_is_recorded_once_and_checked(tmp_path):
    assert _recorded(tmp_path) is None
    tags = LabelSet("token_classification", ("O", "B-LOC"))
    add_facts(str(tmp_path), {LABEL_SET: (tags.to_fact(), "the tags of train.conll")})
    assert _recorded(tmp_path) == tags
    _check(tmp_path, tags, "the tags of train.conll")
    for other in (LabelSet("token_classification", ("O", "B-PER")), LabelSet("classification",
                                                                              ("O", "B-LOC"))):
        with pytest.raises(RunManifestError, match=(
                f"--output_dir={re.escape(str(tmp_path))} holds checkpoints trained for a "
                r"token_classification with labels \['O', 'B-LOC'\] \(run_manifest.json\); this "
                r"run has .* \(the tags of x\)\. Give the run's own settings to continue it, or "
                r"use another --output_dir$")):
            _check(tmp_path, other, "the tags of x")
        # Recording another one is refused the same way; the recorded one stays.
        with pytest.raises(RunManifestError, match="holds checkpoints trained for"):
            add_facts(str(tmp_path), {LABEL_SET: (other.to_fact(), "the tags of x")})
        assert _recorded(tmp_path) == tags
    update_manifest(str(tmp_path), lambda content: content["facts"].update(label_set=[1, 2]))
    with pytest.raises(RunManifestError, match=r"run_manifest.json: expected"):
        _recorded(tmp_path)



def test_a_first_format_manifest_is_read_and_its_facts_kept_when_it_is_updated(tmp_path):
    """Format 1 (the first manifests) named the facts' section "records"; the next update writes
    format 2 with the facts it held."""
    tags = LabelSet("token_classification", ("O", "B-LOC"))
    (tmp_path / "run_manifest.json").write_text(json.dumps(
        {"format": 1, "records": {"label_set": tags.to_fact()}, "trained": {"step": 2,
                                                                            "checkpoint": "c"}}))
    assert _recorded(tmp_path) == tags
    with pytest.raises(RunManifestError, match="holds checkpoints trained for"):
        _check(tmp_path, LabelSet("token_classification", ("O", "B-PER")), "the tags of x")
    update_manifest(str(tmp_path), lambda content: content["facts"].update(seed_recipe=["a"]))
    written = json.loads((tmp_path / "run_manifest.json").read_text())
    assert written["format"] == 2 and "records" not in written and written["trained"]["step"] == 2
    assert written["facts"] == {"label_set": tags.to_fact(), "seed_recipe": ["a"]}

def earlier_run_directory(directory) -> None:
    """What every run directory an earlier version trained holds: TF's checkpoint state file
    (elsewhere a label_list.json is the user's file, not a record)."""
    (directory / "checkpoint").write_text('model_checkpoint_path: "model.ckpt-2"\n')


def test_an_earlier_versions_label_file_is_read_and_checked(tmp_path):
    """label_list.json of a directory an earlier version trained is its label set."""
    earlier_run_directory(tmp_path)
    (tmp_path / "label_list.json").write_text(
        '{"task_type": "token_classification", "labels": ["O", "B-LOC"]}')
    tags = LabelSet("token_classification", ("O", "B-LOC"))
    assert _recorded(tmp_path) == tags
    with pytest.raises(RunManifestError, match=r"holds checkpoints trained for a "
                                               r"token_classification with labels \['O', "
                                               r"'B-LOC'\]"):
        _check(tmp_path, LabelSet("token_classification", ("O", "B-PER")), "the tags of x")
    (tmp_path / "label_list.json").write_text("[1, 2]")
    with pytest.raises(EarlierLayoutError, match=r"label_list.json must hold a JSON object"):
        _recorded(tmp_path)
    # Where no earlier version ran, a label_list.json is the user's file: no record.
    (tmp_path / "checkpoint").unlink()
    assert _recorded(tmp_path) is None


def test_a_label_set_records_its_task_and_refuses_another_with_the_same_labels(tmp_path):
    """SST-2 and WNLI both have the labels 0 and 1: without the task recorded, a WNLI run in an
    SST-2 directory resumed SST-2's checkpoints, reported SST-2's dev score as its own and
    predicted WNLI with SST-2's model."""
    sst2 = LabelSet("classification", ("0", "1"), "sst-2")
    add_facts(str(tmp_path), {LABEL_SET: (sst2.to_fact(), "--task_name=sst-2")})
    manifest = json.loads((tmp_path / "run_manifest.json").read_text())
    assert manifest["facts"]["label_set"]["task"] == "sst-2"
    assert _recorded(tmp_path) == sst2
    _check(tmp_path, sst2, "--task_name=sst-2")
    with pytest.raises(RunManifestError, match=r"holds checkpoints trained for a classification "
                                               r"with labels \['0', '1'\] \(task sst-2\) "
                                               r"\(run_manifest.json\); this run has a "
                                               r"classification with labels \['0', '1'\] \(task "
                                               r"wnli\) \(--task_name=wnli\)"):
        _check(tmp_path, LabelSet("classification", ("0", "1"), "wnli"), "--task_name=wnli")
    # A label file written before the task was recorded is checked on its labels only.
    earlier = tmp_path / "earlier"
    earlier.mkdir()
    earlier_run_directory(earlier)
    (earlier / "label_list.json").write_text('{"task_type": "classification", "labels": ["0", '
                                             '"1"]}')
    _check(earlier, LabelSet("classification", ("0", "1"), "wnli"), "x")
    (earlier / "label_list.json").write_text('{"task_type": "classification", "labels": null, '
                                             '"task": 3}')
    with pytest.raises(RunManifestError, match=r"label_list.json: expected .*not a label set"):
        _recorded(earlier)


def test_glue_tasks_that_share_a_model_record_one_task():
    from data_prep.classification.glue_tasks import glue_task
    assert {glue_task(name).model_task for name in ("mnli", "mismnli", "ax")} == {"mnli"}
    assert glue_task("sst-2").model_task != glue_task("wnli").model_task


def wnli_run(tmp_path, split: str, action: str):
    """run_classifier's WNLI run in ``tmp_path / "out"`` (made here, empty) on one example of
    ``split`` with ``action``: (the output directory, a function running it)."""
    config = shared_setup.tiny_config(vocab_size=500, max_position_embeddings=32)
    (tmp_path / "config.json").write_text(config.to_json_string())
    data = tmp_path / "glue" / "WNLI"
    data.mkdir(parents=True)
    header, row = (("index\tsentence1\tsentence2\tlabel", "0\tA b.\tC d.\t1") if split == "train"
                   else ("index\tsentence1\tsentence2", "0\tA b.\tC d."))
    (data / f"{split}.tsv").write_text(f"{header}\n{row}\n")
    out = tmp_path / "out"
    out.mkdir()
    return out, lambda: run_command(
        "run_classifier.py", "--task_name=wnli", f"--data_dir={tmp_path / 'glue'}",
        f"--albert_config_file={tmp_path / 'config.json'}",
        f"--spm_model_file={spm_fixtures.cached_tiny_spm()}", f"--output_dir={out}",
        "--max_seq_length=32", action)


def test_run_classifier_refuses_another_glue_task_with_the_same_labels(tmp_path):
    """A --do_predict run of WNLI in a directory trained on SST-2 stops before any work, naming
    both tasks; nothing there changes."""
    out, run = wnli_run(tmp_path, "test", "--do_predict")
    add_facts(str(out), {
        LABEL_SET: (LabelSet("classification", ("0", "1"), "sst-2").to_fact(), "x"),
        HEADS: (None, "x")})  # an ordinary classifier's run
    (out / "model.ckpt-best.index").write_bytes(b"")
    before = {name: (out / name).read_bytes() for name in os.listdir(out)
              if name != "run_manifest.json"}
    recorded_before = read_manifest(str(out)).content
    refused = run()
    assert refused.error_line() == (
        f"run_classifier: error: --output_dir={out} holds checkpoints trained for a "
        "classification with labels ['0', '1'] (task sst-2) (run_manifest.json); this run has a "
        "classification with labels ['0', '1'] (task wnli) (--task_name=wnli). Give the run's own "
        "settings to continue it, or use another --output_dir")
    after = {name: (out / name).read_bytes() for name in os.listdir(out)
             if not name.startswith(".albert_tf") and name != "run_manifest.json"}
    assert after == before
    # Refused before it recorded anything: not even the names it would have written.
    assert read_manifest(str(out)).content == recorded_before


def test_a_refused_run_leaves_an_earlier_versions_directory_as_it_was(tmp_path):
    """A WNLI training run in a directory an earlier version trained on SST-2 (its
    facts in label_list.json, no run manifest): refused naming label_list.json, where its label
    set comes from, and nothing written there, no run manifest either (the manifest that
    supersedes those files is written by the first run that goes on)."""
    out, run = wnli_run(tmp_path, "train", "--do_train")
    earlier_run_directory(out)
    (out / "label_list.json").write_text(
        '{"task_type": "classification", "labels": ["0", "1"], "task": "sst-2"}')
    (out / ".albert_tf_outputs.json").write_text(json.dumps(
        {"fixed_names": ["checkpoint", "label_list.json", "model.ckpt-*"]}))
    before = {name: (out / name).read_bytes() for name in os.listdir(out)}
    refused = run()
    assert refused.returncode == 1
    assert refused.error_line() == (
        f"run_classifier: error: --output_dir={out} holds checkpoints trained for a "
        "classification with labels ['0', '1'] (task sst-2) (label_list.json); this run has a "
        "classification with labels ['0', '1'] (task wnli) (--task_name=wnli). Give the run's own "
        "settings to continue it, or use another --output_dir")
    assert {name: (out / name).read_bytes() for name in os.listdir(out)} == before


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
    recorded = read_manifest(str(tmp_path / "out")).fact("label_set")
    assert recorded == {"task_type": "token_classification",
                        "labels": ["O", "B-LOC", "B-ORG", "B-PER", "I-PER"], "task": None}
    assert not (tmp_path / "out" / "label_list.json").exists()
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
        f"run_ner: error: --output_dir={tmp_path / 'out'} holds checkpoints trained for a "
        "token_classification with labels ['O', 'B-LOC', ")
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
        f"run_ner: error: no tag set: {tmp_path / 'out' / 'run_manifest.json'} does not record "
        "the tags of a tagger (the run with --do_train records them); give --train_file")
