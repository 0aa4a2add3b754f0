"""A resumed sweep refuses other evaluation data than the sweep it resumes
(albert_tf/evaluation/checkpoint_sweep.py, ``check_eval_data``, reading the sweep's "eval_data" in
the run manifest): run_classifier and run_ner used to report, after ``--dev_file`` changed, the
best checkpoint chosen on the earlier dev file as this run's, evaluating nothing on the new one.
A directory of an earlier version kept the data in eval_data.json, which is read the same way."""

from __future__ import annotations

import json
import re

import pytest

from albert_tf.evaluation.checkpoint_sweep import (EvalDataChanged, SweepPolicy, check_eval_data,
                                                   sweep_checkpoints)
from albert_tf.files.run_manifest import read_manifest
from data_prep.common.feature_cache import cached_feature_file, feature_file_source

GLUE = SweepPolicy.glue(train_step=4)


def eval_data(*sources: str) -> dict[str, str]:
    return dict(zip(("", "mismatched"), sources))


def fake_checkpoint(directory, step):
    for suffix in (".data-00000-of-00001", ".index"):
        (directory / f"model.ckpt-{step}{suffix}").write_text(f"step {step}")


def sweep(directory, data, policy=GLUE, evaluation=""):
    evaluated = []

    def evaluate(prefix):
        evaluated.append(int(prefix.rsplit("-", 1)[1]))
        return {"acc": 0.5}

    sweep_checkpoints(str(directory), evaluate, "acc", log=lambda m: None, policy=policy,
                      evaluation=evaluation, eval_data=data)
    return evaluated


def test_a_resumed_sweep_refuses_other_eval_data_and_a_fresh_one_records_its_own(tmp_path):
    out = str(tmp_path)
    # No sweep state yet: any data start a sweep, which records them with its state.
    assert check_eval_data(read_manifest(out), eval_data("dev.csv (features a)"), GLUE) is False
    assert check_eval_data(read_manifest(out), eval_data("dev2.csv (features b)"),
                           SweepPolicy()) is False
    fake_checkpoint(tmp_path, 2)
    fake_checkpoint(tmp_path, 4)
    assert sweep(tmp_path, eval_data("dev3.csv (features c)")) == [2, 4]
    assert read_manifest(out).sweep()["eval_data"] == {"": "dev3.csv (features c)"}
    assert check_eval_data(read_manifest(out), eval_data("dev3.csv (features c)"), GLUE) is True
    with pytest.raises(EvalDataChanged, match=(
            re.escape(f"{tmp_path / 'run_manifest.json'}: the checkpoints in this directory were "
                      "evaluated on dev3.csv (features c); this run evaluates dev.csv (features "
                      "a) "))):
        check_eval_data(read_manifest(out), eval_data("dev.csv (features a)"), GLUE)
    with pytest.raises(EvalDataChanged):  # a second eval set (MNLI's mismatched) is data too
        check_eval_data(read_manifest(out), eval_data("dev3.csv (features c)", "mm"), GLUE)
    with pytest.raises(EvalDataChanged):  # the sweep itself refuses them, evaluating nothing
        sweep(tmp_path, eval_data("dev.csv (features a)"))
    assert read_manifest(out).sweep()["eval_data"] == {"": "dev3.csv (features c)"}
    # The same data resume the sweep: nothing evaluated again.
    assert sweep(tmp_path, eval_data("dev3.csv (features c)")) == []


def test_a_sweep_that_is_not_resumable_only_starts_afresh_on_other_data(tmp_path):
    """Pretraining's, SQuAD's and RACE's sweeps evaluate every checkpoint again on other data (and
    record those); a named evaluation keeps data of its own."""
    for step in (1, 2):
        fake_checkpoint(tmp_path, step)
    assert sweep(tmp_path, eval_data("a"), SweepPolicy()) == [1, 2]
    assert sweep(tmp_path, eval_data("a"), SweepPolicy()) == []
    assert check_eval_data(read_manifest(str(tmp_path)), eval_data("b"), SweepPolicy()) is False
    assert sweep(tmp_path, eval_data("b"), SweepPolicy()) == [1, 2]
    assert read_manifest(str(tmp_path)).sweep()["eval_data"] == {"": "b"}
    assert sweep(tmp_path, eval_data("nsp records"), SweepPolicy(), evaluation="nsp") == [1, 2]
    assert read_manifest(str(tmp_path)).sweep("nsp")["eval_data"] == {"": "nsp records"}
    assert read_manifest(str(tmp_path)).sweep()["eval_data"] == {"": "b"}


def test_an_earlier_versions_sweep_state_is_resumed_and_its_data_checked(tmp_path):
    """best_trial.txt and eval_data.json of a directory an earlier version swept (it holds TF's
    checkpoint state file, as every directory an earlier version trained in)."""
    for step in (2, 4):
        fake_checkpoint(tmp_path, step)
    (tmp_path / "checkpoint").write_text('model_checkpoint_path: "model.ckpt-4"\n')
    (tmp_path / "best_trial.txt").write_text("2:2:0.5")
    # A sweep state written before the data were recorded is resumed, and the data recorded.
    assert check_eval_data(read_manifest(str(tmp_path)), eval_data("dev.csv (features a)"),
                           GLUE) is True
    assert sweep(tmp_path, eval_data("dev.csv (features a)")) == [4]
    assert read_manifest(str(tmp_path)).sweep()["eval_data"] == {"": "dev.csv (features a)"}
    earlier = tmp_path / "earlier"
    earlier.mkdir()
    (earlier / "checkpoint").write_text('model_checkpoint_path: "model.ckpt-4"\n')
    (earlier / "best_trial.txt").write_text("4:2:0.5")
    (earlier / "eval_data.json").write_text(json.dumps({"eval_sets": {"": "dev3.csv"}}))
    assert check_eval_data(read_manifest(str(earlier)), eval_data("dev3.csv"), GLUE) is True
    with pytest.raises(EvalDataChanged, match=r"evaluated on dev3.csv; this run evaluates dev.csv"):
        check_eval_data(read_manifest(str(earlier)), eval_data("dev.csv"), GLUE)


def test_the_source_of_features_changes_with_the_data_though_the_file_name_does_not(tmp_path):
    data = tmp_path / "dev.csv"

    def features():
        def build(sink):
            for line in data.read_text().splitlines():
                sink.write(line.encode())
            return {}
        return cached_feature_file(str(tmp_path), "own_data", "dev", {"max_seq_length": 32},
                                   "tok", [str(data)], build)

    data.write_text("a\nb\n")
    first = features()
    first_source = feature_file_source(first)
    data.write_text("a\nc\n")
    second = features()
    assert first.path == second.path
    assert first_source != feature_file_source(second)
    assert first_source.startswith(f"{data} (features ")
    assert feature_file_source(features()) == feature_file_source(second)
