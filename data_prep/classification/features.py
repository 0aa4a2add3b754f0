"""GLUE examples -> fixed-length features -> TFRecords, cached as feature files.

Layout of one feature of max_seq_length S (reference ``convert_single_example``)::

    input_ids    [CLS] a_1 .. a_n [SEP] b_1 .. b_m [SEP] 0 .. 0      (pair; single: no b and 2nd [SEP])
    segment_ids    0    0  ..  0    0     1  ..  1    1  0 .. 0
    input_mask     1    1  ..  1    1     1  ..  1    1  0 .. 0

A pair is truncated to S-3 pieces by popping from the end of the currently longer list (ties pop from b;
``truncate_seq_pair``, data_prep/common/pair_truncation.py); a single sentence keeps its first S-2
pieces. label_id = index of the label in the label list (STS-B: the float score; unlabelled
examples: the placeholder 0). Every record written is a real example (``is_real_example`` 1): on a
TPU the input pipeline fills the last eval/predict batch itself (albert_tf/training/input_pipeline.py).

TFRecords: the task's schema (albert_tf/tasks/classification/records.py: ``input_ids``,
``input_mask``, ``segment_ids`` int64 [S]; ``label_ids`` int64 scalar, float for STS-B;
``is_real_example``), whose ``parse_glue_example`` run_classifier.py reads them with. Records are
serialized deterministically (feature names in sorted order), so the same inputs give the same
bytes in every process (protobuf's default map order varies from process to process).

``cached_glue_features`` keeps them in the shared feature cache (data_prep/common/feature_cache.py),
keyed by its ``GlueFeatureSettings`` (max_seq_length and ``FEATURES_VERSION``):
unlike the reference, whose ``<task>_train.tf_record`` is silently reused after S, the tokenizer or the TSV
changed, an entry is reused only when all of them are unchanged. Its sidecar metadata holds what
post-processing needs: the guids of the real examples (so predictions need not re-read the TSV),
``num_real_examples`` and ``is_regression``.
"""

from __future__ import annotations

import dataclasses
import logging
from typing import Iterable, Iterator, Protocol, Sequence

from albert_tf.tasks.classification import records
from data_prep.classification.glue_tasks import glue_task
from data_prep.classification.processors import InputExample
from data_prep.common.feature_cache import FeatureFile, RecordSink, cached_feature_file
from data_prep.common.pair_truncation import truncate_seq_pair
from data_prep.common.progress import Progress
from data_prep.common.tf_example import float_feature, int64_feature, serialize_example
from data_prep.common.user_errors import SettingsError

# Bump when the bytes written for the same inputs change, or when inputs accepted before are now
# refused (every cached GLUE feature file is rebuilt, so its TSV is read and checked again).
# 2: STS-B scores outside 0..5 (nan included) and files without examples are refused.
FEATURES_VERSION = 2

# Number of examples whose pieces are logged, as the reference does, to eyeball the preprocessing.
_NUM_EXAMPLES_TO_LOG = 3


class GlueTokenizer(Protocol):
    """What feature conversion needs from ``FullTokenizer`` (albert_tf/tokenization/full_tokenizer.py)."""

    cls_id: int
    sep_id: int
    fingerprint: str
    uses_sentencepiece: bool
    do_lower_case: bool

    def tokenize(self, text: str) -> list[str]: ...

    def convert_tokens_to_ids(self, tokens: Iterable[str]) -> list[int]: ...


@dataclasses.dataclass(frozen=True)
class InputFeatures:
    """One fixed-length model input; every list has length max_seq_length."""

    input_ids: list[int]
    input_mask: list[int]
    segment_ids: list[int]
    label_id: int | float
    is_real_example: bool = True


def check_max_seq_length(max_seq_length: int) -> None:
    """SettingsError unless a record of max_seq_length fits [CLS] a [SEP] b [SEP] (3 special
    tokens)."""
    if max_seq_length < 3:
        raise SettingsError(f"max_seq_length must be >= 3 ([CLS] a [SEP] b [SEP] needs 3 special "
                            f"tokens), got {max_seq_length}")


@dataclasses.dataclass(frozen=True)
class GlueFeatureSettings:
    """What determines a GLUE feature file's records besides its TSV and the tokenizer: what
    ``cached_glue_features`` converts with and, as ``dataclasses.asdict``, its cache key's settings.

    max_seq_length: S, the length of every record. features_version: ``FEATURES_VERSION``.
    """

    max_seq_length: int
    features_version: int = dataclasses.field(default=FEATURES_VERSION, init=False)

    def __post_init__(self):
        check_max_seq_length(self.max_seq_length)


def build_features(ids_a: Sequence[int], ids_b: Sequence[int] | None, max_seq_length: int,
                   cls_id: int, sep_id: int, label_id: int | float) -> InputFeatures:
    """``[CLS] a [SEP] (b [SEP])`` with segment ids and mask, truncated and zero-padded to max_seq_length."""
    check_max_seq_length(max_seq_length)
    ids_a = list(ids_a)
    ids_b = list(ids_b) if ids_b else None
    if ids_b is not None:
        ids_a, ids_b = truncate_seq_pair(ids_a, ids_b, max_seq_length - 3)
    else:
        ids_a = ids_a[:max_seq_length - 2]
    input_ids = [cls_id] + ids_a + [sep_id]
    segment_ids = [0] * len(input_ids)
    if ids_b is not None:
        input_ids += ids_b + [sep_id]
        segment_ids += [1] * (len(ids_b) + 1)
    input_mask = [1] * len(input_ids)
    padding = [0] * (max_seq_length - len(input_ids))
    return InputFeatures(input_ids=input_ids + padding, input_mask=input_mask + padding,
                         segment_ids=segment_ids + padding, label_id=label_id)


