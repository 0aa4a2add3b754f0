"""``tf.train.Example`` building blocks shared by the fine-tuning feature writers (GLUE, SQuAD,
RACE, NER).

Records are serialized deterministically (feature names sorted), so the same features give the same
bytes in every process: protobuf's default map order varies between processes.
"""

from __future__ import annotations

from typing import Mapping, Sequence

import tensorflow as tf


def int64_feature(values: Sequence[int]) -> tf.train.Feature:
    return tf.train.Feature(int64_list=tf.train.Int64List(value=[int(v) for v in values]))


def float_feature(values: Sequence[float]) -> tf.train.Feature:
    return tf.train.Feature(float_list=tf.train.FloatList(value=[float(v) for v in values]))


def serialize_example(features: Mapping[str, tf.train.Feature]) -> bytes:
    """One serialized ``tf.train.Example`` of ``features``, bytes independent of the process."""
    example = tf.train.Example(features=tf.train.Features(feature=features))
    return example.SerializeToString(deterministic=True)
