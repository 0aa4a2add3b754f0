"""Keras 3 building blocks shared by the encoder and the heads.

Each layer creates its weights in ``__init__`` (every shape follows from the config, not from the
input), so a freshly constructed model already holds all its variables: checkpoints can be loaded
before any forward pass. Layer and weight names are chosen so that ``variable.path`` contains
"LayerNorm" for LayerNorm parameters and ends in "bias" for biases: the optimizers' exclusion regexes
(reference defaults ``LayerNorm``, ``layer_norm``, ``bias``) rely on that.
"""

from __future__ import annotations

import contextlib
import threading
from typing import Callable, Iterator

import keras
import tensorflow as tf

LAYER_NORM_EPSILON = 1e-12


def gelu(x: tf.Tensor) -> tf.Tensor:
    """The tanh approximation of GELU used by the reference (not the exact erf form):
    0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))).

    ``tf.nn.gelu(approximate=True)`` is this formula; its graph (x^3 as one Pow) is the pattern
    TensorFlow's oneDNN remapper fuses into the preceding MatMul + BiasAdd on CPU, and its
    gradient takes fewer passes over the [N, intermediate_size] tensor than that of x * x * x.
    """
    return tf.nn.gelu(x, approximate=True)


_ACTIVATIONS: dict[str, Callable[[tf.Tensor], tf.Tensor]] = {
    "gelu": gelu,
    "relu": tf.nn.relu,
    "tanh": tf.tanh,
    "linear": tf.identity,
    "": tf.identity,
}


def get_activation(name: str | None) -> Callable[[tf.Tensor], tf.Tensor]:
    """Maps the reference's ``hidden_act`` strings (case-insensitive) to functions."""
    key = "" if name is None else name.lower()
    if key not in _ACTIVATIONS:
        raise ValueError(f"Unsupported activation {name!r}; expected one of {sorted(_ACTIVATIONS)}.")
    return _ACTIVATIONS[key]


class _DropoutSeedState(threading.local):
    """The seed scope of the forward pass being traced in this thread (MirroredStrategy traces each
    replica in its own thread): its seed and how many dropout calls it has seeded so far."""

    seed: tf.Tensor | None = None
    calls: int = 0


_seed_state = _DropoutSeedState()


@contextlib.contextmanager
def dropout_seed_scope(seed: tf.Tensor) -> Iterator[None]:
    """Within the block, ``dropout`` draws its masks from ``seed`` (int32 [2]) statelessly.

    The n-th dropout call traced in the block (trace order, which the model's code fixes: the
    embeddings, then per layer the attention probabilities, attention output and FFN output, then
    the head) gets the seed ``stateless_fold_in(seed, n)``. The masks are thus a function of
    ``seed`` alone, whatever the process traced before, so a training step that derives ``seed``
    from the run's seed, the step, the replica and the micro-batch draws the same masks in an
    interrupted and resumed run as in an uninterrupted one. The Trainer opens this scope around
    every training forward pass.
    """
    if seed.dtype != tf.int32 or seed.shape != (2,):
        raise ValueError(f"The dropout seed must be an int32 [2] tensor, got {seed!r}.")
    previous = (_seed_state.seed, _seed_state.calls)
    _seed_state.seed, _seed_state.calls = seed, 0
    try:
        yield
    finally:
        _seed_state.seed, _seed_state.calls = previous


def dropout(x: tf.Tensor, rate: float, training: bool | None) -> tf.Tensor:
    """Inverted dropout, active only when ``training`` is true and ``rate`` > 0: each element is
    kept with probability 1 - ``rate`` and scaled by 1 / (1 - ``rate``), as ``tf.nn.dropout``.

    Inside ``dropout_seed_scope`` the mask is stateless (``tf.nn.experimental.stateless_dropout``,
    seeded by the scope); outside it (a model called with ``training=True`` directly) it comes from
    TF's stateful RNG. Neither puts seed-state variables into the model, unlike
    keras.layers.Dropout (they would show up in its checkpoints and need syncing across replicas).
    """
    if not training or rate <= 0.0:
        return x
    if _seed_state.seed is None:
        return tf.nn.dropout(x, rate=rate)
    seed = tf.random.experimental.stateless_fold_in(_seed_state.seed, _seed_state.calls)
    _seed_state.calls += 1
    return tf.nn.experimental.stateless_dropout(x, rate=rate, seed=seed)


class _WeightCastState(threading.local):
    """The casts of the forward pass being traced in this thread: (variable, dtype, graph) ->
    the variable cast to dtype in that graph; None outside ``weights_cast_once``."""

    casts: dict | None = None


