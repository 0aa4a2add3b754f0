"""The SQuAD task model (reference checkpoints in and out) and the task's reduce step, end to end
from our own feature files to the reference's golden predictions and scores."""

from __future__ import annotations

import json
import os
import re
import string

import numpy as np
import pytest
import tensorflow as tf

from albert_tf.checkpoints import tf1_format
from albert_tf.tasks.question_answering.model import AlbertSquadModel
from albert_tf.tasks.question_answering.task import SquadEvalContext, SquadSettings, SquadTask
from data_prep.question_answering.feature_file import write_squad_feature_file
from data_prep.question_answering.features import SquadFeatureSettings
from tests import numpy_albert
from tests.shared_setup import SHARED_DATA_DIR, tiny_config
from tests.tf1_fixtures import write_reference_checkpoint

SQUAD_DIR = os.path.join(SHARED_DATA_DIR, "squad")
GOLDEN_DIR = os.path.join(SQUAD_DIR, "reference_golden")


def load_json(path: str):
    with open(path, encoding="utf-8") as handle:
        return json.load(handle)


def head_shapes(version_2: bool, hidden: int) -> dict[str, tuple[int, ...]]:
    """The reference's SQuAD head variables (tf.layers.dense kernels are [in, out])."""
    if not version_2:
        return {"cls/squad/output_weights": (2, hidden), "cls/squad/output_bias": (2,)}
    return {
        "start_logits/dense/kernel": (hidden, 1), "start_logits/dense/bias": (1,),
        "end_logits/dense_0/kernel": (2 * hidden, hidden), "end_logits/dense_0/bias": (hidden,),
        "end_logits/LayerNorm/beta": (hidden,), "end_logits/LayerNorm/gamma": (hidden,),
        "end_logits/dense_1/kernel": (hidden, 1), "end_logits/dense_1/bias": (1,),
        "answer_class/dense_0/kernel": (2 * hidden, hidden),
        "answer_class/dense_0/bias": (hidden,), "answer_class/dense_1/kernel": (hidden, 1),
    }


@pytest.mark.parametrize("version_2", [False, True])
def test_reference_checkpoint_loads_completely_and_exports_back(tmp_path, version_2):
    config = tiny_config()
    shapes = numpy_albert.reference_variable_shapes(config, with_heads=False)
    shapes.update(head_shapes(version_2, config.hidden_size))
    values = write_reference_checkpoint(str(tmp_path / "ref" / "model.ckpt"), shapes)
    model = AlbertSquadModel(config, version_2=version_2)
    report = tf1_format.load_tf1_checkpoint(model, str(tmp_path / "ref"))
    assert report.missing == [] and report.unused == []
    exported = tf1_format.export_tf1_checkpoint(model, str(tmp_path / "out" / "model.ckpt"))
    reader = tf.train.load_checkpoint(exported)
    for name, value in values.items():
        np.testing.assert_array_equal(reader.get_tensor(name), value, err_msg=name)


def test_v1_logits_are_the_sequence_output_times_the_reference_weights(tmp_path):
    config = tiny_config()
    shapes = numpy_albert.reference_variable_shapes(config, with_heads=False)
    shapes.update(head_shapes(False, config.hidden_size))
    weights = write_reference_checkpoint(str(tmp_path / "model.ckpt"), shapes)
    model = AlbertSquadModel(config)
    tf1_format.load_tf1_checkpoint(model, str(tmp_path))
    rng = np.random.default_rng(0)
    inputs = {"input_ids": rng.integers(0, 8000, (2, 10)).astype(np.int32),
              "input_mask": np.ones((2, 10), np.int32),
              "segment_ids": np.zeros((2, 10), np.int32)}
    sequence = numpy_albert.forward(weights, config, **inputs)["sequence_output"]
    expected = sequence @ weights["cls/squad/output_weights"].T + weights["cls/squad/output_bias"]
    outputs = model(inputs)
    np.testing.assert_allclose(outputs["start_logits"].numpy(), expected[..., 0], atol=1e-5)
    np.testing.assert_allclose(outputs["end_logits"].numpy(), expected[..., 1], atol=1e-5)


