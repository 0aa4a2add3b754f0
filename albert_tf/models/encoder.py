"""The ALBERT encoder as Keras 3 layers, numerically identical to the reference's forward pass.

Public API:
- ``AlbertModel(config)`` called on ``{"input_ids", "input_mask", "segment_ids"}`` (int32 [B, S];
  mask and segments optional) returns ``sequence_output`` [B, S, H], ``pooled_output`` [B, H] and
  ``encoder_outputs`` (a list of L*K tensors [B, S, H], one per layer and inner group).
- ``AlbertPretrainingModel(config)`` (in albert_tf/tasks/pretraining/model.py) adds the MLM and SOP
  heads; every task model builds on ``AlbertTaskModel`` (albert_tf/models/task_model.py).

Run ``python -m albert_tf.model_report --albert_config_file=...`` for a parameter report.
"""

from __future__ import annotations

import math
from typing import Mapping

import keras
import tensorflow as tf

from albert_tf.models.config import AlbertConfig
from albert_tf.models.layers import (Dense, LayerNorm, dropout, truncated_normal,
                                     weights_cast_once)

ATTENTION_MASK_ADDER = -10000.0
# The int [B, S] inputs of the encoder, and of every task model and serving signature built on it.
INPUT_NAMES = ("input_ids", "input_mask", "segment_ids")


class AlbertEmbeddings(keras.layers.Layer):
    """Factorized embeddings in E-space: word + token type + position, then LayerNorm and dropout.

    Weights: ``word_embeddings`` [V, E], ``token_type_embeddings`` [T, E], ``position_embeddings``
    [P, E], ``LayerNorm`` (gamma/beta [E]). Inputs int32 [B, S]; output [B, S, E].
    """

    def __init__(self, config: AlbertConfig, name: str = "embeddings", **kwargs):
        super().__init__(name=name, **kwargs)
        init = truncated_normal(config.initializer_range)
        self.max_position_embeddings = config.max_position_embeddings
        self.dropout_rate = config.hidden_dropout_prob
        self.word_embeddings = self.add_weight(
            shape=(config.vocab_size, config.embedding_size), name="word_embeddings", initializer=init)
        self.token_type_embeddings = self.add_weight(
            shape=(config.type_vocab_size, config.embedding_size), name="token_type_embeddings",
            initializer=init)
        self.position_embeddings = self.add_weight(
            shape=(config.max_position_embeddings, config.embedding_size),
            name="position_embeddings", initializer=init)
        self.layer_norm = LayerNorm(config.embedding_size, name="LayerNorm")
        self.built = True

    def call(self, input_ids: tf.Tensor, segment_ids: tf.Tensor,
             training: bool | None = None) -> tf.Tensor:
        seq_length = input_ids.shape[1]
        if seq_length is not None and seq_length > self.max_position_embeddings:
            raise ValueError(f"Sequence length {seq_length} exceeds max_position_embeddings "
                             f"({self.max_position_embeddings}) of the ALBERT config.")
        dtype = self.compute_dtype
        words = tf.gather(tf.cast(self.word_embeddings, dtype), input_ids)
        types = tf.gather(tf.cast(self.token_type_embeddings, dtype), segment_ids)
        positions = tf.cast(self.position_embeddings, dtype)[:tf.shape(input_ids)[1]]
        embedded = words + types + positions[tf.newaxis]
        return dropout(self.layer_norm(embedded), self.dropout_rate, training)


def attention_mask_adder(input_mask: tf.Tensor) -> tf.Tensor:
    """int [B, S] mask (1 real, 0 pad) -> float32 [B, 1, 1, S] adder: 0 for real keys, -10000 for pads."""
    mask = tf.cast(input_mask, tf.float32)[:, tf.newaxis, tf.newaxis, :]
    return (1.0 - mask) * ATTENTION_MASK_ADDER


# The sub-layers of a block's attention part and of its feed-forward part (each with its LayerNorm).
ATTENTION_PARTS = ("query", "key", "value", "attention_output", "attention_layer_norm")
FFN_PARTS = ("ffn_intermediate", "ffn_output", "ffn_layer_norm")


