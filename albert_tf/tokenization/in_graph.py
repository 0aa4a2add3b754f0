"""``InGraphTokenizer``: raw strings -> ALBERT ids as TensorFlow ops, for serving signatures that take text.

The same contract as ``FullTokenizer.encode_text`` (albert_tf/tokenization/full_tokenizer.py) in
SentencePiece mode, with identical ids: whitespace collapse, NFKD and accent removal, lowercasing,
SentencePiece (tensorflow_text, same C++ library as Python) and the reference's digit-comma rule,
each step the in-graph twin of the Python path (see the class). WordPiece mode has no in-graph
twin. ``SpanTokenizer`` (albert_tf/tokenization/spans.py) builds on it to report character spans.
"""

from __future__ import annotations

from typing import Sequence

import sentencepiece as spm
import tensorflow as tf

from albert_tf.tokenization.full_tokenizer import FullTokenizer
from albert_tf.tokenization.model_files import TokenizerError
from albert_tf.tokenization.sentencepiece import (is_digit_comma_piece, load_sentencepiece_model,
                                                  split_digit_comma_piece)
from albert_tf.tokenization.unicode_tables import character_class, python_unicode_tables

# ---------------------------------------------------------------------------------------------------
# In-graph tokenizer for serving (SentencePiece mode)
# ---------------------------------------------------------------------------------------------------

_CAPITAL_SIGMA, _FINAL_SIGMA = 0x3A3, 0x3C2
# Never a value of the char map: marks "character unchanged" (a lone 0xFF byte is invalid UTF-8).
_UNCHANGED = b"\xff"


_CASE_OTHER, _CASE_CASED, _CASE_IGNORABLE = 0, 1, 2


def _case_class_table(cased: Sequence[int], ignorable: Sequence[int]) -> tf.lookup.StaticHashTable:
    """cp (int32) -> _CASE_CASED, _CASE_IGNORABLE or _CASE_OTHER (the default)."""
    keys = tf.constant(list(cased) + list(ignorable), tf.int32)
    values = tf.constant([_CASE_CASED] * len(cased) + [_CASE_IGNORABLE] * len(ignorable), tf.int32)
    return tf.lookup.StaticHashTable(tf.lookup.KeyValueTensorInitializer(keys, values),
                                     default_value=_CASE_OTHER)


def _digit_comma_replacements(sp_model: spm.SentencePieceProcessor) -> tf.RaggedTensor:
    """[V, (R)] int32: row i = the ids ``encode_pieces`` emits for a piece of id i (digit-comma rule).

    The digit-comma re-encoding depends on the piece alone, so it is a static table: [i] for most
    ids, ``EncodeAsIds(piece[:-1] without "▁") + [id(",")]`` for "▁1990,"-like pieces.
    """
    rows = []
    for i in range(sp_model.GetPieceSize()):
        piece = sp_model.IdToPiece(i)
        if is_digit_comma_piece(piece):
            rows.append([sp_model.PieceToId(p) for p in split_digit_comma_piece(sp_model, piece)])
        else:
            rows.append([i])
    return tf.ragged.constant(rows, dtype=tf.int32)


