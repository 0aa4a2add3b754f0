"""Early exit (PABEE) for run_classifier: the internal classifiers and their weighted loss against
NumPy, the patience rule on hand-made per-layer outputs, and the early-exit table."""

import keras
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


def loss_case(task: ClassifierTask, is_regression: bool, seed: int):
    """(model, inputs, labels, features) for a loss test: a perturbed model of ``task`` with its
    heads' dropout off, 5 random examples and their labels (scores for a regression)."""
    model = perturbed(task.build_model())
    for head in model.layer_heads():
        head.dropout_rate = 0.0
    inputs = random_inputs(batch=5, seed=seed)
    labels = (np.array([0.5, 2.0, 4.5, 1.0, 3.0], np.float32) if is_regression
              else np.array([0, 2, 1, 1, 0], np.int32))
    features = {**{k: tf.constant(v) for k, v in inputs.items()},
                "label_ids": tf.constant(labels), "is_real_example": tf.ones(5)}
    return model, inputs, labels, features


@pytest.mark.parametrize("is_regression", [False, True])
@pytest.mark.parametrize("heads", ["separate", "shared"])
def test_training_loss_is_the_layer_weighted_mean_of_the_internal_losses(is_regression, heads):
    """train_loss (head dropout off) = mean over examples of sum_j j * loss_j / sum_j j, loss_j the
    cross-entropy (regression: squared error) of layer j's classifier, computed with NumPy from
    the model's per-layer logits."""
    num_labels = 1 if is_regression else 3
    task = ClassifierTask(config(), ("pearson",) if is_regression else ("accuracy",), num_labels,
                          is_regression=is_regression, early_exit=heads)
    model, inputs, labels, features = loss_case(task, is_regression, seed=4)
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


def numpy_kl(teacher, student):
    """KL(softmax(teacher) || softmax(student)) per row, in float64."""
    def log_softmax(logits):
        logits = logits.astype(np.float64) - logits.max(-1, keepdims=True)
        return logits - np.log(np.exp(logits).sum(-1, keepdims=True))

    return (np.exp(log_softmax(teacher)) * (log_softmax(teacher) - log_softmax(student))).sum(-1)


# float32 log-softmax of logits within +-4 over 3 classes: each value is off by at most a few
# ulps of its magnitude (<= ~6, ulp 4.8e-7), so each KL term (a probability times a difference of
# two of them) by <= ~6e-6 and the sum over classes, whose probabilities add up to 1, likewise.
KL_TOLERANCE = 1e-5


def test_the_distillation_loss_is_the_kl_to_the_full_depth_and_the_squared_gap_of_scores():
    """distillation_loss against NumPy: KL(teacher || student) of softmaxes (0 for equal logits,
    whatever their shift), the squared score difference for a regression; mixed_loss weighs it
    against the labels' loss; no gradient reaches the teacher."""
    from albert_tf.tasks.classification.distillation import distillation_loss, mixed_loss

    rng = np.random.default_rng(7)
    student, teacher = (rng.uniform(-4, 4, (6, 3)).astype(np.float32) for _ in range(2))
    np.testing.assert_allclose(distillation_loss(tf.constant(student), tf.constant(teacher),
                                                 False).numpy(),
                               numpy_kl(teacher, student), atol=KL_TOLERANCE)
    assert np.all(np.abs(distillation_loss(tf.constant(student), tf.constant(student + 2.5),
                                           False).numpy()) <= KL_TOLERANCE)
    np.testing.assert_allclose(
        distillation_loss(tf.constant(student[:, :1]), tf.constant(teacher[:, :1]), True).numpy(),
        (student[:, 0].astype(np.float64) - teacher[:, 0]) ** 2, rtol=1e-6)
    labels_loss = rng.uniform(0, 3, 6).astype(np.float32)
    mixed = mixed_loss(tf.constant(labels_loss), tf.constant(student), tf.constant(teacher),
                       False, 0.25).numpy()
    np.testing.assert_allclose(mixed, 0.75 * labels_loss + 0.25 * numpy_kl(teacher, student),
                               atol=KL_TOLERANCE)
    np.testing.assert_array_equal(mixed_loss(tf.constant(labels_loss), tf.constant(student),
                                             tf.constant(teacher), False, 0.0).numpy(),
                                  labels_loss)
    teacher_variable = tf.Variable(teacher)
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(distillation_loss(tf.constant(student), teacher_variable, False))
    assert tape.gradient(loss, teacher_variable) is None


@pytest.mark.parametrize("is_regression", [False, True])
@pytest.mark.parametrize("weight", [0.0, 0.6, 1.0])
def test_stage_two_loss_mixes_each_internal_classifiers_labels_and_the_full_depth(is_regression,
                                                                                  weight):
    """Two-stage training's stage 2 (``internal_only``): train_loss (head dropout off) = mean over
    examples and layers 1..L-1 of (1 - w) x the labels' loss + w x the distance to layer L's
    logits (KL; a regression: squared gap), computed with NumPy from the model's per-layer logits;
    the gradients reach the internal classifiers alone."""
    num_labels = 1 if is_regression else 3
    task = ClassifierTask(config(), ("pearson",) if is_regression else ("accuracy",), num_labels,
                          is_regression=is_regression, early_exit="separate", internal_only=True,
                          distillation=weight)
    model, inputs, labels, features = loss_case(task, is_regression, seed=5)
    with tf.GradientTape() as tape:
        loss, _ = task.train_loss(model, features, task.loss_normalizers(features))
    layer_logits = model(inputs, training=False)["layer_logits"].numpy().astype(np.float64)
    internal, full = layer_logits[:, :-1], layer_logits[:, -1]
    if is_regression:
        label_loss = (internal[..., 0] - labels[:, None]) ** 2
        distance = (internal[..., 0] - full[:, None, 0]) ** 2
    else:
        label_loss = np.stack([numpy_cross_entropy(internal[:, j], labels)
                               for j in range(LAYERS - 1)], axis=1)
        distance = np.stack([numpy_kl(full, internal[:, j]) for j in range(LAYERS - 1)], axis=1)
    want = np.mean((1 - weight) * label_loss + weight * distance)
    assert float(loss) == pytest.approx(float(want), rel=1e-5, abs=KL_TOLERANCE)
    gradients = tape.gradient(loss, model.trainable_variables)
    assert {v.path.split("/")[0] for v in model.trainable_variables} == {
        f"exit_classifier_{j}" for j in range(1, LAYERS)}
    assert all(g is not None and np.any(g.numpy()) for g in gradients)


def test_distillation_is_stage_two_s_and_a_weight():
    with pytest.raises(ValueError, match="needs internal_only"):
        ClassifierTask(config(), ("accuracy",), 2, early_exit="separate", distillation=0.5)
    with pytest.raises(ValueError, match=r"a weight in \[0, 1\], got 1.5"):
        ClassifierTask(config(), ("accuracy",), 2, early_exit="separate", internal_only=True,
                       distillation=1.5)


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
    layers = exits.stopped_layers(logits, False, exits.ExitPolicy.fixed_depth(2, 3))
    assert layers.tolist() == [2, 2]
    # A patience over the first 2 layers: exits at 2 at the latest.
    assert exits.stopped_layers(logits, False, exits.ExitPolicy(1, 2)).tolist() == [2, 2]
    assert exits.stopped_layers(one_hot_layers([[0, 1, 1], [2, 2, 0]]), False,
                                exits.ExitPolicy(1, 3)).tolist() == [3, 2]
    outputs = early_exit_predictions({"layer_logits": logits}, layers, is_regression=False)
    assert outputs["predictions"].tolist() == [1, 2]
    assert outputs["exit_layers"].tolist() == [2, 2]
    np.testing.assert_allclose(outputs["probabilities"].sum(-1), 1.0, rtol=1e-6)


def probability_layers(rows):
    """layer_logits [N, L, C] whose softmax at each layer is the given probabilities."""
    return np.log(np.asarray(rows, np.float64))


def test_confidence_exits_at_the_first_layer_sure_enough():
    """Confidence c: the first layer whose top probability is at least c (layer 1 included), the
    last layer when none is; with a patience in the same policy, whichever stops first; within
    max_layers."""
    logits = probability_layers([[[0.55, 0.45], [0.8, 0.2], [0.95, 0.05]],
                                 [[0.9, 0.1], [0.3, 0.7], [0.3, 0.7]],
                                 [[0.5, 0.5], [0.6, 0.4], [0.4, 0.6]]])
    assert exits.confident_exit_layers(logits, 0.8).tolist() == [2, 1, 3]
    assert exits.confident_exit_layers(logits, 0.95).tolist() == [3, 3, 3]
    assert exits.confident_exit_layers(logits, 0.55).tolist() == [1, 1, 2]
    rule = exits.ExitPolicy.of_rule(exits.ExitRule(confidence=0.8), 3)
    assert (rule.patience, rule.max_layers, rule.confidence) == (3, 3, 0.8)
    assert exits.stopped_layers(logits, False, rule).tolist() == [2, 1, 3]
    # Patience 1 stops the first and third examples at layer 2 (their classes agree there), the
    # second at 3; confidence 0.95 the first at 3: the earlier one wins.
    both = exits.ExitPolicy(1, 3, confidence=0.95)
    assert exits.stopped_layers(logits, False, both).tolist() == [2, 3, 2]
    assert exits.stopped_layers(logits, False, exits.ExitPolicy(3, 2, confidence=0.95)
                                ).tolist() == [2, 2, 2]
    assert exits.ExitPolicy.of_rule(exits.ExitRule(confidence=0.99), 3).can_stop_early
    assert not exits.ExitPolicy(2, 3).can_stop_early
    assert rule.describe() == "at confidence 0.8, at the latest after layer 3"
    assert exits.ExitPolicy(1, 6).describe() == "at patience 1, at the latest after layer 6"
    assert exits.ExitPolicy.fixed_depth(3, 6).describe() == "after layer 3 (a fixed depth)"
    with pytest.raises(ValueError):
        exits.ExitPolicy(3, 3, confidence=1.0).check(3)
    with pytest.raises(ValueError):
        exits.ExitRule(patience=1, confidence=0.5)


