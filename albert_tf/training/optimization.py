"""The reference's optimizers and learning-rate schedule as Keras 3 objects.

- ``WarmupPolynomialDecay``: linear warmup from 0, otherwise polynomial decay to 0.
- ``AdamWeightDecay``: Adam without bias correction, epsilon outside the square root, decoupled weight
  decay added to the update before the learning-rate multiply.
- ``Lamb``: the same update scaled per tensor by the trust ratio ||theta|| / ||update||.
- ``clip_gradients``: global-norm clipping (the reference clips at 1.0 before every update).
- ``create_optimizer``: the reference's ``create_optimizer`` as a factory over ``OPTIMIZER_NAMES``.

Keras's own Adam/AdamW/Lamb differ (bias correction, epsilon placement, decay applied separately, no
per-variable exclusions), hence these classes. They are TensorFlow-backend optimizers: they run eagerly,
in ``tf.function``, under any ``tf.distribute`` strategy and wrapped in ``keras.optimizers.LossScaleOptimizer``.

Gradient clipping happens inside the optimizer (argument ``clip_norm``) rather than in the training loop,
because only there the gradient is final: summed over replicas (``tf.distribute``) and divided by the loss
scale (``LossScaleOptimizer``). The global norm before clipping is kept in ``optimizer.gradient_norm``
for logging. Under a multi-replica strategy this clips the global gradient, unlike the reference on TPU,
which clips each core's gradient and then sums them.
"""

from __future__ import annotations

import numbers
import re
from typing import Any, Callable, Sequence

import keras
import tensorflow as tf

OPTIMIZER_NAMES = ("adamw", "lamb")

DEFAULT_EXCLUDE_FROM_WEIGHT_DECAY = ("LayerNorm", "layer_norm", "bias")

VariableNameFn = Callable[[Any], str]

# Keras's built-in gradient transforms, refused because this module implements them the reference's way
# (or not at all). Each maps to the value meaning "off", which from_config passes back.
_KERAS_FEATURES_OFF = {
    "weight_decay": None,
    "clipnorm": None,
    "clipvalue": None,
    "global_clipnorm": None,
    "use_ema": False,
    "ema_overwrite_frequency": None,
    "gradient_accumulation_steps": None,
}
_KERAS_FEATURES_IGNORED_WHEN_OFF = ("ema_momentum",)


@keras.saving.register_keras_serializable(package="albert_tf")
class WarmupPolynomialDecay(keras.optimizers.schedules.LearningRateSchedule):
    """The reference's learning rate as a function of the global step.

    ``decay(step) = initial_learning_rate * (1 - min(step, num_train_steps) / num_train_steps) ** poly_power``
    on the raw step. With ``num_warmup_steps > 0`` and ``s = step - start_warmup_step < num_warmup_steps``
    the rate is instead ``initial_learning_rate * s / num_warmup_steps``: 0 at the first warmup step
    (as in the reference, so the very first update with warmup is a no-op apart from the moments).

    Fixed reference bug: before ``start_warmup_step`` the reference's rate is negative; here it is 0.
    """

    def __init__(self, initial_learning_rate: float, num_train_steps: int, num_warmup_steps: int = 0,
                 poly_power: float = 1.0, start_warmup_step: int = 0):
        _check_number("initial_learning_rate", initial_learning_rate, minimum=0.0)
        _check_int("num_train_steps", num_train_steps, minimum=1)
        _check_int("num_warmup_steps", num_warmup_steps, minimum=0)
        _check_number("poly_power", poly_power, minimum=0.0, exclusive=True)
        _check_int("start_warmup_step", start_warmup_step, minimum=0)
        self.initial_learning_rate = float(initial_learning_rate)
        self.num_train_steps = int(num_train_steps)
        self.num_warmup_steps = int(num_warmup_steps)
        self.poly_power = float(poly_power)
        self.start_warmup_step = int(start_warmup_step)

    def __call__(self, step: Any) -> tf.Tensor:
        """step: scalar integer (tensor or variable). Returns a float32 scalar."""
        with tf.name_scope("warmup_polynomial_decay"):
            step = tf.cast(tf.convert_to_tensor(step), tf.float32)
            init_lr = tf.constant(self.initial_learning_rate, tf.float32)
            total = tf.constant(float(self.num_train_steps), tf.float32)
            done = tf.minimum(step, total) / total
            learning_rate = init_lr * tf.pow(1.0 - done, self.poly_power)
            if self.num_warmup_steps:
                warmup_steps = tf.constant(float(self.num_warmup_steps), tf.float32)
                warmup_done = step - float(self.start_warmup_step)
                warmup_lr = init_lr * (tf.maximum(warmup_done, 0.0) / warmup_steps)
                learning_rate = tf.where(warmup_done < warmup_steps, warmup_lr, learning_rate)
            return learning_rate

    def get_config(self) -> dict[str, Any]:
        return {
            "initial_learning_rate": self.initial_learning_rate,
            "num_train_steps": self.num_train_steps,
            "num_warmup_steps": self.num_warmup_steps,
            "poly_power": self.poly_power,
            "start_warmup_step": self.start_warmup_step,
        }


