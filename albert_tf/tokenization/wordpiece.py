"""WordPiece mode (a vocab file and no SentencePiece model): BERT's BasicTokenizer + greedy
longest-match WordpieceTokenizer, with the reference's semantics.

BasicTokenizer normalizes by itself (cleanup, optional lowercasing and accent removal, CJK
characters and punctuation split off); WordpieceTokenizer maps each word to the longest vocabulary
pieces, ``##`` marking continuations, [UNK] for a word it cannot cover or longer than 200
characters. ``is_start_piece_wordpiece`` is the start-piece rule of whole-word masking. Unlike the
reference, a vocab file that is not UTF-8 text is a ``TokenizerError`` naming the file.
"""

from __future__ import annotations

import unicodedata

from albert_tf.files.text_lines import split_lines
from albert_tf.tokenization.model_files import TokenizerError
from albert_tf.tokenization.normalization import convert_to_unicode

WORDPIECE_UNK = "[UNK]"


# WordpieceTokenizer: longer words become [UNK] (reference value).
_MAX_INPUT_CHARS_PER_WORD = 200


def is_start_piece_wordpiece(piece: str) -> bool:
    """True if a WordPiece token begins a word: it is not a "##" continuation."""
    return not piece.startswith("##")


# ---------------------------------------------------------------------------------------------------
# WordPiece mode (BERT's basic + wordpiece tokenizers, reference semantics)
# ---------------------------------------------------------------------------------------------------

def parse_vocab(data: bytes, vocab_file: str) -> dict[str, int]:
    """Token -> id from the bytes of a vocab file (``vocab_file`` names it in errors): one token per
    line, its first whitespace-separated field.

    SentencePiece ``.vocab`` files (``piece<TAB>score``) therefore load too. A blank line is the token
    " "; a repeated token keeps its first id; ids are consecutive in order of first appearance.
    """
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise TokenizerError(f"vocab file {vocab_file} is not UTF-8 text: {err}") from err
    vocab: dict[str, int] = {}
    # Lines end at "\n" only, as the reference's readline reads them: a token may hold U+0085, ...
    for line in split_lines(text):
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
