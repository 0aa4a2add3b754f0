"""albert_tf/training/optimization.py against NumPy re-derivations of the reference's rules (learning-rate
schedule, global-norm clipping, AdamWeightDecay, LAMB)."""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys

import keras
import numpy as np
import pytest
import tensorflow as tf

from albert_tf.training.optimization import (OPTIMIZER_NAMES, AdamWeightDecay, Lamb,
                                             WarmupPolynomialDecay, clip_gradients,
                                             create_optimizer)
from tests.shared_setup import REPO_ROOT, subprocess_env

# Variables named as the model names them; (decayed, adapted) written out by hand from the reference's rules:
# LayerNorm parameters and anything whose name contains "bias" are excluded from both.
ENCODER = "bert/encoder/transformer/group_0/inner_group_0"
VARIABLES = {
    f"{ENCODER}/LayerNorm/gamma": ((4,), False, False),
    f"{ENCODER}/LayerNorm_1/beta": ((4,), False, False),
    f"{ENCODER}/attention_1/self/query/kernel": ((4, 3), True, True),
    f"{ENCODER}/attention_1/self/query/bias": ((3,), False, False),
    "bert/embeddings/word_embeddings": ((6, 4), True, True),
    "cls/predictions/output_bias": ((6,), False, False),
    "cls/predictions/transform/dense/kernel": ((4, 4), True, True),  # starts at zero: ||theta|| = 0
    "bert/pooler/dense/kernel": ((4, 4), True, True),  # always gets a zero gradient
}
ZERO_INIT = "cls/predictions/transform/dense/kernel"
ZERO_GRAD = "bert/pooler/dense/kernel"


def _variable_at(path: str, value: np.ndarray) -> keras.Variable:
    """A keras.Variable whose ``.path`` is ``path``, built with nested Keras name scopes."""
    *scopes, name = path.split("/")
    with contextlib.ExitStack() as stack:
        for scope in scopes:
            stack.enter_context(keras.name_scope(scope))
        variable = keras.Variable(value, name=name)
    assert variable.path == path
    return variable


