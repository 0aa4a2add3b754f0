"""A resumed sweep refuses other evaluation data than the sweep it resumes
(albert_tf/evaluation/eval_data_record.py): run_classifier and run_ner used to report, after
``--dev_file`` changed, the best checkpoint chosen on the earlier dev file as this run's, evaluating
nothing on the new one."""

from __future__ import annotations

import json

import pytest

from albert_tf.evaluation.eval_data_record import EvalDataChanged, check_and_record_eval_data
from albert_tf.training.task import EvalSet
from data_prep.common.feature_cache import cached_feature_file, feature_file_source


def eval_sets(*sources: str) -> list[EvalSet]:
    return [EvalSet(name, lambda: None, source=source)
            for name, source in zip(("", "mismatched"), sources)]


def test_a_resumed_sweep_refuses_other_eval_data_and_a_fresh_one_records_its_own(tmp_path):
    out = str(tmp_path)
    check_and_record_eval_data(out, eval_sets("dev.csv (features a)"), "best_trial.txt")
    assert json.loads((tmp_path / "eval_data.json").read_text()) == {
        "eval_sets": {"": "dev.csv (features a)"}}
    # No sweep state yet (the first sweep, or SQuAD's and RACE's, which evaluate every checkpoint
    # again): the new data are recorded.
    check_and_record_eval_data(out, eval_sets("dev2.csv (features b)"), "best_trial.txt")
    check_and_record_eval_data(out, eval_sets("dev3.csv (features c)"), None)
    (tmp_path / "best_trial.txt").write_text("4:2:0.5")
    check_and_record_eval_data(out, eval_sets("dev3.csv (features c)"), "best_trial.txt")
    with pytest.raises(EvalDataChanged, match=r"eval_data.json: the checkpoints in this directory "
                                              r"were evaluated on dev3.csv \(features c\); this "
                                              r"run evaluates dev.csv \(features a\) "):
        check_and_record_eval_data(out, eval_sets("dev.csv (features a)"), "best_trial.txt")
    with pytest.raises(EvalDataChanged):  # a second eval set (MNLI's mismatched) is data too
        check_and_record_eval_data(out, eval_sets("dev3.csv (features c)", "mm"), "best_trial.txt")
    assert json.loads((tmp_path / "eval_data.json").read_text()) == {
        "eval_sets": {"": "dev3.csv (features c)"}}
    # A sweep state written before the data were recorded is resumed, and the data recorded.
    (tmp_path / "eval_data.json").unlink()
    check_and_record_eval_data(out, eval_sets("dev.csv (features a)"), "best_trial.txt")
    assert (tmp_path / "eval_data.json").exists()


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
