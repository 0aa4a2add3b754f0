"""Character alignment between a raw SQuAD paragraph and the text of its SentencePiece pieces.

The reference maps every piece back to character offsets of the *raw* paragraph (answers are
sliced from it) by aligning two strings: the raw paragraph (n chars) and the pieces' text, i.e. the
concatenated pieces with "▁" read as a space (m chars). A raw char matches a piece-text char when
the raw char, normalized alone (``preprocess_text(char, remove_space=False)``: NFKD, accents
removed, lowercased), is exactly that one char. It takes a longest common subsequence restricted to
a band around the diagonal: cell (i, j) exists only for ``i - d <= j < i + d`` and every cell outside
counts as 0, with ``d = |n - m| + 5``, doubled once when the first pass aligns no more than 0.8 n
chars. Its backtrack from (n-1, m-1) prefers, at each cell, a match that extends the diagonal
predecessor's length past both others, else the left cell when it is strictly longer than the one
above, else the one above; it stops at a cell the pass never filled. When no char aligns or fewer
than 0.8 n do, the paragraph is a mismatch (the reference logs "MISMATCH DETECTED!" and drops the
question).

The reference fills the O(n * d) table cell by cell in Python. Here the same banded table comes from
the bit-parallel LCS recurrence (one big-integer row per raw char, O(n * m / 64) word operations):
a banded table equals the plain LCS table of the match matrix with its out-of-band matches removed
(inside the band, any two cells are joined by a monotone path that stays in the band), and a row of
that table is encoded by the zero bits of the row's bit vector (``f[i][j]`` = zeros among bits
0..j). The same pass marks, per row, the cells where the backtrack surely moves diagonally, so the
backtrack follows those runs bit by bit and computes table entries only at the few other cells of
its path. The result is identical, tie-breaks included; tests compare it with the cell-by-cell
table on many strings.

``IndexFiller`` reproduces the reference's ``_convert_index``: where a position is unaligned it
snaps starts forward and ends backward to the nearest aligned neighbours.
"""

from __future__ import annotations

import bisect
import dataclasses
from typing import Sequence

import numpy as np

# Band half-width slack of the reference's first pass: d = |n - m| + 5.
_BAND_SLACK = 5
# The first pass suffices when more than this fraction of the raw chars align; an alignment is kept
# when at least this fraction does.
_MIN_ALIGNED_FRACTION = 0.8


@dataclasses.dataclass(frozen=True)
class CharAlignment:
    """Aligned char pairs of a raw text (n chars) and a piece text (m chars).

    orig_to_chartok: [n] raw char -> piece-text char, None where unaligned.
    chartok_to_orig: [m] piece-text char -> raw char, None where unaligned.
    lcs_length: length of the banded longest common subsequence.
    """

    orig_to_chartok: list[int | None]
    chartok_to_orig: list[int | None]
    lcs_length: int


def _char_masks(text: str) -> dict[str, int]:
    """char -> bit mask of the positions of ``text`` holding it (bit j = position j)."""
    codes = np.frombuffer(text.encode("utf-32-le"), dtype=np.uint32)
    distinct = np.unique(codes)
    packed = np.packbits(codes[None, :] == distinct[:, None], axis=1, bitorder="little")
    return {chr(code): int.from_bytes(row.tobytes(), "little")
            for code, row in zip(distinct.tolist(), packed)}


def _banded_rows(raw_keys: Sequence[str], masks: dict[str, int], m: int,
                 max_dist: int) -> tuple[list[int], list[int]]:
    """Bit vectors of every row of the banded LCS table, and of the cells known to be diagonal moves.

    rows[i]: zero bit j where f[i][j] = f[i][j-1] + 1. diagonal_moves[i]: bit j set where the
    backtrack surely takes the diagonal at (i, j): a match at an interior cell (i > 0, j > 0, both
    the cell above and the one to the left inside the band) with f[i][j-1] = f[i-1][j-1] (zero bit
    j in row i) and f[i-1][j] = f[i-1][j-1] (set bit j in row i-1), so that the match extends the
    diagonal past both neighbours.
    """
    full = (1 << m) - 1
    not_first_column = full ^ 1
    band = (1 << (2 * max_dist)) - 1  # columns i - d .. i + d - 1 once shifted by i - d
    inner = band >> 2                 # columns i - d + 1 .. i + d - 2 once shifted by i - d + 1
    vector = full
    above = 0  # row i - 1 as the diagonal rule reads it; 0 keeps row 0 out
    rows, diagonal_moves = [], []
    for i, key in enumerate(raw_keys):
        matches = masks.get(key, 0)
        diagonal = 0
        if matches:
            shift = i - max_dist
            if shift >= 0:
                matches &= band << shift
                interior = inner << (shift + 1)
            else:
                matches &= band >> -shift
                interior = (inner >> -(shift + 1)) & not_first_column
            carried = vector & matches
            vector = ((vector + carried) | (vector - carried)) & full
            diagonal = matches & interior & above & ~vector
        rows.append(vector)
        diagonal_moves.append(diagonal)
        above = vector
    return rows, diagonal_moves


