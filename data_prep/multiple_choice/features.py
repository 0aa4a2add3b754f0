"""RACE questions -> fixed-length multiple-choice features and their TFRecords.

Layout of one choice (row) of max_seq_length S, as the reference's RACE ``convert_single_example``
builds it::

    input_ids    [CLS] article_1 .. article_n [SEP] qa_1 .. qa_m [SEP] 0 .. 0
    segment_ids    0       0     ..     0       0     1   ..  1    1   0 .. 0
    input_mask     1       1     ..     1       1     1   ..  1    1   0 .. 0

qa is the question with the option filled in (see data_prep/multiple_choice/reader.py). Its pieces
keep their LAST ``max_qa_length``; then the article keeps its first ``S - 3 - m`` pieces. A question
has one row per option (always 4).

TFRecords: the task's schema (albert_tf/tasks/multiple_choice/records.py, the reference's names,
dtypes and shapes; ``parse_race_record`` is its parser): ``input_ids``, ``input_mask``,
``segment_ids`` int64 [4*S] (the 4 rows concatenated, option A first); ``label_ids`` int64 scalar
(0-3 for A-D); ``is_real_example`` int64 scalar (always 1: no padding records are written).
"""

from __future__ import annotations

import dataclasses
from typing import Sequence

from albert_tf.tasks.multiple_choice import records
from albert_tf.tasks.multiple_choice.records import NUM_CHOICES
from albert_tf.tokenization.full_tokenizer import FullTokenizer
from data_prep.common.tf_example import int64_feature, serialize_example
from data_prep.common.user_errors import SettingsError

# The records version: bump when the records written for the same inputs and settings change
# (every cached RACE feature file is then rebuilt).
FEATURES_VERSION = 1


@dataclasses.dataclass(frozen=True)
class RaceFeatures:
    """One question as model input: every field is [NUM_CHOICES][S], one row per option."""

    input_ids: list[list[int]]
    input_mask: list[list[int]]
    segment_ids: list[list[int]]
    label_id: int


def check_lengths(max_seq_length: int, max_qa_length: int) -> None:
    """SettingsError (a ValueError) unless a row can hold [CLS] [SEP] qa [SEP] with up to
    max_qa_length qa pieces."""
    if max_qa_length < 1:
        raise SettingsError(f"max_qa_length must be >= 1, got {max_qa_length}")
    if max_seq_length < max_qa_length + 3:
        raise SettingsError(f"max_seq_length ({max_seq_length}) must be >= max_qa_length + 3 "
                         f"({max_qa_length + 3}): [CLS], two [SEP] and up to {max_qa_length} "
                         "question+option pieces")


@dataclasses.dataclass(frozen=True)
class RaceFeatureSettings:
    """What determines a RACE feature file's records besides its article files and the tokenizer:
    what the builders convert with and, as ``dataclasses.asdict``, the feature cache's key
    settings (data_prep/multiple_choice/feature_file.py).

    max_seq_length: S, the length of every row. max_qa_length: the question+option pieces kept.
    middle_only / high_only: read one level only. skip_invalid: skip invalid questions and articles
    instead of refusing the file. features_version: ``FEATURES_VERSION``.
    """

    max_seq_length: int
    max_qa_length: int
    middle_only: bool = False
    high_only: bool = False
    skip_invalid: bool = False
    features_version: int = dataclasses.field(default=FEATURES_VERSION, init=False)

    def __post_init__(self):
        check_lengths(self.max_seq_length, self.max_qa_length)


def choice_row(article_ids: Sequence[int], qa_ids: Sequence[int], max_seq_length: int,
               max_qa_length: int, cls_id: int, sep_id: int) -> tuple[list[int], list[int], list[int]]:
    """(input_ids, input_mask, segment_ids) of one choice, each of length max_seq_length.

    Expects ``check_lengths(max_seq_length, max_qa_length)`` to hold.
    """
    qa_ids = list(qa_ids)[-max_qa_length:]
    article_ids = list(article_ids)[:max_seq_length - 3 - len(qa_ids)]
    input_ids = [cls_id] + article_ids + [sep_id] + qa_ids + [sep_id]
    segment_ids = [0] * (len(article_ids) + 2) + [1] * (len(qa_ids) + 1)
    padding = [0] * (max_seq_length - len(input_ids))
    return input_ids + padding, [1] * len(input_ids) + padding, segment_ids + padding


def question_features(article_ids: Sequence[int], qa_texts: Sequence[str], label_id: int,
                      tokenizer: FullTokenizer, max_seq_length: int, max_qa_length: int) -> RaceFeatures:
    """Features of one question from its article's ids and its 4 normalized question+option texts.

    The qa texts are tokenized with ``tokenizer.tokenize`` (no further normalization: the reader has
    applied the reference's). Raises ValueError for bad lengths or a qa count other than 4.
    """
    check_lengths(max_seq_length, max_qa_length)
    if len(qa_texts) != NUM_CHOICES:
        raise ValueError(f"expected {NUM_CHOICES} question+option texts, got {len(qa_texts)}")
    rows = [choice_row(article_ids, tokenizer.convert_tokens_to_ids(tokenizer.tokenize(text)),
                       max_seq_length, max_qa_length, tokenizer.cls_id, tokenizer.sep_id)
            for text in qa_texts]
    input_ids, input_mask, segment_ids = (list(column) for column in zip(*rows))
    return RaceFeatures(input_ids=input_ids, input_mask=input_mask, segment_ids=segment_ids,
                        label_id=label_id)


# -- TFRecords -------------------------------------------------------------------------------------

def _flatten(rows: Sequence[Sequence[int]]) -> list[int]:
    return [value for row in rows for value in row]


def serialize_race_features(features: RaceFeatures) -> bytes:
    """The reference's record: ids/mask/segments int64 [4*S] (rows concatenated), label_ids,
    is_real_example = 1."""
    return serialize_example({
        records.INPUT_IDS: int64_feature(_flatten(features.input_ids)),
        records.INPUT_MASK: int64_feature(_flatten(features.input_mask)),
        records.SEGMENT_IDS: int64_feature(_flatten(features.segment_ids)),
        records.LABEL_IDS: int64_feature([features.label_id]),
        records.IS_REAL_EXAMPLE: int64_feature([1]),
    })