def test_the_table_measures_confidences_above_chance_and_may_choose_one(tmp_path):
    """A classification's table holds each of ``CONFIDENCES`` above 1 / C (a regression's none);
    the chooser weighs them with the patiences by the same price per layer, and records the
    chosen rule in early_exit_results.json, which prediction and export then stop by; a file of
    an earlier version (a patience alone) still reads."""
    rng = np.random.default_rng(5)
    labels = rng.integers(0, 3, 200)
    # Half the examples: layer 1 right and sure (0.9), then right. The others: layer 1 wrong at
    # 0.4, then right, wrong and right at 0.5, 0.5 and 0.9, so patience 1 runs them to the last
    # layer and the sure ones to layer 2, where a confidence of 0.85 stops the sure ones at 1.
    sure = rng.random(200) < 0.5

    def top(label, probability):
        row = np.full(3, (1 - probability) / 2)
        row[label % 3] = probability
        return row

    rows = [[top(label, 0.9), top(label, 0.5), top(label, 0.5), top(label, 0.9)] if is_sure
            else [top(label + 1, 0.4), top(label, 0.5), top(label + 2, 0.5), top(label, 0.9)]
            for label, is_sure in zip(labels, sure)]
    logits = probability_layers(rows)

    def metrics(outputs):
        return {"eval_accuracy": float(np.mean(outputs.argmax(-1) == labels))}

    table = exits.early_exit_metrics(logits, metrics, False)
    confidences = [value for value in exits.CONFIDENCES if value > 1 / 3]
    assert [rule.confidence for rule in exits.table_rules(table)[4:]] == confidences
    assert table["early_exit/confidence_0.85/eval_accuracy"] == 1.0
    assert table["early_exit/confidence_0.85/mean_layers"] == pytest.approx(
        1 + 3 * (1 - sure.mean()))
    assert "early_exit/confidence_0.3/eval_accuracy" not in table  # below 1 / 3: layer 1 always
    assert exits.sweep_confidences(2)[0] == 0.55 and exits.sweep_confidences(1) == ()
    assert not [name for name in exits.early_exit_metrics(logits[..., :1], metrics, True)
                if "confidence" in name]
    rule = exits.choose_rule(table, "eval_accuracy")
    assert rule.confidence is not None and table[rule.key("eval_accuracy")] == 1.0
    assert "confidence 0.85" in exits.format_table(table, ("eval_accuracy",))
    results = exits.results_of(table, "eval_accuracy", 2.0, ordinary_is_full_depth=True)
    assert (results["patience"], results["confidence"]) == (None, rule.confidence)
    assert results["chosen"]["points_from_ordinary"] == 0.0
    path = str(tmp_path / exits.RESULTS_FILE)
    exits.write_results(path, results)
    policy = exits.EarlyExitSettings("separate").policy(4, path)
    assert (policy.confidence, policy.max_layers) == (rule.confidence, 4)
    np.testing.assert_array_equal(exits.stopped_layers(logits, False, policy),
                                  exits.confident_exit_layers(logits, rule.confidence))
    assert table["early_exit/patience_1/mean_layers"] == pytest.approx(2 + 2 * (1 - sure.mean()))
    given = exits.EarlyExitSettings("separate", confidence=0.5).policy(4, path)
    assert given.confidence == 0.5
    exits.write_results(path, {**results, "patience": 2, "confidence": None})
    assert exits.EarlyExitSettings("separate").policy(4, path).patience == 2
    earlier = {name: value for name, value in results.items() if name != "confidence"}
    exits.write_results(path, {**earlier, "patience": 3})
    assert exits.read_chosen_rule(path) == exits.ExitRule(patience=3)
    exits.write_results(path, {**results, "confidence": 1.5})
    with pytest.raises(exits.UserError, match="expected a patience >= 1 or a confidence in"):
        exits.read_chosen_rule(path)


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
    # Layer 1 alone is right on every example, and sure enough of it: a confidence stops there.
    chosen = exits.choose_rule(table, "eval_accuracy")
    assert table[chosen.key("eval_accuracy")] == 1.0 and table[chosen.key("mean_layers")] == 1
    patiences_only = {name: value for name, value in table.items() if "confidence" not in name}
    assert exits.choose_rule(patiences_only, "eval_accuracy") == exits.ExitRule(patience=1)
    text = exits.format_table(table, ("eval_accuracy",))
    assert "patience 1" in text and "layer 4" in text
    # Padding examples (weight 0) count in neither.
    weighted = exits.early_exit_metrics(logits, metrics, False, weights=np.array([1, 1, 1, 0]))
    assert weighted["early_exit/patience_1/mean_layers"] == pytest.approx(10 / 3)


def patience_table(metric, mean_layers, key="eval_accuracy"):
    """A hand-made ``early_exit_metrics`` table: patience t's ``key`` and mean layers (lists over
    t = 1..L); each layer's classifier alone at the full depth's metric (the chooser reads only L
    from them)."""
    table = {}
    for patience, (value, layers) in enumerate(zip(metric, mean_layers), start=1):
        table[f"early_exit/patience_{patience}/{key}"] = value
        table[f"early_exit/patience_{patience}/mean_layers"] = layers
        table[f"early_exit/layer_{patience}/{key}"] = metric[-1]
    return table


# Shaped like the SST-2 benchmark's separate heads (docs/early_exit.md, 12 layers): the full depth
# 0.7844 stands alone above patiences 3-10, which hover around 0.775-0.780.
SST2_LIKE = patience_table(
    [0.7592, 0.7718, 0.7752, 0.7718, 0.7741, 0.7752, 0.7775, 0.7798, 0.7798, 0.7821, 0.7844,
     0.7844],
    [2.21, 3.35, 4.39, 5.40, 6.41, 7.41, 8.42, 9.43, 10.43, 11.22, 12.0, 12.0])


def test_the_chosen_patience_trades_the_metric_for_layers():
    """The default (2 points for skipping layers 2..L) takes patience 3 (4.39 layers, 0.92 points
    below a full depth that stands alone), not patience 8 as a threshold at 0.5 points below the
    full depth did; a tolerance of 0.5 keeps the full depth; 0 takes the best metric (ties: the
    fewest layers); a model of one layer has only patience 1."""
    assert exits.choose_rule(SST2_LIKE, "eval_accuracy").patience == 3
    # Patiences 11 and 12 both run all 12 layers: ties go to the larger patience.
    assert exits.choose_rule(SST2_LIKE, "eval_accuracy", 0.5).patience == 12
    assert exits.choose_rule(SST2_LIKE, "eval_accuracy", 0.0).patience == 12
    assert exits.choose_rule(SST2_LIKE, "eval_accuracy", 10.0).patience == 2
    assert exits.choose_rule(SST2_LIKE, "eval_accuracy", 20.0).patience == 1
    # A flat metric: the fewest layers whatever the tolerance > 0.
    flat = patience_table([0.8] * 4, [2.0, 3.0, 4.0, 4.0])
    assert exits.choose_rule(flat, "eval_accuracy", 0.1).patience == 1
    assert exits.choose_rule(flat, "eval_accuracy", 0.0).patience == 1
    assert exits.choose_rule(patience_table([0.7], [1.0]), "eval_accuracy").patience == 1


def test_the_results_and_the_table_give_the_price_against_the_ordinary_model():
    """early_exit_results.json's ``chosen``: the chosen patience's accuracy and mean layers and its
    distance, in points, from the full depth and from the ordinary model; two-stage training: the
    ordinary model is the full depth (the table's last row repeats it); joint: unknown, said."""
    table = {**SST2_LIKE, "early_exit/layer_12/eval_accuracy": 0.7844}
    two_stage = exits.results_of(table, "eval_accuracy", 2.0, ordinary_is_full_depth=True)
    assert two_stage["patience"] == 3 and two_stage["ordinary"] == {"eval_accuracy": 0.7844}
    assert two_stage["chosen"] == {"eval_accuracy": 0.7752, "mean_layers": 4.39,
                                   "points_from_full_depth": pytest.approx(-0.92),
                                   "points_from_ordinary": pytest.approx(-0.92)}
    assert exits.price_line(two_stage) == (
        "eval_accuracy 0.7752 with 4.39 of 12 layers on average: -0.92 points against the full "
        "depth, -0.92 against the ordinary model (0.7844; two-stage training: the full depth is "
        "the ordinary model)")
    joint = exits.results_of(table, "eval_accuracy", 2.0)
    assert joint["ordinary"] is None and joint["chosen"]["points_from_ordinary"] is None
    assert exits.price_line(joint).endswith(
        "-0.92 points against the full depth; against the ordinary model: unknown (joint "
        "training changes the full depth; train without --early_exit, the same recipe and "
        "seed, to know it)")
    rows = exits.format_table(table, ("eval_accuracy",), ordinary_is_full_depth=True)
    assert rows.splitlines()[-1].split()[:3] == ["ordinary", "0.7844", "12"]
    assert exits.format_table(table, ("eval_accuracy",)).splitlines()[-1].split()[:2] == [
        "ordinary", "unknown"]