def clip_gradients(grads: Sequence[Any], clip_norm: float | None = 1.0) -> tuple[list[Any], tf.Tensor]:
    """Global-norm clipping as ``tf.clip_by_global_norm``; returns (clipped, global norm before clipping).

    grads: tensors (any shapes), ``tf.IndexedSlices`` or None; None stays None. Sparse gradients are made
    dense first, so the norm is that of the summed rows (repeated indices counted once, correctly).
    Floating gradients of lower precision are cast to float32 (the variables' dtype under mixed precision).
    ``clip_norm=None`` only computes the norm. A non-finite norm turns every gradient into NaN, as in TF.
    """
    dense = [None if g is None else _dense_float32(g) for g in grads]
    if clip_norm is None:
        return dense, tf.linalg.global_norm(dense)
    _check_number("clip_norm", clip_norm, minimum=0.0, exclusive=True)
    clipped, norm = tf.clip_by_global_norm(dense, clip_norm)
    return list(clipped), norm


def _dense_float32(gradient: Any) -> tf.Tensor:
    if isinstance(gradient, tf.IndexedSlices):
        gradient = tf.convert_to_tensor(gradient)
    if gradient.dtype in (tf.float16, tf.bfloat16):
        gradient = tf.cast(gradient, tf.float32)
    return gradient


def _default_variable_name(variable: Any) -> str:
    """The name exclusions are matched against: Keras's ``variable.path`` ("layer/.../name")."""
    path = getattr(variable, "path", None)
    return path if path else variable.name.split(":")[0]


