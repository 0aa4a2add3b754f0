"""tf.data pipelines over feature TFRecords, shared by every task's training and evaluation.

- ``record_train_dataset_fn``: every fine-tuning task's training input: a full reshuffle of the
  file's records every epoch (``EpochOrder``: a different seeded permutation per epoch, the same
  for the same seed, whatever order the file holds its records in), batched with drop_remainder,
  then parsed. The reference shuffles with a buffer of 100 records instead (``SHUFFLE_BUFFER``),
  which leaves a file in document or label order in that order: see "The training order" in
  docs/running.md.
- ``record_eval_dataset``: the records once, each batch marked with ``is_real_example``; in file
  order, or with length buckets sorted by length chunk by chunk (``RECORD_INDEX`` restores the
  order of the outputs); with ``static_batches`` (on TPU: ``needs_static_batches``) every batch is
  full, the last one filled with padding records that the tasks' evaluations leave out.

With ``LengthBuckets`` (albert_tf/training/length_buckets.py) every parsed batch is cut to the
shortest bucket length that holds it, in training and evaluation; with ``grouped``
(--group_by_length) the training stream is regrouped by length, chunk by chunk.

Records are batched before parsing. A resumed run starts the training stream at the first record
it has not consumed: its epoch and its place in that epoch's permutation are computed, and no
record before it is parsed (nor, for a file split in buckets, read, but those of its bucket).
Every dataset shards by element across workers, with tf.data's autotuning off
(``with_run_options``).

Record files are checked when a pipeline is built: a file with no record (which a repeated dataset
would search forever), or whose first record the parse function refuses (records of another
``--max_seq_length`` or of another task), is a ``RecordFileError`` naming the file. The record
reading, those checks and the tracing of a corrupt or unparsable record met later to its file
(``reading_records``, around the Trainer's loops) are albert_tf/files/records.py. Pretraining
builds its own pipeline over many files (albert_tf/tasks/pretraining/task.py).
"""

from __future__ import annotations

import dataclasses
import math
import secrets
from typing import Callable

import tensorflow as tf

from albert_tf.files.records import (ParseFn, require_parsable, require_records, tfrecord_dataset,
                                     without_autotuning)
from albert_tf.training.length_buckets import (GROUP_CHUNK_BATCHES, LengthBuckets, group_by_length,
                                               length_order)

# dataset_fn(global_batch_size, batches_to_skip) -> batched dataset of feature dicts.
DatasetFn = Callable[[int, int], tf.data.Dataset]

# The feature of an evaluation batch sorted by length that says where each example stands in its
# file (int64 [B]); Trainer.predict restores the file order by it.
RECORD_INDEX = "record_index"

# The reference's training shuffle buffer (examples). Pretraining keeps it (its records are
# shuffled when they are written); fine-tuning reshuffles whole epochs (EpochOrder).
SHUFFLE_BUFFER = 100

# The serialized records the training input of a fine-tuning task holds at once to reshuffle them
# (docs/running.md, "The training order"): a record file up to this size is read once and held
# whole; a larger one is dealt at random into ceil(size / SHUFFLE_MEMORY_BYTES) buckets every
# epoch, each about this size and read from the file in a pass of its own (see EpochOrder).
SHUFFLE_MEMORY_BYTES = 1 << 30

# The random-number algorithm of the order, fixed so that a seed gives the same order anywhere.
_RNG = "philox"
# The last epoch a stream counts to (int64: never reached).
_LAST_EPOCH = (1 << 63) - 1
# A batch size that takes every record of a file into one batch: a plain batch reserves room for at
# most 65,536 elements up front, whatever its batch size (never put a map before it: tf.data fuses
# map and batch, and the fused op allocates the whole batch size).
_ALL = 1 << 62


def with_run_options(dataset: tf.data.Dataset) -> tf.data.Dataset:
    """``dataset`` sharded by element across workers (file-level auto-sharding fails with fewer
    files than workers), without tf.data's autotuning (``without_autotuning``)."""
    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.DATA
    return without_autotuning(dataset.with_options(options))


