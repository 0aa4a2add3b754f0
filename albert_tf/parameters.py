"""Parameter counts of a model, split the way the paper reports them."""

from __future__ import annotations

import math

import keras

from albert_tf.checkpoints import tf1_variable_map
from albert_tf.config import AlbertConfig

# (group label, reference-name prefix); first match wins, anything else is a task head.
_GROUPS = (
    ("embeddings", "bert/embeddings/"),
    ("embedding projection (E->H)", "bert/encoder/embedding_hidden_mapping_in/"),
    ("transformer", "bert/encoder/transformer/"),
    ("pooler", "bert/pooler/"),
    ("MLM head (excluding tied embeddings)", "cls/predictions/"),
    ("SOP head", "cls/seq_relationship/"),
)
_ENCODER_GROUPS = ("embeddings", "embedding projection (E->H)", "transformer", "pooler")


def parameter_report(model: keras.Model) -> dict[str, int]:
    """{group: parameter count} plus "encoder total" and "total"; tied weights counted once."""
    counts = {label: 0 for label, _ in _GROUPS}
    counts["task heads"] = 0
    for name, variable in tf1_variable_map(model).items():
        label = next((label for label, prefix in _GROUPS if name.startswith(prefix)), "task heads")
        counts[label] += math.prod(variable.shape)
    counts["encoder total"] = sum(counts[label] for label in _ENCODER_GROUPS)
    counts["total"] = sum(v for k, v in counts.items() if k != "encoder total")
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