@pytest.mark.requires_shared_data
@pytest.mark.parametrize("name", ["v1.1-sample_S64", "v2.0-sample_S384"])
def test_reduce_reproduces_the_reference_from_our_feature_file(tmp_path, en8k, name):
    """Our eval feature file's sidecar + the golden raw outputs -> the golden files and scores."""
    golden = load_json(os.path.join(GOLDEN_DIR, name + ".json"))
    settings = golden["settings"]
    feature_file = write_squad_feature_file(
        os.path.join(SQUAD_DIR, settings["source"]), str(tmp_path / "eval.tfrecord"), en8k,
        SquadFeatureSettings(settings["max_seq_length"], settings["doc_stride"],
                             settings["max_query_length"]))
    version_2 = settings["version"] == 2
    context = SquadEvalContext.from_metadata(feature_file.metadata, str(tmp_path))
    raw = golden["raw_results"]
    outputs = {key: np.asarray([result[key] for result in raw]) for key in raw[0]}
    outputs["unique_ids"] = outputs.pop("unique_id")
    outputs["is_real_example"] = np.ones(len(raw), np.int32)
    metrics = SquadTask(tiny_config(), SquadSettings(version_2=version_2)).reduce(outputs, context)
    written = load_json(str(tmp_path / "predictions.json"))
    assert load_json(str(tmp_path / "nbest_predictions.json")).keys() == golden[
        "nbest_predictions"].keys()
    if not version_2:
        assert written == golden["predictions"]
        assert metrics == pytest.approx(golden["evaluate_v1"])
        return
    reference = golden["evaluate_v2_reference"]
    assert written == golden["predictions_reference_tuned"]
    assert metrics["reference_tuned_f1"] == pytest.approx(reference["f1"])
    assert metrics["reference_tuned_exact"] == pytest.approx(reference["exact"])
    assert metrics["reference_tuned_threshold"] == pytest.approx(
        reference["null_score_diff_threshold"])
    # The fixed-threshold score is that of the reference's threshold-0 predictions, as written.
    fixed = golden["predictions_threshold_0"]
    answered = [qid for qid, text in fixed.items() if text]
    assert metrics["total"] == len(fixed) == 14
    assert metrics["NoAns_total"] + metrics["HasAns_total"] == 14
    assert metrics["exact"] == pytest.approx(metrics_exact(feature_file.metadata, fixed))
    assert set(answered) <= set(fixed)
    null_odds = load_json(str(tmp_path / "null_odds.json"))
    assert null_odds == pytest.approx(golden["null_odds"], rel=1e-6)


def metrics_exact(metadata: dict, predictions: dict) -> float:
    """Exact match in percent, written here: "" is right for a question without gold answers."""
    def normalize(text: str) -> str:
        text = "".join(ch for ch in text.lower() if ch not in set(string.punctuation))
        return " ".join(re.sub(r"\b(a|an|the)\b", " ", text).split())

    scores = []
    for row in metadata["examples"]:
        truths = [normalize(t) for t in row["answers"] if normalize(t)] or [""]
        scores.append(float(normalize(predictions[row["qas_id"]]) in truths))
    return 100.0 * float(np.mean(scores))


@pytest.mark.requires_shared_data
def test_fixed_threshold_predictions_when_asked(tmp_path, en8k):
    golden = load_json(os.path.join(GOLDEN_DIR, "v2.0-sample_S64.json"))
    settings = golden["settings"]
    feature_file = write_squad_feature_file(
        os.path.join(SQUAD_DIR, settings["source"]), str(tmp_path / "eval.tfrecord"), en8k,
        SquadFeatureSettings(settings["max_seq_length"], settings["doc_stride"],
                             settings["max_query_length"]))
    raw = golden["raw_results"]
    outputs = {key: np.asarray([result[key] for result in raw]) for key in raw[0]}
    outputs["unique_ids"] = outputs.pop("unique_id")
    outputs["is_real_example"] = np.ones(len(raw), np.int32)
    task = SquadTask(tiny_config(), SquadSettings(version_2=True, tuned_predictions=False))
    task.reduce(outputs, SquadEvalContext.from_metadata(feature_file.metadata, str(tmp_path)))
    assert load_json(str(tmp_path / "predictions.json")) == golden["predictions_threshold_0"]
