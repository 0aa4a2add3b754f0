"""Serialized ``tf.train.Example`` records of pretraining instances, without importing TensorFlow.

The record layout is the reference's: per instance, padded with zeros,

| feature              | type  | length |
|----------------------|-------|--------|
| input_ids            | int64 | S      |
| input_mask           | int64 | S      |
| segment_ids          | int64 | S      |
| token_boundary       | int64 | S      |
| masked_lm_positions  | int64 | M      |
| masked_lm_ids        | int64 | M      |
| masked_lm_weights    | float | M      |
| next_sentence_labels | int64 | 1      |

(S = max_seq_length, M = max_predictions_per_seq; albert_tf/tasks/pretraining/records.py holds the
matching parser.) The protobuf wire format is written directly because worker processes run without
TensorFlow and because building ``tf.train.Example`` messages field by field was the slowest step of
the generator; the bytes parse to exactly the message ``tf.train.Example`` would build.
"""

from __future__ import annotations

import struct
from typing import Sequence

# Protobuf wire type of every field written here (bytes, sub-messages, packed lists).
_LENGTH_DELIMITED = 2
# Field numbers of tf.train.Example -> Features -> map<string, Feature> -> Feature -> Int64List/FloatList.
_EXAMPLE_FEATURES = 1
_FEATURES_MAP = 1
_MAP_KEY = 1
_MAP_VALUE = 2
_FEATURE_FLOAT_LIST = 2
_FEATURE_INT64_LIST = 3
_LIST_VALUE = 1

# Varints of small non-negative ints are looked up rather than computed (ids of vocabularies up to
# 2**17 pieces, positions, lengths); larger values fall back to ``encode_varint``.
_VARINT_TABLE_SIZE = 1 << 17


def encode_varint(value: int) -> bytes:
    """Protobuf base-128 varint of a non-negative int (negative int64 never occur in this schema)."""
    if value < 0:
        raise ValueError(f"negative value {value} cannot be written by this encoder")
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


_VARINTS = [encode_varint(value) for value in range(_VARINT_TABLE_SIZE)]


def _varint(value: int) -> bytes:
    return _VARINTS[value] if value < _VARINT_TABLE_SIZE else encode_varint(value)


def _tag(field: int, wire_type: int) -> bytes:
    return _varint((field << 3) | wire_type)


def _delimited(field: int, payload: bytes) -> bytes:
    return _tag(field, _LENGTH_DELIMITED) + _varint(len(payload)) + payload


_LIST_VALUE_TAG = _tag(_LIST_VALUE, _LENGTH_DELIMITED)
_INT64_LIST_TAG = _tag(_FEATURE_INT64_LIST, _LENGTH_DELIMITED)
_FLOAT_LIST_TAG = _tag(_FEATURE_FLOAT_LIST, _LENGTH_DELIMITED)
_MAP_VALUE_TAG = _tag(_MAP_VALUE, _LENGTH_DELIMITED)
_FEATURES_MAP_TAG = _tag(_FEATURES_MAP, _LENGTH_DELIMITED)


def _packed_varints(values: Sequence[int]) -> bytes:
    """Packed varints of non-negative ints (the table lookup runs at C speed through ``map``)."""
    try:
        return b"".join(map(_VARINTS.__getitem__, values))
    except IndexError:
        return b"".join(map(_varint, values))


def _map_entry(key_prefix: bytes, list_tag: bytes, packed: bytes) -> bytes:
    """One ``feature`` map entry: key, then Feature{Int64List|FloatList{packed values}}.

    Written out by hand (tags are constants) because this runs 8 times per record.
    """
    value_list = _LIST_VALUE_TAG + _varint(len(packed)) + packed
    feature = list_tag + _varint(len(value_list)) + value_list
    entry = key_prefix + _MAP_VALUE_TAG + _varint(len(feature)) + feature
    return _FEATURES_MAP_TAG + _varint(len(entry)) + entry


# Feature names in the order the reference writes them, with their kinds.
INT64 = "int64"
FLOAT = "float"
FEATURE_KINDS = (
    ("input_ids", INT64), ("input_mask", INT64), ("segment_ids", INT64), ("token_boundary", INT64),
    ("masked_lm_positions", INT64), ("masked_lm_ids", INT64), ("masked_lm_weights", FLOAT),
    ("next_sentence_labels", INT64),
)
_KEY_PREFIXES = {name: _delimited(_MAP_KEY, name.encode("utf-8")) for name, _ in FEATURE_KINDS}


def serialize_pretraining_example(input_ids: Sequence[int], segment_ids: Sequence[int],
                                  token_boundary: Sequence[int], masked_lm_positions: Sequence[int],
                                  masked_lm_ids: Sequence[int], next_sentence_label: int,
                                  max_seq_length: int, max_predictions_per_seq: int) -> bytes:
    """Serialized tf.train.Example of one instance with T real tokens and P predictions.

    input_ids, segment_ids, token_boundary: [T], T <= max_seq_length; masked_lm_positions and
    masked_lm_ids: [P], P <= max_predictions_per_seq. Pads to S and M with zeros; input_mask and
    masked_lm_weights mark the real entries.
    """
    num_tokens, num_predictions = len(input_ids), len(masked_lm_positions)
    if num_tokens > max_seq_length or num_predictions > max_predictions_per_seq:
        raise ValueError(f"instance of {num_tokens} tokens and {num_predictions} predictions does not "
                         f"fit max_seq_length {max_seq_length} / max_predictions_per_seq "
                         f"{max_predictions_per_seq}")
    seq_pad = [0] * (max_seq_length - num_tokens)
    pred_pad = [0] * (max_predictions_per_seq - num_predictions)
    # A varint of 0 or 1 is that single byte, so the 0/1 features are packed by ``bytes``.
    packed = {
        "input_ids": _packed_varints([*input_ids, *seq_pad]),
        "input_mask": bytes([1] * num_tokens + seq_pad),
        "segment_ids": _zero_one_bytes(segment_ids, seq_pad, "segment_ids"),
        "token_boundary": _zero_one_bytes(token_boundary, seq_pad, "token_boundary"),
        "masked_lm_positions": _packed_varints([*masked_lm_positions, *pred_pad]),
        "masked_lm_ids": _packed_varints([*masked_lm_ids, *pred_pad]),
        "masked_lm_weights": struct.pack(f"<{max_predictions_per_seq}f",
                                         *([1.0] * num_predictions + pred_pad)),
        "next_sentence_labels": _packed_varints([next_sentence_label]),
    }
    entries = b"".join(
        _map_entry(_KEY_PREFIXES[name], _FLOAT_LIST_TAG if kind == FLOAT else _INT64_LIST_TAG, packed[name])
        for name, kind in FEATURE_KINDS)
    return _delimited(_EXAMPLE_FEATURES, entries)


def _zero_one_bytes(values: Sequence[int], padding: list[int], name: str) -> bytes:
    packed = bytes([*values, *padding])
    if packed.translate(None, b"\x00\x01"):
        raise ValueError(f"{name} must hold only 0 and 1")
    return packed
