"""Early exit (PABEE) for run_classifier: the internal classifiers and their weighted loss against
NumPy, the patience rule on hand-made per-layer outputs, and the early-exit table."""

import numpy as np
import pytest
import tensorflow as tf

from albert_tf.checkpoints.tf1_names import tf1_variable_map
from albert_tf.tasks.classification import early_exit as exits
from albert_tf.tasks.classification.model import AlbertClassifierModel
from albert_tf.tasks.classification.task import ClassifierTask, early_exit_predictions
from tests import numpy_albert
from tests.shared_setup import tiny_config

LAYERS = 3


def config(**overrides):
    return tiny_config(num_hidden_layers=LAYERS, **overrides)


def random_inputs(batch=4, seq=12, seed=0):
    rng = np.random.default_rng(seed)
    mask = (np.arange(seq) < rng.integers(seq // 2, seq + 1, (batch, 1))).astype(np.int32)
    return {"input_ids": (rng.integers(5, 8000, (batch, seq)) * mask).astype(np.int32),
            "input_mask": mask, "segment_ids": ((np.arange(seq) >= 4) * mask).astype(np.int32)}


def perturbed(model, seed=1):
    """Every weight moved off its initial value (zero biases, unit gammas), so that a head or a
    name mixed up shows."""
    rng = np.random.default_rng(seed)
    for variable in model.weights:
        variable.assign(variable.numpy() + rng.normal(scale=0.05, size=variable.shape)
                        .astype(np.float32))
    return model


def numpy_layer_logits(weights, cfg, inputs, heads):
    """[B, L, C] with NumPy: the pooler on each layer's [CLS] vector, then layer j's head
    (``heads[j]`` = (output_weights, output_bias))."""
    forward = numpy_albert.forward(weights, cfg, inputs["input_ids"], inputs["input_mask"],
                                   inputs["segment_ids"])
    layers = forward["encoder_outputs"][cfg.inner_group_num - 1::cfg.inner_group_num]
    logits = []
    for hidden, (kernel, bias) in zip(layers, heads):
        pooled = numpy_albert.dense(weights, "bert/pooler/dense", hidden[:, 0], np.tanh)
        logits.append(pooled @ kernel.T + bias)
    return np.stack(logits, axis=1)


# -- the internal classifiers ---------------------------------------------------------------------

@pytest.mark.parametrize("inner_group_num", [1, 2])
def test_internal_classifiers_equal_the_numpy_forward_pass_and_layer_l_is_the_ordinary_head(
        inner_group_num):
    """Separate heads: every layer's logits are the NumPy reference's pooler + that layer's head;
    layer L's are exactly ``logits``, and an ordinary classifier with the same weights gives them
    too (the early-exit option changes nothing of the ordinary computation)."""
    cfg = config(inner_group_num=inner_group_num)
    model = perturbed(AlbertClassifierModel(cfg, 3, early_exit="separate"))
    inputs = random_inputs()
    outputs = model(inputs, training=False)
    weights = {name: variable.numpy() for name, variable in tf1_variable_map(model).items()}
    heads = [(weights[f"early_exit/layer_{j}/output_weights"],
              weights[f"early_exit/layer_{j}/output_bias"]) for j in range(1, LAYERS)]
    heads.append((weights["output_weights"], weights["output_bias"]))
    layer_logits = outputs["layer_logits"].numpy()
    assert layer_logits.shape == (4, LAYERS, 3)
    np.testing.assert_allclose(layer_logits, numpy_layer_logits(weights, cfg, inputs, heads),
                               atol=2e-5)
    np.testing.assert_array_equal(layer_logits[:, -1], outputs["logits"].numpy())

    ordinary = AlbertClassifierModel(cfg, 3)
    ordinary_names = tf1_variable_map(ordinary)
    assert set(ordinary_names) < set(weights)
    for name, variable in ordinary_names.items():
        variable.assign(weights[name])
    np.testing.assert_array_equal(ordinary(inputs, training=False)["logits"].numpy(),
                                  outputs["logits"].numpy())


def test_shared_heads_add_no_variable_and_apply_the_ordinary_head_after_every_layer():
    cfg = config()
    model = perturbed(AlbertClassifierModel(cfg, 2, early_exit="shared"))
    ordinary = AlbertClassifierModel(cfg, 2)
    assert sorted(tf1_variable_map(model)) == sorted(tf1_variable_map(ordinary))
    assert len(model.weights) == len(ordinary.weights)
    weights = {name: variable.numpy() for name, variable in tf1_variable_map(model).items()}
    inputs = random_inputs(seed=3)
    heads = [(weights["output_weights"], weights["output_bias"])] * LAYERS
    np.testing.assert_allclose(model(inputs, training=False)["layer_logits"].numpy(),
                               numpy_layer_logits(weights, cfg, inputs, heads), atol=2e-5)


def test_without_early_exit_the_model_and_its_names_are_the_ordinary_ones():
    model = AlbertClassifierModel(config(), 2)
    assert "layer_logits" not in model(random_inputs(), training=False)
    assert sorted(model.tf1_head_variables()) == ["output_bias", "output_weights"]
    assert model.layer_heads() == []


def test_separate_heads_have_their_tf1_names_and_object_paths():
    model = AlbertClassifierModel(config(), 2, early_exit="separate")
    head_names = sorted(model.tf1_head_variables())
    assert head_names == sorted(["output_weights", "output_bias"] + [
        f"early_exit/layer_{j}/{kind}" for j in (1, 2) for kind in ("output_weights",
                                                                     "output_bias")])
    assert [head.name for head in model.layer_heads()] == [
        "exit_classifier_1", "exit_classifier_2", "classifier"]


# -- PABEE's loss ---------------------------------------------------------------------------------

def numpy_cross_entropy(logits, labels):
    logits = logits.astype(np.float64)
    log_probs = logits - logits.max(-1, keepdims=True)
    log_probs -= np.log(np.exp(log_probs).sum(-1, keepdims=True))
    return -log_probs[np.arange(len(labels)), labels]


def test_pabee_weights_are_the_layer_numbers_normalised():
    np.testing.assert_allclose(exits.pabee_weights(4), np.array([1, 2, 3, 4]) / 10)


@pytest.mark.parametrize("is_regression", [False, True])
@pytest.mark.parametrize("heads", ["separate", "shared"])
def test_training_loss_is_the_layer_weighted_mean_of_the_internal_losses(is_regression, heads):
    """train_loss (head dropout off) = mean over examples of sum_j j * loss_j / sum_j j, loss_j the
    cross-entropy (regression: squared error) of layer j's classifier, computed with NumPy from
    the model's per-layer logits."""
    num_labels = 1 if is_regression else 3
    task = ClassifierTask(config(), ("pearson",) if is_regression else ("accuracy",), num_labels,
                          is_regression=is_regression, early_exit=heads)
    model = perturbed(task.build_model())
    for head in model.layer_heads():
        head.dropout_rate = 0.0
    inputs = random_inputs(batch=5, seed=4)
    labels = (np.array([0.5, 2.0, 4.5, 1.0, 3.0], np.float32) if is_regression
              else np.array([0, 2, 1, 1, 0], np.int32))
    features = {**{k: tf.constant(v) for k, v in inputs.items()},
                "label_ids": tf.constant(labels), "is_real_example": tf.ones(5)}
    loss, logs = task.train_loss(model, features, task.loss_normalizers(features))
    layer_logits = model(inputs, training=False)["layer_logits"].numpy().astype(np.float64)
    if is_regression:
        per_layer = (layer_logits[..., 0] - labels[:, None]) ** 2
    else:
        per_layer = np.stack([numpy_cross_entropy(layer_logits[:, j], labels)
                              for j in range(LAYERS)], axis=1)
    weights = np.arange(1, LAYERS + 1) / np.arange(1, LAYERS + 1).sum()
    assert float(loss) == pytest.approx(float(np.mean(per_layer @ weights)), rel=1e-5)
    if not is_regression:  # the logged accuracy is the full depth's
        assert float(logs["accuracy"]) == pytest.approx(
            np.mean(layer_logits[:, -1].argmax(-1) == labels))


# -- the patience rule ----------------------------------------------------------------------------

def one_hot_layers(classes, num_classes=3):
    """[N, L, C] logits whose arg-max per layer is ``classes`` [N][L]."""
    classes = np.asarray(classes)
    return np.eye(num_classes)[classes] * 2.0 - 1.0


def test_patience_exits_when_the_prediction_stayed_unchanged_patience_times():
    logits = one_hot_layers([[0, 0, 0, 0, 0],   # settled at once
                             [0, 1, 1, 1, 2],   # 1 from layer 2
                             [0, 1, 0, 1, 0],   # never settles
                             [2, 2, 1, 1, 1]])  # 2 then 1
    assert exits.exit_layers(logits, 1, False).tolist() == [2, 3, 5, 2]
    assert exits.exit_layers(logits, 2, False).tolist() == [3, 4, 5, 5]
    assert exits.exit_layers(logits, 3, False).tolist() == [4, 5, 5, 5]
    for patience in (4, 5, 9):  # L - 1 and more: all L layers
        assert exits.exit_layers(logits, patience, False).tolist() == [5, 5, 5, 5]
    chosen = exits.outputs_at(logits, exits.exit_layers(logits, 1, False)).argmax(-1)
    assert chosen.tolist() == [0, 1, 0, 2]
    with pytest.raises(ValueError):
        exits.exit_layers(logits, 0, False)


def test_regression_patience_counts_changes_below_the_threshold():
    scores = np.array([[1.0, 1.05, 1.12, 2.0, 2.01],
                       [3.0, 2.0, 1.0, 0.0, -1.0]])[..., None]
    assert exits.exit_layers(scores, 1, True, threshold=0.1).tolist() == [2, 5]
    assert exits.exit_layers(scores, 2, True, threshold=0.1).tolist() == [3, 5]
    assert exits.exit_layers(scores, 1, True, threshold=1.5).tolist() == [2, 2]
    assert exits.exit_layers(scores, 2, True, threshold=0.05).tolist() == [5, 5]


def test_fixed_depth_and_the_served_probabilities_at_the_exit_layer():
    logits = one_hot_layers([[0, 1, 1], [2, 2, 0]])
    layers = exits.stopped_layers(logits, False, 0.1, inference_layers=2)
    assert layers.tolist() == [2, 2]
    outputs = early_exit_predictions({"layer_logits": logits}, layers, is_regression=False)
    assert outputs["predictions"].tolist() == [1, 2]
    assert outputs["exit_layers"].tolist() == [2, 2]
    np.testing.assert_allclose(outputs["probabilities"].sum(-1), 1.0, rtol=1e-6)
    with pytest.raises(ValueError):
        exits.stopped_layers(logits, False, 0.1, patience=1, inference_layers=2)


def test_early_exit_table_and_the_chosen_patience():
    """Per layer: its classifier's accuracy; per patience: the accuracy of the exit layers'
    predictions and their mean; the chosen patience has the fewest mean layers within the
    tolerance of the full depth."""
    logits = one_hot_layers([[0, 0, 0, 0], [1, 0, 1, 1], [2, 1, 2, 2], [0, 1, 1, 1]])
    labels = np.array([0, 1, 2, 0])

    def metrics(outputs):
        return {"eval_accuracy": float(np.mean(outputs.argmax(-1) == labels))}

    table = exits.early_exit_metrics(logits, metrics, False)
    assert [table[f"early_exit/layer_{j}/eval_accuracy"] for j in range(1, 5)] == [
        1.0, 0.25, 0.75, 0.75]
    # patience 1 exits at [2, 4, 4, 3]: predictions 0, 1, 2, 1
    assert table["early_exit/patience_1/eval_accuracy"] == 0.75
    assert table["early_exit/patience_1/mean_layers"] == 3.25
    assert table["early_exit/patience_2/mean_layers"] == 3.75
    assert table["early_exit/patience_4/mean_layers"] == 4.0
    assert exits.num_layers_of(table) == 4
    assert exits.choose_patience(table, "eval_accuracy") == 1
    text = exits.format_table(table, ("eval_accuracy",))
    assert "patience 1" in text and "layer 4" in text
    # Padding examples (weight 0) count in neither.
    weighted = exits.early_exit_metrics(logits, metrics, False, weights=np.array([1, 1, 1, 0]))
    assert weighted["early_exit/patience_1/mean_layers"] == pytest.approx(10 / 3)
