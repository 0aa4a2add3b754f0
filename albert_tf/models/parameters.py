"""Parameter counts of a model, split the way the paper reports them, and a training-memory estimate
(the library of ``python -m albert_tf.model_report``).

``parameter_report`` counts the variables of an encoder or a task model (embeddings, projection,
transformer, pooler, each head group the task model declares; tied weights once).
``training_memory_bytes`` is a lower-bound estimate for one device from the config alone, through
closed-form counts of the encoder and the pretraining heads.
"""

from __future__ import annotations

import math
from typing import Sequence

import keras

from albert_tf.models.config import AlbertConfig
from albert_tf.models.encoder import AlbertModel
from albert_tf.models.task_model import AlbertTaskModel


def _count(layers: keras.layers.Layer | Sequence[keras.layers.Layer] | None) -> int:
    """Parameters of the layers' variables, each variable counted once."""
    if layers is None:
        return 0
    if isinstance(layers, keras.layers.Layer):
        layers = [layers]
    variables = {id(v): v for layer in layers for v in layer.weights}
    return sum(math.prod(v.shape) for v in variables.values())


def parameter_report(model: AlbertModel | AlbertTaskModel) -> dict[str, int]:
    """{group: parameter count} of an encoder or a task model: the encoder's embeddings, projection,
    transformer and pooler, "encoder total", each head group the task model declares
    (``head_parameter_groups``), and "total". Tied weights (the MLM decoder is the word-embedding
    table) are counted once, in the embeddings."""
    encoder = model if isinstance(model, AlbertModel) else model.albert
    counts = {"embeddings": _count(encoder.embeddings),
              "embedding projection (E->H)": _count(encoder.embedding_projection),
              "transformer": _count(encoder.transformer),
              "pooler": _count(encoder.pooler)}
    counts["encoder total"] = sum(counts.values())
    heads = {} if encoder is model else model.head_parameter_groups()
    counts.update({label: _count(layers) for label, layers in heads.items()})
    counts["total"] = counts["encoder total"] + sum(_count(layers) for layers in heads.values())
    return counts


def format_parameter_report(counts: dict[str, int]) -> str:
    """One line per group: exact count and millions."""
    width = max(len(label) for label in counts)
    return "\n".join(f"{label:<{width}}  {count:>12,d}  ({count / 1e6:.2f}M)"
                     for label, count in counts.items())


def encoder_parameter_count(config: AlbertConfig) -> int:
    """Closed form of the encoder's parameters (embeddings, projection, G*K blocks, pooler)."""
    v, e, h, i = (config.vocab_size, config.embedding_size, config.hidden_size,
                  config.intermediate_size)
    embeddings = (v + config.max_position_embeddings + config.type_vocab_size) * e + 2 * e
    projection = e * h + h if e != h else 0
    block = 4 * (h * h + h) + (h * i + i) + (i * h + h) + 2 * 2 * h
    pooler = h * h + h
    return (embeddings + projection + pooler
            + config.num_hidden_groups * config.inner_group_num * block)


def heads_parameter_count(config: AlbertConfig) -> int:
    """MLM head (transform, LayerNorm, output bias; the output matrix is tied) + SOP head."""
    h, e = config.hidden_size, config.embedding_size
    return (h * e + e) + 2 * e + config.vocab_size + (2 * h + 2)


def training_memory_bytes(config: AlbertConfig, batch_size: int, seq_length: int,
                          compute_bytes: int = 4) -> dict[str, int]:
    """Rough training-memory estimate (bytes) of a pretraining step, to choose batch and precision.

    - weights + Adam/LAMB slots: 3 float32 copies of every parameter (12 bytes each), plus one
      float32 gradient (4 bytes);
    - activations kept for the backward pass, per token and per transformer block (counted L * K
      times: sharing saves parameters, not activations): the block input, Q, K, V, context,
      attention output, LayerNorm output, FFN output and LayerNorm_1 output (9 H), the FFN
      intermediate before and after the activation (2 I), attention scores and probabilities
      (2 A S), all in the compute dtype (``compute_bytes``: 4 float32, 2 bfloat16/float16).
    Ignores the embeddings' and heads' activations and framework overhead (a lower bound).
    """
    parameters = encoder_parameter_count(config) + heads_parameter_count(config)
    per_token = (9 * config.hidden_size + 2 * config.intermediate_size
                 + 2 * config.num_attention_heads * seq_length)
    blocks = config.num_hidden_layers * config.inner_group_num
    activations = per_token * seq_length * batch_size * blocks * compute_bytes
    return {"weights_and_optimizer": 16 * parameters, "activations": activations,
            "total": 16 * parameters + activations}
