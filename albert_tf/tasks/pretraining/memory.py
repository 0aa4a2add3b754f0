"""A lower-bound estimate of the memory of one pretraining step on one device, from the config
alone (``python -m albert_tf.model_report`` prints it), to choose the batch size and precision.
"""

from __future__ import annotations

from albert_tf.models.config import AlbertConfig
from albert_tf.models.parameters import encoder_parameter_count


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
