"""``tokenizer.json``: albert_tf's SentencePiece tokenization as a ``tokenizers`` pipeline.

``tokenizer_json(model_bytes, do_lower_case)`` is the file ``write_hf_directory`` puts beside
``spiece.model``; it encodes as ``FullTokenizer.encode_text`` (``preprocess_text``, the
SentencePiece model, the reference's digit-comma rule), so that transformers' ``AutoTokenizer``
gives albert_tf's ids. Transformers' own conversion of ``spiece.model`` does not: it makes the
ALBERT recipe's user-defined symbols ``( ) " - . – £ €`` added tokens, which cut the text before the
model and put a "▁" after each ("x-rays": ``▁x - ▁ray s`` for ``▁x - ray s``), and it normalizes as
its old slow tokenizer did (``''`` -> ``"``, Unicode "Mn" marks as accents, no final sigma).

The pipeline, each step the twin of albert_tf's (albert_tf/tokenization/):

1. normalizer, ``preprocess_text``: runs of the characters ``str.split`` splits on to one space,
   stripped; NFKD, with this Python's decomposition of the few characters ``tokenizers``' older
   Unicode tables decompose otherwise; the characters ``unicodedata.combining`` marks removed;
   with ``do_lower_case``, ``str.lower``'s final sigma (a capital sigma after a cased letter and not
   before one, case-ignorable characters skipped) and lower-casing;
2. normalizer, SentencePiece's: NFC (tokenizers applies the character map per grapheme and misses
   the compositions it holds for Hangul jamo and two-part vowel signs), the model's
   ``precompiled_charsmap``; then, as SentencePiece's normalizer, spaces stripped and collapsed,
   the dummy prefix "▁", spaces as "▁", trailing "▁" removed;
3. pre-tokenizer: a cut before every "▁" (none when a piece holds a "▁" after its start), which
   leaves the best segmentation as it is;
4. model: ``Unigram`` with the model's pieces and scores, the same search as SentencePiece's.
   Pieces SentencePiece never matches in text (control symbols, ``<unk>``, unused pieces) and the
   pieces the digit-comma rule splits (``"▁1990,"`` -> the pieces of ``"1990"``, then ``","``)
   score below any other path: the best path then ends the number before its comma, which is what
   the rule gives for a piece that begins a word and ends it. User-defined symbols score as
   SentencePiece scores them (``bytes * max_score - 0.1``). Control symbols and ``<unk>`` are
   special added tokens too (a ``[MASK]`` written in the text is the mask token: transformers'
   convention);
5. post-processor: ``[CLS] A [SEP]`` and ``[CLS] A [SEP] B [SEP]`` with type ids 0 and 1, the
   fine-tuning scripts' packing.

What ``tokenizers`` cannot express (one id per piece, no step after the model): the digit-comma
rule for a piece that does not begin its word (``"$45,"``: the reference re-encodes ``"$45"`` as a
text of its own, with a "▁" the text lacks) or that more of the word follows (en8k's ``"▁2,"`` in
"2,45"); SentencePiece's float32 sums, where two paths score the same to float32 precision (3 or 4
texts in 23,725 with a 30,000-piece model); lower-casing of characters newer than this Python's
Unicode (the Rust tables lower-case them). Supported models: unigram, without byte fallback,
whitespace as a prefix (the ALBERT recipe); others raise ``HuggingFaceFormatError``.
"""

from __future__ import annotations

import functools
import struct
import unicodedata
from typing import NamedTuple

from albert_tf.checkpoints.hf_names import HuggingFaceFormatError
from albert_tf.tokenization.sentencepiece import SPIECE_UNDERLINE, is_digit_comma_piece
from albert_tf.tokenization.unicode_tables import (character_class, characters,
                                                   python_unicode_tables)

# SentencePiece ModelProto.SentencePiece.Type
_NORMAL, _UNKNOWN, _CONTROL, _USER_DEFINED, _UNUSED, _BYTE = 1, 2, 3, 4, 5, 6
_UNIGRAM = 1
# SentencePiece's score of a user-defined symbol: its length in bytes * max_score - this.
_USER_DEFINED_BONUS = 0.1