def test_prediction_and_export_choose_again_with_a_given_patience_tolerance(tmp_path):
    """--do_predict / --export_dir without --patience: the patience the sweep chose, unless
    --patience_tolerance is given (it used to be ignored there): then the one that tolerance
    chooses from the recorded table; a file without a table is one line."""
    path = str(tmp_path / exits.RESULTS_FILE)
    exits.write_results(path, exits.results_of(SST2_LIKE, "eval_accuracy", 2.0))
    assert exits.EarlyExitSettings("separate").policy(12, path).patience == 3
    for tolerance, patience in ((2.0, 3), (0.0, 12), (20.0, 1)):
        policy = exits.EarlyExitSettings("separate", tolerance_points=tolerance).policy(12, path)
        assert (policy.patience, policy.max_layers) == (patience, 12)
    assert exits.EarlyExitSettings("separate", patience=5, tolerance_points=0.0).policy(
        12, path).patience == 5
    (tmp_path / exits.RESULTS_FILE).write_text('{"patience": 3, "tolerance_points": 2.0}')
    with pytest.raises(exits.UserError, match="no early-exit table to choose a rule from "
                       "with --patience_tolerance=0.0"):
        exits.EarlyExitSettings("separate", tolerance_points=0.0).policy(12, path)


def test_a_chosen_patience_of_another_checkpoint_than_the_best_is_refused(tmp_path):
    """early_exit_results.json names the checkpoint whose table it holds: when the run manifest's
    best is another one (a later sweep chose it, and a stop came before the file was written
    again), prediction and export refuse its patience instead of serving it for other weights."""
    from albert_tf.files.run_manifest import update_manifest

    path = str(tmp_path / exits.RESULTS_FILE)
    results = exits.results_of(SST2_LIKE, "eval_accuracy", 2.0)
    exits.write_results(path, dict(results, best_step=4, fingerprint="f4"))
    # No manifest: nothing to hold it against.
    assert exits.read_chosen_rule(path) == exits.ExitRule(patience=3)
    update_manifest(str(tmp_path), lambda content: content.update(
        best={"step": 4, "fingerprint": "f4", "selection_metric": "eval_accuracy",
              "metrics": {}}))
    assert exits.EarlyExitSettings("separate").policy(12, path).patience == 3
    update_manifest(str(tmp_path), lambda content: content["best"].update(step=6,
                                                                          fingerprint="f6"))
    with pytest.raises(exits.UserError, match=r"describes the checkpoint of step 4, not "
                                              r"model.ckpt-best \(step 6\)"):
        exits.EarlyExitSettings("separate").policy(12, path)


def test_the_chosen_patience_loses_at_most_the_tolerance_times_the_layers_it_saves():
    """On random tables (metrics and mean layers increasing with noise): the chosen patience's
    loss against the full depth is at most tolerance x (L - mean layers) / (L - 1) points, so
    never more than the tolerance; a larger tolerance never chooses more mean layers."""
    rng = np.random.default_rng(11)
    for _ in range(200):
        layers = int(rng.integers(2, 13))
        mean_layers = np.sort(rng.uniform(1, layers, layers))
        mean_layers[-1] = layers  # patience L: every example runs all L layers
        metric = np.clip(np.sort(rng.uniform(0.5, 0.9, layers)) + rng.normal(0, 0.01, layers),
                         0, 1)
        metric[-2] = metric[-1] if layers > 2 else metric[-2]  # L - 1 and L: the full depth
        mean_layers[-2] = layers if layers > 2 else mean_layers[-2]
        table = patience_table(metric.tolist(), mean_layers.tolist())
        previous = np.inf
        for tolerance in (0.0, 0.25, 0.5, 1.0, 2.0, 5.0, 20.0):
            chosen = exits.choose_rule(table, "eval_accuracy", tolerance).patience
            loss = (metric[-1] - metric[chosen - 1]) * 100
            allowed = tolerance * (layers - mean_layers[chosen - 1]) / (layers - 1)
            assert loss <= allowed + 1e-9 <= tolerance + 1e-9, (tolerance, chosen, table)
            assert mean_layers[chosen - 1] <= previous
            previous = mean_layers[chosen - 1]


# -- serving --------------------------------------------------------------------------------------

# argv: the export, an .npz of the ids, a JSON list of patiences, the output .npz prefix, and a
# JSON file receiving the project modules the process imported (must be none).
TENSORFLOW_ONLY_CALLER = r"""
import json, sys
import numpy as np
import tensorflow as tf
loaded = tf.saved_model.load(sys.argv[1])
ids = {name: tf.constant(value) for name, value in np.load(sys.argv[2]).items()}
default = loaded.signatures["serving_default"](**ids)
np.savez(sys.argv[4] + "default.npz", **{k: v.numpy() for k, v in default.items()})
for patience in json.loads(sys.argv[3]):
    for row in range(len(ids["input_ids"])):  # batch 1, as a latency-bound client calls it
        one = {name: value[row:row + 1] for name, value in ids.items()}
        outputs = loaded.signatures["serve_patience"](**one, patience=tf.constant(patience))
        np.savez(sys.argv[4] + f"{patience}_{row}.npz",
                 **{k: v.numpy() for k, v in outputs.items()})
project = sorted(name for name in sys.modules
                 if name.split(".")[0] in ("albert_tf", "data_prep", "tests"))
with open(sys.argv[5], "w") as handle:
    json.dump(project, handle)
"""


@pytest.mark.subprocess
@pytest.mark.parametrize("is_regression", [False, True])
def test_export_serves_the_patience_rule_in_a_tensorflow_only_process(tmp_path, is_regression):
    """The ids_only export of an early-exit model, loaded by a process that imports TensorFlow
    and NumPy only: serving_default (the recorded patience 2) and serve_patience at batch 1 (each
    patience) give the Keras model's predictions at the exit layers of the NumPy rule, and those
    layers as ``layers_used``."""
    import json
    import subprocess
    import sys

    from albert_tf.serving.saved_model import IDS_ONLY
    from albert_tf.tasks.classification.serving import export_classifier
    from tests.shared_setup import subprocess_env

    layers, threshold = 6, 0.5
    keras.utils.set_random_seed(7)  # weights whose exits vary with the patience
    model = perturbed(AlbertClassifierModel(tiny_config(num_hidden_layers=layers),
                                            1 if is_regression else 3,
                                            is_regression=is_regression, early_exit="separate"),
                      seed=7)
    for head in model.layer_heads()[:-1]:  # heads that disagree now and then
        head.output_weights.assign(head.output_weights * (3 if is_regression else 30))
    inputs = random_inputs(batch=6, seed=8)
    export_classifier(model, str(tmp_path / "export"),
                      policy=exits.ExitPolicy(2, layers, regression_threshold=threshold))
    np.savez(tmp_path / "ids.npz", **inputs)
    patiences = [1, 3, layers]
    result = subprocess.run(
        [sys.executable, "-c", TENSORFLOW_ONLY_CALLER, str(tmp_path / "export" / IDS_ONLY),
         str(tmp_path / "ids.npz"), json.dumps(patiences), str(tmp_path / "out_"),
         str(tmp_path / "modules.json")],
        capture_output=True, text=True, env=subprocess_env(), timeout=600)
    assert result.returncode == 0, result.stderr[-4000:]
    assert json.loads((tmp_path / "modules.json").read_text()) == []
    layer_logits = model(inputs, training=False)["layer_logits"].numpy()

    def expected(patience):
        exit_at = exits.exit_layers(layer_logits, patience, is_regression, threshold)
        return exit_at, early_exit_predictions({"layer_logits": layer_logits}, exit_at,
                                               is_regression)

    exit_at, want = expected(2)
    served = dict(np.load(tmp_path / "out_default.npz"))
    assert sorted(served) == ["layers_used", "predictions", "probabilities"]
    assert 1 < exit_at.min() and len(set(exit_at)) > 1
    np.testing.assert_array_equal(served["layers_used"], exit_at)
    np.testing.assert_allclose(served["probabilities"], want["probabilities"], atol=1e-5)
    np.testing.assert_allclose(served["predictions"], want["predictions"], atol=1e-5)
    for patience in patiences:
        exit_at, want = expected(patience)
        for row in range(len(exit_at)):
            one = dict(np.load(tmp_path / f"out_{patience}_{row}.npz"))
            assert one["layers_used"].tolist() == [exit_at[row]], (patience, row)
            np.testing.assert_allclose(one["predictions"], want["predictions"][row:row + 1],
                                       atol=1e-5)
    assert json.loads((tmp_path / "export" / IDS_ONLY / "assets.extra" / "early_exit.json")
                      .read_text()) == {"heads": "separate", "patience": 2, "max_layers": layers,
                                        "regression_threshold": threshold, "confidence": None}


