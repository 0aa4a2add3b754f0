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

The reference fills the O(n * d) table cell by cell in Python and keeps an n x m table. Here the
same banded table comes from the bit-parallel LCS recurrence, one big integer of 2 d bits per raw
char: the banded table equals the plain LCS table of the match matrix with its out-of-band matches
removed (inside the band, any two cells are joined by a monotone path that stays in the band); a row
of that table is encoded by the zero bits of the row's bit vector (``f[i][j]`` = zeros among bits
0..j), and a row differs from the one above only inside its band (below it nothing can change;
above it every bit stays 1). So row i keeps just its band, columns i - d .. i + d - 1 (columns
outside 0..m-1 never match and stay 1), plus the count of zero bits left of it. The same pass marks,
per row, the cells where the backtrack surely moves diagonally, so the backtrack follows those runs
bit by bit and computes table entries only at the few other cells of its path. The result is
identical, tie-breaks included; tests compare it with the cell-by-cell table on many strings.

Memory stays bounded however long the paragraph: the forward pass keeps only the row before each
block of K rows (K at least sqrt(n)) and the last block; the backtrack, which walks the rows upward,
recomputes one block at a time from its kept row. That is O(n + m) plus O(sqrt(n) * d) bits (and a
few fixed MB), a few MB for a 500,000-char paragraph of ordinary text (d is small when the pieces'
text is about as long as the raw text), for about one more forward pass of time. Time grows with
n * d (word operations on d-bit rows).

