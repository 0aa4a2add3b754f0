"""In-graph checks of a serving signature's inputs, failing with a message that names the input.

A SavedModel's signatures run wherever it is loaded (TF Serving, ``tf.saved_model.load`` in a
process without albert_tf), so the checks are ops of the saved graph (``tf.debugging.Assert``):
a wrong input is an ``InvalidArgumentError`` whose message names it and says what was expected,
e.g. ``input_mask has shape [2,7] but input_ids has [2,8]: they must be equal``. Without them a
wrong input ends deep in the model (a failed Reshape or GatherV2), or is broadcast and silently
answered (an ``input_mask`` of shape [B, 1] acts as all ones).

Each check returns its Assert op; ``gated(tensors, checks)`` returns the tensors behind the checks
(control dependencies), so that no op computed from them runs, and fails with a graph-internal
message, before the checks have passed. A check costs a few scalar ops per call (a range check a
pass over its input too): little beside the model.

- ``token_ids_checks``: what every ids signature (the fine-tuned exports' and the hub export's)
  checks: ``same_shape`` of every input as ``input_ids``, ``positions_fit`` and the ranges of the
  ids and segment ids (``values_in_range``); ``positions_checks``: those of MLM positions;
- ``with_dynamic_shapes``: what a saved function applies to its inputs before the checks, so that
  they run even on inputs of contradictory static shapes;
- ``same_shape``, ``same_rows`` (the batch agreement of text inputs), ``positions_fit`` (the
  length a model's position embeddings take), ``dimension_is``, ``values_in_range``, and ``check``,
  the assertion they are built on.
"""

from __future__ import annotations

from typing import Mapping, Sequence

import tensorflow as tf

from albert_tf.models.config import AlbertConfig

# A part of a message: text, or an int32 scalar or vector tensor (written as "[2,8]").
MessagePart = str | tf.Tensor


def _text(part: MessagePart) -> tf.Tensor | str:
    if isinstance(part, str):
        return part
    values = tf.strings.as_string(part)
    if part.shape.rank == 0:
        return values
    return tf.strings.join(["[", tf.strings.reduce_join(values, separator=","), "]"])


def check(ok: tf.Tensor, *message: MessagePart) -> tf.Operation:
    """An Assert op failing unless the bool scalar ``ok``, with the message joined from ``message``
    (texts and int tensors)."""
    return tf.debugging.Assert(ok, [tf.strings.join([_text(part) for part in message])])


def gated(tensors: Mapping[str, tf.Tensor],
          checks: Sequence[tf.Operation]) -> dict[str, tf.Tensor]:
    """``tensors`` (a dict of tensors), each available only once every check has passed."""
    with tf.control_dependencies(checks):
        return {name: tf.identity(tensor) for name, tensor in tensors.items()}


def with_dynamic_shapes(tensors: Mapping[str, tf.Tensor]) -> dict[str, tf.Tensor]:
    """``tensors`` (dense) with only their rank known to the graph. A saved function (not a
    signature) called on eager tensors is traced around its inputs' static shapes, so contradictory
    shapes (an input_mask of 11 positions for input_ids of 12) would fail while that graph is built,
    in a model op, before the checks could run and name the input. Computes nothing."""
    return {name: tf.compat.v1.placeholder_with_default(tensor, [None] * tensor.shape.rank)
            for name, tensor in tensors.items()}


def _rows(tensor: tf.Tensor | tf.RaggedTensor) -> tf.Tensor:
    if isinstance(tensor, tf.RaggedTensor):
        return tf.cast(tensor.nrows(), tf.int32)
    return tf.shape(tensor)[0]


def same_shape(tensors: Mapping[str, tf.Tensor], reference: str) -> list[tf.Operation]:
    """Every tensor has the shape of ``tensors[reference]`` (same rank: the signature's specs)."""
    expected = tf.shape(tensors[reference])
    return [check(tf.reduce_all(tf.equal(tf.shape(tensor), expected)),
                  f"{name} has shape ", tf.shape(tensor), f" but {reference} has ", expected,
                  ": they must be equal")
            for name, tensor in tensors.items() if name != reference]