class AttentionFFNBlock(keras.layers.Layer):
    """One post-LN transformer block, the reference's ``inner_group_{k}``.

    attention (scale 1/sqrt(D), mask adder -10000 on padded keys, softmax in float32, probs dropout)
    -> output projection -> dropout -> LayerNorm(+input) -> FFN(hidden_act) -> dropout ->
    LayerNorm_1(+attention output). Input [B, S, H] and int input_mask [B, S]; output [B, S, H].
    (The mask stays an int tensor: Keras would autocast a float adder to the compute dtype.)
    Attention kernels are stored 2-D [H, A*D] exactly as in the reference checkpoints.

    ``attention_of`` / ``ffn_of``: a block whose attention (``ATTENTION_PARTS``) / feed-forward
    (``FFN_PARTS``) layers this block uses instead of its own (cross-layer sharing of one part).
    """

    def __init__(self, config: AlbertConfig, name: str,
                 attention_of: AttentionFFNBlock | None = None,
                 ffn_of: AttentionFFNBlock | None = None, **kwargs):
        super().__init__(name=name, **kwargs)
        hidden, init_range = config.hidden_size, config.initializer_range
        self.num_heads = config.num_attention_heads
        self.head_size = config.head_size
        self.hidden_dropout = config.hidden_dropout_prob
        self.attention_dropout = config.attention_probs_dropout_prob
        if attention_of is not None:
            for part in ATTENTION_PARTS:
                setattr(self, part, getattr(attention_of, part))
        else:
            self.query = Dense(hidden, hidden, init_range, name="query")
            self.key = Dense(hidden, hidden, init_range, name="key")
            self.value = Dense(hidden, hidden, init_range, name="value")
            self.attention_output = Dense(hidden, hidden, init_range, name="attention_output")
            self.attention_layer_norm = LayerNorm(hidden, name="LayerNorm")
        if ffn_of is not None:
            for part in FFN_PARTS:
                setattr(self, part, getattr(ffn_of, part))
        else:
            self.ffn_intermediate = Dense(hidden, config.intermediate_size, init_range,
                                          activation=config.hidden_act, name="ffn_intermediate")
            self.ffn_output = Dense(config.intermediate_size, hidden, init_range,
                                    name="ffn_output")
            self.ffn_layer_norm = LayerNorm(hidden, name="LayerNorm_1")
        self.built = True

    def _split_heads(self, x: tf.Tensor) -> tf.Tensor:
        """[B, S, H] -> [B, A, S, D]."""
        batch, seq = tf.shape(x)[0], tf.shape(x)[1]
        x = tf.reshape(x, [batch, seq, self.num_heads, self.head_size])
        return tf.transpose(x, [0, 2, 1, 3])

    def call(self, hidden: tf.Tensor, input_mask: tf.Tensor, training: bool | None = None,
             first_only: bool = False) -> tf.Tensor:
        """[B, S, H] -> [B, S, H]; with ``first_only`` only position 0's output, [B, 1, H] (its
        query attends to every key as usual; the other positions' queries, attention outputs and
        feed-forward passes are not computed)."""
        hidden = tf.cast(hidden, self.compute_dtype)
        queries = hidden[:, :1] if first_only else hidden
        q = self._split_heads(self.query(queries))
        k = self._split_heads(self.key(hidden))
        v = self._split_heads(self.value(hidden))
        scores = tf.matmul(q, k, transpose_b=True) * (1.0 / math.sqrt(self.head_size))
        scores = tf.cast(scores, tf.float32) + attention_mask_adder(input_mask)
        probs = tf.cast(tf.nn.softmax(scores, axis=-1), self.compute_dtype)
        probs = dropout(probs, self.attention_dropout, training)
        context = tf.transpose(tf.matmul(probs, v), [0, 2, 1, 3])
        context = tf.reshape(context, tf.shape(queries))
        attended = dropout(self.attention_output(context), self.hidden_dropout, training)
        attended = tf.cast(self.attention_layer_norm(attended + queries), self.compute_dtype)
        ffn = self.ffn_output(self.ffn_intermediate(attended))
        ffn = dropout(ffn, self.hidden_dropout, training)
        return self.ffn_layer_norm(ffn + attended)