@keras.saving.register_keras_serializable(package="albert_tf")
class AdamWeightDecay(keras.optimizers.Optimizer):
    """The reference's AdamWeightDecayOptimizer, per variable theta with gradient g:

        m <- beta_1 m + (1 - beta_1) g          (slot "adam_m")
        v <- beta_2 v + (1 - beta_2) g^2        (slot "adam_v")
        u <- m / (sqrt(v) + epsilon)            no bias correction, epsilon outside the square root
        u <- u + weight_decay_rate theta        unless a pattern of exclude_from_weight_decay matches
        theta <- theta - lr u

    Exclusion patterns are regular expressions found anywhere (``re.search``) in the variable's name,
    given by ``variable_name_fn`` (default: Keras's ``variable.path``, e.g.
    "bert/encoder/.../LayerNorm/gamma"); the defaults exclude LayerNorm parameters and biases.
    Slots are created once per variable in ``build`` (call it inside ``strategy.scope()``).

    ``clip_norm``: if set, the gradients (summed over replicas, loss scale removed) are clipped to this
    global norm before the update; the norm before clipping is stored in ``gradient_norm`` either way.
    ``variable_name_fn`` is not part of ``get_config``: pass it again after ``from_config``.
    """

    def __init__(self,
                 learning_rate: float | keras.optimizers.schedules.LearningRateSchedule = 0.001,
                 weight_decay_rate: float = 0.01,
                 beta_1: float = 0.9,
                 beta_2: float = 0.999,
                 epsilon: float = 1e-6,
                 exclude_from_weight_decay: Sequence[str] | None = DEFAULT_EXCLUDE_FROM_WEIGHT_DECAY,
                 clip_norm: float | None = None,
                 variable_name_fn: VariableNameFn | None = None,
                 name: str | None = None,
                 **kwargs: Any):
        _refuse_keras_features(type(self).__name__, kwargs)
        super().__init__(learning_rate=learning_rate, name=name, **kwargs)
        _check_number("weight_decay_rate", weight_decay_rate, minimum=0.0)
        _check_number("beta_1", beta_1, minimum=0.0, maximum=1.0)
        _check_number("beta_2", beta_2, minimum=0.0, maximum=1.0)
        _check_number("epsilon", epsilon, minimum=0.0)
        if clip_norm is not None:
            _check_number("clip_norm", clip_norm, minimum=0.0, exclusive=True)
        if keras.backend.backend() != "tensorflow":
            raise ValueError(f"{type(self).__name__} needs the TensorFlow Keras backend, "
                             f"got KERAS_BACKEND={keras.backend.backend()!r}.")
        self.weight_decay_rate = float(weight_decay_rate)
        self.beta_1 = float(beta_1)
        self.beta_2 = float(beta_2)
        self.epsilon = float(epsilon)
        self.exclude_from_weight_decay = _compile_patterns("exclude_from_weight_decay",
                                                           exclude_from_weight_decay)
        self.clip_norm = None if clip_norm is None else float(clip_norm)
        self.variable_name_fn = variable_name_fn or _default_variable_name

    def build(self, var_list: Sequence[Any]) -> None:
        """Creates the zero slots adam_m / adam_v per variable and decides each variable's exclusions."""
        if self.built:
            return
        super().build(var_list)
        self._adam_m, self._adam_v = self.add_optimizer_variables(var_list, ["adam_m", "adam_v"])
        names = [self.variable_name_fn(variable) for variable in var_list]
        self._decays_weights = [self._uses_weight_decay(name) for name in names]
        self._adapts_layer = [self._uses_layer_adaptation(name) for name in names]
        self._gradient_norm = self.add_variable(shape=(), dtype="float32", initializer="zeros",
                                                aggregation="only_first_replica", name="gradient_norm")

    @property
    def gradient_norm(self) -> keras.Variable:
        """Global norm of the last applied gradients, before clipping (float32 scalar variable)."""
        return self._gradient_norm

    def _uses_weight_decay(self, name: str) -> bool:
        return bool(self.weight_decay_rate) and not _matches_any(self.exclude_from_weight_decay, name)

    def _uses_layer_adaptation(self, name: str) -> bool:
        """AdamWeightDecay has no layer adaptation; Lamb overrides this."""
        return False

    def uses_weight_decay(self, variable: Any) -> bool:
        """Whether weight decay applies to ``variable`` (after ``build``)."""
        return self._decays_weights[self._get_variable_index(variable)]

    def uses_layer_adaptation(self, variable: Any) -> bool:
        """Whether the LAMB trust ratio applies to ``variable`` (after ``build``; always False here)."""
        return self._adapts_layer[self._get_variable_index(variable)]

    def _all_reduce_sum_gradients(self, grads_and_vars):
        """Clips the final gradients: after the cross-replica sum and after the loss scale is removed.

        Keras 3's TensorFlow optimizer calls this from ``_backend_update_step`` just before the updates
        (tests/test_optimization.py checks it under MirroredStrategy and LossScaleOptimizer).
        """
        grads_and_vars = super()._all_reduce_sum_gradients(grads_and_vars)
        grads, variables = zip(*grads_and_vars)
        grads, norm = clip_gradients(grads, self.clip_norm)
        self._gradient_norm.assign(norm)
        return list(zip(grads, variables))

    def update_step(self, gradient: Any, variable: Any, learning_rate: Any) -> None:
        """One reference update of ``variable`` (float32 under mixed precision) from ``gradient``."""
        index = self._get_variable_index(variable)
        dtype = variable.dtype
        gradient = tf.cast(_dense_float32(gradient), dtype)
        learning_rate = tf.cast(learning_rate, dtype)
        adam_m, adam_v = self._adam_m[index], self._adam_v[index]
        next_m = self.beta_1 * adam_m + (1.0 - self.beta_1) * gradient
        next_v = self.beta_2 * adam_v + (1.0 - self.beta_2) * tf.square(gradient)
        update = next_m / (tf.sqrt(next_v) + self.epsilon)
        if self._decays_weights[index]:
            update += self.weight_decay_rate * variable
        self.assign_sub(variable, self._scaled_update(update, variable, learning_rate, index))
        self.assign(adam_m, next_m)
        self.assign(adam_v, next_v)

    def _scaled_update(self, update: tf.Tensor, variable: Any, learning_rate: tf.Tensor,
                       index: int) -> tf.Tensor:
        """What is subtracted from the variable: lr * u."""
        del variable, index
        return learning_rate * update

    def get_config(self) -> dict[str, Any]:
        config = super().get_config()
        config.update({
            "weight_decay_rate": self.weight_decay_rate,
            "beta_1": self.beta_1,
            "beta_2": self.beta_2,
            "epsilon": self.epsilon,
            "exclude_from_weight_decay": [p.pattern for p in self.exclude_from_weight_decay],
            "clip_norm": self.clip_norm,
        })
        return config


