"""Early-exit inference in the graph: the stopping rules of
albert_tf/tasks/classification/early_exit.py run inside a ``tf.while_loop`` over the encoder's
layers, so that a batch stops computing when every one of its examples has exited (at batch 1:
when the example has).

``early_exit_logits(model, inputs, policy)`` runs the embeddings, then per iteration one layer
(its K blocks), the pooler on its [CLS] vector and that layer's internal classifier
(``AlbertClassifierModel.layer_heads``), and updates each example's streak of unchanged
predictions; an example exits after layer j when its streak reaches the patience, when the
classifier gives its class at least the policy's confidence (if it has one), or when j is the
``ExitPolicy``'s last layer, and keeps the logits of that layer; a request's own patience or
confidence replaces the policy's rule. The loop ends when every example
has exited. Under ALBERT's sharing (``cross_layer_sharing="all"``, one group) every iteration
applies the same block; with several groups or another sharing a ``tf.switch_case`` picks the
layer's blocks. Examples that exited early in a batch of several still ride along (their rows are
computed until the last one exits): the saving is per batch, all of it at batch 1.

``fixed_depth_logits(model, inputs, layers)`` is the fixed depth k unrolled in Python (what a
TFLite model, whose graph is traced for one depth, runs, and a policy that cannot stop early),
its last layer for [CLS] alone.
"""

from __future__ import annotations

from typing import Mapping

import tensorflow as tf

from albert_tf.models.layers import weights_cast_once
from albert_tf.tasks.classification.early_exit import ExitPolicy
from albert_tf.tasks.classification.model import AlbertClassifierModel


def _embedded(model: AlbertClassifierModel, inputs: Mapping[str, tf.Tensor]) -> tf.Tensor:
    """The encoder's input to its first layer [B, S, H] (embeddings, projected to H)."""
    albert = model.albert
    hidden = albert.embeddings(tf.cast(inputs["input_ids"], tf.int32),
                               tf.cast(inputs["segment_ids"], tf.int32), training=False)
    if albert.embedding_projection is not None:
        hidden = albert.embedding_projection(hidden)
    return hidden


def _run_blocks(blocks, hidden: tf.Tensor, input_mask: tf.Tensor) -> tf.Tensor:
    """One layer's blocks on [B, S, H]; float32 out (a block casts its input to its compute dtype
    first, so a mixed-precision loop keeps one dtype)."""
    for block in blocks:
        hidden = block(hidden, input_mask, training=False)
    return tf.cast(hidden, tf.float32)


def _layer_logits(model: AlbertClassifierModel, hidden: tf.Tensor, kernel: tf.Tensor,
                  bias: tf.Tensor) -> tf.Tensor:
    """An internal classifier on a layer's output: float32 [B, C], as ``ClassifierHead``."""
    pooled = tf.cast(model.albert.pooler(hidden[:, 0]), tf.float32)
    return tf.matmul(pooled, kernel, transpose_b=True) + bias


def fixed_depth_logits(model: AlbertClassifierModel, inputs: Mapping[str, tf.Tensor],
                       layers: int) -> tf.Tensor:
    """float32 [B, C]: layer ``layers``' internal classifier, computing only those layers, and
    the last block of the last of them for [CLS] alone ([B, 1, H]: all its classifier reads), as
    the ordinary model's forward pass does (``AlbertModel``'s ``first_token_only``); each weight
    read (or cast) once for all layers (``weights_cast_once``). At full depth this is the
    ordinary model's computation, so a straight pass serves at its speed."""
    input_mask = tf.cast(inputs["input_mask"], tf.int32)
    blocks = [block for layer in model.albert.transformer.layer_blocks[:layers]
              for block in layer]
    with weights_cast_once():
        hidden = _embedded(model, inputs)
        for index, block in enumerate(blocks):
            hidden = block(hidden, input_mask, training=False,
                           first_only=index == len(blocks) - 1)
        head = model.layer_heads()[layers - 1]
        return _layer_logits(model, tf.cast(hidden, tf.float32), head.output_weights,
                             head.output_bias)


