"""This Python's own Unicode behaviour where ``preprocess_text`` relies on it, tabulated once per
process (about one second), for the two tokenizers that must reproduce it outside Python: the
in-graph one (albert_tf/tokenization/in_graph.py) and the Hugging Face ``tokenizer.json``
(albert_tf/checkpoints/hf_tokenizer.py).

Pure Python (no TensorFlow): both build regular expressions and lookup tables from these tables.
"""

from __future__ import annotations

import functools
import sys
import unicodedata
from typing import NamedTuple, Sequence

SMALL_SIGMA, FINAL_SIGMA = "\u03c3", "\u03c2"


class UnicodeTables(NamedTuple):
    """whitespace: code points ``str.split()`` splits on. combining: code points
    ``unicodedata.combining`` marks (what preprocess_text removes). decompose: cp -> NFKD(char)
    without combining chars, where that differs from the char (per-char mapping equals
    preprocess_text's whole-string NFKD + removal: canonical reordering only permutes combining
    chars, which are all removed). lower: cp -> cp of ``str.lower()`` (single chars; U+0130, the only
    multi-char lowercase, is decomposed by NFKD before lowercasing). cased / ignorable: the Cased /
    Case_Ignorable properties as str.lower's final-sigma rule sees them, found by probing str.lower
    itself."""

    whitespace: tuple[int, ...]
    combining: tuple[int, ...]
    decompose: dict[int, str]
    lower: dict[int, int]
    cased: tuple[int, ...]
    ignorable: tuple[int, ...]


def characters() -> list[str]:
    """Every character of this Python (every code point but the surrogates)."""
    return [chr(cp) for cp in range(sys.maxunicode + 1) if not 0xD800 <= cp <= 0xDFFF]


@functools.lru_cache(maxsize=None)
def python_unicode_tables() -> UnicodeTables:
    """The tables of this Python (see ``UnicodeTables``)."""
    whitespace, combining, decompose, lower, cased, ignorable = [], [], {}, {}, [], []
    for char in characters():
        cp = ord(char)
        if char.isspace():
            whitespace.append(cp)
        if unicodedata.combining(char):
            combining.append(cp)
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
        if ("A\u03a3" + char).lower()[1] == SMALL_SIGMA:
            cased.append(cp)
        elif ("A" + char + "\u03a3").lower()[-1] == FINAL_SIGMA:
            ignorable.append(cp)
    return UnicodeTables(tuple(whitespace), tuple(combining), decompose, lower, tuple(cased),
                         tuple(ignorable))


def character_class(points: Sequence[int]) -> str:
    """A regular-expression character class matching exactly ``points`` (ranges written
    ``\\x{A}-\\x{B}``, which RE2 and Oniguruma both read)."""
    ranges: list[list[int]] = []
    for cp in sorted(points):
        if ranges and cp == ranges[-1][1] + 1:
            ranges[-1][1] = cp
        else:
            ranges.append([cp, cp])
    parts = [f"\\x{{{a:X}}}" if a == b else f"\\x{{{a:X}}}-\\x{{{b:X}}}" for a, b in ranges]
    return "[" + "".join(parts) + "]"