def test_the_export_serves_a_confidence_each_request_gives(tmp_path):
    """serve_confidence of a classification's export (recorded rule: patience 2) stops each
    example where the NumPy confidence rule does on the Keras model's layers, at batch 1 and for
    a batch, whatever the recorded patience; a confidence outside (0, 1) fails the graph's check,
    and a regression's export has no such signature (no class probabilities to be sure of)."""
    from albert_tf.serving.saved_model import IDS_ONLY
    from albert_tf.tasks.classification.early_exit_inference import early_exit_logits
    from albert_tf.tasks.classification.serving import export_classifier

    layers = 6
    keras.utils.set_random_seed(7)
    model = perturbed(AlbertClassifierModel(tiny_config(num_hidden_layers=layers), 3,
                                            early_exit="separate"), seed=7)
    for head in model.layer_heads()[:-1]:  # heads unsure at some layers, sure at others
        head.output_weights.assign(head.output_weights * 30)
    inputs = random_inputs(batch=6, seed=8)
    export_classifier(model, str(tmp_path / "export"), policy=exits.ExitPolicy(2, layers))
    loaded = tf.saved_model.load(str(tmp_path / "export" / IDS_ONLY))
    assert {"serve_patience", "serve_confidence"} <= set(loaded.signatures)
    layer_logits = model(inputs, training=False)["layer_logits"].numpy()
    spread = set()
    for confidence in (0.4, 0.7, 0.95):
        exit_at = exits.confident_exit_layers(layer_logits, confidence)
        spread.add(tuple(exit_at))
        want = early_exit_predictions({"layer_logits": layer_logits}, exit_at, False)
        served = loaded.signatures["serve_confidence"](
            **{name: tf.constant(value) for name, value in inputs.items()},
            confidence=tf.constant(confidence))
        np.testing.assert_array_equal(served["layers_used"].numpy(), exit_at)
        np.testing.assert_allclose(served["probabilities"].numpy(), want["probabilities"],
                                   atol=1e-5)
        for row in range(len(exit_at)):  # batch 1: each example stops on its own
            one = loaded.signatures["serve_confidence"](
                **{name: tf.constant(value[row:row + 1]) for name, value in inputs.items()},
                confidence=tf.constant(confidence))
            assert one["layers_used"].numpy().tolist() == [exit_at[row]], (confidence, row)
    assert len(spread) == 3  # the three confidences stop the examples at different layers
    # The request's rule replaces the recorded patience: some example runs past where it stops.
    assert (exits.confident_exit_layers(layer_logits, 0.95)
            > exits.exit_layers(layer_logits, 2, False)).any()
    for wrong in (0.0, 1.0, float("nan")):
        with pytest.raises(tf.errors.InvalidArgumentError,
                           match=r"confidence must lie in \(0, 1\)"):
            loaded.signatures["serve_confidence"](
                **{name: tf.constant(value) for name, value in inputs.items()},
                confidence=tf.constant(wrong))
    with pytest.raises(ValueError, match="a patience or by a confidence, not both"):
        early_exit_logits(model, inputs, exits.ExitPolicy(2, layers), patience=tf.constant(1),
                          confidence=tf.constant(0.5))

    regression = AlbertClassifierModel(tiny_config(num_hidden_layers=2), 1, is_regression=True,
                                       early_exit="separate")
    export_classifier(regression, str(tmp_path / "regression"))
    signatures = tf.saved_model.load(str(tmp_path / "regression" / IDS_ONLY)).signatures
    assert "serve_patience" in signatures and "serve_confidence" not in signatures


@pytest.mark.parametrize("rule, value", [("patience", 1), ("confidence", 0.7)])
def test_the_text_signatures_stop_by_the_requests_rule(tmp_path, rule, value):
    """serve_text_<rule> of an export with a tokenizer packs the texts as serve_text does and
    stops each example where the NumPy rule does on the Keras model's layers for those packed
    ids, returning the packed ids."""
    import tensorflow_text  # noqa: F401  (registers the SentencePiece ops of with_text)

    from albert_tf.tasks.classification.serving import TextPacker, export_classifier
    from albert_tf.tokenization.full_tokenizer import FullTokenizer
    from tests import spm_fixtures

    layers, max_seq_length = 6, 16
    tokenizer = FullTokenizer(spm_model_file=spm_fixtures.cached_tiny_spm(500),
                              do_lower_case=True)
    keras.utils.set_random_seed(7)
    model = perturbed(AlbertClassifierModel(tiny_config(num_hidden_layers=layers, vocab_size=500),
                                            3, early_exit="separate"), seed=7)
    for head in model.layer_heads()[:-1]:
        head.output_weights.assign(head.output_weights * 30)
    export_classifier(model, str(tmp_path / "export"), tokenizer=tokenizer,
                      max_seq_length=max_seq_length, policy=exits.ExitPolicy(3, layers))
    texts = {"text_a": tf.constant(["the cat sat on the mat", "a dog", "rain all day long",
                                    "what is this"]),
             "text_b": tf.constant(["", "it ran away", "", "nothing at all"])}
    served = tf.saved_model.load(str(tmp_path / "export" / "with_text")).signatures[
        f"serve_text_{rule}"](**texts, **{rule: tf.constant(value)})
    packed = {name: tensor.numpy() for name, tensor in
              TextPacker(tokenizer, max_seq_length)(texts["text_a"], texts["text_b"]).items()}
    layer_logits = model(packed, training=False)["layer_logits"].numpy()
    exit_at = (exits.exit_layers(layer_logits, value, False) if rule == "patience"
               else exits.confident_exit_layers(layer_logits, value))
    assert exit_at.min() < 3  # the request's rule stops before the recorded patience 3 can
    np.testing.assert_array_equal(served["input_ids"].numpy(), packed["input_ids"])
    np.testing.assert_array_equal(served["layers_used"].numpy(), exit_at)
    want = early_exit_predictions({"layer_logits": layer_logits}, exit_at, False)
    np.testing.assert_allclose(served["probabilities"].numpy(), want["probabilities"], atol=1e-5)


# -- through run_classifier -----------------------------------------------------------------------

@pytest.mark.slow  # two runs of run_classifier, about 30 s each
@pytest.mark.requires_shared_data
@pytest.mark.parametrize("heads, training", [("separate", "two_stage"), ("separate", "joint"),
                                             ("shared", "joint")])
def test_run_classifier_early_exit_resumes_exactly(tmp_path, heads, training):
    """--early_exit with dropout on: a run restarted from its step-3 checkpoint ends with the
    uninterrupted run's step-7 checkpoint, bit for bit, internal classifiers included (two-stage:
    stage 2 resumed, its stage 1 finished)."""
    import os

    from tests.shared_setup import EN8K_MODEL, GLUE_DIR
    from tests.test_resume_dropout import LOOP, checkpoint_tensors, resume_difference, write_config

    data_dir = tmp_path / "glue" / "RTE"
    data_dir.mkdir(parents=True)
    for split in ("train", "dev", "test"):
        with open(os.path.join(GLUE_DIR, "RTE", f"{split}.tsv"), encoding="utf-8") as handle:
            (data_dir / f"{split}.tsv").write_text("".join(handle.readlines()[:33]))
    config = write_config(tmp_path, max_position_embeddings=64, num_hidden_layers=3)
    flags = ["--task_name=RTE", f"--data_dir={data_dir.parent}", f"--albert_config_file={config}",
             f"--spm_model_file={EN8K_MODEL}", "--max_seq_length=64", "--do_train",
             "--train_step=7", "--train_batch_size=8", "--learning_rate=1e-3", *LOOP,
             "--early_exit", f"--early_exit_heads={heads}", f"--early_exit_training={training}"]
    assert resume_difference(tmp_path, "run_classifier.py", flags, 7, 3) == 0.0
    saved = checkpoint_tensors(str(tmp_path / "full" / "model.ckpt-7"))
    exit_heads = {name for name in saved if "exit_classifier" in name}
    assert len(exit_heads) == (0 if heads == "shared" else 2 * 2)  # layers 1, 2: weights, bias


@pytest.mark.parametrize("flags, message", [
    (["--patience=2"], "--patience applies to --early_exit models only"),
    (["--early_exit_heads=shared"], "--early_exit_heads applies to --early_exit models only"),
    (["--early_exit", "--patience=2", "--inference_layers=3"],
     "--patience and --inference_layers: each is a way of stopping"),
    (["--early_exit", "--patience=2", "--exit_confidence=0.9"],
     "--patience and --exit_confidence: each is a way of stopping"),
    (["--exit_confidence=0.9"], "--exit_confidence applies to --early_exit models only"),
    (["--early_exit", "--exit_confidence=1"],
     "--exit_confidence=1.0: expected a probability strictly between 0 and 1."),
    (["--early_exit", "--exit_confidence=0"],
     "--exit_confidence=0.0: expected a probability strictly between 0 and 1."),
    (["--early_exit", "--patience=0"], "--patience"),
    (["--early_exit_training=joint"], "--early_exit_training applies to --early_exit models only"),
    (["--early_exit", "--early_exit_heads=shared", "--early_exit_training=two_stage"],
     "--early_exit_heads=shared has none (the ordinary classifier after every layer): give "
     "--early_exit_training=joint."),
    (["--early_exit", "--early_exit_heads=shared", "--early_exit_learning_rate=1e-3"],
     "--early_exit_learning_rate is the learning rate of two-stage training's stage 2; this run "
     "trains jointly"),
    (["--early_exit", "--early_exit_training=joint", "--early_exit_train_step=100"],
     "--early_exit_train_step is the number of training steps of two-stage training's stage 2; "
     "this run trains jointly (--early_exit_training=joint)."),
    (["--early_exit", "--early_exit_heads=shared", "--early_exit_distillation=0.5"],
     "--early_exit_distillation is the weight of self-distillation of two-stage training's "
     "stage 2; this run trains jointly (--early_exit_training=joint)."),
    (["--early_exit_distillation=0.5"],
     "--early_exit_distillation applies to --early_exit models only"),
    (["--early_exit_train_step=100"],
     "--early_exit_train_step applies to --early_exit models only"),
    (["--early_exit", "--early_exit_distillation=1.5"], "--early_exit_distillation"),
    (["--early_exit", "--early_exit_train_step=0"], "--early_exit_train_step"),
])
def test_early_exit_flag_mistakes_are_usage_errors(tmp_path, flags, message):
    from tests.command_runner import run_command

    result = run_command("run_classifier.py", "--task_name=rte", f"--data_dir={tmp_path}",
                         f"--albert_config_file={tmp_path}/config.json", "--spm_model_file=x",
                         f"--output_dir={tmp_path}/out", "--do_train", *flags)
    assert result.returncode == 1
    assert message in result.stderr and "Traceback" not in result.stderr


