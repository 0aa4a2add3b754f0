"""Batches padded to their own longest example (or to a fixed set of lengths), not to max_seq_length.

Every fine-tuning record is padded to ``max_seq_length`` (S) when it is written, as the reference
does; most of a batch of short texts is then padding, and the encoder spends most of its work on it.
``LengthBuckets`` cuts each parsed batch back to the shortest allowed length that holds its longest
example (its last position with ``input_mask`` 1), for every feature of length S the task names.

Why this changes no result: padding sits after the real tokens, padded keys get the attention mask
adder (-10000, whose exp is exactly 0 in float32), and every task's output of a real example
reads real positions only (the [CLS] position, a token's own position, or start/end logits masked by
``p_mask`` in SQuAD v2), so the outputs of the real positions are those of the padded-to-S batch up
to float rounding. SQuAD v1.1 is the exception: the reference's v1 loss and n-best lists take their
softmax and ranking over all S positions, padding included, so its batches keep length S.

Which lengths (``bucket_lengths``): without XLA a batch's length is a dynamic dimension of one
traced graph, so every length 1..S is allowed (``exact``) and a batch carries no padding beyond its
longest example, as Hugging Face's dynamic padding. XLA (--use_xla) compiles once per shape it
meets, so there the lengths are a small fixed set: multiples of 8 up to 64, 16 up to 128, 32 up to
256, 64 beyond, each at most a quarter longer than the one below it. (A TPU keeps length S: its
training loop is compiled for one input shape.)

``group_by_length`` (``--group_by_length``): the records of each chunk of ``GROUP_CHUNK_BATCHES``
training batches sorted by length and cut into batches, whose order within the chunk is shuffled
(seeded), so that most batches hold examples of nearly one length (as Hugging Face's
LengthGroupedSampler). It changes which examples share a batch, hence the training trajectory; it is
off by default. ``example_lengths`` also orders the evaluation chunks
(albert_tf/training/input_pipeline.py), which changes no output.
"""

from __future__ import annotations

import dataclasses
from typing import Callable, Sequence

import tensorflow as tf

from albert_tf.training.task import Features

# The feature whose 1s mark the real positions of every task's records.
MASK_FEATURE = "input_mask"
# The training batches of one chunk that --group_by_length sorts by length (Hugging Face's
# LengthGroupedSampler uses 50 as well).
GROUP_CHUNK_BATCHES = 50
# (largest length, step below it): the bucket lengths are the multiples of the step of each range.
_STEPS = ((64, 8), (128, 16), (256, 32))
_LARGE_STEP = 64


def bucket_lengths(max_seq_length: int, exact: bool = False) -> tuple[int, ...]:
    """The lengths a batch may be padded to, ascending, ending with ``max_seq_length``: with
    ``exact`` every length 1..S; else multiples of 8 up to 64, of 16 up to 128, of 32 up to 256,
    of 64 beyond (e.g. S 128: 8, 16, .., 64, 80, 96, 112, 128: 12 lengths; S 512: 20)."""
    if exact:
        return tuple(range(1, max_seq_length + 1))
    lengths, start = [], 0
    for end, step in (*_STEPS, (max_seq_length, _LARGE_STEP)):
        lengths.extend(range(start + step, min(end, max_seq_length) + 1, step))
        start = max(start, end)
        if start >= max_seq_length:
            break
    if not lengths or lengths[-1] != max_seq_length:
        lengths.append(max_seq_length)
    return tuple(lengths)


def example_lengths(features: Features) -> tf.Tensor:
    """int32 [B]: per example, 1 + the last position whose ``input_mask`` is 1 (over all its rows:
    RACE's [B, 4, S] masks give the longest of the four choices); 0 for an all-padding example."""
    mask = tf.cast(tf.not_equal(features[MASK_FEATURE], 0), tf.int32)
    positions = tf.range(1, tf.shape(mask)[-1] + 1, dtype=tf.int32)
    lengths = tf.reduce_max(mask * positions, axis=-1)
    while lengths.shape.rank > 1:
        lengths = tf.reduce_max(lengths, axis=-1)
    return lengths


def length_order(features: Features) -> tf.Tensor:
    """int32 [B]: the examples of ``features`` from shortest to longest (``example_lengths``;
    stable, so examples of one length keep their order)."""
    return tf.argsort(example_lengths(features), stable=True)


