"""GLUE examples -> fixed-length features -> TFRecords, and the feature cache (spec 7.2).

Layout of one feature of max_seq_length S (reference ``convert_single_example``)::

    input_ids    [CLS] a_1 .. a_n [SEP] b_1 .. b_m [SEP] 0 .. 0      (pair; single: no b and 2nd [SEP])
    segment_ids    0    0  ..  0    0     1  ..  1    1  0 .. 0
    input_mask     1    1  ..  1    1     1  ..  1    1  0 .. 0

A pair is truncated to S-3 pieces by popping from the end of the currently longer list (ties pop from b);
a single sentence keeps its first S-2 pieces. label_id = index of the label in the label list (STS-B: the
float score; unlabelled examples: the placeholder 0). Padding examples (all zeros,
``is_real_example=0``) can fill the last batch of an eval/predict set.

TFRecord schema (the reference's names, dtypes and shapes): ``input_ids``, ``input_mask``, ``segment_ids``
int64 [S]; ``label_ids`` int64 scalar (float for STS-B); ``is_real_example`` int64 scalar.

Unlike the reference, whose ``<task>_train.tf_record`` is silently reused after S or the tokenizer
changed, cache files are named by everything that determines their bytes:
``<cache_dir>/<task>_<split>_<S>_<tokenizer fingerprint>.tf_record`` with a JSON sidecar
(``.json`` instead of ``.tf_record``) holding the full key (including a hash of the source TSV) and the
example counts. A cache is reused only when the sidecar's key matches; both files are written atomically.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import os
from typing import Iterable, NamedTuple, Protocol, Sequence

import tensorflow as tf

from albert_tf.io_utils import absolute_path, atomic_write_text, temporary_path
from data_prep.glue_processors import GlueProcessor, InputExample, get_processor

# Bump when the bytes written for the same inputs change (invalidates every existing cache).
CACHE_FORMAT_VERSION = 1

# Number of examples whose pieces are logged, as the reference does, to eyeball the preprocessing.
_NUM_EXAMPLES_TO_LOG = 3


class GlueTokenizer(Protocol):
    """What feature conversion needs from ``albert_tf.tokenization.FullTokenizer``."""

    cls_id: int
    sep_id: int
    fingerprint: str
    uses_sentencepiece: bool
    do_lower_case: bool
    vocab_size: int

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


class FeatureCache(NamedTuple):
    """A feature TFRecord file: its path, its record count and how many records are real examples."""

    path: str
    num_examples: int
    num_real_examples: int


def truncate_seq_pair(tokens_a: list, tokens_b: list, max_length: int) -> None:
    """Pops from the end of the longer list (b on ties) until both together hold <= max_length items."""
    while len(tokens_a) + len(tokens_b) > max_length:
        if len(tokens_a) > len(tokens_b):
            tokens_a.pop()
        else:
            tokens_b.pop()


def _check_max_seq_length(max_seq_length: int) -> None:
    if max_seq_length < 3:
        raise ValueError(f"max_seq_length must be >= 3 ([CLS] a [SEP] b [SEP] needs 3 special tokens), "
                         f"got {max_seq_length}")


def build_features(ids_a: Sequence[int], ids_b: Sequence[int] | None, max_seq_length: int,
                   cls_id: int, sep_id: int, label_id: int | float) -> InputFeatures:
    """``[CLS] a [SEP] (b [SEP])`` with segment ids and mask, truncated and zero-padded to max_seq_length."""
    _check_max_seq_length(max_seq_length)
    ids_a = list(ids_a)
    ids_b = list(ids_b) if ids_b else None
    if ids_b is not None:
        truncate_seq_pair(ids_a, ids_b, max_seq_length - 3)
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


def padding_features(max_seq_length: int, is_regression: bool) -> InputFeatures:
    """An all-zero feature with ``is_real_example=False`` (fills the last fixed-size eval batch)."""
    zeros = [0] * max_seq_length
    return InputFeatures(input_ids=zeros, input_mask=zeros, segment_ids=zeros,
                         label_id=0.0 if is_regression else 0, is_real_example=False)


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


def convert_examples_to_features(examples: Sequence[InputExample], label_list: Sequence[str] | None,
                                 max_seq_length: int, tokenizer: GlueTokenizer,
                                 pad_to_multiple_of: int = 1) -> list[InputFeatures]:
    """Features of every example, then padding features until the count is a multiple of
    ``pad_to_multiple_of`` (1 = no padding)."""
    if pad_to_multiple_of < 1:
        raise ValueError(f"pad_to_multiple_of must be >= 1, got {pad_to_multiple_of}")
    features = []
    for index, example in enumerate(examples):
        feature = convert_example(example, label_list, max_seq_length, tokenizer)
        if index < _NUM_EXAMPLES_TO_LOG:
            logging.info("guid %s: input ids %s label_id %s", example.guid,
                         feature.input_ids[:sum(feature.input_mask)], feature.label_id)
        features.append(feature)
    while len(features) % pad_to_multiple_of:
        features.append(padding_features(max_seq_length, label_list is None))
    return features


# -- TFRecords -------------------------------------------------------------------------------------

def _int64_feature(values: Sequence[int]) -> tf.train.Feature:
    return tf.train.Feature(int64_list=tf.train.Int64List(value=list(values)))


def _float_feature(values: Sequence[float]) -> tf.train.Feature:
    return tf.train.Feature(float_list=tf.train.FloatList(value=list(values)))


def features_to_tf_example(features: InputFeatures, is_regression: bool) -> tf.train.Example:
    """The reference's record: int64 ids/mask/segments [S], label_ids (float for regression),
    is_real_example."""
    label = (_float_feature([float(features.label_id)]) if is_regression
             else _int64_feature([int(features.label_id)]))
    return tf.train.Example(features=tf.train.Features(feature={
        "input_ids": _int64_feature(features.input_ids),
        "input_mask": _int64_feature(features.input_mask),
        "segment_ids": _int64_feature(features.segment_ids),
        "label_ids": label,
        "is_real_example": _int64_feature([int(features.is_real_example)]),
    }))


def write_features_tfrecord(path: str, features: Iterable[InputFeatures], is_regression: bool) -> int:
    """Writes one record per feature to ``path`` atomically; returns the number of records."""
    count = 0
    with temporary_path(path) as temporary, tf.io.TFRecordWriter(temporary) as writer:
        for feature in features:
            writer.write(features_to_tf_example(feature, is_regression).SerializeToString())
            count += 1
    return count


def glue_feature_spec(max_seq_length: int, is_regression: bool) -> dict[str, tf.io.FixedLenFeature]:
    """``tf.io.parse_example`` spec of a GLUE record."""
    return {
        "input_ids": tf.io.FixedLenFeature([max_seq_length], tf.int64),
        "input_mask": tf.io.FixedLenFeature([max_seq_length], tf.int64),
        "segment_ids": tf.io.FixedLenFeature([max_seq_length], tf.int64),
        "label_ids": tf.io.FixedLenFeature([], tf.float32 if is_regression else tf.int64),
        "is_real_example": tf.io.FixedLenFeature([], tf.int64),
    }


def parse_glue_example(serialized: tf.Tensor, max_seq_length: int,
                       is_regression: bool) -> dict[str, tf.Tensor]:
    """Parses one serialized record (scalar string) or a batch [B]; int64 features become int32.

    Shapes: ids/mask/segments [S] (or [B, S]); label_ids and is_real_example [] (or [B]).
    """
    parsed = tf.io.parse_example(serialized, glue_feature_spec(max_seq_length, is_regression))
    return {name: tf.cast(value, tf.int32) if value.dtype == tf.int64 else value
            for name, value in parsed.items()}


# -- the feature cache -----------------------------------------------------------------------------

def _sha256_of_file(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def cache_paths(cache_dir: str, task_name: str, split: str, max_seq_length: int, fingerprint: str,
                pad_to_multiple_of: int = 1) -> tuple[str, str]:
    """(record path, sidecar path) of a cache entry."""
    stem = f"{task_name.lower()}_{split}_{max_seq_length}_{fingerprint}"
    if pad_to_multiple_of > 1:
        stem += f"_pad{pad_to_multiple_of}"
    return os.path.join(cache_dir, stem + ".tf_record"), os.path.join(cache_dir, stem + ".json")


def _read_sidecar(sidecar_path: str) -> dict | None:
    try:
        with open(sidecar_path, encoding="utf-8") as handle:
            return json.load(handle)
    except (OSError, ValueError):
        return None


def cached_glue_features(task_name: str, data_dir: str, split: str, tokenizer: GlueTokenizer,
                         max_seq_length: int, cache_dir: str, pad_to_multiple_of: int = 1) -> FeatureCache:
    """The TFRecord of ``split`` of ``task_name``: reused when its key matches, else (re)written.

    The processor normalizes text as ``tokenizer`` was built (SentencePiece mode and lowercasing).
    The key covers task, split, max_seq_length, tokenizer fingerprint, padding, the source file's
    sha256 and CACHE_FORMAT_VERSION, so a stale cache is never reused.
    """
    _check_max_seq_length(max_seq_length)
    processor = get_processor(task_name, use_spm=tokenizer.uses_sentencepiece,
                              do_lower_case=tokenizer.do_lower_case)
    source_path = processor.split_path(data_dir, split)
    record_path, sidecar_path = cache_paths(cache_dir, task_name, split, max_seq_length,
                                            tokenizer.fingerprint, pad_to_multiple_of)
    key = {
        "format_version": CACHE_FORMAT_VERSION,
        "task_name": task_name.lower(),
        "split": split,
        "max_seq_length": max_seq_length,
        "tokenizer_fingerprint": tokenizer.fingerprint,
        "pad_to_multiple_of": pad_to_multiple_of,
        "source_sha256": _sha256_of_file(source_path),
    }
    sidecar = _read_sidecar(sidecar_path)
    if (sidecar is not None and sidecar.get("key") == key and tf.io.gfile.exists(record_path)
            and tf.io.gfile.stat(record_path).length == sidecar.get("record_bytes")):
        logging.info("reusing cached features %s (%d examples)", record_path, sidecar["num_examples"])
        return FeatureCache(record_path, sidecar["num_examples"], sidecar["num_real_examples"])
    return _write_cache(processor, data_dir, split, tokenizer, max_seq_length, pad_to_multiple_of,
                        key, record_path, sidecar_path, source_path)


def _write_cache(processor: GlueProcessor, data_dir: str, split: str, tokenizer: GlueTokenizer,
                 max_seq_length: int, pad_to_multiple_of: int, key: dict, record_path: str,
                 sidecar_path: str, source_path: str) -> FeatureCache:
    examples = processor.get_examples(data_dir, split)
    features = convert_examples_to_features(examples, processor.get_labels(), max_seq_length, tokenizer,
                                            pad_to_multiple_of)
    num_examples = write_features_tfrecord(record_path, features, processor.is_regression)
    sidecar = {
        "key": key,
        "source_file": absolute_path(source_path),
        "num_examples": num_examples,
        "num_real_examples": len(examples),
        "is_regression": processor.is_regression,
        "tokenizer_vocab_size": tokenizer.vocab_size,
        "record_bytes": tf.io.gfile.stat(record_path).length,
    }
    atomic_write_text(sidecar_path, json.dumps(sidecar, indent=2, sort_keys=True) + "\n")
    logging.info("wrote %d features (%d real) to %s", num_examples, len(examples), record_path)
    return FeatureCache(record_path, num_examples, len(examples))
