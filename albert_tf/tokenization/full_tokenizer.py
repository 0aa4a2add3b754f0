"""``FullTokenizer``: the reference's tokenizer, SentencePiece when a model file is given, else WordPiece.

``FullTokenizer.tokenize`` does NOT normalize (reference semantics: callers preprocess);
``encode_text`` / ``tokenize_text`` do the whole caller-side chain and are what new code should
call. ``fingerprint`` identifies mode, casing and model bytes (a feature-cache key); the tokenizer
pickles as its model bytes, so a Beam worker on another machine rebuilds it without the file.

Differences from the reference, on purpose: a model or vocab lacking [CLS]/[SEP]/[MASK], a missing
or corrupt file, and an unknown WordPiece token are errors naming the file; no TF-Hub v1
``from_hub_module``. The modes themselves are in albert_tf/tokenization/sentencepiece.py and
wordpiece.py; the same contract as TensorFlow ops, for serving, in in_graph.py (identical ids).
"""

from __future__ import annotations

import hashlib
from typing import Iterable

import sentencepiece as spm

from albert_tf.tokenization.model_files import TokenizerError, read_model_file
from albert_tf.tokenization.normalization import convert_to_unicode, preprocess_text
from albert_tf.tokenization.sentencepiece import (SPECIAL_PIECES, encode_pieces, is_start_piece_sp,
                                                  load_sentencepiece_model)
from albert_tf.tokenization.wordpiece import (WORDPIECE_UNK, BasicTokenizer, WordpieceTokenizer,
                                              is_start_piece_wordpiece, parse_vocab)

# ---------------------------------------------------------------------------------------------------
# FullTokenizer
# ---------------------------------------------------------------------------------------------------

def _is_sentencepiece_vocab(vocab: dict[str, int]) -> bool:
    """Whether a vocabulary read as WordPiece is a SentencePiece model's ``.vocab`` listing (its
    <unk> piece and word-start pieces ``\u2581...``): read as WordPiece, every word would become
    [UNK] or wrong pieces, so it is refused with a pointer to the model file."""
    return "<unk>" in vocab and any(piece.startswith("\u2581") for piece in vocab)