def _initial_values(seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    values = {path: rng.normal(size=shape).astype(np.float32) for path, (shape, _, _) in VARIABLES.items()}
    values[ZERO_INIT] = np.zeros(VARIABLES[ZERO_INIT][0], np.float32)
    return values


def _gradients(num_steps: int, scale: float, seed: int = 1) -> list[dict[str, np.ndarray]]:
    rng = np.random.default_rng(seed)
    steps = []
    for _ in range(num_steps):
        grads = {path: (scale * rng.normal(size=shape)).astype(np.float32)
                 for path, (shape, _, _) in VARIABLES.items()}
        grads[ZERO_GRAD] = np.zeros(VARIABLES[ZERO_GRAD][0], np.float32)
        steps.append(grads)
    return steps


def _reference_steps(values, grad_steps, learning_rates, lamb, clip_norm=None, weight_decay_rate=0.01,
                     beta_1=0.9, beta_2=0.999, epsilon=1e-6):
    """The reference's AdamWeightDecay / LAMB steps, after its global-norm clip, in float64 NumPy.

    Returns (params, m, v, grad norms).
    """
    params = {k: v.astype(np.float64) for k, v in values.items()}
    adam_m = {k: np.zeros_like(v) for k, v in params.items()}
    adam_v = {k: np.zeros_like(v) for k, v in params.items()}
    norms = []
    for grads, lr in zip(grad_steps, learning_rates):
        grads = {k: g.astype(np.float64) for k, g in grads.items()}
        norm = np.sqrt(sum(np.sum(g * g) for g in grads.values()))
        norms.append(norm)
        if clip_norm is not None:
            grads = {k: g * clip_norm / max(norm, clip_norm) for k, g in grads.items()}
        for path, (_, decayed, adapted) in VARIABLES.items():
            theta, g = params[path], grads[path]
            adam_m[path] = beta_1 * adam_m[path] + (1 - beta_1) * g
            adam_v[path] = beta_2 * adam_v[path] + (1 - beta_2) * g * g
            update = adam_m[path] / (np.sqrt(adam_v[path]) + epsilon)
            if decayed:
                update = update + weight_decay_rate * theta
            ratio = 1.0
            if lamb and adapted:
                theta_norm, update_norm = np.linalg.norm(theta), np.linalg.norm(update)
                if theta_norm > 0 and update_norm > 0:
                    ratio = theta_norm / update_norm
            params[path] = theta - ratio * lr * update
    return params, adam_m, adam_v, norms


def _run_optimizer(optimizer, values, grad_steps, grad_dtype=tf.float32):
    variables = {path: _variable_at(path, value) for path, value in values.items()}
    optimizer.build(list(variables.values()))

    @tf.function
    def apply(grads):
        optimizer.apply_gradients([(grads[path], variables[path]) for path in variables])

    for grads in grad_steps:
        apply({path: tf.cast(g, grad_dtype) for path, g in grads.items()})
    return variables


def _slot(optimizer, path: str, slot: str) -> np.ndarray:
    name = f"{path.replace('/', '_')}_{slot}"
    matches = [v for v in optimizer.variables if v.name == name]
    assert len(matches) == 1, [v.name for v in optimizer.variables]
    return matches[0].numpy()


@pytest.mark.parametrize("optimizer_class", [AdamWeightDecay, Lamb])
def test_update_rule_matches_numpy(optimizer_class):
    values, grad_steps = _initial_values(), _gradients(num_steps=5, scale=0.5)
    optimizer = optimizer_class(learning_rate=0.01)
    variables = _run_optimizer(optimizer, values, grad_steps)
    lamb = optimizer_class is Lamb
    expected, adam_m, adam_v, _ = _reference_steps(values, grad_steps, [0.01] * 5, lamb=lamb)
    for path, (_, decayed, adapted) in VARIABLES.items():
        assert optimizer.uses_weight_decay(variables[path]) == decayed, path
        assert optimizer.uses_layer_adaptation(variables[path]) == (adapted and lamb), path
        np.testing.assert_allclose(variables[path].numpy(), expected[path], rtol=1e-5, atol=1e-6,
                                   err_msg=path)
        np.testing.assert_allclose(_slot(optimizer, path, "adam_m"), adam_m[path], rtol=1e-5, atol=1e-7)
        np.testing.assert_allclose(_slot(optimizer, path, "adam_v"), adam_v[path], rtol=1e-5, atol=1e-9)
    assert int(optimizer.iterations) == 5


def test_rule_details_visible_in_the_numbers():
    """Zero-norm, zero-gradient and excluded variables follow the special cases of the reference's
    LAMB: trust ratio 1 for a zero norm or an excluded name, plain ||theta|| / ||u|| otherwise.
    """
    values, grad_steps = _initial_values(), _gradients(num_steps=1, scale=0.5)
    variables = _run_optimizer(Lamb(learning_rate=0.01), values, grad_steps)
    # Zero gradient: m = v = 0 so u = wd * theta, r = ||theta|| / ||wd theta|| = 1 / wd, and
    # theta <- theta - (1 / wd) * lr * wd * theta = (1 - lr) * theta with lr = 0.01.
    np.testing.assert_allclose(variables[ZERO_GRAD].numpy(), values[ZERO_GRAD] * (1 - 0.01), rtol=1e-5)
    # Zero-norm variable: ratio 1, so the first step is -lr * g / (|g| + eps) elementwise (about -lr sign g).
    g = grad_steps[0][ZERO_INIT]
    np.testing.assert_allclose(variables[ZERO_INIT].numpy(), -0.01 * (0.1 * g) / (np.sqrt(0.001) * np.abs(g)
                                                                                 + 1e-6), rtol=1e-4)
    # Excluded bias: plain Adam step without decay or ratio.
    bias = "cls/predictions/output_bias"
    g = grad_steps[0][bias]
    np.testing.assert_allclose(variables[bias].numpy(),
                               values[bias] - 0.01 * (0.1 * g) / (np.sqrt(0.001) * np.abs(g) + 1e-6), rtol=1e-4)


def test_train_op_schedule_and_clipping_match_numpy():
    """create_optimizer = schedule (warmup, decay) + global-norm clip at 1.0 + LAMB, as the reference's."""
    values, grad_steps = _initial_values(), _gradients(num_steps=6, scale=3.0)
    optimizer = create_optimizer("lamb", learning_rate=0.02, num_train_steps=5, num_warmup_steps=2)
    variables = _run_optimizer(optimizer, values, grad_steps)
    learning_rates = [0.0, 0.01, 0.02 * (1 - 2 / 5), 0.02 * (1 - 3 / 5), 0.02 * (1 - 4 / 5), 0.0]
    expected, _, _, norms = _reference_steps(values, grad_steps, learning_rates, lamb=True, clip_norm=1.0)
    assert norms[-1] > 1.0
    np.testing.assert_allclose(float(optimizer.gradient_norm), norms[-1], rtol=1e-5)
    for path in VARIABLES:
        np.testing.assert_allclose(variables[path].numpy(), expected[path], rtol=1e-5, atol=1e-6,
                                   err_msg=path)


def test_low_precision_gradients_are_cast_to_float32():
    values, grad_steps = _initial_values(), _gradients(num_steps=2, scale=0.5)
    rounded = [{k: tf.cast(tf.cast(g, tf.bfloat16), tf.float32).numpy() for k, g in s.items()}
               for s in grad_steps]
    low = _run_optimizer(Lamb(learning_rate=0.01, clip_norm=1.0), values, grad_steps, tf.bfloat16)
    full = _run_optimizer(Lamb(learning_rate=0.01, clip_norm=1.0), values, rounded)
    for path in VARIABLES:
        assert low[path].dtype == "float32"
        np.testing.assert_allclose(low[path].numpy(), full[path].numpy(), rtol=1e-6, atol=1e-7)


def test_loss_scale_optimizer_clips_unscaled_gradients():
    """Wrapped for float16, clipping must see the gradients after the loss scale is removed."""
    values, grad_steps = _initial_values(), _gradients(num_steps=3, scale=3.0)
    scale = 2.0 ** 10
    wrapped = keras.optimizers.LossScaleOptimizer(Lamb(learning_rate=0.01, clip_norm=1.0), initial_scale=scale)
    scaled_steps = [{k: g * scale for k, g in s.items()} for s in grad_steps]
    got = _run_optimizer(wrapped, values, scaled_steps)
    expected, _, _, norms = _reference_steps(values, grad_steps, [0.01] * 3, lamb=True, clip_norm=1.0)
    np.testing.assert_allclose(float(wrapped.inner_optimizer.gradient_norm), norms[-1], rtol=1e-5)
    for path in VARIABLES:
        np.testing.assert_allclose(got[path].numpy(), expected[path], rtol=1e-5, atol=1e-6, err_msg=path)


def test_sparse_gradient_is_applied_densely():
    """An embedding gradient (tf.IndexedSlices, repeated rows) updates like its dense sum (m, v decay too)."""
    table = np.arange(12, dtype=np.float32).reshape(4, 3) / 10
    sparse = tf.IndexedSlices(tf.constant([[1.0, 2.0, 3.0], [0.5, 0.5, 0.5]]), tf.constant([2, 2]),
                              tf.constant([4, 3]))
    dense = np.zeros((4, 3), np.float32)
    dense[2] = [1.5, 2.5, 3.5]
    results = []
    for grad in (sparse, tf.constant(dense)):
        variable = _variable_at("bert/embeddings/word_embeddings", table)
        optimizer = Lamb(learning_rate=0.01, clip_norm=1.0)
        optimizer.apply_gradients([(grad, variable)])
        results.append((variable.numpy(), float(optimizer.gradient_norm)))
    np.testing.assert_allclose(results[0][0], results[1][0], rtol=1e-6)
    assert results[0][1] == pytest.approx(np.linalg.norm(dense), rel=1e-6)


def test_variable_name_fn_overrides_the_matched_name():
    variable = _variable_at("dense/kernel", np.ones((2, 2), np.float32))
    optimizer = Lamb(learning_rate=0.01, variable_name_fn=lambda v: "cls/predictions/output_bias")
    optimizer.build([variable])
    assert not optimizer.uses_weight_decay(variable)
    assert not optimizer.uses_layer_adaptation(variable)


def test_explicit_exclusions_and_zero_decay():
    variable = _variable_at("bert/embeddings/word_embeddings", np.ones((2, 2), np.float32))
    optimizer = Lamb(learning_rate=0.01, exclude_from_layer_adaptation=["embeddings$"])
    optimizer.build([variable])
    assert optimizer.uses_weight_decay(variable) and not optimizer.uses_layer_adaptation(variable)
    no_decay = AdamWeightDecay(learning_rate=0.01, weight_decay_rate=0.0)
    no_decay.build([variable])
    assert not no_decay.uses_weight_decay(variable)


@pytest.mark.parametrize("argument", [{"weight_decay": 0.01}, {"global_clipnorm": 1.0}, {"clipnorm": 1.0},
                                      {"use_ema": True}, {"gradient_accumulation_steps": 2}])
def test_keras_builtin_transforms_are_refused(argument):
    with pytest.raises(ValueError, match=list(argument)[0]):
        AdamWeightDecay(learning_rate=0.01, **argument)


def test_bad_arguments_raise_clearly():
    with pytest.raises(ValueError, match="exclude_from_weight_decay"):
        AdamWeightDecay(exclude_from_weight_decay=["("])
    with pytest.raises(ValueError, match="exclude_from_weight_decay"):
        AdamWeightDecay(exclude_from_weight_decay="bias")
    with pytest.raises(ValueError, match="num_train_steps"):
        WarmupPolynomialDecay(0.1, num_train_steps=0)
    with pytest.raises(ValueError, match="clip_norm"):
        clip_gradients([tf.ones(2)], clip_norm=0.0)


def test_optimizer_config_round_trip():
    optimizer = create_optimizer("lamb", 1e-3, num_train_steps=100, num_warmup_steps=10, poly_power=2.0,
                                 start_warmup_step=3, weight_decay_rate=0.02)
    config = optimizer.get_config()
    restored = keras.optimizers.deserialize(keras.optimizers.serialize(optimizer))
    assert type(restored) is Lamb
    assert restored.get_config() == config
    assert config["exclude_from_layer_adaptation"] == ["LayerNorm", "layer_norm", "bias"]
    assert config["weight_decay_rate"] == 0.02 and config["clip_norm"] == 1.0


def _schedule_reference(step, init_lr, num_train_steps, num_warmup_steps, poly_power, start_warmup_step):
    """The reference's learning-rate schedule by hand, with albert_tf's fix: 0 (not negative)
    before start_warmup_step.
    """
    decayed = init_lr * (1 - min(step, num_train_steps) / num_train_steps) ** poly_power
    warmup_done = step - start_warmup_step
    if num_warmup_steps and warmup_done < num_warmup_steps:
        return init_lr * max(warmup_done, 0) / num_warmup_steps
    return decayed


@pytest.mark.parametrize("num_warmup_steps,poly_power,start_warmup_step,steps", [
    (10, 1.0, 0, {0: 0.0, 5: 0.05, 9: 0.09, 10: 0.09, 55: 0.045, 100: 0.0, 150: 0.0}),
    (10, 2.0, 0, {0: 0.0, 5: 0.05, 10: 0.081, 55: 0.02025, 100: 0.0, 150: 0.0}),
    (10, 1.0, 20, {0: 0.0, 19: 0.0, 20: 0.0, 25: 0.05, 30: 0.07, 100: 0.0}),
    (0, 1.0, 0, {0: 0.1, 50: 0.05, 100: 0.0, 101: 0.0}),
])
def test_schedule_matches_spec(num_warmup_steps, poly_power, start_warmup_step, steps):
    schedule = WarmupPolynomialDecay(0.1, num_train_steps=100, num_warmup_steps=num_warmup_steps,
                                     poly_power=poly_power, start_warmup_step=start_warmup_step)
    for step, by_hand in steps.items():
        got = float(schedule(tf.constant(step, tf.int64)))
        assert got == pytest.approx(by_hand, rel=1e-6, abs=1e-9), step
    for step in range(151):  # every step, against the formula
        formula = _schedule_reference(step, 0.1, 100, num_warmup_steps, poly_power, start_warmup_step)
        got = float(schedule(tf.constant(step, tf.int64)))
        assert got == pytest.approx(formula, rel=1e-6, abs=1e-9), step


def test_schedule_serializes():
    schedule = WarmupPolynomialDecay(0.1, num_train_steps=100, num_warmup_steps=10, poly_power=2.0,
                                     start_warmup_step=5)
    restored = keras.optimizers.schedules.deserialize(keras.optimizers.schedules.serialize(schedule))
    assert isinstance(restored, WarmupPolynomialDecay)
    assert restored.get_config() == schedule.get_config()


@pytest.mark.parametrize("scale", [5.0, 0.01])
def test_clip_gradients_matches_numpy(scale):
    rng = np.random.default_rng(3)
    grads = [scale * rng.normal(size=(3, 4)), None, scale * rng.normal(size=(5,))]
    norm = np.sqrt(sum(np.sum(g.astype(np.float32) ** 2) for g in grads if g is not None))
    clipped, got_norm = clip_gradients([None if g is None else tf.constant(g, tf.float32) for g in grads])
    assert float(got_norm) == pytest.approx(norm, rel=1e-6)
    clipped_norm = np.sqrt(sum(np.sum(c.numpy() ** 2) for c in clipped if c is not None))
    assert clipped_norm == pytest.approx(min(norm, 1.0), rel=1e-5)  # clipped to 1.0, never scaled up
    assert clipped[1] is None
    for g, c in zip(grads, clipped):
        if g is not None:
            np.testing.assert_allclose(c.numpy(), g / max(norm, 1.0), rtol=1e-6)


@pytest.mark.parametrize("name,expected", [("adamw", AdamWeightDecay), ("lamb", Lamb)])
def test_factory_builds_the_named_class(name, expected):
    optimizer = create_optimizer(name, 1e-3, num_train_steps=10, num_warmup_steps=1)
    assert type(optimizer) is expected


def test_every_published_name_builds_an_optimizer():
    """OPTIMIZER_NAMES are the --optimizer flag's choices: each must build, and no other name."""
    built = {name: type(create_optimizer(name, 1e-3, num_train_steps=10, num_warmup_steps=1))
             for name in OPTIMIZER_NAMES}
    assert built == {"adamw": AdamWeightDecay, "lamb": Lamb}


@pytest.mark.parametrize("name", ["lamb ", "LAMB2", "adam", "LAMB", ""])
def test_factory_rejects_unknown_names(name):
    with pytest.raises(ValueError, match="valid names are \\['adamw', 'lamb'\\]"):
        create_optimizer(name, 1e-3, num_train_steps=10, num_warmup_steps=1)


_MIRRORED_SCRIPT = r"""
import json
import numpy as np
from albert_tf.training.distribute import configure_logical_cpus, create_strategy
configure_logical_cpus(2)
import keras
import tensorflow as tf
from albert_tf.training.optimization import create_optimizer

rng = np.random.default_rng(0)
x = rng.normal(size=(8, 4)).astype(np.float32)
t = rng.normal(size=(8, 3)).astype(np.float32)
init_w = rng.normal(size=(4, 3)).astype(np.float32)

def train(strategy):
    with strategy.scope():
        with keras.name_scope("layer"):
            w = keras.Variable(init_w, name="kernel")
            b = keras.Variable(np.zeros(3, np.float32), name="bias")
        optimizer = create_optimizer("lamb", 0.1, num_train_steps=10, num_warmup_steps=0)
        optimizer.build([w, b])
    replicas = strategy.num_replicas_in_sync
    per_replica = 8 // replicas

    def replica_step():
        index = tf.distribute.get_replica_context().replica_id_in_sync_group
        xs = tf.constant(x)[index * per_replica:(index + 1) * per_replica]
        ts = tf.constant(t)[index * per_replica:(index + 1) * per_replica]
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(tf.square(tf.matmul(xs, w) + b - ts)) / 8.0
        grads = tape.gradient(loss, [w, b])
        optimizer.apply_gradients(zip(grads, [w, b]))

    @tf.function
    def step():
        strategy.run(replica_step)

    for _ in range(2):
        step()
    return {"replicas": replicas, "w": w.numpy().tolist(), "b": b.numpy().tolist(),
            "norm": float(optimizer.gradient_norm.numpy())}

mirrored = train(create_strategy("mirrored"))
single = train(create_strategy("one_device"))
print("RESULT" + json.dumps({"mirrored": mirrored, "single": single}))
"""


@pytest.mark.subprocess  # logical CPUs are set before TensorFlow starts
def test_mirrored_two_cpus_matches_single_device():
    proc = subprocess.run([sys.executable, "-c", _MIRRORED_SCRIPT], cwd=REPO_ROOT,
                          env=subprocess_env(), capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    line = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT")][-1]
    result = json.loads(line[len("RESULT"):])
    mirrored, single = result["mirrored"], result["single"]
    assert mirrored["replicas"] == 2 and single["replicas"] == 1
    assert single["norm"] > 1.0  # clipping is active, so per-replica clipping would differ
    assert mirrored["norm"] == pytest.approx(single["norm"], rel=1e-5)
    np.testing.assert_allclose(mirrored["w"], single["w"], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(mirrored["b"], single["b"], rtol=1e-5, atol=1e-6)