@pytest.mark.parametrize("task, refused_because", [
    (["--task_name=rte", "--data_dir=glue"], "--task_name=rte is a classification"),
    (["--task_name=SST-2", "--data_dir=glue"], "--task_name=SST-2 is a classification"),
    (["--train_file=train.csv"], "your files are a classification (--task_type=classification)"),
    (["--train_file=train.csv", "--task_type=classification"],
     "your files are a classification (--task_type=classification)"),
    (["--task_name=STS-B", "--data_dir=glue"], None),
    (["--train_file=train.csv", "--task_type=regression"], None),
])
def test_regression_threshold_is_refused_on_a_classification(task, refused_because):
    """--regression_threshold says when a regression's score is unchanged: on a classification
    it would be ignored, so it is refused with the flags, as the other early-exit flags that do
    not apply."""
    from tests.command_runner import run_command

    result = run_command("run_classifier.py", *task, "--albert_config_file=config.json",
                         "--spm_model_file=x.model", "--output_dir=out", "--do_train",
                         "--early_exit", "--regression_threshold=0.2", "--only_check_args")
    if refused_because is None:
        assert (result.returncode, result.stderr) == (0, "")
    else:
        assert result.error_line() == (
            "run_classifier: error: --regression_threshold applies to a regression "
            f"(--task_type=regression on your files, or --task_name=sts-b); {refused_because}.")


@pytest.mark.requires_shared_data
def test_run_classifier_early_exit_sweeps_predicts_and_serves_by_patience(task_runs):
    """The harness's RTE run with --early_exit (3 layers): the sweep's table for both checkpoints,
    early_exit_results.json (the best checkpoint's table, the chosen patience), the predictions at
    each example's exit layer with exit_layers.tsv, and the export serving the chosen patience
    (serving_default) and any other (serve_patience), as the NumPy rule on the Keras model."""
    import json
    import pathlib

    from albert_tf.checkpoints.files import BEST_CHECKPOINT_NAME
    from tests.task_cases import EARLY_EXIT_LAYERS, RTE_SEQ
    from tests.test_run_classifier import blocks_of, features_of

    run = task_runs.get("glue_early_exit")
    output_dir, layers = run.output_dir, EARLY_EXIT_LAYERS
    blocks = [dict(line.split(" = ") for line in block[:-1])
              for block in blocks_of(output_dir / "eval_results.txt")]
    assert len(blocks) == 2
    for block in blocks:
        assert block["eval_accuracy"] == block[f"early_exit/layer_{layers}/eval_accuracy"]
        assert {f"early_exit/patience_{p}/mean_layers" for p in range(1, layers + 1)} < set(block)
    assert "Early exit (dev): each layer's classifier" in run.result.stdout
    results = json.loads((output_dir / "early_exit_results.json").read_text())
    best = json.loads((output_dir / "best_results.json").read_text())["metrics"]
    assert results["table"] == {k: v for k, v in best.items() if k.startswith("early_exit/")}
    policy = exits.ExitPolicy.of_rule(exits.chosen_rule(results), layers)
    assert results["num_layers"] == layers

    model = ClassifierTask(config(max_position_embeddings=RTE_SEQ), ("accuracy",), 2,
                           early_exit="separate").build_model()
    tf.train.Checkpoint(model=model).read(str(output_dir / BEST_CHECKPOINT_NAME)).expect_partial()
    _, test_inputs, _ = features_of("rte", pathlib.Path(run.flags["data_dir"]), "test")
    layer_logits = model(test_inputs, training=False)["layer_logits"].numpy()
    exit_at = exits.stopped_layers(layer_logits, False, policy)
    rows = (output_dir / "exit_layers.tsv").read_text().splitlines()
    assert rows[0] == "index\tlayers" and len(rows) == 41
    assert [int(row.split("\t")[1]) for row in rows[1:]] == exit_at.tolist()
    probabilities = np.array([[float(v) for v in row.split("\t")] for row in
                              (output_dir / "test_results.tsv").read_text().splitlines()])
    want = early_exit_predictions({"layer_logits": layer_logits}, exit_at, False)
    np.testing.assert_allclose(probabilities, want["probabilities"], atol=1e-5)

    loaded = tf.saved_model.load(str(run.export_dir / "ids_only"))
    ids = {name: tf.constant(value[:8]) for name, value in test_inputs.items()}
    served = loaded.signatures["serving_default"](**ids)
    np.testing.assert_array_equal(served["layers_used"].numpy(), exit_at[:8])
    np.testing.assert_array_equal(served["predictions"].numpy(), want["predictions"][:8])
    other = loaded.signatures["serve_patience"](**ids, patience=tf.constant(1))
    np.testing.assert_array_equal(other["layers_used"].numpy(),
                                  exits.exit_layers(layer_logits[:8], 1, False))


@pytest.mark.requires_shared_data
def test_run_classifier_predicts_and_serves_by_a_given_confidence(tmp_path, task_runs):
    """--exit_confidence on a copy of the harness's early-exit RTE run, predicting and exporting
    alone: exit_layers.tsv and the export's serving_default stop where the NumPy confidence rule
    does on the Keras model's layers, the export records the confidence, and the run says it."""
    import json
    import pathlib
    import shutil

    from albert_tf.checkpoints.files import BEST_CHECKPOINT_NAME
    from tests.command_runner import run_command
    from tests.task_cases import EARLY_EXIT_LAYERS, RTE_SEQ
    from tests.task_harness import arguments, only_actions
    from tests.test_run_classifier import features_of

    run = task_runs.get("glue_early_exit")
    output_dir, export_dir = tmp_path / "out", tmp_path / "export"
    shutil.copytree(run.output_dir, output_dir)
    model = ClassifierTask(config(max_position_embeddings=RTE_SEQ), ("accuracy",), 2,
                           early_exit="separate").build_model()
    tf.train.Checkpoint(model=model).read(str(output_dir / BEST_CHECKPOINT_NAME)).expect_partial()
    _, test_inputs, _ = features_of("rte", pathlib.Path(run.flags["data_dir"]), "test")
    layer_logits = model(test_inputs, training=False)["layer_logits"].numpy()
    top = np.exp(layer_logits).max(-1) / np.exp(layer_logits).sum(-1)  # [N, L]
    # The middle of the widest gap between the top probabilities of any layer, among those that
    # stop 20-80% of the examples after layer 1: the served graph's float32 rounding cannot move
    # an example across it.
    values = np.unique(top)
    middles = [(low + high) / 2 for low, high in zip(values[:-1], values[1:])
               if 0.2 <= np.mean(top[:, 0] >= (low + high) / 2) <= 0.8]
    confidence = float(max(middles, key=lambda middle: np.abs(top - middle).min()))
    flags = {**only_actions(run.case, run.flags, "do_predict"), "output_dir": str(output_dir),
             "export_dir": str(export_dir), "exit_confidence": str(confidence)}
    result = run_command(run.case.script, *arguments(flags))
    assert result.returncode == 0, result.stderr[-3000:]
    assert (f"the export stops at confidence {confidence:g}, at the latest after layer "
            f"{EARLY_EXIT_LAYERS}") in result.stdout
    exit_at = exits.confident_exit_layers(layer_logits, confidence)
    assert 1 in exit_at and len(set(exit_at.tolist())) > 1
    rows = (output_dir / "exit_layers.tsv").read_text().splitlines()
    assert [int(row.split("\t")[1]) for row in rows[1:]] == exit_at.tolist()
    loaded = tf.saved_model.load(str(export_dir / "ids_only"))
    served = loaded.signatures["serving_default"](
        **{name: tf.constant(value) for name, value in test_inputs.items()})
    np.testing.assert_array_equal(served["layers_used"].numpy(), exit_at)
    recorded = json.loads((export_dir / "ids_only" / "assets.extra" / "early_exit.json")
                          .read_text())
    assert (recorded["confidence"], recorded["max_layers"]) == (confidence, EARLY_EXIT_LAYERS)