class FullTokenizer:
    """The reference's ``FullTokenizer``: SentencePiece when ``spm_model_file`` is set, else WordPiece.

    Both modes require the pieces [CLS], [SEP] and [MASK] (and WordPiece additionally [UNK]); a model or
    vocabulary lacking them is rejected at construction, naming the file and the missing pieces.

    Attributes: ``vocab`` (piece -> id; SP mode: every id 0..V-1 in id order), ``inv_vocab``,
    ``sp_model`` (SP mode, else None), ``do_lower_case``.
    """

    def __init__(self, vocab_file: str | None = None, do_lower_case: bool = True,
                 spm_model_file: str | None = None):
        if spm_model_file:
            source_file, kind = spm_model_file, "SentencePiece model file"
        elif vocab_file:
            source_file, kind = vocab_file, "vocab file"
        else:
            raise TokenizerError("FullTokenizer needs spm_model_file (SentencePiece) or vocab_file "
                                 "(WordPiece); both are empty")
        source_bytes = read_model_file(source_file, kind)
        self._load(bool(spm_model_file), source_file, source_bytes, do_lower_case)

    def __reduce__(self):
        """Pickles as the model or vocabulary bytes, so that a process on another machine (a Beam
        worker) rebuilds the same tokenizer without reading the file."""
        return (_unpickle_full_tokenizer,
                (self.sp_model is not None, self.source_file, self._source_bytes, self.do_lower_case))

    def _load(self, uses_sentencepiece: bool, source_file: str, source_bytes: bytes,
              do_lower_case: bool) -> None:
        """Builds the tokenizer from the SentencePiece model's or the vocab file's bytes."""
        self.do_lower_case = do_lower_case
        self.sp_model: spm.SentencePieceProcessor | None = None
        self.source_file = source_file
        self._source_bytes = source_bytes
        if uses_sentencepiece:
            self.sp_model = load_sentencepiece_model(source_bytes, source_file)
            self.vocab = {self.sp_model.IdToPiece(i): i for i in range(self.sp_model.GetPieceSize())}
            required = SPECIAL_PIECES
        else:
            self.vocab = parse_vocab(source_bytes, source_file)
            self.basic_tokenizer = BasicTokenizer(do_lower_case=do_lower_case)
            self.wordpiece_tokenizer = WordpieceTokenizer(vocab=self.vocab)
            required = (WORDPIECE_UNK,) + SPECIAL_PIECES
        missing = [piece for piece in required if piece not in self.vocab]
        if missing and not uses_sentencepiece and _is_sentencepiece_vocab(self.vocab):
            raise TokenizerError(
                f"vocab file {self.source_file} is the .vocab listing of a SentencePiece model "
                "(<unk> and pieces starting with \u2581), not a WordPiece vocab.txt: give the "
                "model itself (the .model file beside it) as --spm_model_file")
        if missing:
            kind = "SentencePiece model" if self.sp_model else "vocab file"
            raise TokenizerError(
                f"{kind} {self.source_file} lacks the special pieces {missing}; ALBERT needs "
                f"{list(required)} (train SentencePiece with control_symbols=[CLS],[SEP],[MASK], "
                f"see data_prep/train_sentencepiece.py)")
        self.inv_vocab = {i: piece for piece, i in self.vocab.items()}
        mode = "spm" if self.sp_model else "wordpiece"
        digest = hashlib.sha256(f"{mode}\0{int(bool(do_lower_case))}\0".encode("utf-8") + source_bytes)
        self._fingerprint = digest.hexdigest()[:16]


    # -- tokenization -----------------------------------------------------------------------------

    def tokenize(self, text: str) -> list[str]:
        """Pieces of ``text`` WITHOUT caller-side normalization (reference semantics).

        SP mode: ``encode_pieces`` only; ``do_lower_case`` is not applied here. Use ``tokenize_text``
        unless ``text`` already went through ``preprocess_text``.
        """
        if self.sp_model is not None:
            return encode_pieces(self.sp_model, text)
        return [sub for token in self.basic_tokenizer.tokenize(text)
                for sub in self.wordpiece_tokenizer.tokenize(token)]

    def tokenize_text(self, text: str) -> list[str]:
        """Pieces of raw ``text`` with the caller-side normalization every reference script applies.

        SP mode: ``preprocess_text(text, lower=do_lower_case)`` then ``tokenize``. WordPiece mode:
        ``tokenize`` (BasicTokenizer already normalizes).
        """
        if self.sp_model is not None:
            text = preprocess_text(text, lower=self.do_lower_case)
        return self.tokenize(text)

    def encode_text(self, text: str) -> list[int]:
        """Ids of raw ``text``: ``convert_tokens_to_ids(tokenize_text(text))``."""
        return self.convert_tokens_to_ids(self.tokenize_text(text))

    def convert_tokens_to_ids(self, tokens: Iterable[str]) -> list[int]:
        """SP mode: unknown pieces -> the unk id. WordPiece mode: unknown tokens raise KeyError."""
        if self.sp_model is not None:
            return [self.sp_model.PieceToId(convert_to_unicode(t)) for t in tokens]
        ids = []
        for token in tokens:
            if token not in self.vocab:
                raise KeyError(f"token {token!r} is not in vocab file {self.source_file}")
            ids.append(self.vocab[token])
        return ids

    def convert_ids_to_tokens(self, ids: Iterable[int]) -> list[str]:
        """Pieces of ``ids``; an id outside 0..vocab_size-1 raises KeyError naming it."""
        tokens = []
        for i in ids:
            if int(i) not in self.inv_vocab:
                raise KeyError(f"id {i} outside the vocabulary of {self.source_file} "
                               f"(size {self.vocab_size})")
            tokens.append(self.inv_vocab[int(i)])
        return tokens

    def is_start_piece(self, piece: str) -> bool:
        """Whether ``piece`` begins a word, by the reference's start-piece rule of this mode."""
        if self.sp_model is not None:
            return is_start_piece_sp(piece)
        return is_start_piece_wordpiece(piece)

    # -- special ids and identity -----------------------------------------------------------------

    @property
    def vocab_size(self) -> int:
        return len(self.vocab)


    @property
    def unk_id(self) -> int:
        if self.sp_model is not None:
            return self.sp_model.unk_id()
        return self.vocab[WORDPIECE_UNK]

    @property
    def cls_id(self) -> int:
        return self.vocab["[CLS]"]

    @property
    def sep_id(self) -> int:
        return self.vocab["[SEP]"]

    @property
    def mask_id(self) -> int:
        return self.vocab["[MASK]"]

    @property
    def fingerprint(self) -> str:
        """16 hex chars of sha256(mode, do_lower_case, model/vocab file bytes): a feature-cache key."""
        return self._fingerprint

    @property
    def uses_sentencepiece(self) -> bool:
        return self.sp_model is not None


def _unpickle_full_tokenizer(uses_sentencepiece: bool, source_file: str, source_bytes: bytes,
                             do_lower_case: bool) -> FullTokenizer:
    tokenizer = FullTokenizer.__new__(FullTokenizer)
    tokenizer._load(uses_sentencepiece, source_file, source_bytes, do_lower_case)
    return tokenizer