_weight_casts = _WeightCastState()


@contextlib.contextmanager
def weights_cast_once() -> Iterator[None]:
    """Within the block, ``cast_weight`` casts each variable to a dtype once per graph.

    ALBERT runs one block's weights in every layer: under mixed precision each of the L uses
    would cast every kernel to bfloat16 again, and its gradient back, L times a step (with the
    sums of the L float32 gradients, 0.07 s of a 0.89 s bfloat16 train step at batch 32, length
    20, ALBERT-base). Cast once, the L uses share the bfloat16 copy, and their gradients are
    summed in bfloat16 before the one cast back, as PyTorch's autocast does with its cast cache.
    In float32 the cast is a read: nothing changes.
    The model opens this scope around each forward pass (``AlbertModel.call``).
    """
    previous = _weight_casts.casts
    _weight_casts.casts = {}
    try:
        yield
    finally:
        _weight_casts.casts = previous


def cast_weight(variable, dtype) -> tf.Tensor:
    """``variable`` cast to ``dtype``; inside ``weights_cast_once``, the first cast made in the
    current graph (a loop or branch body is a graph of its own, and takes its own cast)."""
    casts = _weight_casts.casts
    if casts is None:
        return tf.cast(variable, dtype)
    key = (id(variable), tf.as_dtype(dtype), id(tf.compat.v1.get_default_graph()))
    if key not in casts:
        casts[key] = tf.cast(variable, dtype)
    return casts[key]


def truncated_normal(stddev: float) -> keras.initializers.Initializer:
    """The reference's initializer: normal(0, stddev) truncated at 2 standard deviations."""
    return keras.initializers.TruncatedNormal(stddev=stddev)


class LayerNorm(keras.layers.Layer):
    """LayerNorm over the last axis with the reference's epsilon (1e-12), always computed in float32.

    Weights: ``gamma`` [width] (ones), ``beta`` [width] (zeros). Input [..., width] of any float
    dtype; output float32 (the next layer casts back to its compute dtype).
    """

    def __init__(self, width: int, name: str = "LayerNorm", **kwargs):
        super().__init__(name=name, dtype="float32", **kwargs)
        self.width = width
        self.beta = self.add_weight(shape=(width,), name="beta", initializer="zeros")
        self.gamma = self.add_weight(shape=(width,), name="gamma", initializer="ones")
        self.built = True

    def call(self, x: tf.Tensor) -> tf.Tensor:
        x = tf.cast(x, tf.float32)
        mean, variance = tf.nn.moments(x, axes=[-1], keepdims=True)
        normalized = (x - mean) * tf.math.rsqrt(variance + LAYER_NORM_EPSILON)
        return normalized * self.gamma + self.beta


class Dense(keras.layers.Layer):
    """``x @ kernel + bias`` then an activation; kernel [in, out], bias [out] as the reference stores them.

    Input [..., in] -> output [..., out] in the layer's compute dtype.
    """

    def __init__(self, input_width: int, output_width: int, initializer_range: float,
                 activation: str | None = None, use_bias: bool = True, name: str = "dense",
                 **kwargs):
        super().__init__(name=name, **kwargs)
        self.activation = get_activation(activation)
        self.kernel = self.add_weight(shape=(input_width, output_width), name="kernel",
                                      initializer=truncated_normal(initializer_range))
        self.bias = (self.add_weight(shape=(output_width,), name="bias", initializer="zeros")
                     if use_bias else None)
        self.built = True

    def call(self, x: tf.Tensor) -> tf.Tensor:
        """[..., in] -> [..., out], computed as one 2-D [N, in] x [in, out] matmul + BiasAdd.

        The 2-D MatMul followed by BiasAdd is the pattern TensorFlow's oneDNN remapper fuses into
        one kernel on CPU, and BiasAdd's gradient is one reduction (a broadcasting add's would be
        a Sum over a reshaped copy); the result is the reference's ``x @ kernel + bias``.
        """
        x = tf.cast(x, self.compute_dtype)
        kernel = cast_weight(self.kernel, self.compute_dtype)
        flat = x if x.shape.rank == 2 else tf.reshape(x, [-1, kernel.shape[0]])
        y = tf.matmul(flat, kernel)
        if self.bias is not None:
            y = tf.nn.bias_add(y, cast_weight(self.bias, self.compute_dtype))
        y = self.activation(y)
        if x.shape.rank == 2:
            return y
        y = tf.reshape(y, tf.concat([tf.shape(x)[:-1], tf.shape(kernel)[1:]], axis=0))
        y.set_shape(x.shape[:-1].concatenate(kernel.shape[1:]))
        return y
