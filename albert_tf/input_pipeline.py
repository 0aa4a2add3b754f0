"""tf.data pipelines over feature TFRecords, shared by every task's training and evaluation.

- ``record_train_dataset_fn``: the reference's fine-tuning input: records repeated, shuffled with a
  buffer of 100 (seeded here), batched with drop_remainder, then parsed.
- ``record_eval_dataset``: the records in file order, once.

Records are batched before parsing so that a resumed run skips the batches it already consumed
without parsing them. Every dataset shards by element across workers (``with_data_sharding``).
"""

from __future__ import annotations

from typing import Callable

import tensorflow as tf

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
    skip the batches a resumed run consumed, parse."""

    def dataset_fn(batch_size: int, batches_to_skip: int) -> tf.data.Dataset:
        dataset = tf.data.TFRecordDataset(record_path).repeat()
        dataset = dataset.shuffle(SHUFFLE_BUFFER, seed=seed)
        dataset = dataset.batch(batch_size, drop_remainder=True).skip(batches_to_skip)
        dataset = dataset.map(parse, num_parallel_calls=tf.data.AUTOTUNE)
        return with_data_sharding(dataset).prefetch(tf.data.AUTOTUNE)

    return dataset_fn


def record_eval_dataset(record_path: str, parse: ParseFn, batch_size: int,
                        drop_remainder: bool = False) -> tf.data.Dataset:
    """The records in file order, once. drop_remainder only on TPU, where the file was padded with
    is_real_example=0 records to a multiple of the batch."""
    dataset = tf.data.TFRecordDataset(record_path).batch(batch_size, drop_remainder=drop_remainder)
    dataset = dataset.map(parse)
    return with_data_sharding(dataset).prefetch(tf.data.AUTOTUNE)
