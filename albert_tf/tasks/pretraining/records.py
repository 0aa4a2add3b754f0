"""The pretraining TFRecord schema (the reference's feature names, dtypes and shapes) and its
parser, shared by every reader of those files.

Files written by the reference's create_pretraining_data and by ours (data_prep/) hold the same
features; run_pretraining's input pipeline parses them with ``parse_pretraining_example``.
``check_pretraining_files`` checks the first records of every file against the run's settings
before any work, so that records of another length or vocabulary are one clear error naming the
file and the flag instead of a parse or gather error inside the training loop.
"""

from __future__ import annotations

from typing import Sequence

import tensorflow as tf
from google.protobuf.message import DecodeError

from albert_tf.errors.user_error import UserError
from albert_tf.files.records import read_first_records

# Feature name -> (length kind, dtype on disk). "seq": max_seq_length S; "pred": max_predictions_per_seq M.
_PRETRAINING_FEATURES = (
    ("input_ids", "seq", tf.int64),
    ("input_mask", "seq", tf.int64),
    ("segment_ids", "seq", tf.int64),
    ("token_boundary", "seq", tf.int64),
    ("masked_lm_positions", "pred", tf.int64),
    ("masked_lm_ids", "pred", tf.int64),
    ("masked_lm_weights", "pred", tf.float32),
    ("next_sentence_labels", "one", tf.int64),
)
# The flag that sets each length kind, for messages.
_LENGTH_FLAGS = {"seq": "--max_seq_length", "pred": "--max_predictions_per_seq"}
# Features holding vocabulary ids, checked against the config's vocab_size.
_TOKEN_ID_FEATURES = ("input_ids", "masked_lm_ids")
# Records read from the start of each file by ``check_pretraining_files``.
RECORDS_CHECKED_PER_FILE = 10


class PretrainingDataError(UserError, ValueError):
    """Pretraining records that do not fit the run: another length, vocabulary or schema."""


def pretraining_feature_spec(max_seq_length: int,
                             max_predictions_per_seq: int) -> dict[str, tf.io.FixedLenFeature]:
    """``tf.io.parse_single_example`` spec of one pretraining record.

    input_ids, input_mask, segment_ids, token_boundary: int64 [S]; masked_lm_positions, masked_lm_ids:
    int64 [M]; masked_lm_weights: float32 [M]; next_sentence_labels: int64 [1] (the sentence-order label:
    1 = segments swapped or B from another document).
    """
    lengths = {"seq": max_seq_length, "pred": max_predictions_per_seq, "one": 1}
    return {name: tf.io.FixedLenFeature([lengths[kind]], dtype)
            for name, kind, dtype in _PRETRAINING_FEATURES}


def parse_pretraining_example(serialized: tf.Tensor, max_seq_length: int,
                              max_predictions_per_seq: int) -> dict[str, tf.Tensor]:
    """Parses serialized records (a scalar, or a batch [B] -> features with a leading B); int64
    features become int32 (as the reference's input pipeline does, for TPU), masked_lm_weights stays
    float32. Shapes as in ``pretraining_feature_spec``."""
    example = tf.io.parse_example(
        serialized, pretraining_feature_spec(max_seq_length, max_predictions_per_seq))
    return {name: tf.cast(value, tf.int32) if value.dtype == tf.int64 else value
            for name, value in example.items()}


def check_pretraining_files(paths: Sequence[str], max_seq_length: int,
                            max_predictions_per_seq: int, vocab_size: int | None = None,
                            config_file: str | None = None) -> None:
    """Checks the first ``RECORDS_CHECKED_PER_FILE`` records of every file against the settings.

    Each record must hold every feature of the schema, with the lengths ``max_seq_length`` and
    ``max_predictions_per_seq`` say and token ids below ``vocab_size`` (of ``config_file``) when
    given. Raises PretrainingDataError naming the file, the record, the flag or config and the value
    found (an empty file too); RecordFileError (input_pipeline) for a file that is not a TFRecord
    file.
    """
    lengths = {"seq": max_seq_length, "pred": max_predictions_per_seq, "one": 1}
    for path in paths:
        records = read_first_records(path, RECORDS_CHECKED_PER_FILE)
        if not records:
            raise PretrainingDataError(f"{path}: no record (an empty TFRecord file); recreate it "
                                       "or leave it out of the input")
        for number, record in enumerate(records, start=1):
            where = f"{path}, record {number}"
            values = _record_features(where, record, lengths)
            if vocab_size is not None:
                _check_token_ids(where, values, vocab_size, config_file)


def _record_features(where: str, record: bytes, lengths: dict[str, int]) -> dict[str, list]:
    """{feature: values} of one serialized record, checked against the schema and ``lengths``."""
    try:
        features = tf.train.Example.FromString(record).features.feature
    except DecodeError:
        raise PretrainingDataError(f"{where}: not a tf.train.Example; give the TFRecords that "
                                   "create_pretraining_data writes") from None
    values = {}
    for name, kind, dtype in _PRETRAINING_FEATURES:
        if name not in features:
            raise PretrainingDataError(
                f"{where}: no feature {name!r}, so not a pretraining record (found "
                f"{sorted(features)}); give the TFRecords that create_pretraining_data writes")
        expected_list = "int64_list" if dtype == tf.int64 else "float_list"
        found_list = features[name].WhichOneof("kind")
        if found_list != expected_list:
            raise PretrainingDataError(f"{where}: feature {name!r} holds a {found_list}, the "
                                       f"schema has a {expected_list}")
        values[name] = list(getattr(features[name], expected_list).value)
        if len(values[name]) != lengths[kind]:
            raise PretrainingDataError(_length_message(where, name, kind, lengths[kind],
                                                       len(values[name])))
    return values


def _length_message(where: str, name: str, kind: str, expected: int, found: int) -> str:
    if kind in _LENGTH_FLAGS:
        flag = _LENGTH_FLAGS[kind]
        return (f"{flag}={expected}, but {name!r} in {where} has {found} values: the data was "
                f"created with {flag[2:]} {found}; set {flag}={found} (or recreate the data)")
    return f"{where}: {name!r} has {found} values, the schema has {expected}"


def _check_token_ids(where: str, values: dict[str, list], vocab_size: int,
                     config_file: str | None) -> None:
    for name in _TOKEN_ID_FEATURES:
        largest = max(values[name])
        if largest >= vocab_size:
            config = f" in {config_file}" if config_file else ""
            raise PretrainingDataError(
                f"{where}: {name!r} holds token id {largest}, but vocab_size={vocab_size}{config}: "
                "the data was tokenized with a larger vocabulary than the model's; use the config "
                "of the SentencePiece model the data was created with")