def early_exit_logits(model: AlbertClassifierModel, inputs: Mapping[str, tf.Tensor],
                      policy: ExitPolicy, patience: tf.Tensor | None = None,
                      confidence: tf.Tensor | None = None) -> tuple[tf.Tensor, tf.Tensor]:
    """(logits float32 [B, C] at each example's exit layer, that layer int32 [B], 1-based).

    inputs: ``input_ids``, ``input_mask``, ``segment_ids`` int [B, S]. policy: how to stop
    (``ExitPolicy``; its max_layers bounds every rule); patience: an int32 scalar (>= 1), or
    confidence: a float32 scalar in (0, 1) (a classification only), instead of the policy's
    rule: the request stops by that rule alone.

    A policy that cannot stop before its max_layers k (``ExitPolicy.can_stop_early``: no
    confidence and a patience of at least k - 1; after layer j the streak of unchanged
    predictions is at most j - 1 long, so a patience p stops no earlier than layer p + 1), given
    no rule of the request's, runs its k layers in one straight pass (``fixed_depth_logits``)
    instead of the loop, whose bookkeeping per layer would make, e.g., a full-depth policy
    slower than the ordinary model.
    """
    heads = model.layer_heads()
    if not heads:
        raise ValueError("early_exit_logits needs a model built with early_exit")
    if patience is not None and confidence is not None:
        raise ValueError("a request stops by a patience or by a confidence, not both")
    if confidence is not None and model.is_regression:
        raise ValueError("a confidence rule for a regression, which has no class probabilities")
    requested = patience is not None or confidence is not None
    if not requested and not policy.can_stop_early:
        logits = tf.cast(fixed_depth_logits(model, inputs, policy.max_layers), tf.float32)
        return logits, tf.fill([tf.shape(logits)[0]], tf.constant(policy.max_layers, tf.int32))
    kernels = tf.stack([tf.convert_to_tensor(head.output_weights) for head in heads])  # [L, C, H]
    biases = tf.stack([tf.convert_to_tensor(head.output_bias) for head in heads])  # [L, C]
    input_mask = tf.cast(inputs["input_mask"], tf.int32)
    # Only the rules that can stop an example before max_layers are traced: a confidence-only
    # policy (or request) carries no streak, a patience request (or policy) without confidence
    # computes no probabilities: at batch 1 each op of the loop's body costs a few microseconds,
    # which a small model's layer does not dwarf.
    max_layers, regression_threshold = policy.max_layers, policy.regression_threshold
    if requested:
        by_patience, by_confidence = patience is not None, confidence is not None
    else:
        by_patience = policy.patience_can_stop_early
        by_confidence = policy.confidence is not None and not model.is_regression
    patience = tf.cast(policy.patience if patience is None else patience, tf.int32)
    if by_confidence:
        confidence = tf.cast(policy.confidence if confidence is None else confidence, tf.float32)
    # The distinct block lists the layers run (one under ALBERT's sharing), and each layer's.
    distinct, branch_of_layer = [], []
    for blocks in model.albert.transformer.layer_blocks:
        key = [index for index, known in enumerate(distinct)
               if len(known) == len(blocks) and all(a is b for a, b in zip(known, blocks))]
        if not key:
            distinct.append(blocks)
        branch_of_layer.append(key[0] if key else len(distinct) - 1)
    branch_table = tf.constant(branch_of_layer, tf.int32)

    def run_layer(layer: tf.Tensor, hidden: tf.Tensor) -> tf.Tensor:
        if len(distinct) == 1:
            return _run_blocks(distinct[0], hidden, input_mask)
        return tf.switch_case(tf.gather(branch_table, layer), [
            (lambda blocks=blocks: _run_blocks(blocks, hidden, input_mask))
            for blocks in distinct])

    hidden = tf.cast(_embedded(model, inputs), tf.float32)
    batch = tf.shape(hidden)[0]
    is_regression = model.is_regression
    state = {"layer": tf.constant(0, tf.int32), "hidden": hidden,
             "done": tf.zeros([batch], tf.bool),  # exited
             "exits": tf.zeros([batch], tf.int32),  # exit layer
             "logits": tf.zeros([batch, model.num_labels], tf.float32)}  # at the exit layer
    if by_patience:
        state["previous"] = tf.zeros([batch], tf.float32)  # the last class (as float) or score
        state["streak"] = tf.zeros([batch], tf.int32)  # of unchanged predictions

    def not_done(state):
        return tf.logical_and(state["layer"] < max_layers,
                              tf.logical_not(tf.reduce_all(state["done"])))

    def step(state):
        layer = state["layer"]
        hidden = run_layer(layer, state["hidden"])
        current = _layer_logits(model, hidden, tf.gather(kernels, layer),
                                tf.gather(biases, layer))
        stops = layer + 1 >= max_layers
        new = {}
        if by_patience:
            if is_regression:
                value = current[:, 0]
                same = tf.abs(value - state["previous"]) < regression_threshold
            else:
                value = tf.cast(tf.argmax(current, axis=-1, output_type=tf.int32), tf.float32)
                same = tf.equal(value, state["previous"])
            streak = tf.where(tf.logical_and(same, layer > 0), state["streak"] + 1, 0)
            new.update(previous=value, streak=streak)
            stops = tf.logical_or(stops, streak >= patience)
        if by_confidence:
            sure = tf.reduce_max(tf.nn.softmax(current, axis=-1), axis=-1) >= confidence
            stops = tf.logical_or(stops, sure)
        exiting = tf.logical_and(tf.logical_not(state["done"]), stops)
        new.update(layer=layer + 1, hidden=hidden, done=tf.logical_or(state["done"], exiting),
                   exits=tf.where(exiting, layer + 1, state["exits"]),
                   logits=tf.where(exiting[:, tf.newaxis], current, state["logits"]))
        return (new,)

    final = tf.while_loop(not_done, step, (state,))[0]
    return final["logits"], final["exits"]
