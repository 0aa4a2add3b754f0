"""Each task's record schema (albert_tf/tasks/<task>/records.py) against data_prep's writer of it:
a record written by data_prep holds exactly the schema's features, with its dtypes and lengths,
and the task's parser reads back the values written.
"""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from albert_tf.tasks.classification.records import glue_feature_spec, parse_glue_example
from albert_tf.tasks.multiple_choice.records import (NUM_CHOICES, parse_race_record,
                                                     race_feature_spec)
from albert_tf.tasks.question_answering.records import parse_squad_record, squad_feature_spec
from albert_tf.tasks.token_classification.records import ner_feature_spec, parse_ner_record
from data_prep.classification.features import build_features, serialize_glue_features
from data_prep.multiple_choice.features import RaceFeatures, serialize_race_features
from data_prep.question_answering.features import SquadFeature, feature_record, with_unique_id
from data_prep.token_classification.features import serialize_window, sentence_windows

SEQ = 8
CLS_ID, SEP_ID = 2, 3


def check_against_spec(record: bytes, spec: dict[str, tf.io.FixedLenFeature]) -> dict:
    """{name: values} of a serialized record, checked to hold exactly the spec's features, each of
    the spec's dtype and length."""
    features = tf.train.Example.FromString(record).features.feature
    assert sorted(features) == sorted(spec)
    values = {}
    for name, feature in spec.items():
        kind = "int64_list" if feature.dtype == tf.int64 else "float_list"
        assert features[name].WhichOneof("kind") == kind, name
        values[name] = list(getattr(features[name], kind).value)
        assert len(values[name]) == int(np.prod(feature.shape, dtype=np.int64)), name
    return values


@pytest.mark.parametrize("is_regression", [False, True])
def test_glue_records_match_the_task_schema(is_regression):
    features = build_features([5, 6, 7], [8, 9], SEQ, CLS_ID, SEP_ID,
                              2.5 if is_regression else 1)
    record = serialize_glue_features(features, is_regression)
    written = check_against_spec(record, glue_feature_spec(SEQ, is_regression))
    parsed = parse_glue_example(tf.constant(record), SEQ, is_regression)
    assert written["input_ids"] == features.input_ids
    assert parsed["input_ids"].numpy().tolist() == features.input_ids
    assert parsed["segment_ids"].numpy().tolist() == features.segment_ids
    assert float(parsed["label_ids"]) == features.label_id
    assert int(parsed["is_real_example"]) == 1


def test_race_records_match_the_task_schema():
    rows = [[CLS_ID, 10 + row, SEP_ID, 20 + row, SEP_ID] + [0] * (SEQ - 5)
            for row in range(NUM_CHOICES)]
    features = RaceFeatures(input_ids=rows, input_mask=[[1] * 5 + [0] * (SEQ - 5)] * NUM_CHOICES,
                            segment_ids=[[0] * 3 + [1] * 2 + [0] * (SEQ - 5)] * NUM_CHOICES,
                            label_id=2)
    record = serialize_race_features(features)
    check_against_spec(record, race_feature_spec(SEQ))
    parsed = parse_race_record(tf.constant(record), SEQ)
    assert parsed["input_ids"].numpy().tolist() == rows
    assert int(parsed["label_ids"]) == 2


@pytest.mark.parametrize("is_training", [False, True])
def test_squad_records_match_the_task_schema(is_training):
    labels = ({"start_position": 4, "end_position": 5, "is_impossible": False} if is_training
              else {})
    feature = SquadFeature(
        example_index=0, doc_span_index=0, input_ids=[CLS_ID, 7, SEP_ID, 8, 9, 10, SEP_ID, 0],
        input_mask=[1] * 7 + [0], segment_ids=[0] * 3 + [1] * 4 + [0],
        p_mask=[0, 1, 1, 0, 0, 0, 1, 1], paragraph_len=7, doc_offset=3,
        tok_start_to_orig_index=[0, 2, 4], tok_end_to_orig_index=[1, 3, 5],
        token_is_max_context=[True] * 3, **labels)
    record = with_unique_id(feature_record(feature), 1000000000)
    check_against_spec(record, squad_feature_spec(SEQ, is_training))
    parsed = parse_squad_record(tf.constant(record), SEQ, is_training)
    assert int(parsed["unique_ids"]) == 1000000000
    assert parsed["p_mask"].numpy().tolist() == feature.p_mask
    if is_training:
        assert (int(parsed["start_positions"]), int(parsed["end_positions"])) == (4, 5)


def test_ner_records_match_the_task_schema():
    (window,) = sentence_windows([[11], [12, 13]], [1, 2], 0, SEQ, SEQ, CLS_ID, SEP_ID)
    record = serialize_window(window)
    check_against_spec(record, ner_feature_spec(SEQ))
    parsed = parse_ner_record(tf.constant([record]), SEQ)
    assert parsed["input_ids"].numpy().tolist() == [window.input_ids]
    assert parsed["label_ids"].numpy().tolist() == [window.label_ids]
    assert parsed["word_index"].numpy().tolist() == [window.word_index]
    assert parsed["sentence_index"].numpy().tolist() == [0]
