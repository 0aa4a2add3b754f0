"""The pretraining record format: our hand-written protobuf bytes against tf.train.Example, and the
shared parser (albert_tf/tasks/pretraining/records.py) against the reference's own output file."""

from __future__ import annotations

import random

import numpy as np
import pytest
import tensorflow as tf

from albert_tf.tasks.pretraining.records import parse_pretraining_example, pretraining_feature_spec
from data_prep.pretraining.records import (FEATURE_KINDS, FLOAT, encode_varint,
                                           serialize_pretraining_example)
from tests.shared_setup import REFERENCE_MAX_PREDICTIONS, REFERENCE_RECORDS, REFERENCE_SEQ_LENGTH


def example_via_protobuf_api(input_ids, segment_ids, token_boundary, positions, label_ids, label, seq, pred):
    """The same record built field by field with tf.train.Example (independent of our encoder)."""
    def ints(values):
        return tf.train.Feature(int64_list=tf.train.Int64List(value=list(values)))

    def pad(values, length):
        return list(values) + [0] * (length - len(values))

    features = {
        "input_ids": ints(pad(input_ids, seq)),
        "input_mask": ints(pad([1] * len(input_ids), seq)),
        "segment_ids": ints(pad(segment_ids, seq)),
        "token_boundary": ints(pad(token_boundary, seq)),
        "masked_lm_positions": ints(pad(positions, pred)),
        "masked_lm_ids": ints(pad(label_ids, pred)),
        "masked_lm_weights": tf.train.Feature(float_list=tf.train.FloatList(
            value=pad([1.0] * len(positions), pred))),
        "next_sentence_labels": ints([label]),
    }
    return tf.train.Example(features=tf.train.Features(feature=features))


def random_instance(rng, seq, pred, vocab_size):
    length = rng.randint(5, seq)
    first_sep = rng.randint(2, length - 3)
    input_ids = [rng.randrange(vocab_size) for _ in range(length)]
    segment_ids = [0] * (first_sep + 1) + [1] * (length - first_sep - 1)
    boundary = [rng.randint(0, 1) for _ in range(length)]
    positions = sorted(rng.sample(range(1, length), min(pred, length - 1, rng.randint(1, pred))))
    label_ids = [rng.randrange(vocab_size) for _ in positions]
    return input_ids, segment_ids, boundary, positions, label_ids, rng.randint(0, 1)


@pytest.mark.parametrize("vocab_size", [8000, 30000, 250_000])  # 250k: ids beyond the varint table
def test_encoder_matches_tf_train_example(vocab_size):
    rng = random.Random(vocab_size)
    for _ in range(50):
        instance = random_instance(rng, 64, 10, vocab_size)
        ours = serialize_pretraining_example(*instance, 64, 10)
        assert tf.train.Example.FromString(ours) == example_via_protobuf_api(*instance, 64, 10)


def test_varint_encoding():
    assert encode_varint(0) == b"\x00"
    assert encode_varint(127) == b"\x7f"
    assert encode_varint(300) == b"\xac\x02"  # the protobuf documentation's example
    with pytest.raises(ValueError):
        encode_varint(-1)


def test_encoder_rejects_oversized_and_non_binary_input():
    with pytest.raises(ValueError, match="does not fit"):
        serialize_pretraining_example([5] * 9, [0] * 9, [1] * 9, [1], [5], 0, 8, 4)
    with pytest.raises(ValueError, match="segment_ids"):
        serialize_pretraining_example([5] * 4, [0, 2, 1, 1], [1] * 4, [1], [5], 0, 8, 4)


def test_parser_reads_our_records():
    rng = random.Random(5)
    instance = random_instance(rng, 32, 6, 500)
    parsed = parse_pretraining_example(tf.constant(serialize_pretraining_example(*instance, 32, 6)), 32, 6)
    input_ids, segment_ids, boundary, positions, label_ids, label = instance
    n, p = len(input_ids), len(positions)
    np.testing.assert_array_equal(parsed["input_ids"][:n], input_ids)
    np.testing.assert_array_equal(parsed["input_ids"][n:], 0)
    np.testing.assert_array_equal(parsed["input_mask"], [1] * n + [0] * (32 - n))
    np.testing.assert_array_equal(parsed["segment_ids"][:n], segment_ids)
    np.testing.assert_array_equal(parsed["token_boundary"][:n], boundary)
    np.testing.assert_array_equal(parsed["masked_lm_positions"], positions + [0] * (6 - p))
    np.testing.assert_array_equal(parsed["masked_lm_ids"], label_ids + [0] * (6 - p))
    np.testing.assert_array_equal(parsed["masked_lm_weights"], [1.0] * p + [0.0] * (6 - p))
    np.testing.assert_array_equal(parsed["next_sentence_labels"], [label])
    assert parsed["input_ids"].dtype == tf.int32 and parsed["masked_lm_weights"].dtype == tf.float32


@pytest.mark.requires_shared_data
def test_reference_records_have_our_schema():
    raw = next(iter(tf.data.TFRecordDataset(REFERENCE_RECORDS))).numpy()
    reference = tf.train.Example.FromString(raw).features.feature
    layout = {name: (feature.WhichOneof("kind"), len(getattr(feature, feature.WhichOneof("kind")).value))
              for name, feature in reference.items()}
    spec = pretraining_feature_spec(REFERENCE_SEQ_LENGTH, REFERENCE_MAX_PREDICTIONS)
    assert set(layout) == set(spec) == {name for name, _ in FEATURE_KINDS}
    for name, kind in FEATURE_KINDS:
        expected_kind = "float_list" if kind == FLOAT else "int64_list"
        assert layout[name] == (expected_kind, spec[name].shape[0])
        assert (spec[name].dtype == tf.float32) == (kind == FLOAT)
    # The whole reference file parses with the shared parser.
    count = 0
    for parsed in tf.data.TFRecordDataset(REFERENCE_RECORDS).map(
            lambda record: parse_pretraining_example(record, REFERENCE_SEQ_LENGTH,
                                                     REFERENCE_MAX_PREDICTIONS)).batch(4096):
        count += int(parsed["input_ids"].shape[0])
    assert count == 6670