def test_tflite_runs_a_fixed_depth_as_the_keras_layer(tmp_path):
    """export_classifier_tflite(layers=2) of an early-exit model: LiteRT's outputs are the Keras
    model's layer-2 classifier (float32 within 1e-4), per example, on its real tokens (the file's
    length is dynamic) and padded to S; the file holds the matrix products of 2 layers only, not
    of all LAYERS (the speed-up of exiting early, kept in TFLite)."""
    from ai_edge_litert.interpreter import Interpreter

    from albert_tf.tasks.classification.serving import export_classifier_tflite

    seq = 16
    model = perturbed(AlbertClassifierModel(config(), 3, early_exit="separate"), seed=9)
    path = export_classifier_tflite(model, str(tmp_path / "model.tflite"), seq, layers=2)
    full = export_classifier_tflite(model, str(tmp_path / "full.tflite"), seq)
    inputs = random_inputs(batch=3, seq=seq, seed=10)
    want = model(inputs, training=False)["layer_logits"].numpy()[:, 1]
    interpreter = Interpreter(model_path=path)
    runner = interpreter.get_signature_runner("serving_default")
    lengths = inputs["input_mask"].sum(axis=1)
    assert len(set(lengths.tolist())) > 1
    for end in (lengths, [seq] * 3):
        got = np.concatenate([runner(**{name: value[i:i + 1, :end[i]]
                                        for name, value in inputs.items()})["logits"]
                              for i in range(3)])
        np.testing.assert_allclose(got, want, atol=1e-4)

    def matrix_products(interpreter) -> int:
        return sum(op["op_name"] in ("FULLY_CONNECTED", "BATCH_MATMUL")
                   for op in interpreter._get_ops_details())  # pylint: disable=protected-access

    # Per layer: Q, K, V, the attention output, the two FFN matrices and the two attention
    # products, the same in each layer; the embedding projection and the head come once.
    per_layer = ((matrix_products(Interpreter(model_path=full)) - matrix_products(interpreter))
                 / (LAYERS - 2))
    assert per_layer == 8
    assert matrix_products(interpreter) < 2 * per_layer + 4


@pytest.mark.parametrize("sharing", [{}, {"num_hidden_groups": 3},
                                     {"cross_layer_sharing": "none"}, {"inner_group_num": 2}])
def test_the_while_loop_exits_where_the_numpy_rule_does_whatever_the_sharing(sharing):
    """early_exit_logits (a tf.while_loop over the layers; several groups or no sharing: a
    tf.switch_case per layer) on a batch: each example's exit layer and logits there are the NumPy
    rule's on the model's ``layer_logits``, for several patiences and a last layer below L."""
    from albert_tf.tasks.classification.early_exit_inference import (early_exit_logits,
                                                                     fixed_depth_logits)

    keras.utils.set_random_seed(3)
    model = perturbed(AlbertClassifierModel(tiny_config(num_hidden_layers=6, **sharing), 3,
                                            early_exit="separate"), seed=2)
    for head in model.layer_heads()[:-1]:
        head.output_weights.assign(head.output_weights * 30)
    inputs = random_inputs(batch=8)
    layer_logits = model(inputs, training=False)["layer_logits"].numpy()
    loop = tf.function(lambda ids, patience, policy: early_exit_logits(model, ids, policy,
                                                                       patience))
    by_policy = tf.function(lambda ids, policy: early_exit_logits(model, ids, policy))
    ids = {name: tf.constant(value) for name, value in inputs.items()}
    seen = set()
    confident = [exits.ExitPolicy.of_rule(exits.ExitRule(confidence=value), 6)
                 for value in (0.6, 0.9, 0.99)] + [exits.ExitPolicy(2, 5, confidence=0.9)]
    for policy in (exits.ExitPolicy(1, 6), exits.ExitPolicy(2, 6), exits.ExitPolicy(1, 4),
                   exits.ExitPolicy.fixed_depth(3, 6), *confident):
        logits, layers = (by_policy(ids, policy) if policy.confidence is not None
                          else loop(ids, tf.constant(policy.patience), policy))
        want = exits.stopped_layers(layer_logits, False, policy)
        np.testing.assert_array_equal(layers.numpy(), want)
        np.testing.assert_allclose(logits.numpy(), exits.outputs_at(layer_logits, want),
                                   atol=1e-5)
        seen.update(want.tolist())
    assert len(seen) >= 3 and 1 in seen  # a confidence exits after layer 1 where it is sure
    np.testing.assert_allclose(fixed_depth_logits(model, inputs, 3).numpy(), layer_logits[:, 2],
                               atol=1e-5)


def test_a_policy_that_cannot_stop_early_runs_its_layers_without_the_loop():
    """A full depth, a fixed depth, and patiences of max_layers and max_layers - 1 (which stop at
    max_layers at the earliest): early_exit_logits traces no while loop, and gives the loop's
    layers and logits (the loop forced by a patience tensor)."""
    from albert_tf.tasks.classification.early_exit_inference import early_exit_logits

    keras.utils.set_random_seed(4)
    model = perturbed(AlbertClassifierModel(tiny_config(num_hidden_layers=6), 3,
                                            early_exit="separate"), seed=3)
    ids = {name: tf.constant(value) for name, value in random_inputs(batch=4).items()}
    for policy in (exits.ExitPolicy.full_depth(6), exits.ExitPolicy.fixed_depth(3, 6),
                   exits.ExitPolicy(4, 4), exits.ExitPolicy(5, 6)):
        straight = tf.function(lambda ids, policy=policy: early_exit_logits(model, ids, policy))
        operations = straight.get_concrete_function(ids).graph.get_operations()
        assert not [op.type for op in operations if "While" in op.type], policy
        logits, layers = straight(ids)
        looped, loop_layers = tf.function(lambda ids, policy=policy: early_exit_logits(
            model, ids, policy, tf.constant(policy.patience)))(ids)
        np.testing.assert_array_equal(layers.numpy(), loop_layers.numpy())
        np.testing.assert_array_equal(layers.numpy(), policy.max_layers)
        np.testing.assert_allclose(logits.numpy(), looped.numpy(), atol=1e-5)


@pytest.mark.parametrize("sharing", [{}, {"num_hidden_groups": 3}, {"inner_group_num": 2}])
def test_the_straight_pass_at_full_depth_is_the_ordinary_models_forward_pass_bit_for_bit(sharing):
    """fixed_depth_logits at full depth (what a policy that cannot stop early serves, and the
    TFLite and ONNX files run) computes its last block for [CLS] alone, as the ordinary model
    does: under tf.function its logits equal an ordinary classifier's with the same weights, bit
    for bit, and the same again through early_exit_logits' straight pass."""
    from albert_tf.tasks.classification.early_exit_inference import (early_exit_logits,
                                                                     fixed_depth_logits)

    cfg = tiny_config(num_hidden_layers=6, **sharing)
    model = perturbed(AlbertClassifierModel(cfg, 3, early_exit="separate"), seed=5)
    ordinary = AlbertClassifierModel(cfg, 3)
    weights = tf1_variable_map(model)
    for name, variable in tf1_variable_map(ordinary).items():
        variable.assign(weights[name])
    ids = {name: tf.constant(value) for name, value in random_inputs(batch=4).items()}
    want = tf.function(lambda ids: ordinary(ids, training=False)["logits"])(ids).numpy()
    np.testing.assert_array_equal(tf.function(lambda ids: fixed_depth_logits(model, ids, 6))(
        ids).numpy(), want)
    served, layers = tf.function(lambda ids: early_exit_logits(
        model, ids, exits.ExitPolicy.full_depth(6)))(ids)
    np.testing.assert_array_equal(served.numpy(), want)
    np.testing.assert_array_equal(layers.numpy(), 6)


# -- the kind of classifier an output directory records --------------------------------------------

def test_the_recorded_kind_of_classifier_is_written_once_and_checked(tmp_path):
    from albert_tf.checkpoints.warm_start import UnreadableCheckpointError
    from albert_tf.files.earlier_layouts import EarlierLayoutError
    from albert_tf.files.run_manifest import RunManifestError, add_facts, update_manifest
    from albert_tf.tasks.classification.classifier_heads import (HEADS, HeadsMismatch, check_heads,
                                                             is_recorded, recorded_heads)

    def describe(heads):
        return ("without --early_exit" if heads is None
                else f"with --early_exit --early_exit_heads={heads}")

    for heads, others in ((None, ("separate", "shared")), ("separate", (None, "shared")),
                          ("shared", (None, "separate"))):
        directory = tmp_path / str(heads)
        directory.mkdir()
        check_heads(str(directory), "shared")  # nothing recorded: nothing to check
        assert not is_recorded(str(directory))
        add_facts(str(directory), {HEADS: (heads, "its early-exit flags")})
        with pytest.raises(RunManifestError):  # another kind is never recorded over it
            add_facts(str(directory), {HEADS: ("separate" if heads is None else None, "x")})
        assert is_recorded(str(directory)) and recorded_heads(str(directory)) == heads
        check_heads(str(directory), heads)
        for other in others:
            with pytest.raises(RunManifestError, match="--early_exit") as raised:
                check_heads(str(directory), other)
            assert str(raised.value) == (
                f"--output_dir={directory} holds a classifier trained {describe(heads)} "
                f"(run_manifest.json); this run has a classifier {describe(other)} (its "
                "early-exit flags). Give the run's own settings to continue it, or use another "
                "--output_dir")
    (tmp_path / "bad").mkdir()
    update_manifest(str(tmp_path / "bad"),
                    lambda content: content["facts"].update(classifier_heads="many"))
    with pytest.raises(HeadsMismatch, match="the recorded kind of classifier 'many' is not null"):
        check_heads(str(tmp_path / "bad"), None)
    # A directory of an earlier version (TF's checkpoint state file): its classifier_heads.json.
    earlier = tmp_path / "earlier"
    earlier.mkdir()
    (earlier / "checkpoint").write_text('model_checkpoint_path: "model.ckpt-2"\n')
    (earlier / "classifier_heads.json").write_text('{"early_exit": "shared"}')
    assert recorded_heads(str(earlier)) == "shared"
    with pytest.raises(RunManifestError, match="holds a classifier trained with --early_exit "
                                               "--early_exit_heads=shared"):
        check_heads(str(earlier), None)
    (earlier / "classifier_heads.json").write_text('{"early_exit": "many"}')
    with pytest.raises(HeadsMismatch, match="classifier_heads.json: the recorded kind of "
                                            "classifier 'many' is not null"):
        check_heads(str(earlier), None)
    (earlier / "classifier_heads.json").write_text('{"early_exit": ')
    with pytest.raises(EarlierLayoutError, match="classifier_heads.json is not valid JSON"):
        check_heads(str(earlier), None)
    # Without a record the checkpoint is read: a truncated one is named, not TensorFlow's error.
    (tmp_path / "truncated").mkdir()
    (tmp_path / "truncated" / "model.ckpt-best.index").write_bytes(b"")
    with pytest.raises(UnreadableCheckpointError, match=r"model.ckpt-best: not a readable "
                                                        r"checkpoint \(file is too short"):
        check_heads(str(tmp_path / "truncated"), None)