class InGraphTokenizer(tf.Module):
    """Raw strings -> ALBERT ids inside the graph, identical to ``FullTokenizer.encode_text``.

    ``__call__(texts)``: texts string [B] -> ids int32 RaggedTensor [B, (T)], no [CLS]/[SEP] added.
    Steps, each the in-graph twin of the Python path:
    1. whitespace collapse + strip, on exactly the characters ``str.split()`` treats as whitespace;
    2. NFKD + removal of combining characters, by a per-character table taken from this Python's
       ``unicodedata`` (tf-text's ICU NFKD follows a newer Unicode version and differs on ~120
       recently added characters);
    3. lowercasing (``do_lower_case``) by a table of ``str.lower`` plus its final-sigma rule ("ΟΔΟΣ" ->
       "οδος") (``tf.strings.lower`` misses ~40 characters and drops NUL);
    4. tensorflow_text.SentencepieceTokenizer on the same model bytes (same C++ library as Python);
    5. the reference's digit-comma rule as a static id -> ids table.
    The tables are built by the exporting Python: a SavedModel keeps that Python's Unicode version.
    Not covered: subword sampling (serving never samples); models where "," is not a piece (an unknown
    "<digit>," run would then be one unk id here, several in Python).
    """

    def __init__(self, sp_model_proto: bytes, do_lower_case: bool = True, name: str | None = None):
        super().__init__(name=name)
        import tensorflow_text  # pylint: disable=import-outside-toplevel  (heavy; serving only)

        self.do_lower_case = do_lower_case
        sp_model = load_sentencepiece_model(sp_model_proto)
        tables = python_unicode_tables()
        self._whitespace_run = character_class(tables.whitespace) + "+"
        decompose = tables.decompose
        self._decompose = tf.lookup.StaticHashTable(
            tf.lookup.KeyValueTensorInitializer(
                tf.constant(list(decompose.keys()), tf.int32),
                tf.constant([v.encode("utf-8") for v in decompose.values()], tf.string)),
            default_value=_UNCHANGED)
        lower = tables.lower
        self._lower = tf.lookup.StaticHashTable(
            tf.lookup.KeyValueTensorInitializer(tf.constant(list(lower.keys()), tf.int32),
                                                tf.constant(list(lower.values()), tf.int32)),
            default_value=-1)
        self._case_class = _case_class_table(tables.cased, tables.ignorable)
        self._sentencepiece = tensorflow_text.SentencepieceTokenizer(model=sp_model_proto,
                                                                     out_type=tf.int32)
        self._replacements = _digit_comma_replacements(sp_model)

    @classmethod
    def from_full_tokenizer(cls, tokenizer: FullTokenizer) -> "InGraphTokenizer":
        """The in-graph twin of an SP-mode FullTokenizer (same model bytes and do_lower_case)."""
        if tokenizer.sp_model is None:
            raise TokenizerError(f"InGraphTokenizer needs a SentencePiece model; {tokenizer.source_file} "
                                 "is a WordPiece vocab")
        return cls(tokenizer.sp_model.serialized_model_proto(), tokenizer.do_lower_case)

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
    def normalize(self, texts: tf.Tensor) -> tf.Tensor:
        """preprocess_text(text, lower=do_lower_case) of every string: [B] -> [B]."""
        # Invalid UTF-8 is dropped first, as convert_to_unicode's errors="ignore" does.
        texts = tf.strings.unicode_encode(tf.strings.unicode_decode(texts, "UTF-8", errors="ignore"),
                                          "UTF-8")
        texts = tf.strings.regex_replace(texts, self._whitespace_run, " ")
        texts = tf.strings.regex_replace(texts, "^ | $", "")
        chars = tf.strings.unicode_split(texts, "UTF-8")
        code_points = tf.strings.unicode_decode(texts, "UTF-8")
        mapped = self._decompose.lookup(code_points.flat_values)
        mapped = tf.where(tf.equal(mapped, _UNCHANGED), chars.flat_values, mapped)
        texts = tf.strings.reduce_join(chars.with_flat_values(mapped), axis=-1)
        if self.do_lower_case:
            texts = self._lowercase(texts)
        return texts

    def _lowercase(self, texts: tf.Tensor) -> tf.Tensor:
        """str.lower of every string, final sigma included: [B] -> [B]."""
        code_points = tf.strings.unicode_decode(texts, "UTF-8")
        flat = code_points.flat_values
        rows = code_points.value_rowids()
        lowered = self._lower.lookup(flat)
        lowered = tf.where(lowered >= 0, lowered, flat)
        is_final = self._final_sigma_positions(flat, rows)
        lowered = tf.where(is_final, tf.constant(_FINAL_SIGMA, tf.int32), lowered)
        return tf.strings.unicode_encode(code_points.with_flat_values(lowered), "UTF-8")

    def _final_sigma_positions(self, flat: tf.Tensor, rows: tf.Tensor) -> tf.Tensor:
        """[N] bool: capital sigmas with a cased char before and none after, case-ignorables skipped,
        within the same string (flat = all strings' code points, rows = their string index)."""
        case_class = self._case_class.lookup(flat)
        anchors = tf.not_equal(case_class, _CASE_IGNORABLE)
        cased = tf.equal(case_class, _CASE_CASED)
        # Positions of non-ignorable chars, plus a sentinel of row -1 for "none".
        anchor_pos = tf.concat([tf.where(anchors)[:, 0], [tf.size(flat, tf.int64)]], axis=0)
        row_of = tf.concat([rows, [-1]], axis=0)
        cased_of = tf.concat([cased, [False]], axis=0)
        count = tf.cast(tf.shape(anchor_pos)[0] - 1, tf.int64)
        before = tf.cumsum(tf.cast(anchors, tf.int64), exclusive=True)
        prev = tf.gather(anchor_pos, tf.where(before > 0, before - 1, count))
        upto = tf.cumsum(tf.cast(anchors, tf.int64))
        nxt = tf.gather(anchor_pos, tf.minimum(upto, count))
        prev_cased = tf.gather(cased_of, prev) & tf.equal(tf.gather(row_of, prev), rows)
        next_cased = tf.gather(cased_of, nxt) & tf.equal(tf.gather(row_of, nxt), rows)
        return tf.equal(flat, _CAPITAL_SIGMA) & prev_cased & tf.logical_not(next_cased)

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
    def __call__(self, texts: tf.Tensor) -> tf.RaggedTensor:
        """Raw strings [B] -> ids int32 RaggedTensor [B, (T)] (= FullTokenizer.encode_text per string)."""
        return self.encode_normalized(self.normalize(texts))

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
    def encode_normalized(self, texts: tf.Tensor) -> tf.RaggedTensor:
        """Strings already through ``normalize`` [B] -> ids int32 RaggedTensor [B, (T)]."""
        ids = self._sentencepiece.tokenize(texts)
        return tf.gather(self._replacements, ids).merge_dims(1, 2)