@dataclasses.dataclass(frozen=True)
class LengthBuckets:
    """The lengths a task's batches are padded to, and the features of length S that are cut.

    lengths: ascending bucket lengths, the last one S (``bucket_lengths``): every length 1..S
    (exact: each batch cut to its longest example) or a fixed set (for XLA).
    sequence_features: the names of the features whose last axis is the sequence (their records'
    ``SEQUENCE_FEATURES``), e.g. input_ids, input_mask, segment_ids (NER: also the labels).
    """

    lengths: tuple[int, ...]
    sequence_features: tuple[str, ...]

    @classmethod
    def of(cls, max_seq_length: int, sequence_features: Sequence[str],
           exact: bool = False) -> LengthBuckets:
        """``exact``: each batch cut to its own longest example (without XLA); else to the fixed
        set of ``bucket_lengths``."""
        if MASK_FEATURE not in sequence_features:
            raise ValueError(f"the sequence features {tuple(sequence_features)} lack "
                             f"{MASK_FEATURE!r}, which marks the real positions.")
        return cls(bucket_lengths(max_seq_length, exact), tuple(sequence_features))

    @property
    def exact(self) -> bool:
        """Whether every length 1..S is allowed (a batch is cut to its longest example)."""
        return self.lengths == tuple(range(1, self.lengths[-1] + 1))

    def describe(self) -> str:
        """One line for the run's log: the lengths a batch may have."""
        if self.exact:
            return (f"Batches padded to their longest example (at most {self.lengths[-1]} "
                    "positions)")
        return "Batches padded to the shortest of these lengths that holds them: " + ", ".join(
            str(length) for length in self.lengths)

    def bucket_of(self, longest: tf.Tensor) -> tf.Tensor:
        """int32 []: the shortest bucket length >= ``longest`` (int32 [])."""
        lengths = tf.constant(self.lengths, tf.int32)
        return tf.gather(lengths, tf.searchsorted(lengths, [longest], side="left")[0])

    def trim(self, features: Features) -> dict[str, tf.Tensor]:
        """``features`` (a batch) with every sequence feature cut from S to the batch's bucket
        length along its last axis; the other features unchanged."""
        length = self.bucket_of(tf.reduce_max(example_lengths(features)))
        return {name: value[..., :length] if name in self.sequence_features else value
                for name, value in features.items()}



@dataclasses.dataclass(frozen=True)
class LengthSplit:
    """A training batch whose examples differ much in length, run as parts sorted by length.

    A batch cut to its longest example still pads its short examples to that length: on short
    texts of mixed lengths (SST-2's phrases at batch 32: the longest ~3 times the mean) most of the
    batch's work is padding. ``plan`` sorts the batch's examples by length, to deal them into
    ``parts`` consecutive parts of nearly equal size (of at least ``min_part_examples``
    examples), each cut by ``buckets`` to its own length; the Trainer runs them one after another
    and sums their gradients, which are the batch's (every task's loss is a sum over examples
    divided by normalizers summed over the parts). It also says whether a batch is worth
    it: its parts' positions (examples x length) at most ``work_fraction`` of the whole batch's
    (each part is a pass with its own fixed costs; a batch of nearly one length, e.g. with
    --group_by_length, runs whole).
    """

    buckets: LengthBuckets
    parts: int = 4
    min_part_examples: int = 8
    work_fraction: float = 0.75

    def parts_of(self, batch_size: int | None) -> int:
        """The number of parts of a batch of ``batch_size`` examples (None: unknown, the most)."""
        if batch_size is None:
            return self.parts
        return max(1, min(self.parts, batch_size // self.min_part_examples))

    def describe(self, batch_size: int) -> str:
        """One line for the log of a run whose (per-replica) batches hold ``batch_size``
        examples."""
        return (f"A training batch whose examples differ much in length runs as up to "
                f"{self.parts_of(batch_size)} parts sorted by length, each cut to its own length "
                "(the same gradients, less padding).")

    def can_split(self, features: Features) -> bool:
        """Whether a batch of the shape of ``features`` makes more than one part."""
        return self.parts_of(features[MASK_FEATURE].shape[0]) > 1

    def plan(self, features: Features) -> tuple[tf.Tensor, Callable[[], list[dict[str, tf.Tensor]]]]:
        """(whether the parts save work: bool [], a function making the parts) of ``features``
        (a batch, every feature [B, ...]), both from one sort of its examples by length (stable).

        The parts hold at most ``work_fraction`` of the positions of the batch run whole, both
        counted at the lengths ``buckets`` cuts them to. The function deals the sorted examples
        into consecutive parts of nearly equal size, each cut to its own length; call it where
        the parts are used (inside the branch that runs them), so a batch run whole gathers
        nothing."""
        order = length_order(features)
        parts = self.parts_of(order.shape[0])
        batch = tf.shape(order)[0]
        bounds = [batch * index // parts for index in range(parts + 1)]
        lengths = tf.gather(example_lengths(features), order)
        whole = tf.cast(bounds[-1] * self.buckets.bucket_of(lengths[-1]), tf.float32)
        split = tf.add_n([tf.cast((end - start) * self.buckets.bucket_of(lengths[end - 1]),
                                  tf.float32)
                          for start, end in zip(bounds, bounds[1:])])

        def make_parts() -> list[dict[str, tf.Tensor]]:
            return [self.buckets.trim({name: tf.gather(value, order[start:end])
                                       for name, value in features.items()})
                    for start, end in zip(bounds, bounds[1:])]

        return split <= self.work_fraction * whole, make_parts


def group_by_length(chunk: Features, batch_size: int, key: tf.Tensor) -> tf.data.Dataset:
    """The examples of ``chunk`` (parsed features of a whole number of batches, [N * batch_size,
    ...]) as N batches of nearly equal lengths: sorted by ``example_lengths`` (stable), cut into
    batches of ``batch_size`` in that order, the batches then emitted in a random order drawn from
    ``key`` (a stateless seed, int64 [2])."""
    batches = tf.reshape(length_order(chunk), [-1, batch_size])
    shuffled = tf.random.experimental.stateless_shuffle(tf.range(tf.shape(batches)[0]), key,
                                                        alg="philox")
    rows = tf.gather(batches, shuffled)
    return tf.data.Dataset.from_tensor_slices(rows).map(
        lambda indices: {name: tf.gather(value, indices) for name, value in chunk.items()})