def label_id_of(example: InputExample, label_list: Sequence[str] | None) -> int | float:
    """Index of the example's label in ``label_list``; the float itself for regression (None list).

    Unlabelled examples (label None) get the reference's placeholder: id 0 (0.0 for regression).
    """
    if label_list is None:
        return 0.0 if example.label is None else float(example.label)
    if example.label is None:
        return 0
    if example.label not in label_list:
        raise ValueError(f"example {example.guid}: label {example.label!r} not in {list(label_list)}")
    return list(label_list).index(example.label)


def convert_example(example: InputExample, label_list: Sequence[str] | None, max_seq_length: int,
                    tokenizer: GlueTokenizer) -> InputFeatures:
    """Tokenizes an (already processed) example and lays it out (reference ``convert_single_example``).

    text_b is used only when non-empty, as in the reference.
    """
    ids_a = tokenizer.convert_tokens_to_ids(tokenizer.tokenize(example.text_a))
    ids_b = tokenizer.convert_tokens_to_ids(tokenizer.tokenize(example.text_b)) if example.text_b else None
    return build_features(ids_a, ids_b, max_seq_length, tokenizer.cls_id, tokenizer.sep_id,
                          label_id_of(example, label_list))


def iter_features(examples: Sequence[InputExample], label_list: Sequence[str] | None,
                  max_seq_length: int, tokenizer: GlueTokenizer) -> Iterator[InputFeatures]:
    """Features of every example, in order, one at a time (what the caller does with each, e.g.
    writing its record, counts in the progress logged: data_prep/common/progress.py)."""
    progress = Progress("examples", "converted", total=len(examples))
    for index, example in enumerate(examples):
        feature = convert_example(example, label_list, max_seq_length, tokenizer)
        if index < _NUM_EXAMPLES_TO_LOG:
            logging.info("guid %s: input ids %s label_id %s", example.guid,
                         feature.input_ids[:sum(feature.input_mask)], feature.label_id)
        yield feature
        progress.update(index + 1)
    progress.update(len(examples), final=True)


def convert_examples_to_features(examples: Sequence[InputExample], label_list: Sequence[str] | None,
                                 max_seq_length: int, tokenizer: GlueTokenizer) -> list[InputFeatures]:
    """Features of every example, in order."""
    return list(iter_features(examples, label_list, max_seq_length, tokenizer))


# -- TFRecords -------------------------------------------------------------------------------------

def serialize_glue_features(features: InputFeatures, is_regression: bool) -> bytes:
    """The reference's record: int64 ids/mask/segments [S], label_ids (float for regression),
    is_real_example."""
    label = (float_feature([features.label_id]) if is_regression
             else int64_feature([features.label_id]))
    return serialize_example({
        records.INPUT_IDS: int64_feature(features.input_ids),
        records.INPUT_MASK: int64_feature(features.input_mask),
        records.SEGMENT_IDS: int64_feature(features.segment_ids),
        records.LABEL_IDS: label,
        records.IS_REAL_EXAMPLE: int64_feature([int(features.is_real_example)]),
    })


def write_features(sink: RecordSink, features: Iterable[InputFeatures], is_regression: bool) -> int:
    """Writes one serialized record per feature to ``sink``; returns the number of records."""
    count = 0
    for feature in features:
        sink.write(serialize_glue_features(feature, is_regression))
        count += 1
    return count


# -- the feature cache -----------------------------------------------------------------------------

def write_example_records(sink: RecordSink, examples: Sequence[InputExample],
                          label_list: Sequence[str] | None, max_seq_length: int,
                          tokenizer: GlueTokenizer) -> dict:
    """Writes the records of ``examples`` (a regression when ``label_list`` is None) to ``sink``;
    returns the feature file's metadata: ``guids`` (in record order), ``num_real_examples``,
    ``is_regression``."""
    is_regression = label_list is None
    write_features(sink, iter_features(examples, label_list, max_seq_length, tokenizer),
                   is_regression)
    return {"guids": [example.guid for example in examples],
            "num_real_examples": len(examples), "is_regression": is_regression}


def cached_glue_features(task_name: str, data_dir: str, split: str, tokenizer: GlueTokenizer,
                         settings: GlueFeatureSettings, cache_dir: str) -> FeatureFile:
    """The feature file of ``split`` of ``task_name``: reused from ``cache_dir`` or (re)built.

    The processor normalizes text as ``tokenizer`` was built (SentencePiece mode and lowercasing).
    The cache key covers the task, split, ``settings``, the tokenizer fingerprint and the source
    TSV's size and sha256. Metadata: ``guids`` (in record order), ``num_real_examples``,
    ``is_regression``.
    """
    task = glue_task(task_name)
    processor = task.processor(use_spm=tokenizer.uses_sentencepiece,
                               do_lower_case=tokenizer.do_lower_case)
    source_path = processor.split_path(data_dir, split)

    def build(sink: RecordSink) -> dict:
        return write_example_records(sink, processor.get_examples(data_dir, split), task.labels,
                                     settings.max_seq_length, tokenizer)

    return cached_feature_file(cache_dir, task.name, split, settings, tokenizer.fingerprint,
                               [source_path], build)
