"""Text -> pieces -> ids, exactly as the reference's tokenization.py does it.

Two modes, as in the reference:
- SentencePiece (SP) mode, used by every released ALBERT model: callers first normalize the text with
  ``preprocess_text`` (whitespace collapse, NFKD, accent removal, optional lowercasing), then
  ``encode_pieces`` applies the model plus the reference's digit-comma rule.
- WordPiece mode (only a vocab file): BERT's BasicTokenizer + greedy longest-match WordpieceTokenizer.

``FullTokenizer.tokenize`` does NOT normalize (reference semantics: callers preprocess);
``FullTokenizer.encode_text`` / ``tokenize_text`` do the whole caller-side chain and are what new code
should call. ``InGraphTokenizer`` is the same contract as TensorFlow ops, for serving: identical ids.

Differences from the reference, on purpose: ``SPIECE_UNDERLINE`` is a str (the reference's is bytes);
pieces are always str; a model or vocab lacking [CLS]/[SEP]/[MASK], a missing or corrupt file, and an
unknown WordPiece token are errors naming the file; no TF-Hub v1 ``from_hub_module``.
"""

from __future__ import annotations

import functools
import hashlib
import sys
import unicodedata
from typing import Iterable, NamedTuple, Sequence

import sentencepiece as spm
import tensorflow as tf

SPIECE_UNDERLINE = "\u2581"

# Special pieces every ALBERT vocabulary must hold (pretraining and fine-tuning insert them by name).
SPECIAL_PIECES = ("[CLS]", "[SEP]", "[MASK]")
WORDPIECE_UNK = "[UNK]"

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

# WordpieceTokenizer: longer words become [UNK] (reference value).
_MAX_INPUT_CHARS_PER_WORD = 200


class TokenizerError(ValueError):
    """A vocabulary or SentencePiece model is unusable; the message names the file and the problem."""


# ---------------------------------------------------------------------------------------------------
# Text normalization
# ---------------------------------------------------------------------------------------------------

def convert_to_unicode(text: str | bytes) -> str:
    """Returns ``text`` as str; bytes are decoded as UTF-8 with undecodable bytes dropped (reference)."""
    if isinstance(text, bytes):
        return text.decode("utf-8", "ignore")
    if isinstance(text, str):
        return text
    raise TypeError(f"expected str or bytes, got {type(text).__name__}")


def preprocess_text(inputs: str, remove_space: bool = True, lower: bool = False) -> str:
    """The caller-side normalization of SP mode (reference ``preprocess_text``).

    remove_space: strip and collapse every whitespace run to one space.
    Then NFKD normalization, removal of combining characters (accents: "café" -> "cafe"), and
    lowercasing when ``lower``. No quote normalization (the reference has none).
    """
    text = convert_to_unicode(inputs)
    if remove_space:
        text = " ".join(text.strip().split())
    text = unicodedata.normalize("NFKD", text)
    text = "".join(ch for ch in text if not unicodedata.combining(ch))
    if lower:
        text = text.lower()
    return text


# ---------------------------------------------------------------------------------------------------
# SentencePiece encoding
# ---------------------------------------------------------------------------------------------------

def _is_digit_comma_piece(piece: str) -> bool:
    """A piece longer than one char ending in "," right after a digit, e.g. "▁1990," or "$45,"."""
    return len(piece) > 1 and piece[-1] == "," and piece[-2].isdigit()


def _split_digit_comma_piece(sp_model: spm.SentencePieceProcessor, piece: str) -> list[str]:
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
        if _is_digit_comma_piece(piece):
            result.extend(_split_digit_comma_piece(sp_model, piece))
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


def is_start_piece_wordpiece(piece: str) -> bool:
    """True if a WordPiece token begins a word: it is not a "##" continuation."""
    return not piece.startswith("##")


# ---------------------------------------------------------------------------------------------------
# WordPiece mode (BERT's basic + wordpiece tokenizers, reference semantics)
# ---------------------------------------------------------------------------------------------------

def load_vocab(vocab_file: str) -> dict[str, int]:
    """Token -> id from a vocab file: one token per line, its first whitespace-separated field.

    SentencePiece ``.vocab`` files (``piece<TAB>score``) therefore load too. A blank line is the token
    " "; a repeated token keeps its first id; ids are consecutive in order of first appearance.
    """
    return _parse_vocab(_read_bytes(vocab_file, "vocab file"), vocab_file)


