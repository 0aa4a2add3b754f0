"""Parameter counts of a model, split the way the paper reports them (the report of
``python -m albert_tf.model_report``).

``parameter_report`` counts the variables of an encoder or a task model (embeddings, projection,
transformer, pooler, each head group the task model declares; tied weights once);
``encoder_parameter_count`` is the encoder's count in closed form, from the config alone.
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
    """Closed form of the encoder's parameters: embeddings, projection, pooler and the transformer's
    attention and feed-forward parts, K per group for a part the layers of a group share
    (``cross_layer_sharing``), K per layer otherwise."""
    v, e, h, i = (config.vocab_size, config.embedding_size, config.hidden_size,
                  config.intermediate_size)
    embeddings = (v + config.max_position_embeddings + config.type_vocab_size) * e + 2 * e
    projection = e * h + h if e != h else 0
    attention = 4 * (h * h + h) + 2 * h  # Q, K, V, output projection, LayerNorm
    ffn = (h * i + i) + (i * h + h) + 2 * h  # two dense layers, LayerNorm_1
    pooler = h * h + h

    def copies(part: str) -> int:
        sets = config.num_hidden_groups if config.shares(part) else config.num_hidden_layers
        return sets * config.inner_group_num

    return (embeddings + projection + pooler
            + copies("attention") * attention + copies("ffn") * ffn)


def paper_parameter_count(config: AlbertConfig) -> int:
    """The parameters as the paper counts them: embeddings + transformer (no pooler, no heads)."""
    return encoder_parameter_count(config) - (config.hidden_size ** 2 + config.hidden_size)