@pytest.mark.parametrize("trained, agreeing, refused", [
    (None, (None, "shared"), ("separate",)), ("separate", ("separate",), (None, "shared"))])
def test_a_directory_without_a_record_is_checked_against_its_checkpoint(tmp_path, trained,
                                                                         agreeing, refused):
    """A directory written before the kind of classifier was recorded: a run whose flags disagree
    with its checkpoint about separate heads is refused (it used to record its own flags, fail on
    the checkpoint later, and leave a false record that refused the corrected run); the others pass
    (ordinary and shared heads have the same variables: the checkpoint cannot tell them apart)."""
    from albert_tf.tasks.classification.classifier_heads import HeadsMismatch, check_heads

    model = AlbertClassifierModel(config(), 2, early_exit=trained)
    model(random_inputs(batch=1), training=False)
    tf.train.Checkpoint(model=model).write(str(tmp_path / "model.ckpt-best"))
    for heads in agreeing:
        check_heads(str(tmp_path), heads)
    for heads in refused:
        with pytest.raises(HeadsMismatch) as raised:
            check_heads(str(tmp_path), heads)
        held = "with" if trained else "without"
        assert str(raised.value).startswith(
            f"--output_dir={tmp_path} records no kind of classifier and its checkpoint "
            f"{tmp_path / 'model.ckpt-best'} is of a classifier {held} separate early-exit heads")


def tiny_own_data_run(tmp_path):
    """(train file, output dir, flags) of a tiny run_classifier run on four labelled sentences of
    your own (a 2-layer config of a 500-piece vocabulary, S 16), the train file its dev file too:
    for the checks of whole runs, in-process and in seconds."""
    from tests import spm_fixtures
    from tests.shared_setup import tiny_config as small

    train = tmp_path / "train.csv"
    train.write_text("text,label\ngood film,pos\nbad film,neg\nfine film,pos\nawful,neg\n")
    config = tmp_path / "config.json"
    config.write_text(small(vocab_size=500, max_position_embeddings=16).to_json_string())
    output_dir = tmp_path / "out"
    return train, output_dir, [
        f"--albert_config_file={config}", f"--spm_model_file={spm_fixtures.cached_tiny_spm()}",
        f"--output_dir={output_dir}", "--max_seq_length=16", f"--train_file={train}",
        f"--dev_file={train}", "--train_batch_size=2", "--eval_batch_size=2"]


def test_run_classifier_refuses_other_early_exit_flags_than_the_directory_was_trained_with(
        tmp_path):
    """An ordinary run records its kind (null) in its run manifest; evaluating its checkpoints with
    --early_exit (shared heads: the same variables, untrained internal classifiers) is refused
    before any work, in one line naming the flags and the record, the directory untouched; so is a
    directory trained with separate heads evaluated without --early_exit, or with shared heads."""
    import os

    from albert_tf.files.run_manifest import read_manifest, update_manifest
    from tests.command_runner import run_command

    _, output_dir, flags = tiny_own_data_run(tmp_path)
    trained = run_command("run_classifier.py", *flags, "--do_train", "--do_eval",
                          "--train_step=2", "--save_checkpoints_steps=2")
    assert trained.returncode == 0, trained.stderr[-3000:]
    manifest = read_manifest(str(output_dir))
    assert manifest.has_fact("classifier_heads") and manifest.fact("classifier_heads") is None
    before = sorted(os.listdir(output_dir))
    refused = run_command("run_classifier.py", *flags, "--do_eval", "--early_exit",
                          "--early_exit_heads=shared")
    assert refused.error_line() == (
        f"run_classifier: error: --output_dir={output_dir} holds a classifier trained without "
        "--early_exit (run_manifest.json); this run has a classifier with --early_exit "
        "--early_exit_heads=shared (its early-exit flags). Give the run's own settings to "
        "continue it, or use another --output_dir")
    assert sorted(os.listdir(output_dir)) == before
    assert read_manifest(str(output_dir)).content == manifest.content
    update_manifest(str(output_dir),
                    lambda content: content["facts"].update(classifier_heads="separate"))
    for other, named in ((["--do_eval"], "this run has a classifier without --early_exit"),
                         (["--do_train", "--early_exit", "--early_exit_heads=shared"],
                          "this run has a classifier with --early_exit --early_exit_heads=shared")):
        refused = run_command("run_classifier.py", *flags, *other)
        assert "trained with --early_exit --early_exit_heads=separate" in refused.error_line()
        assert named in refused.error_line()
    assert sorted(os.listdir(output_dir)) == before


def test_an_early_exit_regression_records_its_threshold(tmp_path):
    """The chosen patience of an early-exit regression is made with its --regression_threshold:
    the first run records it; a later run without the flag uses it, one with another is refused
    in one line before any work."""
    from albert_tf.files.run_manifest import read_manifest
    from tests.command_runner import run_command

    train, output_dir, flags = tiny_own_data_run(tmp_path)
    train.write_text("text,label\ngood film,0.9\nbad film,0.1\nfine film,0.7\nawful,0.0\n")
    flags = [*flags, "--task_type=regression", "--early_exit"]
    trained = run_command("run_classifier.py", *flags, "--do_train", "--do_eval", "--train_step=1",
                          "--regression_threshold=0.2")
    assert trained.returncode == 0, trained.stderr[-3000:]
    assert read_manifest(str(output_dir)).fact("regression_threshold") == 0.2
    evaluated = run_command("run_classifier.py", *flags, "--do_eval")
    assert evaluated.returncode == 0, evaluated.stderr[-3000:]
    before = read_manifest(str(output_dir)).content["facts"]
    refused = run_command("run_classifier.py", *flags, "--do_eval", "--regression_threshold=0.3")
    assert refused.error_line() == (
        f"run_classifier: error: --output_dir={output_dir} holds early-exit decisions made with "
        "--regression_threshold=0.2 (run_manifest.json); this run has --regression_threshold=0.3 "
        "(--regression_threshold). Give the run's own settings to continue it, or use another "
        "--output_dir")
    assert read_manifest(str(output_dir)).content["facts"] == before


@pytest.mark.parametrize("output", ["--do_predict", "--tflite_file"])
def test_an_inference_depth_the_config_has_not_is_refused_before_any_work(tmp_path, output):
    """--inference_layers beyond the config's num_hidden_layers: one line before any feature is
    built or step trained (it used to be found after training and the sweep: prediction refused
    there, the TFLite export a bug's IndexError)."""
    import os

    from tests.command_runner import run_command

    train, output_dir, flags = tiny_own_data_run(tmp_path)
    flag = {"--do_predict": f"--test_file={train}",
            "--tflite_file": f"--tflite_file={tmp_path / 'model.tflite'}"}[output]
    result = run_command(
        "run_classifier.py", *flags, "--do_train", "--do_eval", "--train_step=2", "--early_exit",
        "--inference_layers=3", *([flag, "--do_predict"] if output == "--do_predict" else [flag]))
    assert result.error_line() == ("run_classifier: error: --inference_layers=3: the model has 2 "
                                   "layers (num_hidden_layers of --albert_config_file).")
    assert not output_dir.exists() or not os.listdir(output_dir)


def test_a_prediction_without_the_chosen_patience_is_refused_before_training(tmp_path, task_runs):
    """--do_predict without --do_eval, --patience or --inference_layers takes the patience that
    early_exit_results.json records: without that file the run stops in one line before any step
    (it used to train, predict, and only then refuse). On a copy of the harness's early-exit run,
    its results file and predictions removed, asked to train two more steps and predict."""
    import shutil

    from tests.command_runner import run_command
    from tests.task_harness import arguments, only_actions, with_steps

    run = task_runs.get("glue_early_exit")
    output_dir = tmp_path / "out"
    shutil.copytree(run.output_dir, output_dir)
    for product in run.case.products:  # the results file and the predictions
        (output_dir / product).unlink()
    flags = with_steps(only_actions(run.case, run.flags, "do_train", "do_predict"), 4)
    refused = run_command(run.case.script, *arguments({**flags, "output_dir": str(output_dir)}))
    assert refused.error_line() == (
        f"run_classifier: error: {output_dir / exits.RESULTS_FILE} does not exist: the stopping "
        "rule chosen on dev is written by --do_eval with --early_exit; run it, or give "
        "--patience, --exit_confidence or --inference_layers.")
    assert not (output_dir / "model.ckpt-4.index").exists()
    assert not (output_dir / "test_results.tsv").exists()


