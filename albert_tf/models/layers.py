"""Keras 3 building blocks shared by the encoder and the heads.

Each layer creates its weights in ``__init__`` (every shape follows from the config, not from the
input), so a freshly constructed model already holds all its variables: checkpoints can be loaded
before any forward pass. Layer and weight names are chosen so that ``variable.path`` contains
"LayerNorm" for LayerNorm parameters and ends in "bias" for biases: the optimizers' exclusion regexes
(reference defaults ``LayerNorm``, ``layer_norm``, ``bias``) rely on that.
"""

from __future__ import annotations

import math
from typing import Callable

import keras
import tensorflow as tf

LAYER_NORM_EPSILON = 1e-12


def gelu(x: tf.Tensor) -> tf.Tensor:
    """The tanh approximation of GELU used by the reference (not the exact erf form)."""
    cube = x * x * x
    return 0.5 * x * (1.0 + tf.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * cube)))


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


def dropout(x: tf.Tensor, rate: float, training: bool | None) -> tf.Tensor:
    """Inverted dropout, active only when ``training`` is true and ``rate`` > 0.

    Uses TF's stateful RNG instead of keras.layers.Dropout so that no seed-state variables enter the
    model (they would show up in checkpoints and need syncing across replicas).
    """
    if not training or rate <= 0.0:
        return x
    return tf.nn.dropout(x, rate=rate)


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
        x = tf.cast(x, self.compute_dtype)
        y = tf.tensordot(x, tf.cast(self.kernel, self.compute_dtype), axes=[[-1], [0]])
        if self.bias is not None:
            y = y + tf.cast(self.bias, self.compute_dtype)
        return self.activation(y)
