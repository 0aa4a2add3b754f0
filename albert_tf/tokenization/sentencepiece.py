"""SentencePiece mode, used by every released ALBERT model: pieces and ids with the reference's rules.

- ``encode_pieces`` / ``encode_ids``: the model's pieces plus the reference's digit-comma rule, as
  it runs on Python 3 (optionally with the reference's subword sampling). The text must already be
  normalized (``preprocess_text``, albert_tf/tokenization/normalization.py).
- ``is_start_piece_sp``: the reference's start-piece rule, which whole-word masking uses.
- ``load_sentencepiece_model``: a processor from model bytes; a corrupt model is a ``TokenizerError``.
- ``SPECIAL_PIECES``: [CLS], [SEP], [MASK], which every ALBERT vocabulary must hold.

Differences from the reference, on purpose: ``SPIECE_UNDERLINE`` is a str (the reference's is bytes);
pieces are always str.
"""

from __future__ import annotations

import sentencepiece as spm

from albert_tf.tokenization.model_files import TokenizerError
from albert_tf.tokenization.normalization import convert_to_unicode

SPIECE_UNDERLINE = "\u2581"

# Special pieces every ALBERT vocabulary must hold (pretraining and fine-tuning insert them by name).
SPECIAL_PIECES = ("[CLS]", "[SEP]", "[MASK]")


# Single ASCII punctuation pieces that count as word starts in SP mode, by the reference's start-piece
# rule of whole-word masking. The reference also meant to add "€" and "£", but added them as UTF-8
# bytes, which never equal a str piece on Python 3; we keep that py3 behaviour. A lone "€"/"£" piece
# is a start piece anyway (it lies outside a-z), so only mixed pieces such as "x€" (no "▁") are
# affected.
_SP_START_PUNCTUATION = frozenset('!"#$%&()*+,-./:;?@[\\]^_`{|}~')
_SP_CONTINUATION_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz") | _SP_START_PUNCTUATION

# Sampling parameters of the reference's SampleEncodeAsPieces call (subword regularization).
_SAMPLE_NBEST_SIZE = 64
_SAMPLE_ALPHA = 0.1


# ---------------------------------------------------------------------------------------------------
# SentencePiece encoding
# ---------------------------------------------------------------------------------------------------

def is_digit_comma_piece(piece: str) -> bool:
    """A piece longer than one char ending in "," right after a digit, e.g. "▁1990," or "$45,"."""
    return len(piece) > 1 and piece[-1] == "," and piece[-2].isdigit()


def split_digit_comma_piece(sp_model: spm.SentencePieceProcessor, piece: str) -> list[str]:
    """The reference's replacement of a digit-comma piece, as it runs on py3 (see encode_pieces)."""
    return sp_model.EncodeAsPieces(piece[:-1].replace(SPIECE_UNDERLINE, "")) + [piece[-1]]


def encode_pieces(sp_model: spm.SentencePieceProcessor, text: str, sample: bool = False) -> list[str]:
    """SentencePiece pieces of ``text`` with the reference's digit-comma rule.

    ``sample``: subword regularization, ``SampleEncodeAsPieces(text, 64, 0.1)``.

    Digit-comma rule: every piece of length > 1 that ends in "," preceded by a digit is replaced by
    ``EncodeAsPieces(piece[:-1] with every "▁" removed) + [","]`` (re-encoded without sampling).
    The reference *intended* to then drop the "▁" that SentencePiece's dummy prefix puts in front of
    the re-encoded text whenever the original piece had no leading "▁" (e.g. "$45,"). On Python 3
    that comparison is str against bytes and never fires, so the extra "▁" stays:
    "▁1990," -> EncodeAsPieces("1990") + [","]; "$45," -> EncodeAsPieces("$45") + [","], which begins
    with "▁". We reproduce what the reference does (released models were pretrained on it).
    """
    text = convert_to_unicode(text)
    if sample:
        pieces = sp_model.SampleEncodeAsPieces(text, _SAMPLE_NBEST_SIZE, _SAMPLE_ALPHA)
    else:
        pieces = sp_model.EncodeAsPieces(text)
    result: list[str] = []
    for piece in pieces:
        if is_digit_comma_piece(piece):
            result.extend(split_digit_comma_piece(sp_model, piece))
        else:
            result.append(piece)
    return result


def encode_ids(sp_model: spm.SentencePieceProcessor, text: str, sample: bool = False) -> list[int]:
    """Ids of ``encode_pieces(sp_model, text, sample)`` (unknown pieces map to the model's unk id)."""
    return [sp_model.PieceToId(piece) for piece in encode_pieces(sp_model, text, sample=sample)]


# ---------------------------------------------------------------------------------------------------
# The reference's start-piece rule: which pieces begin a word (for whole-word masking)
# ---------------------------------------------------------------------------------------------------

def is_start_piece_sp(piece: str) -> bool:
    """True if an SP piece begins a word (reference ``_is_start_piece_sp`` as it runs on py3).

    Start: begins with "▁" or "<"; or is a single ASCII punctuation char of ``!"#$%&()*+,-./:;?@[\\]^_`{|}~``
    (not ', <, =, >); or any of its characters, lower-cased, lies outside a-z and that set (digits,
    apostrophes, accented or non-Latin characters). Pieces made only of a-z/that punctuation and not
    starting with "▁" are continuations.
    """
    if piece.startswith(SPIECE_UNDERLINE) or piece.startswith("<") or piece in _SP_START_PUNCTUATION:
        return True
    return not all(ch.lower() in _SP_CONTINUATION_CHARS for ch in piece)


def load_sentencepiece_model(model_bytes: bytes, source: str = "<bytes>") -> spm.SentencePieceProcessor:
    """A SentencePieceProcessor from a serialized model; ``source`` names it in errors."""
    processor = spm.SentencePieceProcessor()
    try:
        processor.LoadFromSerializedProto(model_bytes)
    except (RuntimeError, OSError, TypeError) as err:
        raise TokenizerError(f"{source} is not a valid SentencePiece model: {err}") from err
    return processor
