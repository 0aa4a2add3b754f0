"""The RACE choice scorer and task against NumPy; the reference's head names load from a TF1 checkpoint."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from albert_tf.checkpoints import tf1_format
from albert_tf.models.config import AlbertConfig
from albert_tf.tasks.multiple_choice.model import AlbertMultipleChoiceModel
from albert_tf.tasks.multiple_choice.task import MultipleChoiceContext, MultipleChoiceTask
from tests import numpy_albert
from tests.tf1_fixtures import write_reference_checkpoint

CHOICES, SEQ = 4, 12


def small_config() -> AlbertConfig:
    return AlbertConfig.from_dict(dict(
        vocab_size=120, embedding_size=8, hidden_size=16, num_hidden_layers=2,
        num_attention_heads=2, intermediate_size=24, max_position_embeddings=SEQ,
        hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0))


def choice_batch(batch: int = 3, seed: int = 0) -> dict[str, np.ndarray]:
    """Records as on disk: [B, 4 * S] ids, masks with padding, segments 0 / 1, labels."""
    rng = np.random.default_rng(seed)
    ids = rng.integers(1, 120, (batch, CHOICES, SEQ))
    lengths = rng.integers(5, SEQ + 1, (batch, CHOICES))
    mask = (np.arange(SEQ)[None, None] < lengths[..., None]).astype(np.int32)
    segments = ((np.arange(SEQ)[None, None] >= 4) & (mask == 1)).astype(np.int32)
    return {"input_ids": (ids * mask).reshape(batch, -1).astype(np.int32),
            "input_mask": mask.reshape(batch, -1), "segment_ids": segments.reshape(batch, -1),
            "label_ids": rng.integers(0, CHOICES, batch).astype(np.int32),
            "is_real_example": np.ones(batch, np.int32)}


def test_logits_and_loss_equal_numpy_with_reference_weights(tmp_path):
    config = small_config()
    shapes = numpy_albert.reference_variable_shapes(config, with_heads=False)
    shapes.update({"output_weights": (1, config.hidden_size), "output_bias": (1,)})
    weights = write_reference_checkpoint(str(tmp_path / "model.ckpt"), shapes)
    model = AlbertMultipleChoiceModel(config, dropout_prob=0.0)  # training=True = inference
    report = tf1_format.load_tf1_checkpoint(model, str(tmp_path))
    assert report.missing == [] and report.unused == []

    batch = choice_batch()
    flat = {k: batch[k].reshape(-1, SEQ) for k in ("input_ids", "input_mask", "segment_ids")}
    pooled = numpy_albert.forward(weights, config, **flat)["pooled_output"]
    expected = (pooled @ weights["output_weights"].T.astype(np.float64)
                + weights["output_bias"]).reshape(-1, CHOICES)
    logits = model(batch, training=False)["logits"].numpy()
    np.testing.assert_allclose(logits, expected, atol=1e-5)
    # [B, 4, S] inputs give the same logits as the flattened record layout.
    stacked = {k: batch[k].reshape(-1, CHOICES, SEQ) for k in flat}
    np.testing.assert_allclose(model(stacked)["logits"].numpy(), logits, atol=1e-6)

    task = MultipleChoiceTask(config)
    outputs = {k: np.asarray(v) for k, v in task.predict_outputs(model, batch).items()}
    shifted = expected - expected.max(-1, keepdims=True)
    log_probs = shifted - np.log(np.exp(shifted).sum(-1, keepdims=True))
    ce = -log_probs[np.arange(len(batch["label_ids"])), batch["label_ids"]]
    np.testing.assert_allclose(outputs["per_example_loss"], ce, atol=1e-5)
    np.testing.assert_array_equal(outputs["predictions"], expected.argmax(-1))
    loss, _ = task.train_loss(model, batch, {"examples": tf.constant(3.0)})
    np.testing.assert_allclose(loss.numpy(), ce.mean(), atol=1e-5)


def test_head_names_export_round_trip(tmp_path):
    model = AlbertMultipleChoiceModel(small_config())
    prefix = tf1_format.export_tf1_checkpoint(model, str(tmp_path / "model.ckpt"))
    shapes = dict(tf.train.list_variables(prefix))
    assert shapes["output_weights"] == [1, 16] and shapes["output_bias"] == [1]
    assert not model.is_regression


def test_dropout_on_the_pooled_output_only_in_training():
    model = AlbertMultipleChoiceModel(small_config(), dropout_prob=0.5)
    batch = choice_batch(batch=8)
    inference = [model(batch, training=False)["logits"].numpy() for _ in range(2)]
    np.testing.assert_array_equal(inference[0], inference[1])
    trained = model(batch, training=True)["logits"].numpy()
    assert not np.allclose(trained, inference[0])


def test_reduce_accuracy_overall_and_per_level_ignoring_padding():
    task = MultipleChoiceTask(small_config())
    outputs = {"predictions": np.array([0, 1, 2, 3, 0]), "label_ids": np.array([0, 1, 0, 3, 1]),
               "per_example_loss": np.array([0.5, 1.0, 1.5, 2.0, 99.0]),
               "is_real_example": np.array([1, 1, 1, 1, 0])}
    metrics = task.reduce(outputs, MultipleChoiceContext(["middle", "high", "middle", "high"]))
    assert metrics == pytest.approx({"eval_accuracy": 0.75, "eval_loss": 1.25, "loss": 1.25,
                                     "middle_accuracy": 0.5, "high_accuracy": 1.0})
    assert set(task.reduce(outputs)) == {"eval_accuracy", "eval_loss", "loss"}
    with pytest.raises(ValueError, match="3 levels for 4"):
        task.reduce(outputs, MultipleChoiceContext(["middle"] * 3))