@keras.saving.register_keras_serializable(package="albert_tf")
class Lamb(AdamWeightDecay):
    """The reference's LAMBOptimizer: AdamWeightDecay's u, then per whole tensor

        r = ||theta||_2 / ||u||_2, or 1 if either norm is 0 or a pattern of exclude_from_layer_adaptation
            matches the variable's name
        theta <- theta - r lr u

    No clipping of r, no bias correction. ``exclude_from_layer_adaptation=None`` (default) means the
    weight-decay exclusions; an explicit empty list adapts every variable. Every other argument is
    AdamWeightDecay's, by keyword.
    """

    def __init__(self,
                 learning_rate: float | keras.optimizers.schedules.LearningRateSchedule = 0.001,
                 *,
                 exclude_from_layer_adaptation: Sequence[str] | None = None,
                 **kwargs: Any):
        super().__init__(learning_rate=learning_rate, **kwargs)
        if exclude_from_layer_adaptation is None:
            self.exclude_from_layer_adaptation = list(self.exclude_from_weight_decay)
        else:
            self.exclude_from_layer_adaptation = _compile_patterns("exclude_from_layer_adaptation",
                                                                   exclude_from_layer_adaptation)

    def _uses_layer_adaptation(self, name: str) -> bool:
        return not _matches_any(self.exclude_from_layer_adaptation, name)

    def _scaled_update(self, update: tf.Tensor, variable: Any, learning_rate: tf.Tensor,
                       index: int) -> tf.Tensor:
        """What is subtracted from the variable: r * lr * u with the trust ratio r."""
        if not self._adapts_layer[index]:
            return learning_rate * update
        weight_norm = tf.norm(variable)
        update_norm = tf.norm(update)
        ratio = tf.where(weight_norm > 0.0,
                         tf.where(update_norm > 0.0, weight_norm / update_norm, 1.0),
                         1.0)
        return ratio * learning_rate * update

    def get_config(self) -> dict[str, Any]:
        config = super().get_config()
        config["exclude_from_layer_adaptation"] = [p.pattern for p in self.exclude_from_layer_adaptation]
        return config