def _lcs_at(rows: list[int], i: int, j: int) -> int:
    """f[i][j] of the table whose row bit vectors are ``rows`` (0 for i < 0 or j < 0): the zero
    bits of row i among bits 0..j."""
    if i < 0 or j < 0:
        return 0
    return j + 1 - (rows[i] & ((2 << j) - 1)).bit_count()


def _move_at(rows: list[int], raw_keys: Sequence[str], piece_text: str, i: int, j: int,
             max_dist: int) -> int | None:
    """The reference's choice at in-band cell (i, j): 2 diagonal (a match), 1 left, 0 up, None
    where it never filled the cell. Neighbours outside the band count as 0."""
    up = _lcs_at(rows, i - 1, j) if j < i - 1 + max_dist else 0
    left = _lcs_at(rows, i, j - 1) if j - 1 >= i - max_dist else 0
    move = 0 if i > 0 else None
    best = up
    if left > best:
        move, best = 1, left
    if raw_keys[i] == piece_text[j] and _lcs_at(rows, i - 1, j - 1) + 1 > best:
        move = 2
    return move


def _backtrack(rows: list[int], diagonal_moves: list[int], raw_keys: Sequence[str],
               piece_text: str, max_dist: int) -> tuple[list[int | None], list[int | None]]:
    """The reference's backtrack over the banded table from its last cell (see the module doc):
    runs of known diagonal moves are followed bit by bit, every other cell takes ``_move_at``."""
    n, m = len(raw_keys), len(piece_text)
    orig_to_chartok: list[int | None] = [None] * n
    chartok_to_orig: list[int | None] = [None] * m
    i, j = n - 1, m - 1
    while i >= 0 and j >= 0 and i - max_dist <= j < i + max_dist:
        while (diagonal_moves[i] >> j) & 1:  # never set in row 0 or column 0: i, j stay >= 0
            orig_to_chartok[i] = j
            chartok_to_orig[j] = i
            i, j = i - 1, j - 1
        move = _move_at(rows, raw_keys, piece_text, i, j, max_dist)
        if move is None:  # a first-row cell the reference never filled
            break
        if move == 2:
            orig_to_chartok[i] = j
            chartok_to_orig[j] = i
            i, j = i - 1, j - 1
        elif move == 1:
            j -= 1
        else:
            i -= 1
    return orig_to_chartok, chartok_to_orig


def align_characters(raw_keys: Sequence[str], piece_text: str) -> CharAlignment | None:
    """The reference's banded-LCS alignment; None for a mismatch (the reference drops the question).

    raw_keys: [n] every raw char normalized alone (see the module doc); only a one-char key can
      match. piece_text: the pieces concatenated with "▁" replaced by " ".
    """
    n, m = len(raw_keys), len(piece_text)
    if n == 0 or m == 0:
        return None
    masks = _char_masks(piece_text)
    max_dist = abs(n - m) + _BAND_SLACK
    rows, diagonal_moves = _banded_rows(raw_keys, masks, m, max_dist)
    if m - rows[-1].bit_count() <= _MIN_ALIGNED_FRACTION * n:  # one more pass, band doubled
        max_dist *= 2
        rows, diagonal_moves = _banded_rows(raw_keys, masks, m, max_dist)
    lcs_length = m - rows[-1].bit_count()
    orig_to_chartok, chartok_to_orig = _backtrack(rows, diagonal_moves, raw_keys, piece_text,
                                                  max_dist)
    if lcs_length < _MIN_ALIGNED_FRACTION * n or all(v is None for v in orig_to_chartok):
        return None
    return CharAlignment(orig_to_chartok, chartok_to_orig, lcs_length)


class IndexFiller:
    """``fill(position)`` of an index with gaps, as the reference's ``_convert_index``.

    index: positions -> target positions or None (unaligned), with at least one aligned entry.
    limit: length of the target text, or None (then an end past the last aligned entry is not
      stretched to the text's end).
    """

    def __init__(self, index: Sequence[int | None], limit: int | None = None):
        if all(value is None for value in index):
            raise ValueError("IndexFiller needs at least one aligned position")
        self._index = index
        self._limit = limit
        self._aligned: list[int] | None = None  # the aligned positions, listed on the first gap

    def fill(self, position: int, is_start: bool) -> int:
        """The target of ``position``; unaligned starts move forward, unaligned ends backward.

        Between aligned neighbours f (before) and r (after): a start becomes f + 1 and an end r - 1
        when r > f + 1, else a start takes r and an end f. Before the first aligned entry r: a
        start becomes 0 and an end r - 1 (r itself when r is 0). After the last aligned entry f:
        with a limit and f < limit - 1, a start becomes f + 1 and an end limit - 1; otherwise f.
        """
        value = self._index[position]
        if value is not None:
            return value
        if self._aligned is None:
            self._aligned = [p for p, target in enumerate(self._index) if target is not None]
        aligned = self._aligned
        following = bisect.bisect_left(aligned, position)
        if following == 0:
            after = self._index[aligned[0]]
            if after >= 1:
                return 0 if is_start else after - 1
            return after
        before = self._index[aligned[following - 1]]
        if following == len(aligned):
            if self._limit is not None and before < self._limit - 1:
                return before + 1 if is_start else self._limit - 1
            return before
        after = self._index[aligned[following]]
        if is_start:
            return before + 1 if after > before + 1 else after
        return after - 1 if after > before + 1 else before
