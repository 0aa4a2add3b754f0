"""The reference's truncation of a pair of token sequences to a length budget, shared by the
pretraining data (random front/back cuts) and the fine-tuning features (cuts from the back)."""

from __future__ import annotations

import random
from typing import Sequence, TypeVar

T = TypeVar("T")


def truncate_seq_pair(tokens_a: Sequence[T], tokens_b: Sequence[T], max_length: int,
                      rng: random.Random | None = None) -> tuple[list[T], list[T]]:
    """The pair shortened to at most ``max_length`` items in total, by the reference's rule.

    One item at a time is removed from the longer sequence (b when the lengths are equal): from its
    back, or, given ``rng`` (pretraining data), from its front if ``rng.random() < 0.5`` else from
    its back. The draws are made exactly as the reference makes them, but the sequences are sliced
    once at the end, so a very long sentence costs O(length). The fine-tuning features (GLUE)
    truncate without ``rng``.
    """
    len_a, len_b = len(tokens_a), len(tokens_b)
    front_a = back_a = front_b = back_b = 0
    while len_a + len_b > max_length:
        from_front = rng is not None and rng.random() < 0.5
        if len_a > len_b:
            len_a -= 1
            front_a += from_front
            back_a += not from_front
        else:
            len_b -= 1
            front_b += from_front
            back_b += not from_front
    return (list(tokens_a[front_a:len(tokens_a) - back_a]),
            list(tokens_b[front_b:len(tokens_b) - back_b]))
