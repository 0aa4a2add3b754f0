"""tf.data pipelines over feature TFRecords, shared by every task's training and evaluation.

- ``record_train_dataset_fn``: the reference's fine-tuning input: records repeated, shuffled with a
  buffer of 100 (seeded here), batched with drop_remainder, then parsed.
- ``record_eval_dataset``: the records in file order, once.

Records are batched before parsing so that a resumed run skips the batches it already consumed
without parsing them. Every dataset shards by element across workers (``with_data_sharding``).

Record files are checked when a pipeline is built: a file with no record (which a repeated dataset
would search forever) or fewer records than one batch that drops its remainder is a
``RecordFileError`` naming the file. The record reading, those checks and the tracing of a corrupt
record to its file are albert_tf/files/records.py. Pretraining builds its own pipeline over many
files (albert_tf/tasks/pretraining/task.py).
"""

from __future__ import annotations

from typing import Callable

import tensorflow as tf

from albert_tf.files.records import require_records, tfrecord_dataset

# dataset_fn(global_batch_size, batches_to_skip) -> batched dataset of feature dicts.
DatasetFn = Callable[[int, int], tf.data.Dataset]
# serialized records [B] -> feature dict with a leading B.
ParseFn = Callable[[tf.Tensor], dict[str, tf.Tensor]]

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
    skip the batches a resumed run consumed, parse. RecordFileError if the file has no record."""
    require_records([record_path], 1)

    def dataset_fn(batch_size: int, batches_to_skip: int) -> tf.data.Dataset:
        dataset = tfrecord_dataset(record_path).repeat()
        dataset = dataset.shuffle(SHUFFLE_BUFFER, seed=seed)
        dataset = dataset.batch(batch_size, drop_remainder=True).skip(batches_to_skip)
        dataset = dataset.map(parse, num_parallel_calls=tf.data.AUTOTUNE)
        return with_data_sharding(dataset).prefetch(tf.data.AUTOTUNE)

    return dataset_fn


def record_eval_dataset(record_path: str, parse: ParseFn, batch_size: int,
                        drop_remainder: bool = False) -> tf.data.Dataset:
    """The records in file order, once. drop_remainder only on TPU, where the file was padded with
    is_real_example=0 records to a multiple of the batch. RecordFileError if the file has no record
    (with drop_remainder: fewer than ``batch_size``)."""
    require_records([record_path], batch_size if drop_remainder else 1)
    dataset = tfrecord_dataset(record_path).batch(batch_size, drop_remainder=drop_remainder)
    dataset = dataset.map(parse)
    return with_data_sharding(dataset).prefetch(tf.data.AUTOTUNE)
