"""Raw strings -> ALBERT ids with each token's character span in the raw string, inside the graph.

``SpanTokenizer(texts)`` gives the ids of ``InGraphTokenizer`` (identical to
``FullTokenizer.encode_text``) and, per token, the code points ``[start, end)`` of the raw text it
comes from, so a SQuAD client can cut an answer out of its own context. How a span is found:

1. the raw text is normalised as ``preprocess_text`` does; every normalised character comes from one
   raw character: a raw character yields its own decomposition (NFKD without combining marks,
   lowercased: 0, 1 or more characters), a run of whitespace yields one space, or none at the
   text's start and end;
2. SentencePiece reports each piece's bytes in the normalised text; the digit-comma rule's
   sub-pieces (``"▁1990,"`` -> ``"▁19" "90" ","``) take their share of their piece's bytes, counted
   from its end;
3. a token's span runs from the raw character of its first normalised character (the space a
   leading ``"▁"`` stands for is skipped) to the one of its last. A token of no bytes has an empty
   span, except SentencePiece's dummy prefix (a lone ``"▁"`` before the text, e.g. before
   ``"<doc"``): it covers the text up to its first normalised character, at least one character,
   as the reference has it.

A raw character that normalises to several characters ("ﬁ" -> "fi") belongs whole to every token
sharing it. Offsets count code points of the text once invalid UTF-8 is dropped (as
``convert_to_unicode`` does). The reference maps pieces to raw characters differently (a banded
longest common subsequence over the paragraph) and counts the space before a word into the word's
piece; cut and stripped, both give the same answer text.
"""

from __future__ import annotations

import functools
import sys

import tensorflow as tf

from albert_tf.tokenization.full_tokenizer import FullTokenizer
from albert_tf.tokenization.in_graph import InGraphTokenizer
from albert_tf.tokenization.sentencepiece import (SPIECE_UNDERLINE, is_digit_comma_piece,
                                                  split_digit_comma_piece)

# (a, b) = (this, 0) marks "the whole token" in the sub-piece byte table.
_WHOLE_PIECE = 1 << 30
# Byte offsets of row r are searched as r * _ROW_STRIDE + offset (texts under 4 GiB).
_ROW_STRIDE = 1 << 32
_SPACE = ord(" ")


@functools.lru_cache(maxsize=None)
def _whitespace_class() -> str:
    """RE2 class of the characters ``str.split()`` splits on (preprocess_text's whitespace)."""
    code_points = (cp for cp in range(sys.maxunicode + 1) if chr(cp).isspace())
    return "[" + "".join(f"\\x{{{cp:X}}}" for cp in code_points) + "]"


def _sub_pieces(tokenizer: FullTokenizer) -> tuple[tf.RaggedTensor, tf.RaggedTensor]:
    """For every vocabulary id i: the ids ``encode_pieces`` emits for a piece of id i, and each one's
    bytes as (a, b): ``[end - a, end - b)`` of the piece's ``[begin, end)``.

    Returns int32 ids [V, (R)] and int64 byte shares [V, (R), 2]. An ordinary piece is itself,
    whole; a digit-comma piece is split into its sub-pieces, which share out its text without "▁".
    """
    sp_model = tokenizer.sp_model
    ids, shares = [], []
    for i in range(sp_model.GetPieceSize()):
        piece = sp_model.IdToPiece(i)
        if not is_digit_comma_piece(piece):
            ids.append([i])
            shares.append([[_WHOLE_PIECE, 0]])
            continue
        subs = split_digit_comma_piece(sp_model, piece)
        lengths = [len(sub.replace(SPIECE_UNDERLINE, "").encode("utf-8")) for sub in subs]
        remaining = sum(lengths)
        row = []
        for length in lengths:
            row.append([remaining, remaining - length])
            remaining -= length
        ids.append([sp_model.PieceToId(sub) for sub in subs])
        shares.append(row)
    return (tf.ragged.constant(ids, dtype=tf.int32),
            tf.ragged.constant(shares, dtype=tf.int64, ragged_rank=1))