class _Piece(NamedTuple):
    piece: str
    score: float
    type: int


class SentencePieceSpec(NamedTuple):
    """What the tokenizer.json needs of a SentencePiece ModelProto (proto2 defaults applied)."""
    pieces: list[_Piece]
    precompiled_charsmap: bytes
    add_dummy_prefix: bool
    remove_extra_whitespaces: bool
    escape_whitespaces: bool
    model_type: int
    byte_fallback: bool
    treat_whitespace_as_suffix: bool


# --------------------------------------------------------------------------------------------------
# Reading the ModelProto (protobuf wire format; only the fields used here)
# --------------------------------------------------------------------------------------------------

def _varint(data: bytes, position: int) -> tuple[int, int]:
    value, shift = 0, 0
    while True:
        if position >= len(data):
            raise ValueError("truncated varint")
        byte = data[position]
        position += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, position
        shift += 7


def _fields(data: bytes) -> list[tuple[int, int | bytes]]:
    """(field number, value) of every field of a message: ints for varints and fixed32 (as raw
    bits), bytes for length-delimited fields."""
    fields = []
    position = 0
    while position < len(data):
        key, position = _varint(data, position)
        number, wire_type = key >> 3, key & 7
        if wire_type == 0:
            value, position = _varint(data, position)
        elif wire_type == 1:
            value, position = int.from_bytes(data[position:position + 8], "little"), position + 8
        elif wire_type == 2:
            length, position = _varint(data, position)
            value, position = data[position:position + length], position + length
        elif wire_type == 5:
            value, position = int.from_bytes(data[position:position + 4], "little"), position + 4
        else:
            raise ValueError(f"wire type {wire_type}")
        if position > len(data):
            raise ValueError("truncated field")
        fields.append((number, value))
    return fields


def _last(fields: list[tuple[int, int | bytes]], number: int, default):
    """A scalar field: its last value (protobuf's rule), or ``default``."""
    values = [value for field, value in fields if field == number]
    return values[-1] if values else default


def _message(fields: list[tuple[int, int | bytes]], number: int) -> list[tuple[int, int | bytes]]:
    """The fields of an embedded message; occurrences of it merge (protobuf's rule)."""
    return _fields(b"".join(value for field, value in fields if field == number))


def read_sentencepiece_spec(model_bytes: bytes, source: str = "<bytes>") -> SentencePieceSpec:
    """The pieces, normalizer and trainer settings of a serialized SentencePiece model."""
    try:
        model = _fields(model_bytes)
        pieces = []
        for number, value in model:
            if number == 1:
                piece = _fields(value)
                pieces.append(_Piece(
                    _last(piece, 1, b"").decode("utf-8"),
                    struct.unpack("<f", struct.pack("<I", _last(piece, 2, 0)))[0],
                    _last(piece, 3, _NORMAL)))
        trainer, normalizer = _message(model, 2), _message(model, 3)
    except (ValueError, TypeError, UnicodeDecodeError, AttributeError, struct.error) as err:
        raise HuggingFaceFormatError(f"{source} is not a SentencePiece model: {err}") from None
    return SentencePieceSpec(
        pieces=pieces,
        precompiled_charsmap=_last(normalizer, 2, b""),
        add_dummy_prefix=bool(_last(normalizer, 3, 1)),
        remove_extra_whitespaces=bool(_last(normalizer, 4, 1)),
        escape_whitespaces=bool(_last(normalizer, 5, 1)),
        model_type=_last(trainer, 3, _UNIGRAM),
        byte_fallback=bool(_last(trainer, 35, 0)),
        treat_whitespace_as_suffix=bool(_last(trainer, 24, 0)))


# --------------------------------------------------------------------------------------------------
# Python's Unicode behaviour as regular expressions
# --------------------------------------------------------------------------------------------------

class _PythonUnicode(NamedTuple):
    """This Python's Unicode behaviour where ``preprocess_text`` relies on it: character classes
    as Oniguruma regular expressions, and NFKD where the ``tokenizers`` tables disagree."""
    whitespace: str   # what str.split() splits on
    combining: str    # unicodedata.combining(c) != 0: what preprocess_text removes
    cased: str        # cased and not case-ignorable, as str.lower's final-sigma rule sees them
    ignorable: str    # case-ignorable
    nfkd: tuple[tuple[str, str], ...]  # (character, its NFKD here) where tokenizers' NFKD differs