# -- two-stage training (--early_exit_training=two_stage, the default with separate heads) --------

def file_bytes(directory):
    """{relative path: bytes} of every file under ``directory``."""
    import os

    return {os.path.relpath(os.path.join(root, name), directory):
            open(os.path.join(root, name), "rb").read()
            for root, _, names in os.walk(directory) for name in names}


def test_two_stage_full_depth_is_the_ordinary_model_bit_for_bit_and_its_source_untouched(
        tmp_path):
    """Two-stage training: stage 1 in <output_dir>/ordinary is the ordinary run of the same flags
    (its checkpoint equals the ordinary run's, bit for bit, though stage 2 trains its own number
    of steps, --early_exit_train_step); stage 2 changes no encoder or ordinary
    classifier variable, so the full depth's outputs equal the ordinary model's bit for bit; a
    two-stage run from an ordinary output directory reads it and leaves every byte of it as it
    was; the results file and the printed price name the ordinary model's dev metric; a rerun with
    joint training is refused in one line."""
    import json

    from albert_tf.checkpoints.files import BEST_CHECKPOINT_NAME
    from albert_tf.files.run_manifest import read_manifest
    from tests.command_runner import run_command
    from tests.shared_setup import tiny_config as small
    from tests.test_resume_dropout import checkpoint_tensors

    train, output_dir, flags = tiny_own_data_run(tmp_path)
    flags = [flag for flag in flags if not flag.startswith("--output_dir")] + [
        "--do_train", "--do_eval", "--train_step=4", "--save_checkpoints_steps=2", "--seed=3",
        "--learning_rate=1e-2"]
    ordinary_dir, two_stage_dir, from_dir = (tmp_path / name for name in
                                             ("ordinary", "two_stage", "from_ordinary"))
    ordinary = run_command("run_classifier.py", *flags, f"--output_dir={ordinary_dir}")
    assert ordinary.returncode == 0, ordinary.stderr[-3000:]
    two_stage = run_command("run_classifier.py", *flags, f"--output_dir={two_stage_dir}",
                            "--early_exit", "--early_exit_train_step=2")
    assert two_stage.returncode == 0, two_stage.stderr[-3000:]
    # Stage 1 trains --train_step steps, stage 2 --early_exit_train_step.
    assert read_manifest(str(two_stage_dir / "ordinary")).trained["step"] == 4
    assert read_manifest(str(two_stage_dir)).trained["step"] == 2
    stage_one = checkpoint_tensors(str(two_stage_dir / "ordinary" / BEST_CHECKPOINT_NAME))
    want = checkpoint_tensors(str(ordinary_dir / BEST_CHECKPOINT_NAME))
    model_names = {name for name in want if name.startswith("model/")}
    assert model_names and all(np.array_equal(stage_one[name], want[name])
                               for name in model_names)  # stage 1 is the ordinary run, bit for bit
    assert read_manifest(str(two_stage_dir)).fact("early_exit_training") == "two_stage"

    before = file_bytes(ordinary_dir)
    from_ordinary = run_command("run_classifier.py", *flags, f"--output_dir={from_dir}",
                                "--early_exit", f"--init_checkpoint={ordinary_dir}")
    assert from_ordinary.returncode == 0, from_ordinary.stderr[-3000:]
    assert file_bytes(ordinary_dir) == before
    assert not (from_dir / "ordinary").exists()

    cfg = small(vocab_size=500, max_position_embeddings=16)
    rng = np.random.default_rng(0)
    inputs = {"input_ids": tf.constant(rng.integers(5, 500, (6, 16)), tf.int32),
              "input_mask": tf.constant(np.ones((6, 16)), tf.int32),
              "segment_ids": tf.constant(np.zeros((6, 16)), tf.int32)}
    plain = AlbertClassifierModel(cfg, 2)
    tf.train.Checkpoint(model=plain).read(
        str(ordinary_dir / BEST_CHECKPOINT_NAME)).expect_partial().assert_existing_objects_matched()
    logits = plain(inputs, training=False)["logits"].numpy()
    for directory in (two_stage_dir, from_dir):
        tensors = checkpoint_tensors(str(directory / BEST_CHECKPOINT_NAME))
        assert all(np.array_equal(tensors[name], want[name])
                   for name in model_names)  # stage 2 froze all but the exit heads
        trained_heads = [name for name in tensors if "exit_classifier_1/output_weights/" in name]
        model = AlbertClassifierModel(cfg, 2, early_exit="separate")
        tf.train.Checkpoint(model=model).read(str(directory / BEST_CHECKPOINT_NAME)) \
            .expect_partial().assert_existing_objects_matched()
        np.testing.assert_array_equal(model(inputs, training=False)["layer_logits"][:, -1], logits)
        assert trained_heads
        results = json.loads((directory / exits.RESULTS_FILE).read_text())
        full = results["table"]["early_exit/layer_2/eval_accuracy"]
        assert results["ordinary"] == {"eval_accuracy": full}
        assert full == json.loads((ordinary_dir / "best_results.json").read_text())[
            "metrics"]["eval_accuracy"]
        chosen = results["chosen"]
        assert chosen["points_from_ordinary"] == pytest.approx(
            100 * (chosen["eval_accuracy"] - full))
    # Conversion: the two-stage checkpoint to the reference's TF1 names, every classifier kept.
    config_flag = next(flag for flag in flags if flag.startswith("--albert_config_file"))
    converted = run_command("-m albert_tf.convert_checkpoint", config_flag,
                            f"--checkpoint={from_dir}", "--to=reference",
                            f"--output_dir={tmp_path / 'tf1'}")
    assert converted.returncode == 0, converted.stderr[-3000:]
    tf1 = tf.train.load_checkpoint(str(tmp_path / "tf1" / "model.ckpt"))
    np.testing.assert_array_equal(tf1.get_tensor("early_exit/layer_1/output_weights"), next(
        value for name, value in checkpoint_tensors(str(from_dir / BEST_CHECKPOINT_NAME)).items()
        if "exit_classifier_1/output_weights/" in name))
    assert "against the ordinary model" in two_stage.stdout
    assert "two-stage training: the full depth is the ordinary model" in two_stage.stdout

    refused = run_command("run_classifier.py", *flags, f"--output_dir={from_dir}",
                          "--early_exit", "--early_exit_training=joint")
    assert refused.error_line() == (
        f"run_classifier: error: --output_dir={from_dir} holds internal classifiers trained with "
        "--early_exit_training=two_stage; this run has --early_exit_training=joint. Give "
        "--early_exit_training=two_stage to continue it, or use another --output_dir.")


def test_what_counts_as_stage_one_and_the_recorded_training(tmp_path):
    """--init_checkpoint is stage 1 when it holds an ordinary classifier (its head, no internal
    classifier, no early-exit record beside it); an encoder alone is what stage 1 starts from; an
    early-exit classifier is refused. A directory records its training; one with an early-exit
    classifier trained before the record counts as joint."""
    from albert_tf.errors.user_error import UserError
    from albert_tf.files.run_manifest import add_facts, read_manifest, update_manifest
    from albert_tf.tasks.classification import two_stage
    from albert_tf.tasks.classification.classifier_heads import HEADS

    cfg = config()
    for name, model in (("ordinary", AlbertClassifierModel(cfg, 2)),
                        ("separate", AlbertClassifierModel(cfg, 2, early_exit="separate")),
                        ("shared", AlbertClassifierModel(cfg, 2, early_exit="shared"))):
        model(random_inputs(batch=1), training=False)
        tf.train.Checkpoint(model=model).write(str(tmp_path / name / "model.ckpt-best"))
    encoder = AlbertClassifierModel(cfg, 2).albert
    encoder(random_inputs(batch=1), training=False)
    tf.train.Checkpoint(model=tf.train.Checkpoint(albert=encoder)).write(
        str(tmp_path / "encoder" / "model.ckpt-1"))
    add_facts(str(tmp_path / "shared"), {HEADS: ("shared", "its early-exit flags")})
    assert two_stage.ordinary_classifier(str(tmp_path / "ordinary"))
    assert two_stage.ordinary_classifier(str(tmp_path / "ordinary" / "model.ckpt-best"))
    assert not two_stage.ordinary_classifier(str(tmp_path / "encoder" / "model.ckpt-1"))
    assert not two_stage.ordinary_classifier(None)
    for name in ("separate", "shared"):  # shared: the same variables, told by the record
        with pytest.raises(UserError, match="a classifier trained with --early_exit; two-stage"):
            two_stage.ordinary_classifier(str(tmp_path / name))

    # Nothing recorded: any training.
    two_stage.check_training(read_manifest(str(tmp_path / "ordinary")), "two_stage")
    add_facts(str(tmp_path / "ordinary"), {two_stage.TRAINING: ("two_stage", "x")})
    with pytest.raises(UserError, match="trained with --early_exit_training=two_stage; this run "
                                        "has --early_exit_training=joint"):
        two_stage.check_training(read_manifest(str(tmp_path / "ordinary")), "joint")
    update_manifest(str(tmp_path / "shared"), lambda content: content.update(
        trained={"step": 1, "checkpoint": "model.ckpt-best"}))
    two_stage.check_training(read_manifest(str(tmp_path / "shared")), "joint")
    with pytest.raises(UserError, match="trained with --early_exit_training=joint"):
        two_stage.check_training(read_manifest(str(tmp_path / "shared")), "two_stage")