def count_records(path: str) -> int:
    """The number of records of a TFRecord file (read once, in the graph)."""
    return int(tfrecord_dataset(path).reduce(tf.constant(0, tf.int64), lambda count, _: count + 1))


@dataclasses.dataclass(frozen=True)
class EpochOrder:
    """The order a training run reads the records of one file in: epoch after epoch, each a
    uniformly random permutation of all the records, drawn from ``seed`` and the epoch alone (so
    the same seed gives the same order, and the file's own order does not matter).

    A file of up to ``memory_bytes`` is read into memory once and held (one bucket); each epoch
    emits its records in the epoch's permutation. A larger file is split, each epoch anew, into
    ``buckets`` = ceil(file bytes / memory_bytes) buckets: each record goes to a bucket drawn at
    random; the buckets are emitted one after the other, each read from the file (a pass that
    keeps its records only) and emitted in a random permutation of its own. Random buckets in
    turn, each shuffled, are again a uniformly random permutation of the whole epoch; memory holds
    one bucket's records (about ``memory_bytes``) plus 4 bytes a record of the file.
    ``num_records``: counted when the file has more than one bucket (the draw of buckets needs
    it), None otherwise.
    """

    path: str
    seed: int
    buckets: int
    num_records: int | None

    @classmethod
    def of_file(cls, path: str, seed: int, memory_bytes: int = SHUFFLE_MEMORY_BYTES) -> EpochOrder:
        buckets = max(1, math.ceil(tf.io.gfile.stat(path).length / memory_bytes))
        return cls(path, int(seed) % (1 << 63), buckets,
                   count_records(path) if buckets > 1 else None)

    def records(self, first: int = 0) -> tf.data.Dataset:
        """The serialized records in this order, forever, from the ``first`` one of the stream on
        (a resumed run's place: its epoch and the place within it are computed; the earlier
        epochs are not read)."""
        if self.buckets == 1:
            return tfrecord_dataset(self.path).batch(_ALL).flat_map(
                lambda held: self._held_stream(held, first))
        start_epoch, start = divmod(first, self.num_records)
        return tf.data.Dataset.range(start_epoch, _LAST_EPOCH).flat_map(
            lambda epoch: self._bucketed_epoch(
                epoch, tf.where(tf.equal(epoch, start_epoch), tf.constant(start, tf.int64), 0)))

    def key(self, *path: tf.Tensor | int) -> tf.Tensor:
        """The stateless seed of one draw: the run's seed folded with the draw's ``path``."""
        key = tf.constant([self.seed, 0], tf.int64)
        for value in path:
            key = tf.random.experimental.stateless_fold_in(key, tf.cast(value, tf.int64), alg=_RNG)
        return key

    def _held_stream(self, held: tf.Tensor, first: int) -> tf.data.Dataset:
        """The records of ``held`` (the whole file), epoch after epoch, from ``first`` on."""
        count = tf.shape(held, out_type=tf.int64)[0]
        start_epoch, start = first // count, first % count

        def epoch(number: tf.Tensor) -> tf.data.Dataset:
            return tf.data.Dataset.from_tensor_slices(_permutation(count, self.key(number, 1)))

        indices = tf.data.Dataset.range(start_epoch, _LAST_EPOCH).flat_map(epoch).skip(start)
        return indices.map(lambda index: tf.gather(held, index))

    def _bucketed_epoch(self, epoch: tf.Tensor, start: tf.Tensor) -> tf.data.Dataset:
        """One epoch of a file of several buckets (see the class doc), from its ``start``-th
        record on: the buckets before the one that holds it are not read."""
        records = tfrecord_dataset(self.path)
        bucket_of = tf.random.stateless_uniform([self.num_records], self.key(epoch, 0), minval=0,
                                                maxval=self.buckets, dtype=tf.int32, alg=_RNG)

        def bucket(number: tf.Tensor) -> tf.data.Dataset:
            kept = records.enumerate().filter(
                lambda index, _: tf.equal(tf.gather(bucket_of, index), tf.cast(number, tf.int32)))
            # Batched as (index, record) pairs: a map between filter and batch would be fused
            # with the batch, which then allocates all of its batch size up front.
            return kept.batch(self.num_records).flat_map(
                lambda _, held: self._shuffled(held, self.key(epoch, number + 1)))

        ends = tf.cumsum(tf.math.bincount(bucket_of, minlength=self.buckets, dtype=tf.int64))
        first_bucket = tf.reduce_sum(tf.cast(ends <= start, tf.int64))
        skipped = start - tf.concat([[0], ends], 0)[first_bucket]
        return tf.data.Dataset.range(first_bucket, self.buckets).flat_map(bucket).skip(skipped)

    @staticmethod
    def _shuffled(held: tf.Tensor, key: tf.Tensor) -> tf.data.Dataset:
        """The records of ``held`` one by one, in the permutation drawn from ``key``."""
        order = _permutation(tf.shape(held, out_type=tf.int64)[0], key)
        return tf.data.Dataset.from_tensor_slices(order).map(lambda index: tf.gather(held, index))