class AlbertTransformer(keras.layers.Layer):
    """The transformer: L layers of K blocks; layer l belongs to group int(l * G / L).

    ``config.cross_layer_sharing`` says what the layers of a group share with the group's first
    layer: ``all`` their whole blocks (the reference: G*K blocks), ``attention`` or ``ffn`` one
    part of each block (the other part is the layer's own), ``none`` nothing (L*K blocks).
    ``layer_blocks[l]``: the K blocks layer l runs; ``groups[g]``: those of group g's first layer.
    Input [B, S, H] and int input_mask [B, S]; returns the list of L*K block outputs, each
    [B, S, H] (with ``first_only_last``: the last one [B, 1, H], position 0 alone).
    Each block a layer creates is also an attribute (``group_{variable_group(l)}_inner_group_{k}``)
    so tf.train.Checkpoint tracks it (Keras 3 lists of layers are not checkpoint dependencies).
    """

    def __init__(self, config: AlbertConfig, name: str = "transformer", **kwargs):
        super().__init__(name=name, **kwargs)
        self.num_layers = config.num_hidden_layers
        self.num_groups = config.num_hidden_groups
        self.sharing = config.cross_layer_sharing
        self.groups: list[list[AttentionFFNBlock]] = []
        self.layer_blocks: list[list[AttentionFFNBlock]] = []
        for layer_index in range(self.num_layers):
            group = self.group_index(layer_index)
            first = self.groups[group] if group < len(self.groups) else None
            if first is not None and config.shares("attention") and config.shares("ffn"):
                self.layer_blocks.append(first)
                continue
            blocks = []
            for k in range(config.inner_group_num):
                block = AttentionFFNBlock(
                    config, name=f"inner_group_{k}",
                    attention_of=first[k] if first and config.shares("attention") else None,
                    ffn_of=first[k] if first and config.shares("ffn") else None)
                setattr(self, f"group_{self.variable_group(layer_index)}_inner_group_{k}", block)
                blocks.append(block)
            if first is None:
                self.groups.append(blocks)
            self.layer_blocks.append(blocks)
        self.built = True

    def group_index(self, layer_index: int) -> int:
        """The reference's layer -> group mapping, int(l / L * G)."""
        return int(layer_index / self.num_layers * self.num_groups)

    def variable_group(self, layer_index: int) -> int:
        """n in the ``group_{n}`` scope of the variables layer l creates: its group (the reference)
        under ``all``; under the other strategies the layer itself, so a shared part is named
        after the first layer that runs it and a layer's own part after that layer."""
        return self.group_index(layer_index) if self.sharing == "all" else layer_index

    def call(self, hidden: tf.Tensor, input_mask: tf.Tensor, training: bool | None = None,
             first_only_last: bool = False) -> list[tf.Tensor]:
        outputs = []
        blocks = [block for layer in self.layer_blocks for block in layer]
        for index, block in enumerate(blocks):
            hidden = block(hidden, input_mask, training=training,
                           first_only=first_only_last and index == len(blocks) - 1)
            outputs.append(hidden)
        return outputs


class AlbertModel(keras.Model):
    """The ALBERT encoder (the reference's ``bert`` scope): embeddings, projection, transformer, pooler.

    Call on a dict with ``input_ids`` int [B, S] and optionally ``input_mask`` (default all ones) and
    ``segment_ids`` (default zeros). Returns a dict:
    ``sequence_output`` [B, S, H], ``pooled_output`` [B, H], ``encoder_outputs`` list of L*K [B, S, H].
    Dropout runs only with ``training=True``. ``first_token_only``: the last block computes position
    0 ([CLS]) alone, so ``sequence_output`` and the last of ``encoder_outputs`` are [B, 1, H]: all a
    head that reads the pooled output needs, for about 1/(L*K) less work (the other positions of
    the last block feed nothing that head reads).
    """

    def __init__(self, config: AlbertConfig, name: str = "albert", **kwargs):
        super().__init__(name=name, **kwargs)
        self.config = config
        self.embeddings = AlbertEmbeddings(config)
        self.embedding_projection = (
            Dense(config.embedding_size, config.hidden_size, config.initializer_range,
                  name="embedding_hidden_mapping_in")
            if config.embedding_size != config.hidden_size else None)
        self.transformer = AlbertTransformer(config)
        self.pooler = Dense(config.hidden_size, config.hidden_size, config.initializer_range,
                            activation="tanh", name="pooler")
        self.built = True

    def get_embedding_table(self) -> keras.Variable:
        """The [V, E] word-embedding table (tied to the MLM output layer)."""
        return self.embeddings.word_embeddings

    def call(self, inputs: Mapping[str, tf.Tensor], training: bool | None = None,
             first_token_only: bool = False) -> dict[str, tf.Tensor | list[tf.Tensor]]:
        if "input_ids" not in inputs:
            raise KeyError(f"AlbertModel inputs need 'input_ids'; got keys {sorted(inputs)}.")
        input_ids = tf.cast(inputs["input_ids"], tf.int32)
        input_mask = inputs.get("input_mask")
        input_mask = tf.ones_like(input_ids) if input_mask is None else input_mask
        segment_ids = inputs.get("segment_ids")
        segment_ids = tf.zeros_like(input_ids) if segment_ids is None else tf.cast(segment_ids,
                                                                                    tf.int32)
        with weights_cast_once():
            hidden = self.embeddings(input_ids, segment_ids, training=training)
            if self.embedding_projection is not None:
                hidden = self.embedding_projection(hidden)
            encoder_outputs = self.transformer(hidden, tf.cast(input_mask, tf.int32),
                                               training=training, first_only_last=first_token_only)
            sequence_output = encoder_outputs[-1]
            pooled_output = self.pooler(sequence_output[:, 0])
        return {"sequence_output": sequence_output, "pooled_output": pooled_output,
                "encoder_outputs": encoder_outputs}
