"""tf.data pipelines over feature TFRecords, shared by every task's training and evaluation.

- ``record_train_dataset_fn``: the reference's fine-tuning input: records repeated, shuffled with a
  buffer of 100 (seeded here), batched with drop_remainder, then parsed.
- ``record_eval_dataset``: the records in file order, once, each batch marked with
  ``is_real_example``; with ``static_batches`` (on TPU: ``needs_static_batches``) every batch is
  full, the last one filled with padding records that the tasks' evaluations leave out.

Records are batched before parsing so that a resumed run skips the batches it already consumed
without parsing them. Every dataset shards by element across workers (``with_data_sharding``).

Record files are checked when a pipeline is built: a file with no record (which a repeated dataset
would search forever), or whose first record the parse function refuses (records of another
``--max_seq_length`` or of another task), is a ``RecordFileError`` naming the file. The record
reading, those checks and the tracing of a corrupt or unparsable record met later to its file
(``reading_records``, around the Trainer's loops) are albert_tf/files/records.py. Pretraining
builds its own pipeline over many files (albert_tf/tasks/pretraining/task.py).
"""

from __future__ import annotations

from typing import Callable

import tensorflow as tf

from albert_tf.files.records import ParseFn, require_parsable, require_records, tfrecord_dataset

# dataset_fn(global_batch_size, batches_to_skip) -> batched dataset of feature dicts.
DatasetFn = Callable[[int, int], tf.data.Dataset]

# The reference's training shuffle buffer (examples), for every task's input pipeline.
SHUFFLE_BUFFER = 100


def with_data_sharding(dataset: tf.data.Dataset) -> tf.data.Dataset:
    """Shards by element across workers: file-level auto-sharding fails with fewer files than workers."""
    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.DATA
    return dataset.with_options(options)


def record_train_dataset_fn(record_path: str, parse: ParseFn,
                            seed: int | None = 12345) -> DatasetFn:
    """Training input over one TFRecord file: repeat, shuffle(100, seed), batch (drop_remainder),
    skip the batches a resumed run consumed, parse. RecordFileError if the file has no record or
    its first record does not parse."""
    require_records([record_path], 1)
    require_parsable(record_path, parse)

    def dataset_fn(batch_size: int, batches_to_skip: int) -> tf.data.Dataset:
        dataset = tfrecord_dataset(record_path, parse).repeat()
        dataset = dataset.shuffle(SHUFFLE_BUFFER, seed=seed)
        dataset = dataset.batch(batch_size, drop_remainder=True).skip(batches_to_skip)
        dataset = dataset.map(parse, num_parallel_calls=tf.data.AUTOTUNE)
        return with_data_sharding(dataset).prefetch(tf.data.AUTOTUNE)

    return dataset_fn


def needs_static_batches(strategy: tf.distribute.Strategy) -> bool:
    """Whether evaluation batches must all hold the full batch: under a TPUStrategy, whose XLA
    compilation needs one static input shape (a smaller last batch cannot run)."""
    return isinstance(strategy, tf.distribute.TPUStrategy)


def record_eval_dataset(record_path: str, parse: ParseFn, batch_size: int,
                        static_batches: bool = False) -> tf.data.Dataset:
    """The records in file order, once, parsed, with ``is_real_example`` int32 [B] in every batch.

    ``is_real_example`` is 1 for a record of the file (or the record's own value where it has one:
    GLUE files written with padding records carry 0 there). Without ``static_batches`` the last
    batch holds the remainder (as the reference off TPU). With it, the last batch is filled up to
    ``batch_size`` with copies of the file's first record marked ``is_real_example`` 0, and every
    batch has the static shape [batch_size, ...]: the file itself is unchanged (and so is its
    cache key), and each task's ``reduce`` and prediction files leave the padding out. (The
    reference writes all-zero padding records into its GLUE and RACE files on TPU, and its SQuAD
    prediction relies on TPUEstimator padding the last batch.) A file smaller than one batch
    gives one padded batch. RecordFileError if the file has no record or its first record does
    not parse.
    """
    require_records([record_path], 1)
    require_parsable(record_path, parse)
    records = tfrecord_dataset(record_path, parse)
    dataset = records.map(lambda record: (record, tf.constant(1, tf.int32)))
    if static_batches:
        # batch_size - 1 padding records complete any remainder; the extra ones are dropped.
        padding = records.take(1).repeat(batch_size - 1).map(
            lambda record: (record, tf.constant(0, tf.int32)))
        dataset = dataset.concatenate(padding)
    dataset = dataset.batch(batch_size, drop_remainder=static_batches)
    dataset = dataset.map(lambda batch, real: _marked(parse(batch), real))
    return with_data_sharding(dataset).prefetch(tf.data.AUTOTUNE)


def _marked(features: dict[str, tf.Tensor], real: tf.Tensor) -> dict[str, tf.Tensor]:
    """``features`` with ``is_real_example`` int32 [B]: ``real`` [B] times the record's own flag."""
    own = features.get("is_real_example")
    if own is not None:
        real = real * tf.cast(own, tf.int32)
    return {**features, "is_real_example": real}
