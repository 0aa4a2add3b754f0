"""Overlapping windows over a long sequence of pieces, and the window where each piece has the
most context: the reference's SQuAD ``doc_spans`` and ``_check_is_max_context``, shared by every
task that splits long inputs (SQuAD paragraphs, NER sentences).

- ``doc_spans``: windows of up to ``max_pieces`` pieces, the next starting ``min(window length,
  doc_stride)`` pieces later, the last one reaching the end; every piece lies in at least one;
- ``max_context_spans``: per piece, the window with the largest ``min(left, right) + 0.01 * window
  length`` (the first window on ties).
"""

from __future__ import annotations

from typing import Sequence

# Score bonus per piece of window length in the max-context rule (reference value).
_MAX_CONTEXT_LENGTH_WEIGHT = 0.01


def doc_spans(num_pieces: int, max_pieces: int, doc_stride: int) -> list[tuple[int, int]]:
    """(start, length) of each window over ``num_pieces`` pieces (see the module doc)."""
    spans = []
    start = 0
    while start < num_pieces:
        length = min(num_pieces - start, max_pieces)
        spans.append((start, length))
        if start + length == num_pieces:
            break
        start += min(length, doc_stride)
    return spans


def max_context_spans(spans: Sequence[tuple[int, int]], num_pieces: int) -> list[int]:
    """[num_pieces] the index of the window in which each piece has the most context."""
    if len(spans) == 1:
        return [0] * num_pieces
    best_span = [-1] * num_pieces
    best_score: list[float | None] = [None] * num_pieces
    for span_index, (start, length) in enumerate(spans):
        end = start + length - 1
        bonus = _MAX_CONTEXT_LENGTH_WEIGHT * length
        for position in range(start, end + 1):
            score = min(position - start, end - position) + bonus
            if best_score[position] is None or score > best_score[position]:
                best_score[position] = score
                best_span[position] = span_index
    return best_span