@functools.lru_cache(maxsize=None)
def _python_unicode() -> _PythonUnicode:
    """The classes of this Python's tables (albert_tf/tokenization/unicode_tables.py), and where
    tokenizers' NFKD differs (about 5 s, once per process)."""
    from tokenizers import normalizers  # pylint: disable=import-outside-toplevel

    tables = python_unicode_tables()
    # tokenizers' NFKD follows an older Unicode version: every character at once, one per line
    # (NFKD reorders only combining marks, so the line breaks keep the characters apart).
    every = [char for char in characters() if char != "\n"]
    theirs = normalizers.NFKD().normalize_str("\n".join(every)).split("\n")
    nfkd = tuple((char, unicodedata.normalize("NFKD", char))
                 for char, their in zip(every, theirs)
                 if their != unicodedata.normalize("NFKD", char))
    return _PythonUnicode(*map(character_class, (tables.whitespace, tables.combining,
                                                 tables.cased, tables.ignorable)), nfkd)


# --------------------------------------------------------------------------------------------------
# The tokenizer
# --------------------------------------------------------------------------------------------------

def _check_supported(spec: SentencePieceSpec, source: str) -> None:
    problems = []
    if spec.model_type != _UNIGRAM:
        problems.append("its model type is not unigram")
    if spec.byte_fallback or any(piece.type == _BYTE for piece in spec.pieces):
        problems.append("it has byte fallback")
    if spec.treat_whitespace_as_suffix:
        problems.append("it treats whitespace as a suffix")
    if not spec.escape_whitespaces:
        problems.append("it does not escape whitespace")
    if not any(piece.type == _UNKNOWN for piece in spec.pieces):
        problems.append("it has no unknown piece")
    if problems:
        raise HuggingFaceFormatError(
            f"Cannot write a tokenizer.json that encodes as {source}: {'; '.join(problems)} (the "
            "ALBERT recipe, data_prep/pretraining/vocabulary.py, has none of these).")


def check_supported(model_bytes: bytes, source: str = "<bytes>") -> None:
    """HuggingFaceFormatError, naming ``source`` and what, for a SentencePiece model that
    tokenizer.json cannot express (cheap: no tables are built)."""
    _check_supported(read_sentencepiece_spec(model_bytes, source), source)


def _unreachable(piece: _Piece) -> bool:
    """Pieces SentencePiece never matches in text (control symbols, <unk>, unused pieces) or
    albert_tf never keeps (the digit-comma rule splits them)."""
    return (piece.type in (_CONTROL, _UNKNOWN, _UNUSED)
            or (piece.type == _NORMAL and is_digit_comma_piece(piece.piece)))


def _vocabulary(spec: SentencePieceSpec) -> list[tuple[str, float]]:
    """(piece, score) in id order, with SentencePiece's scores of user-defined symbols and
    unreachable pieces scored below any path around them."""
    normal = [piece.score for piece in spec.pieces if piece.type == _NORMAL]
    min_score, max_score = (min(normal), max(normal)) if normal else (0.0, 0.0)
    vocabulary = []
    for piece in spec.pieces:
        score = piece.score
        if piece.type == _USER_DEFINED:
            score = len(piece.piece.encode("utf-8")) * max_score - _USER_DEFINED_BONUS
        elif _unreachable(piece):
            # Any other path over its characters scores at least len * min_score (each character
            # is a piece of its own: SentencePiece's trainer keeps every character it uses).
            score = (len(piece.piece) + 1) * min(min_score, -1.0) - 1.0
        vocabulary.append((piece.piece, score))
    return vocabulary