def _permutation(count: tf.Tensor, key: tf.Tensor) -> tf.Tensor:
    """A uniformly random permutation of 0..count-1 (int64), drawn from the stateless ``key``."""
    return tf.random.experimental.stateless_shuffle(tf.range(count), key, alg=_RNG)


def record_train_dataset_fn(record_path: str, parse: ParseFn, seed: int | None = 12345,
                            memory_bytes: int | None = None, buckets: LengthBuckets | None = None,
                            grouped: bool = False) -> DatasetFn:
    """Training input over one TFRecord file: every epoch a full reshuffle of its records, seeded
    by ``seed`` (``EpochOrder``; None: a seed drawn at random), batched with drop_remainder
    (batches run on across epochs), parsed; a resumed run starts at its first unconsumed record.
    ``memory_bytes``: the records held at once (None: ``SHUFFLE_MEMORY_BYTES``). ``buckets``: each
    batch cut to its bucket length (None: every batch keeps the records' length S). ``grouped``
    (--group_by_length, needs ``buckets``): each chunk of ``GROUP_CHUNK_BATCHES`` batches of that
    stream regrouped into batches of nearly equal lengths (``group_by_length``); a resumed run
    regroups its chunk and skips the batches of it already consumed. RecordFileError if the file
    has no record or its first record does not parse."""
    if grouped and buckets is None:
        raise ValueError("grouping by length needs the length buckets.")
    require_records([record_path], 1)
    require_parsable(record_path, parse)
    if seed is None:
        seed = secrets.randbits(63)
    order = EpochOrder.of_file(record_path, seed, memory_bytes or SHUFFLE_MEMORY_BYTES)

    def dataset_fn(batch_size: int, batches_to_skip: int) -> tf.data.Dataset:
        if grouped:
            dataset = _length_grouped(order, parse, batch_size, batches_to_skip)
        else:
            dataset = order.records(first=batches_to_skip * batch_size)
            dataset = dataset.batch(batch_size, drop_remainder=True)
            dataset = dataset.map(parse, num_parallel_calls=tf.data.AUTOTUNE)
        if buckets is not None:
            dataset = dataset.map(buckets.trim, num_parallel_calls=tf.data.AUTOTUNE)
        return with_run_options(dataset).prefetch(tf.data.AUTOTUNE)

    return dataset_fn


def _length_grouped(order: EpochOrder, parse: ParseFn, batch_size: int,
                    batches_to_skip: int) -> tf.data.Dataset:
    """The batches of ``order``'s stream regrouped by length chunk by chunk (``group_by_length``),
    from the ``batches_to_skip``-th batch on; chunk n's batch order is drawn from the stream's seed
    and n, so a resumed run regroups its chunk as the uninterrupted run did."""
    chunk_size = GROUP_CHUNK_BATCHES * batch_size
    first_chunk, skipped_batches = divmod(batches_to_skip, GROUP_CHUNK_BATCHES)
    chunks = order.records(first=first_chunk * chunk_size).batch(chunk_size, drop_remainder=True)
    dataset = chunks.enumerate(start=first_chunk).flat_map(
        lambda index, serialized: group_by_length(parse(serialized), batch_size,
                                                  order.key(-1, index)))
    return dataset.skip(skipped_batches)