``IndexFiller`` reproduces the reference's ``_convert_index``: where a position is unaligned it
snaps starts forward and ends backward to the nearest aligned neighbours.
"""

from __future__ import annotations

import bisect
import dataclasses
import math
from typing import Sequence

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

# Band half-width slack of the reference's first pass: d = |n - m| + 5.
_BAND_SLACK = 5
# The first pass suffices when more than this fraction of the raw chars align; an alignment is kept
# when at least this fraction does.
_MIN_ALIGNED_FRACTION = 0.8
# Codes that never match: a raw char whose normalized key is not one char; columns off the text.
_UNMATCHABLE_KEY = -1
_OFF_TEXT = -2
# Rows kept per block: at least sqrt(n), and as many as this many bits of band allow.
_BLOCK_BITS = 1 << 24
# Match bits are computed for as many rows at once as fit this many band cells.
_MATCH_BATCH_CELLS = 1 << 22


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


@dataclasses.dataclass
class _Block:
    """Rows ``first`` .. ``first + len(bits) - 1`` of a banded table; bit k of a row's ``bits`` and
    ``diagonal`` stands for column i - d + k.

    zeros_below: per row i, the zero bits of its full bit vector left of the band (f[i][i - d - 1]).
    bits: per row, the band's bits (zero bit k: f[i][j] = f[i][j - 1] + 1 at column j = i - d + k).
    diagonal: per row, bits set where the backtrack surely takes the diagonal: a match at an
      interior cell (i > 0, j > 0, the cell above and the one to the left inside the band) with
      f[i][j-1] = f[i-1][j-1] and f[i-1][j] = f[i-1][j-1], so that the match extends the diagonal
      past both neighbours.
    """

    first: int
    zeros_below: list[int] = dataclasses.field(default_factory=list)
    bits: list[int] = dataclasses.field(default_factory=list)
    diagonal: list[int] = dataclasses.field(default_factory=list)


class _BandedTable:
    """One pass of the reference's banded LCS (half-width ``max_dist``), its rows kept in blocks.

    raw_codes: [n] code point of each raw char's one-char key, _UNMATCHABLE_KEY for other keys.
    piece_codes: [m] code points of the piece text.
    """

    def __init__(self, raw_codes: np.ndarray, piece_codes: np.ndarray, max_dist: int):
        n, m = len(raw_codes), len(piece_codes)
        self.max_dist = max_dist
        self._width = 2 * max_dist
        self._raw_codes = raw_codes
        # padded[p] is column p - max_dist; row i's band is padded[i : i + 2 * max_dist].
        self._padded = np.full(max(n, m) + self._width, _OFF_TEXT, dtype=np.int32)
        self._padded[max_dist:max_dist + m] = piece_codes
        self._block_rows = min(n, max(math.isqrt(n) + 1, _BLOCK_BITS // self._width))
        # (zeros_below, bits) of the row before each block; before row 0 every bit is 1.
        self._checkpoints: list[tuple[int, int]] = []
        self._blocks: dict[int, _Block] = {}
        state = (0, (1 << self._width) - 1)
        last_block = (n - 1) // self._block_rows
        for block in range(last_block):
            self._checkpoints.append(state)
            state = self._compute_rows(block * self._block_rows, state, None)
        self._checkpoints.append(state)
        self._compute_block(last_block)

    def _compute_block(self, block: int) -> _Block:
        rows = self._blocks[block] = _Block(block * self._block_rows)
        self._compute_rows(rows.first, self._checkpoints[block], rows)
        return rows

    def _match_bits(self, start: int, stop: int) -> list[int]:
        """Per row start..stop-1, the bits of its band columns whose char equals the row's key."""
        windows = sliding_window_view(self._padded, self._width)[start:stop]
        hits = windows == self._raw_codes[start:stop, None]
        packed = np.packbits(hits, axis=1, bitorder="little").tobytes()
        row_bytes = (self._width + 7) // 8
        return [int.from_bytes(packed[offset:offset + row_bytes], "little")
                for offset in range(0, len(packed), row_bytes)]

    def _compute_rows(self, start: int, state: tuple[int, int], rows: _Block | None
                      ) -> tuple[int, int]:
        """Rows of the block starting at ``start`` from ``state`` (zeros_below, bits) of the row
        before, by the bit-parallel LCS recurrence; appended to ``rows`` (with their diagonal
        moves) unless None. Returns the state of the block's last row."""
        max_dist, width = self.max_dist, self._width
        full = (1 << width) - 1
        top = 1 << (width - 1)             # the column entering the band: 1, never matched before
        interior = (full >> 2) << 1        # columns i - d + 1 .. i + d - 2
        zeros_below, vector = state
        stop = min(len(self._raw_codes), start + self._block_rows)
        batch = max(1, _MATCH_BATCH_CELLS // width)
        for first in range(start, stop, batch):
            last = min(stop, first + batch)
            for i, matches in zip(range(first, last), self._match_bits(first, last)):
                zeros_below += 1 - (vector & 1)  # the column leaving the band keeps its bit
                above = (vector >> 1) | top      # row i - 1 on row i's columns
                diagonal = 0
                if matches:
                    carried = above & matches
                    vector = ((above + carried) | (above - carried)) & full
                    if rows is not None and i > 0:
                        diagonal = matches & interior & above & ~vector
                        if i <= max_dist:  # column 0 lies in the band: no cell to its left
                            diagonal &= ~(1 << (max_dist - i))
                else:
                    vector = above
                if rows is not None:
                    rows.zeros_below.append(zeros_below)
                    rows.bits.append(vector)
                    rows.diagonal.append(diagonal)
        return zeros_below, vector

    def block_of(self, i: int) -> _Block:
        """The block holding row i, recomputed if needed. The block below it stays (the backtrack
        reads rows i and i - 1), blocks further down are dropped (the backtrack walks upward and
        never returns to them)."""
        block = i // self._block_rows
        rows = self._blocks.get(block)
        if rows is None:
            for kept in [b for b in self._blocks if b > block + 1]:
                del self._blocks[kept]
            rows = self._compute_block(block)
        return rows

    def value(self, i: int, j: int) -> int:
        """f[i][j] for a column j inside row i's band, 0 for i < 0 or j < 0."""
        if i < 0 or j < 0:
            return 0
        rows = self.block_of(i)
        k = j - i + self.max_dist
        return (rows.zeros_below[i - rows.first] + k + 1
                - (rows.bits[i - rows.first] & ((2 << k) - 1)).bit_count())


def _move_at(table: _BandedTable, raw_keys: Sequence[str], piece_text: str, i: int,
             j: int) -> int | None:
    """The reference's choice at in-band cell (i, j): 2 diagonal (a match), 1 left, 0 up, None
    where it never filled the cell. Neighbours outside the band count as 0."""
    max_dist = table.max_dist
    up = table.value(i - 1, j) if j < i - 1 + max_dist else 0
    left = table.value(i, j - 1) if j - 1 >= i - max_dist else 0
    move = 0 if i > 0 else None
    best = up
    if left > best:
        move, best = 1, left
    if raw_keys[i] == piece_text[j] and table.value(i - 1, j - 1) + 1 > best:
        move = 2
    return move


def _backtrack(table: _BandedTable, raw_keys: Sequence[str],
               piece_text: str) -> tuple[list[int | None], list[int | None]]:
    """The reference's backtrack over the banded table from its last cell (see the module doc):
    runs of known diagonal moves are followed bit by bit, every other cell takes ``_move_at``."""
    n, m, max_dist = len(raw_keys), len(piece_text), table.max_dist
    orig_to_chartok: list[int | None] = [None] * n
    chartok_to_orig: list[int | None] = [None] * m
    i, j = n - 1, m - 1
    while i >= 0 and j >= 0 and i - max_dist <= j < i + max_dist:
        k = j - i + max_dist  # the column's bit in its row; a diagonal move keeps it
        rows = table.block_of(i)
        # Never set in row 0 or column 0: i and j stay >= 0.
        while i >= rows.first and (rows.diagonal[i - rows.first] >> k) & 1:
            orig_to_chartok[i] = j
            chartok_to_orig[j] = i
            i, j = i - 1, j - 1
        if i < rows.first:  # the run goes on in the block above
            continue
        move = _move_at(table, raw_keys, piece_text, i, j)
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
    raw_codes = np.array([ord(key) if len(key) == 1 else _UNMATCHABLE_KEY for key in raw_keys],
                         dtype=np.int32)
    piece_codes = np.frombuffer(piece_text.encode("utf-32-le"), dtype=np.uint32).astype(np.int32)
    max_dist = abs(n - m) + _BAND_SLACK
    table = _BandedTable(raw_codes, piece_codes, max_dist)
    if table.value(n - 1, m - 1) <= _MIN_ALIGNED_FRACTION * n:  # one more pass, band doubled
        table = _BandedTable(raw_codes, piece_codes, 2 * max_dist)
    lcs_length = table.value(n - 1, m - 1)
    if lcs_length < _MIN_ALIGNED_FRACTION * n:
        return None
    orig_to_chartok, chartok_to_orig = _backtrack(table, raw_keys, piece_text)
    if all(v is None for v in orig_to_chartok):
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