def _normalizers(spec: SentencePieceSpec, do_lower_case: bool) -> list:
    from tokenizers import Regex, normalizers  # pylint: disable=import-outside-toplevel

    classes = _python_unicode()
    steps = [
        # preprocess_text: " ".join(text.strip().split()), NFKD, combining characters removed,
        # lower-casing with str.lower's final sigma.
        normalizers.Replace(Regex(f"\\A{classes.whitespace}+|{classes.whitespace}+\\z"), ""),
        normalizers.Replace(Regex(f"{classes.whitespace}+"), " "),
        *(normalizers.Replace(char, decomposed) for char, decomposed in classes.nfkd),
        normalizers.NFKD(),
        normalizers.Replace(Regex(classes.combining), ""),
    ]
    if do_lower_case:
        cased, ignorable = classes.cased, classes.ignorable
        steps += [normalizers.Replace(
            Regex(f"(?<={cased}{ignorable}*)\u03a3(?!{ignorable}*{cased})"), "\u03c2"),
                  normalizers.Lowercase()]
    # SentencePiece's normalizer: its character map (after NFC: tokenizers applies the map per
    # grapheme and misses the compositions it holds for, e.g., Hangul jamo), then its whitespace
    # handling.
    if spec.precompiled_charsmap:
        steps += [normalizers.NFC(), normalizers.Precompiled(spec.precompiled_charsmap)]
    if spec.remove_extra_whitespaces:
        steps += [normalizers.Replace(Regex("\\A +| +\\z"), ""),
                  normalizers.Replace(Regex(" {2,}"), " ")]
    if spec.add_dummy_prefix:
        steps.append(normalizers.Prepend(SPIECE_UNDERLINE))  # only before a non-empty text
    steps.append(normalizers.Replace(" ", SPIECE_UNDERLINE))
    if spec.remove_extra_whitespaces:
        steps.append(normalizers.Replace(Regex(f"{SPIECE_UNDERLINE}+\\z"), ""))
    return steps


def build_tokenizer(model_bytes: bytes, do_lower_case: bool, source: str = "<bytes>"):
    """A ``tokenizers.Tokenizer`` that encodes as ``FullTokenizer(spm_model_file=...,
    do_lower_case=do_lower_case).encode_text`` (the module doc says how, and where it cannot).
    HuggingFaceFormatError for a model outside the supported kind, naming ``source``."""
    # pylint: disable=import-outside-toplevel  (tokenizers: only for Hugging Face exports)
    from tokenizers import AddedToken, Tokenizer, decoders, normalizers, pre_tokenizers, processors
    from tokenizers.models import Unigram

    spec = read_sentencepiece_spec(model_bytes, source)
    _check_supported(spec, source)
    unk_id = next(i for i, piece in enumerate(spec.pieces) if piece.type == _UNKNOWN)
    tokenizer = Tokenizer(Unigram(_vocabulary(spec), unk_id=unk_id, byte_fallback=False))
    tokenizer.normalizer = normalizers.Sequence(_normalizers(spec, do_lower_case))
    if not any(SPIECE_UNDERLINE in piece.piece[1:] for piece in spec.pieces):
        tokenizer.pre_tokenizer = pre_tokenizers.Metaspace(
            replacement=SPIECE_UNDERLINE, prepend_scheme="never", split=True)
    tokenizer.decoder = decoders.Metaspace(replacement=SPIECE_UNDERLINE, prepend_scheme="always",
                                           split=True)
    tokenizer.add_special_tokens([
        AddedToken(piece.piece, special=True, normalized=False)
        for piece in spec.pieces if piece.type in (_CONTROL, _UNKNOWN)])
    ids = {piece.piece: i for i, piece in enumerate(spec.pieces)}
    if "[CLS]" in ids and "[SEP]" in ids:
        tokenizer.post_processor = processors.TemplateProcessing(
            single="[CLS]:0 $A:0 [SEP]:0", pair="[CLS]:0 $A:0 [SEP]:0 $B:1 [SEP]:1",
            special_tokens=[("[CLS]", ids["[CLS]"]), ("[SEP]", ids["[SEP]"])])
    return tokenizer


def tokenizer_json(model_bytes: bytes, do_lower_case: bool, source: str = "<bytes>") -> str:
    """The ``tokenizer.json`` text of ``build_tokenizer``."""
    return build_tokenizer(model_bytes, do_lower_case, source).to_str(pretty=True)