def same_rows(tensors: Mapping[str, tf.Tensor | tf.RaggedTensor],
              reference: str) -> list[tf.Operation]:
    """Every tensor has as many rows (first dimension) as ``tensors[reference]``: one per
    example."""
    expected = _rows(tensors[reference])
    return [check(tf.equal(_rows(tensor), expected), f"{name} has ", _rows(tensor),
                  f" rows but {reference} has ", expected, ": give one row per example to each")
            for name, tensor in tensors.items() if name != reference]


def positions_fit(input_ids: tf.Tensor, max_positions: int,
                  name: str = "input_ids") -> tf.Operation:
    """The last dimension of ``input_ids`` (the input ``name``: its positions) lies in
    [1, max_positions]: the position embeddings of the model's config."""
    length = tf.shape(input_ids)[-1]
    return check((length >= 1) & (length <= max_positions), f"{name} has ", length,
                 f" positions but this model takes 1 to {max_positions} "
                 "(max_position_embeddings); truncate longer inputs as the features do")


def dimension_is(tensor: tf.Tensor, name: str, axis: int, size: int,
                 requirement: str) -> tf.Operation:
    """Dimension ``axis`` of ``tensor`` (the input ``name``) is ``size``; the message is
    ``requirement`` followed by what was given."""
    given = tf.shape(tensor)
    return check(tf.equal(given[axis], size), requirement, ", got ", given[axis],
                 f" ({name} has shape ", given, ")")


def values_in_range(tensor: tf.Tensor, name: str, low: int | tf.Tensor, high: int | tf.Tensor,
                    meaning: str) -> tf.Operation:
    """Every value of ``tensor`` (the int32 input ``name``) lies in [low, high); ``meaning`` says
    what the range is."""
    inside = tf.reduce_all((tensor >= low) & (tensor < high))
    return check(inside, f"{name} must lie in [", tf.convert_to_tensor(low, tf.int32), ", ",
                 tf.convert_to_tensor(high, tf.int32), f") ({meaning}) but holds values from ",
                 tf.reduce_min(tensor), " to ", tf.reduce_max(tensor))


def token_ids_checks(ids: Mapping[str, tf.Tensor], config: AlbertConfig,
                     ids_name: str = "input_ids",
                     types_name: str = "segment_ids") -> list[tf.Operation]:
    """The checks of every ids signature: each input (``input_mask``, ``segment_ids``, ...) has the
    shape of ``input_ids``, whose positions fit the model (``positions_fit``); the ids lie in the
    config's vocabulary and the segment ids in its token types (an id outside is an error naming
    the embedding's node on CPU, and a silent zero vector on GPU). ids_name, types_name: the keys
    of the ids and segment ids in ``ids`` (``input_word_ids``, ``input_type_ids`` in the TF2
    encoder convention), as the messages name them."""
    return [*same_shape(ids, ids_name),
            positions_fit(ids[ids_name], config.max_position_embeddings, ids_name),
            values_in_range(ids[ids_name], ids_name, 0, config.vocab_size,
                            "vocab_size of the config"),
            values_in_range(ids[types_name], types_name, 0, config.type_vocab_size,
                            "type_vocab_size of the config")]


def positions_checks(input_ids: tf.Tensor, positions: tf.Tensor, ids_name: str,
                     positions_name: str) -> list[tf.Operation]:
    """The checks of the positions of an MLM input (int32 [B, P]): a row per example of
    ``input_ids`` [B, S], every position inside the sequence, in [0, S)."""
    return [*same_rows({ids_name: input_ids, positions_name: positions}, ids_name),
            values_in_range(positions, positions_name, 0, tf.shape(input_ids)[1],
                            f"the positions of {ids_name}")]
