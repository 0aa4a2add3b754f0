"""Tolerances for float32 comparisons, derived from how the compared values are computed.

Two float32 computations of the same mathematical value differ when they sum in another order
(another batch shape, a batch split into parts, another device or kernel). Each rounded sum of n
terms lies within (n - 1) * EPS / 2 * sum|terms| of the exact sum (the standard bound for
recursive summation, EPS = 2**-23), so two orders differ by at most
``sum_tolerance(n, sum|terms|)``.

Training trajectories cannot be bounded that way: Adam and LAMB divide each gradient by its
running RMS plus epsilon (1e-6), so a weight whose gradient is near 0 moves by up to
lr * (1 - beta_1) / epsilon = 1e5 * lr per unit change of its gradient. A rounding change of
1e-10 in such a gradient moves the weight by 1e-6 per step at lr 1e-2, on whichever of the
100,000 weights happens to sit near 0 (seen: 1.2e-5 after three steps). ``assert_trained_alike``
therefore compares two runs' difference with the difference a real defect makes in the same
training, which moves weights by Adam's whole step (about lr per step).
"""

from __future__ import annotations

import math
from typing import Iterable

import numpy as np

FLOAT32_EPS = float(np.finfo(np.float32).eps)  # 2**-23 = 1.19e-7
BFLOAT16_UNIT_ROUNDOFF = 2.0 ** -9  # 8 significant bits: a rounding's largest relative error

# How far below a real defect's effect the difference of two runs that should be equal must stay.
# Float32 reordering moved the weights by at most 1e-4 of a defect's move in every run measured
# (test_length_split: 1.2e-5 vs 0.14; test_training: 1.2e-7 vs 0.02; mirrored_equivalence:
# 1.2e-7 vs 0.06); a defect is 1 by definition. 1e-2 leaves both sides a factor of 100.
DEFECT_FRACTION = 1e-2


def sum_tolerance(terms: int, magnitude: float) -> float:
    """Largest difference between two float32 sums of the same ``terms`` numbers taken in
    different orders, ``magnitude`` bounding the sum of their absolute values: each sum is within
    (terms - 1) * EPS / 2 * magnitude of the exact one, so terms * EPS * magnitude covers both."""
    return terms * FLOAT32_EPS * magnitude


def bfloat16_tolerance(roundings: int, magnitude: float, confidence: float = 5.0) -> float:
    """How far a result computed through ``roundings`` successive bfloat16 roundings may stray
    from its float32 value, ``magnitude`` being the size of the values rounded. The worst case,
    roundings * u, never occurs for more than a few roundings; the probabilistic bound of Higham
    and Mary (SIAM J. Sci. Comput. 41, 2019) holds instead: with independent mean-zero rounding
    errors the relative error exceeds confidence * sqrt(roundings) * u with probability at most
    2 exp(-confidence**2 / 2) (7.5e-6 at 5)."""
    return confidence * math.sqrt(roundings) * BFLOAT16_UNIT_ROUNDOFF * magnitude


def max_difference(got: Iterable[np.ndarray], want: Iterable[np.ndarray]) -> float:
    """Largest absolute difference between paired arrays (e.g. two models' weights)."""
    return max(float(np.max(np.abs(np.asarray(a, np.float64) - np.asarray(b, np.float64))))
               for a, b in zip(got, want))


def assert_below_defect(difference: float, defect: float, scale: float,
                        what: str = "weights") -> None:
    """Asserts that ``difference`` (the largest between two trainings that should be equal) is at
    most ``DEFECT_FRACTION`` of ``defect`` (the largest a real defect makes in the same training:
    one example of every batch replaced by another, from the same initial weights). The defect
    must itself move the weights clearly, by more than 1e3 float32 steps of their largest size
    ``scale``, else the comparison would prove nothing."""
    assert defect > 1e3 * FLOAT32_EPS * scale, f"the defect moved the {what} only {defect:.3g}"
    assert difference <= DEFECT_FRACTION * defect, (
        f"{what} differ by {difference:.3g}, over {DEFECT_FRACTION} of a defect's {defect:.3g}")


def assert_trained_alike(got: Iterable[np.ndarray], want: Iterable[np.ndarray],
                         defective: Iterable[np.ndarray], what: str = "weights") -> None:
    """``assert_below_defect`` on weights: ``got`` and ``want`` from two trainings that should be
    equal, ``defective`` from ``want``'s training with the defect (all paired, same order)."""
    want = [np.asarray(w) for w in want]
    assert_below_defect(max_difference(got, want), max_difference(defective, want),
                        max(float(np.max(np.abs(w))) for w in want), what)
