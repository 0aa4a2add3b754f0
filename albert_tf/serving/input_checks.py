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

- ``with_ranks``: what every saved function applies to its inputs first: each has the rank of its
  layout (``[batch, seq]``, ...), checked when the graph runs (``rank_is``: a signature called
  with an eager tensor of another rank reaches the graph unchecked by TensorFlow), and only then
  do the other checks and the model see it, with its rank known and its other dimensions hidden
  (``hide_shapes``: a function traced around its caller's static shapes would otherwise fail
  while its graph is built, before any check could run);
- ``token_ids_checks``: what every ids signature (the fine-tuned exports' and the hub export's)
  checks: ``same_shape`` of every input as ``input_ids``, ``positions_fit`` and the ranges of the
  ids, the mask and the segment ids (``values_in_range``); ``positions_checks``: those of MLM
  positions;
- ``Conformer``: for the saved functions that take a dict without an input signature (the TF2
  encoder convention's call, whose ``training`` argument forbids one), the given dict as the
  function expects it: missing and unknown keys and other dtypes become a failing check naming
  them (``fails``), int64 ids are cast to int32 after a check that they fit (``int32_ids``);
- ``same_shape``, ``same_rows`` (the batch agreement of text inputs), ``positions_fit`` (the
  length a model's position embeddings take), ``dimension_is``, ``values_in_range``, and ``check``,
  the assertion they are built on.
"""

from __future__ import annotations

from typing import Mapping, Sequence

import tensorflow as tf

from albert_tf.models.config import AlbertConfig

# A part of a message: text, or an integer scalar or vector tensor (written as "[2,8]").
MessagePart = str | tf.Tensor

# The axes of an input, as messages name them: ("batch", "seq") is written "[batch, seq]".
Layout = tuple[str, ...]
IDS_LAYOUT: Layout = ("batch", "seq")
TEXT_LAYOUT: Layout = ("batch",)
INT32_RANGE = (-2**31, 2**31 - 1)


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


def fails(message: str) -> tf.Operation:
    """An Assert op that always fails with ``message``: a mistake seen while a function is traced
    (a missing input, a dtype), reported when the saved function runs."""
    return tf.debugging.Assert(tf.constant(False), [message])


def gated(tensors: Mapping[str, tf.Tensor],
          checks: Sequence[tf.Operation]) -> dict[str, tf.Tensor]:
    """``tensors`` (a dict of tensors), each available only once every check has passed."""
    with tf.control_dependencies(checks):
        return {name: tf.identity(tensor) for name, tensor in tensors.items()}


def layout_text(layout: Layout) -> str:
    return f"[{', '.join(layout)}]"


def hide_shapes(tensors: Mapping[str, tf.Tensor]) -> dict[str, tf.Tensor]:
    """``tensors`` (dense) with no static shape, not even a rank. A saved function (not a
    signature) called on eager tensors is traced around its inputs' static shapes, so contradictory
    shapes (an input_mask of 11 positions for input_ids of 12, or of rank 3) would fail while that
    graph is built, in a model op, before the checks could run and name the input. Computes
    nothing."""
    return {name: tf.compat.v1.placeholder_with_default(tensor, None)
            for name, tensor in tensors.items()}


def runtime_rank(tensor: tf.Tensor) -> tf.Tensor:
    """The rank of ``tensor`` (int32 scalar) computed when the graph runs. ``tf.rank`` would be
    folded by Grappler from a signature's declared shape, which a caller's eager tensor need not
    have: the indices of the shape's (non-negative) entries hide its length from the optimizer."""
    return tf.shape(tf.where(tf.shape(tensor) >= 0), out_type=tf.int32)[0]


def rank_is(tensor: tf.Tensor, name: str, layout: Layout) -> tf.Operation:
    """``tensor`` (the input ``name``) has the rank of ``layout``, e.g. ``input_mask has shape
    [2,8,1] but must have rank 2: [batch, seq]``."""
    return check(tf.equal(runtime_rank(tensor), len(layout)), f"{name} has shape ",
                 tf.shape(tensor), f" but must have rank {len(layout)}: {layout_text(layout)}")


def with_ranks(tensors: Mapping[str, tf.Tensor],
               layouts: Mapping[str, Layout]) -> dict[str, tf.Tensor]:
    """``tensors`` behind the checks of their ranks (``layouts[name]``, see ``rank_is``), with that
    rank known to the graph and their dimensions unknown (``hide_shapes``): what every saved
    function applies to its inputs before any other check. Computes a few scalars."""
    hidden = hide_shapes(tensors)
    checked = gated(hidden, [rank_is(tensor, name, layouts[name])
                             for name, tensor in hidden.items()])
    return {name: tf.compat.v1.placeholder_with_default(tensor, [None] * len(layouts[name]))
            for name, tensor in checked.items()}


def int32_ids(tensor: tf.Tensor, name: str) -> tuple[tf.Tensor, list[tf.Operation]]:
    """An int32 or int64 input as int32, and the checks that make the cast safe (none for int32;
    for int64, that every value fits int32, so that none wraps into another valid id)."""
    if tensor.dtype == tf.int32:
        return tensor, []
    low, high = INT32_RANGE
    inside = tf.reduce_all((tensor >= low) & (tensor <= high))
    fits = check(inside, f"{name} holds values from ", tf.reduce_min(tensor), " to ",
                 tf.reduce_max(tensor), ", outside int32 (it is cast from int64 to int32)")
    return tf.cast(tensor, tf.int32), [fits]


class Conformer:
    """The inputs of a saved function that takes a dict without an input signature, as the function
    expects them: ``conformer(inputs)`` -> int32 tensors of the ranks of ``layouts`` ({name:
    layout}, in the function's order), behind checks.

    Whatever the dict a trace of the function is for, its graph answers: a missing key, a key not
    in ``layouts`` (``renamed`` may say what the caller meant, e.g. {"input_ids": "its TF2 name is
    input_word_ids"}) or an input of another dtype than int32 / int64 fails, naming them and what
    ``call`` (the function, as messages name it) takes; int64 inputs are cast after ``int32_ids``'
    check; then ``with_ranks``. A failure is decided when tracing but raised when the graph runs
    (``fails``), so the outputs have their usual structure: zeros of unknown shape stand for the
    inputs, which nothing computes from before the check has failed. The checks are functions
    shared by every trace (a function traced for many mistakes stays small); a Conformer is no
    trackable, so they are saved only as the traces' callees.
    """

    def __init__(self, layouts: Mapping[str, Layout], call: str,
                 renamed: Mapping[str, str] | None = None):
        self.layouts, self.call, self.renamed = dict(layouts), call, dict(renamed or {})

        def ranked(ids: dict[str, tf.Tensor]) -> dict[str, tf.Tensor]:
            return with_ranks(ids, self.layouts)

        self._with_ranks = tf.function(
            ranked, autograph=False,
            input_signature=[{name: tf.TensorSpec(None, tf.int32, name=name) for name in layouts}])
        self._from_int64 = {name: self._int64_function(name) for name in layouts}

    @staticmethod
    def _int64_function(name: str) -> tf.types.experimental.GenericFunction:
        def from_int64(ids: tf.Tensor) -> tf.Tensor:
            ids, checks = int32_ids(ids, name)
            return gated({name: ids}, checks)[name]

        return tf.function(from_int64, input_signature=[tf.TensorSpec(None, tf.int64, name=name)],
                           autograph=False)

    def problems(self, inputs: Mapping[str, tf.Tensor]) -> list[str]:
        """What is wrong with the keys and dtypes of ``inputs``, as messages say it."""
        problems = [f"{name} is not an input of {self.call}"
                    + (f" ({self.renamed[name]})" if name in self.renamed else "")
                    for name in inputs if name not in self.layouts]
        problems += [f"{name} is missing" for name in self.layouts if name not in inputs]
        return problems + [f"{name} has dtype {inputs[name].dtype.name} but must be int32 or int64"
                           for name in self.layouts if name in inputs
                           and inputs[name].dtype not in (tf.int32, tf.int64)]

    def __call__(self, inputs: Mapping[str, tf.Tensor]) -> dict[str, tf.Tensor]:
        problems = self.problems(inputs)
        if problems:
            expected = ", ".join(f"{name} {layout_text(layout)}"
                                 for name, layout in self.layouts.items())
            failure = fails(f"{'; '.join(problems)}: {self.call} takes int32 (or int64) "
                            f"{expected}")
            stand_ins = gated({name: tf.zeros([1] * len(layout), tf.int32)
                               for name, layout in self.layouts.items()}, [failure])
            return {name: tf.compat.v1.placeholder_with_default(
                tensor, [None] * len(self.layouts[name])) for name, tensor in stand_ins.items()}
        ids = hide_shapes({name: inputs[name] for name in self.layouts})
        return self._with_ranks({name: self._from_int64[name](tensor)
                                 if tensor.dtype == tf.int64 else tensor
                                 for name, tensor in ids.items()})


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
    the embedding's node on CPU, and a silent zero vector on GPU); the mask is 0 or 1 (another
    value would scale the attention bias: a silently wrong answer). ids_name, types_name: the keys
    of the ids and segment ids in ``ids`` (``input_word_ids``, ``input_type_ids`` in the TF2
    encoder convention), as the messages name them. The inputs' ranks are checked before
    (``with_ranks``)."""
    return [*same_shape(ids, ids_name),
            positions_fit(ids[ids_name], config.max_position_embeddings, ids_name),
            values_in_range(ids[ids_name], ids_name, 0, config.vocab_size,
                            "vocab_size of the config"),
            values_in_range(ids["input_mask"], "input_mask", 0, 2, "1 for a token, 0 for padding"),
            values_in_range(ids[types_name], types_name, 0, config.type_vocab_size,
                            "type_vocab_size of the config")]


def positions_checks(input_ids: tf.Tensor, positions: tf.Tensor, ids_name: str,
                     positions_name: str) -> list[tf.Operation]:
    """The checks of the positions of an MLM input (int32 [B, P]): a row per example of
    ``input_ids`` [B, S], every position inside the sequence, in [0, S)."""
    return [*same_rows({ids_name: input_ids, positions_name: positions}, ids_name),
            values_in_range(positions, positions_name, 0, tf.shape(input_ids)[1],
                            f"the positions of {ids_name}")]