def _parse_vocab(data: bytes, vocab_file: str) -> dict[str, int]:
    """``load_vocab`` on the file's bytes; ``vocab_file`` names it in errors."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise TokenizerError(f"vocab file {vocab_file} is not UTF-8 text: {err}") from err
    vocab: dict[str, int] = {}
    for line in text.splitlines():
        fields = line.split()
        token = fields[0] if fields else " "
        if token not in vocab:
            vocab[token] = len(vocab)
    return vocab


def whitespace_tokenize(text: str) -> list[str]:
    """Strips and splits on whitespace runs."""
    return text.strip().split()


def is_whitespace(char: str) -> bool:
    """Space, tab, newline, carriage return or any Unicode space separator (Zs, e.g. U+00A0)."""
    return char in " \t\n\r" or unicodedata.category(char) == "Zs"


def is_control(char: str) -> bool:
    """A control or format character (Cc/Cf), except tab/newline/CR, which count as whitespace."""
    if char in "\t\n\r":
        return False
    return unicodedata.category(char) in ("Cc", "Cf")


def is_punctuation(char: str) -> bool:
    """Every non-alphanumeric printable ASCII char (so "$", "`", "^" too) or any Unicode P* char."""
    cp = ord(char)
    if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
        return True
    return unicodedata.category(char).startswith("P")


_CJK_RANGES = ((0x4E00, 0x9FFF), (0x3400, 0x4DBF), (0x20000, 0x2A6DF), (0x2A700, 0x2B73F),
               (0x2B740, 0x2B81F), (0x2B820, 0x2CEAF), (0xF900, 0xFAFF), (0x2F800, 0x2FA1F))


def is_chinese_char(cp: int) -> bool:
    """True for code points of the CJK Unified Ideographs blocks (not Hangul, Hiragana, Katakana)."""
    return any(low <= cp <= high for low, high in _CJK_RANGES)


class BasicTokenizer:
    """Cleans text, isolates CJK chars, optionally lowercases + strips accents, splits punctuation."""

    def __init__(self, do_lower_case: bool = True):
        self.do_lower_case = do_lower_case

    def tokenize(self, text: str) -> list[str]:
        """Returns the basic tokens of ``text``."""
        text = self._clean_text(convert_to_unicode(text))
        text = self._space_out_cjk(text)
        tokens: list[str] = []
        for token in whitespace_tokenize(text):
            if self.do_lower_case:
                token = self._strip_accents(token.lower())
            tokens.extend(self._split_on_punctuation(token))
        return whitespace_tokenize(" ".join(tokens))

    @staticmethod
    def _clean_text(text: str) -> str:
        """Drops NUL, U+FFFD and control chars; maps every whitespace char to a space."""
        out = []
        for ch in text:
            if ord(ch) in (0, 0xFFFD) or is_control(ch):
                continue
            out.append(" " if is_whitespace(ch) else ch)
        return "".join(out)

    @staticmethod
    def _space_out_cjk(text: str) -> str:
        """Surrounds every CJK ideograph with spaces so each becomes its own token."""
        return "".join(f" {ch} " if is_chinese_char(ord(ch)) else ch for ch in text)

    @staticmethod
    def _strip_accents(text: str) -> str:
        """NFD, then drops nonspacing marks (Mn)."""
        return "".join(ch for ch in unicodedata.normalize("NFD", text)
                       if unicodedata.category(ch) != "Mn")

    @staticmethod
    def _split_on_punctuation(text: str) -> list[str]:
        """Every punctuation char becomes its own token; runs of other chars stay together."""
        pieces: list[list[str]] = []
        start_new = True
        for ch in text:
            if is_punctuation(ch):
                pieces.append([ch])
                start_new = True
            else:
                if start_new:
                    pieces.append([])
                    start_new = False
                pieces[-1].append(ch)
        return ["".join(p) for p in pieces]


class WordpieceTokenizer:
    """Greedy longest-match-first WordPiece; "##" marks continuations; unmatchable words -> unk."""

    def __init__(self, vocab: dict[str, int], unk_token: str = WORDPIECE_UNK,
                 max_input_chars_per_word: int = _MAX_INPUT_CHARS_PER_WORD):
        self.vocab = vocab
        self.unk_token = unk_token
        self.max_input_chars_per_word = max_input_chars_per_word

    def tokenize(self, text: str) -> list[str]:
        """WordPiece tokens of already basic-tokenized, whitespace-separated text."""
        output: list[str] = []
        for token in whitespace_tokenize(convert_to_unicode(text)):
            output.extend(self._split_word(token))
        return output

    def _split_word(self, word: str) -> list[str]:
        if len(word) > self.max_input_chars_per_word:
            return [self.unk_token]
        sub_tokens = []
        start = 0
        while start < len(word):
            end = len(word)
            match = None
            while start < end:
                candidate = word[start:end] if start == 0 else "##" + word[start:end]
                if candidate in self.vocab:
                    match = candidate
                    break
                end -= 1
            if match is None:
                return [self.unk_token]
            sub_tokens.append(match)
            start = end
        return sub_tokens


# ---------------------------------------------------------------------------------------------------
# FullTokenizer
# ---------------------------------------------------------------------------------------------------

def _read_bytes(path: str, what: str) -> bytes:
    """Reads a local or remote (gs://...) file; a missing file is an error naming ``what`` and the path."""
    if not path:
        raise TokenizerError(f"no {what} given (empty path)")
    if not tf.io.gfile.exists(path):
        raise FileNotFoundError(f"{what} not found: {path}")
    with tf.io.gfile.GFile(path, "rb") as handle:
        return handle.read()


def load_sentencepiece_model(model_bytes: bytes, source: str = "<bytes>") -> spm.SentencePieceProcessor:
    """A SentencePieceProcessor from a serialized model; ``source`` names it in errors."""
    processor = spm.SentencePieceProcessor()
    try:
        processor.LoadFromSerializedProto(model_bytes)
    except (RuntimeError, OSError, TypeError) as err:
        raise TokenizerError(f"{source} is not a valid SentencePiece model: {err}") from err
    return processor


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
            self._load(True, spm_model_file, _read_bytes(spm_model_file, "SentencePiece model file"),
                       do_lower_case)
        elif vocab_file:
            self._load(False, vocab_file, _read_bytes(vocab_file, "vocab file"), do_lower_case)
        else:
            raise TokenizerError("FullTokenizer needs spm_model_file (SentencePiece) or vocab_file "
                                 "(WordPiece); both are empty")

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
            self.vocab = _parse_vocab(source_bytes, source_file)
            self.basic_tokenizer = BasicTokenizer(do_lower_case=do_lower_case)
            self.wordpiece_tokenizer = WordpieceTokenizer(vocab=self.vocab)
            required = (WORDPIECE_UNK,) + SPECIAL_PIECES
        missing = [piece for piece in required if piece not in self.vocab]
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

    @classmethod
    def from_scratch(cls, vocab_file: str | None, do_lower_case: bool,
                     spm_model_file: str | None) -> "FullTokenizer":
        """Reference-compatible alias of the constructor."""
        return cls(vocab_file, do_lower_case, spm_model_file)

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
    def pad_id(self) -> int:
        """0: the reference pads every feature with id 0 whatever the vocabulary (0 = <pad> in the recipe)."""
        return 0

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


# ---------------------------------------------------------------------------------------------------
# In-graph tokenizer for serving (SentencePiece mode)
# ---------------------------------------------------------------------------------------------------

_CAPITAL_SIGMA, _SMALL_SIGMA, _FINAL_SIGMA = 0x3A3, 0x3C3, 0x3C2
# Never a value of the char map: marks "character unchanged" (a lone 0xFF byte is invalid UTF-8).
_UNCHANGED = b"\xff"


class _UnicodeTables(NamedTuple):
    whitespace: list[int]
    decompose: dict[int, str]
    lower: dict[int, int]
    cased: list[int]
    ignorable: list[int]


@functools.lru_cache(maxsize=None)
def _unicode_tables() -> _UnicodeTables:
    """Python's own Unicode behaviour, tabulated once per process (about one second).

    whitespace: code points ``str.split()`` splits on.
    decompose: cp -> NFKD(char) without combining chars, where that differs from the char. Per-char
      mapping equals preprocess_text's whole-string NFKD + removal: canonical reordering only permutes
      combining chars, which are all removed.
    lower: cp -> cp of ``str.lower()`` (single char for every char left after NFKD; U+0130, the only
      multi-char lowercase, is decomposed by NFKD before lowercasing).
    cased / ignorable: the Cased / Case_Ignorable properties as str.lower's final-sigma rule sees them,
      found by probing str.lower itself.
    """
    whitespace, decompose, lower, cased, ignorable = [], {}, {}, [], []
    for cp in range(sys.maxunicode + 1):
        if 0xD800 <= cp <= 0xDFFF:
            continue
        char = chr(cp)
        if char.isspace():
            whitespace.append(cp)
        if unicodedata.combining(char):
            decompose[cp] = ""
        elif not unicodedata.is_normalized("NFKD", char):
            decompose[cp] = "".join(c for c in unicodedata.normalize("NFKD", char)
                                    if not unicodedata.combining(c))
        lowered = char.lower()
        if lowered != char and len(lowered) == 1:
            lower[cp] = ord(lowered)
        # str.lower turns a capital sigma into the final form unless a cased char follows (skipping
        # case-ignorable ones), and only after a cased char. So: "AΣx" keeps σ iff x is cased (and
        # not ignorable); otherwise "AxΣ" ends in ς iff x is case-ignorable.
        if ("A\u03a3" + char).lower()[1] == chr(_SMALL_SIGMA):
            cased.append(cp)
        elif ("A" + char + "\u03a3").lower()[-1] == chr(_FINAL_SIGMA):
            ignorable.append(cp)
    return _UnicodeTables(whitespace, decompose, lower, cased, ignorable)


def _regex_char_class(code_points: Sequence[int]) -> str:
    """An RE2 character class matching exactly ``code_points``."""
    ranges: list[list[int]] = []
    for cp in sorted(code_points):
        if ranges and cp == ranges[-1][1] + 1:
            ranges[-1][1] = cp
        else:
            ranges.append([cp, cp])
    parts = [f"\\x{{{a:X}}}" if a == b else f"\\x{{{a:X}}}-\\x{{{b:X}}}" for a, b in ranges]
    return "[" + "".join(parts) + "]"


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
        if _is_digit_comma_piece(piece):
            rows.append([sp_model.PieceToId(p) for p in _split_digit_comma_piece(sp_model, piece)])
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
        tables = _unicode_tables()
        self._whitespace_run = _regex_char_class(tables.whitespace) + "+"
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