def needs_static_batches(strategy: tf.distribute.Strategy) -> bool:
    """Whether evaluation batches must all hold the full batch: under a TPUStrategy, whose XLA
    compilation needs one static input shape (a smaller last batch cannot run)."""
    return isinstance(strategy, tf.distribute.TPUStrategy)


def record_eval_dataset(record_path: str, parse: ParseFn, batch_size: int,
                        static_batches: bool = False,
                        buckets: LengthBuckets | None = None) -> tf.data.Dataset:
    """The records of the file, once, parsed, with ``is_real_example`` int32 [B] in every batch.

    ``is_real_example`` is 1 for a record of the file (or the record's own value where it has one:
    GLUE files written with padding records carry 0 there). Without ``static_batches`` the last
    batch holds the remainder (as the reference off TPU). With it, the last batch is filled up to
    ``batch_size`` with copies of the file's first record marked ``is_real_example`` 0, and every
    batch has the static shape [batch_size, ...]: the file itself is unchanged (and so is its
    cache key), and each task's ``reduce`` and prediction files leave the padding out. (The
    reference writes all-zero padding records into its GLUE and RACE files on TPU, and its SQuAD
    prediction relies on TPUEstimator padding the last batch.) A file smaller than one batch
    gives one padded batch.

    Without ``buckets`` the batches hold the records in file order, of length S. With ``buckets``
    (never with ``static_batches``) each chunk of ``GROUP_CHUNK_BATCHES`` batches of the file is
    sorted by length before it is batched, every batch is cut to its bucket length, and every
    example carries ``RECORD_INDEX``, its place in the file (int64 [B]), by which
    ``Trainer.predict`` puts its outputs back in file order: the work of padding goes, the
    outputs stay those of the file order. RecordFileError if the file has no record or its first
    record does not parse.
    """
    if buckets is not None and static_batches:
        raise ValueError("static batches keep length S: no length buckets with them.")
    require_records([record_path], 1)
    require_parsable(record_path, parse)
    records = tfrecord_dataset(record_path, parse)
    if buckets is not None:
        chunks = records.enumerate().batch(GROUP_CHUNK_BATCHES * batch_size)
        dataset = chunks.flat_map(lambda index, serialized: _sorted_batches(
            {**parse(serialized), RECORD_INDEX: index}, batch_size))
        dataset = dataset.map(lambda features: buckets.trim(
            _marked(features, tf.ones_like(features[RECORD_INDEX], tf.int32))))
        return with_run_options(dataset).prefetch(tf.data.AUTOTUNE)
    dataset = records.map(lambda record: (record, tf.constant(1, tf.int32)))
    if static_batches:
        # batch_size - 1 padding records complete any remainder; the extra ones are dropped.
        padding = records.take(1).repeat(batch_size - 1).map(
            lambda record: (record, tf.constant(0, tf.int32)))
        dataset = dataset.concatenate(padding)
    dataset = dataset.batch(batch_size, drop_remainder=static_batches)
    dataset = dataset.map(lambda batch, real: _marked(parse(batch), real))
    return with_run_options(dataset).prefetch(tf.data.AUTOTUNE)


def _sorted_batches(chunk: dict[str, tf.Tensor], batch_size: int) -> tf.data.Dataset:
    """The examples of ``chunk`` (parsed features [N, ...]) sorted by length (stable), in
    batches of ``batch_size`` (the last one holds the remainder)."""
    order = length_order(chunk)
    return tf.data.Dataset.from_tensor_slices(
        {name: tf.gather(value, order) for name, value in chunk.items()}).batch(batch_size)


def _marked(features: dict[str, tf.Tensor], real: tf.Tensor) -> dict[str, tf.Tensor]:
    """``features`` with ``is_real_example`` int32 [B]: ``real`` [B] times the record's own flag."""
    own = features.get("is_real_example")
    if own is not None:
        real = real * tf.cast(own, tf.int32)
    return {**features, "is_real_example": real}