_OPTIMIZER_CLASSES = {"adamw": AdamWeightDecay, "lamb": Lamb}


def create_optimizer(optimizer_name: str,
                     learning_rate: float,
                     num_train_steps: int,
                     num_warmup_steps: int,
                     poly_power: float = 1.0,
                     start_warmup_step: int = 0,
                     weight_decay_rate: float = 0.01,
                     clip_norm: float | None = 1.0,
                     variable_name_fn: VariableNameFn | None = None) -> AdamWeightDecay:
    """The reference's optimizer for ``--optimizer`` (exactly "adamw" or "lamb"; anything else raises).

    Uses ``WarmupPolynomialDecay`` over the optimizer's own step counter (``optimizer.iterations``,
    saved with the optimizer in checkpoints), the reference's hyper-parameters (beta_1 0.9, beta_2 0.999,
    epsilon 1e-6, exclusions LayerNorm/layer_norm/bias) and global-norm clipping at ``clip_norm``.
    """
    if optimizer_name not in _OPTIMIZER_CLASSES:
        raise ValueError(f"Unknown optimizer {optimizer_name!r}; valid names are {list(OPTIMIZER_NAMES)}.")
    schedule = WarmupPolynomialDecay(initial_learning_rate=learning_rate, num_train_steps=num_train_steps,
                                     num_warmup_steps=num_warmup_steps, poly_power=poly_power,
                                     start_warmup_step=start_warmup_step)
    return _OPTIMIZER_CLASSES[optimizer_name](learning_rate=schedule, weight_decay_rate=weight_decay_rate,
                                              clip_norm=clip_norm, variable_name_fn=variable_name_fn)


def _refuse_keras_features(class_name: str, kwargs: dict[str, Any]) -> None:
    """Removes Keras base-optimizer arguments that are off; raises if one is on (it would apply twice)."""
    for key, off_value in _KERAS_FEATURES_OFF.items():
        if key in kwargs:
            value = kwargs.pop(key)
            if value != off_value:
                raise ValueError(
                    f"{class_name} does not support Keras's {key}={value!r}: weight decay and gradient "
                    "clipping follow the reference (weight_decay_rate, clip_norm); EMA and gradient "
                    "accumulation are not available.")
    for key in _KERAS_FEATURES_IGNORED_WHEN_OFF:
        kwargs.pop(key, None)


def _compile_patterns(argument: str, patterns: Sequence[str] | None) -> list[re.Pattern]:
    if patterns is None:
        return []
    if isinstance(patterns, str):
        raise ValueError(f"{argument} must be a list of regular expressions, got the string {patterns!r}.")
    compiled = []
    for pattern in patterns:
        try:
            compiled.append(re.compile(pattern))
        except (re.error, TypeError) as err:
            raise ValueError(f"{argument}: {pattern!r} is not a valid regular expression: {err}") from None
    return compiled


def _matches_any(patterns: Sequence[re.Pattern], name: str) -> bool:
    return any(pattern.search(name) is not None for pattern in patterns)


def _check_number(argument: str, value: Any, minimum: float | None = None, maximum: float | None = None,
                  exclusive: bool = False) -> None:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ValueError(f"{argument} must be a number, got {value!r}.")
    if minimum is not None and (value < minimum or (exclusive and value == minimum)):
        relation = ">" if exclusive else ">="
        raise ValueError(f"{argument} must be {relation} {minimum}, got {value!r}.")
    if maximum is not None and value > maximum:
        raise ValueError(f"{argument} must be <= {maximum}, got {value!r}.")


def _check_int(argument: str, value: Any, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < minimum:
        raise ValueError(f"{argument} must be an integer >= {minimum}, got {value!r}.")