class SpanTokenizer(tf.Module):
    """``__call__(texts)``: strings [B] -> ``ids`` int32 [B, (T)] (= ``InGraphTokenizer``'s) and
    ``char_start`` / ``char_end`` int32 [B, (T)], each token's code points ``[start, end)`` in its
    raw text. Requires a SentencePiece tokenizer."""

    def __init__(self, tokenizer: FullTokenizer, name: str = "span_tokenizer"):
        super().__init__(name=name)
        import tensorflow_text  # pylint: disable=import-outside-toplevel  (heavy; serving only)

        self.normalizer = InGraphTokenizer.from_full_tokenizer(tokenizer)
        self._sentencepiece = tensorflow_text.SentencepieceTokenizer(
            model=tokenizer.sp_model.serialized_model_proto(), out_type=tf.int32)
        self._sub_ids, self._sub_shares = _sub_pieces(tokenizer)

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
    def __call__(self, texts: tf.Tensor) -> dict[str, tf.RaggedTensor]:
        normalized = self.normalizer.normalize(texts)
        pieces, piece_begins, piece_ends = self._sentencepiece.tokenize_with_offsets(normalized)
        ids = tf.gather(self._sub_ids, pieces)  # [B, (t), (r)]
        shares = tf.gather(self._sub_shares, pieces).flat_values  # [T, 2]
        per_piece = ids.values.row_lengths()
        ends = tf.repeat(tf.cast(piece_ends.flat_values, tf.int64), per_piece)
        begins = tf.maximum(tf.repeat(tf.cast(piece_begins.flat_values, tf.int64), per_piece),
                            ends - shares[:, 0])
        ends = tf.maximum(begins, ends - shares[:, 1])
        ids = ids.merge_dims(1, 2)
        start, end = self._char_spans(texts, normalized, ids.value_rowids(), begins, ends)
        return {"ids": ids, "char_start": ids.with_flat_values(start),
                "char_end": ids.with_flat_values(end)}

    def _char_spans(self, texts: tf.Tensor, normalized: tf.Tensor, rows: tf.Tensor,
                    byte_begins: tf.Tensor, byte_ends: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        """Raw code point spans [T] of tokens given as bytes ``[begin, end)`` [T] of row ``rows``
        [T] of ``normalized`` (module doc, step 3)."""
        source = self._source_characters(texts).flat_values
        code_points, offsets = tf.strings.unicode_decode_with_offsets(normalized, "UTF-8")
        keys = offsets.value_rowids() * _ROW_STRIDE + offsets.flat_values
        first = tf.searchsorted(keys, rows * _ROW_STRIDE + byte_begins, out_type=tf.int64)
        last = tf.searchsorted(keys, rows * _ROW_STRIDE + byte_ends, out_type=tf.int64) - 1
        first = tf.minimum(first, tf.gather(offsets.row_limits(), rows) - 1)  # empty tokens
        first += tf.cast((tf.gather(code_points.flat_values, first) == _SPACE) & (last > first),
                         tf.int64)
        start = tf.gather(source, first)
        end = tf.where(last >= first, tf.gather(source, tf.maximum(first, last)) + 1, start)
        # SentencePiece's dummy prefix (a lone "▁" piece of no bytes before the first character)
        # covers the text up to that character, at least one character, as the reference has it.
        prefix = tf.equal(byte_ends, 0)
        end = tf.where(prefix, tf.maximum(start, 1), end)
        start = tf.where(prefix, tf.zeros_like(start), start)
        return tf.cast(start, tf.int32), tf.cast(end, tf.int32)

    def _source_characters(self, texts: tf.Tensor) -> tf.RaggedTensor:
        """int64 [B, (m)]: for every character of ``normalize(texts)``, the index of the raw character
        it comes from (module doc, step 1)."""
        code_points = tf.strings.unicode_decode(texts, "UTF-8", errors="ignore")
        rows, row_starts = code_points.value_rowids(), code_points.row_starts()
        local = tf.range(tf.size(rows, tf.int64)) - tf.gather(row_starts, rows)
        chars = tf.strings.unicode_encode(tf.expand_dims(code_points.flat_values, 1), "UTF-8")
        is_space = tf.strings.regex_full_match(chars, _whitespace_class())
        solid = tf.cast(tf.logical_not(is_space), tf.int64)
        # Solid (non-whitespace) characters before and after each character of its row.
        solid_before = tf.cumsum(solid, exclusive=True)
        solid_before -= tf.gather(solid_before, tf.gather(row_starts, rows))
        row_solid = tf.math.unsorted_segment_sum(solid, rows, code_points.nrows())
        solid_after = tf.gather(row_solid, rows) - solid_before - solid
        after_space = tf.roll(is_space, shift=1, axis=0) & (local > 0)
        kept_space = is_space & tf.logical_not(after_space) & (solid_before > 0) & (solid_after > 0)
        decomposed = tf.strings.length(self.normalizer.normalize(chars), unit="UTF8_CHAR")
        emitted = tf.where(is_space, tf.cast(kept_space, tf.int64), tf.cast(decomposed, tf.int64))
        return tf.RaggedTensor.from_row_lengths(
            tf.repeat(local, emitted),
            tf.math.unsorted_segment_sum(emitted, rows, code_points.nrows()))
