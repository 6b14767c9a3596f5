"""The weighted method's per-column scaling (kernel section (e)).

See docs/metrics.md, Linkage attack: scores (Mahalanobis, weighted, single-column).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Literal

import numpy as np

__all__ = ["max_abs_diff", "min_abs_diff_sorted", "weighted_scaling"]

def weighted_scaling(
    col_min: Sequence[float] | np.ndarray,
    col_max: Sequence[float] | np.ndarray,
    weights: Sequence[float] | np.ndarray | None = None,
    *,
    normalize: Literal["range", "none"] = "range",
) -> tuple[np.ndarray, float]:
    """Per-column multipliers and an offset for the weighted score (docs/metrics.md,
    Linkage attack: scores).

    With ``d_c = |x_c - y_c|`` and the min/max of ``d_c`` over all candidate
    pairs, the range-normalised weighted sum is
    ``Σ w_c (d_c - min_c)/(max_c - min_c) = Σ |x_c·mult_c - y_c·mult_c| - offset``
    with ``mult_c = w_c/(max_c - min_c)`` and ``offset = Σ w_c·min_c/(max_c - min_c)``.
    A column whose range is 0 contributes 0 (the reference normalises a
    constant score to all zeros), so its multiplier is 0.  Pass ``offset`` as
    ``value_offset`` so that tie snapping sees the normalised score itself
    (its ``max(1, |a|, |b|)`` scale depends on the offset).

    Weight errors follow ``combine_scores``: wrong length, NA/negative, all zero.
    """
    lo = np.asarray(col_min, dtype=np.float64)
    hi = np.asarray(col_max, dtype=np.float64)
    if lo.ndim != 1 or lo.shape != hi.shape or lo.size == 0:
        raise ValueError("col_min and col_max must be 1-d with one entry per column")
    w = np.ones_like(lo) if weights is None else np.asarray(weights, dtype=np.float64)
    if w.shape != lo.shape:
        raise ValueError("weights must have one entry per column")
    if np.isnan(w).any() or (w < 0).any() or not np.isfinite(w).all():
        raise ValueError("weights must be finite and non-negative (a negative weight flips orientation)")
    if not (w > 0).any():
        raise ValueError("weights are all zero: every candidate would tie")
    if normalize == "none":
        return w.copy(), 0.0
    if normalize != "range":
        raise ValueError("normalize must be 'range' or 'none' (rank is not an affine map of |x - y|)")
    if not (np.isfinite(lo).all() and np.isfinite(hi).all()) or (hi < lo).any():
        raise ValueError("column ranges must be finite with max >= min")
    rng = hi - lo
    live = rng > 0
    with np.errstate(over="ignore"):  # inf below a range of about 5.6e-309: the caller refuses it
        mult = np.where(live, w / np.where(live, rng, 1.0), 0.0)
    offset = float(np.sum(np.where(live, w * lo / np.where(live, rng, 1.0), 0.0)))
    return mult, offset


def min_abs_diff_sorted(original_sorted: np.ndarray, synthetic_sorted: np.ndarray) -> float:
    """Smallest |x - y| over all (x an original value, y a synthetic one) pairs of one column of one block.

    Inputs sorted ascending.  0 when a value occurs on both sides; otherwise
    the closest pair, found among each y's sorted neighbours: rounding of
    ``|x - y|`` is monotone, so that is the minimum of the computed values over
    all pairs too.  +inf when a side is empty (no pairs; neutral for ``min``
    across blocks).
    """
    x = np.asarray(original_sorted, dtype=np.float64)
    y = np.asarray(synthetic_sorted, dtype=np.float64)
    if x.size == 0 or y.size == 0:
        return math.inf
    pos = np.searchsorted(x, y)
    right = x[np.minimum(pos, x.size - 1)]
    left = x[np.maximum(pos - 1, 0)]
    return float(min(np.abs(right - y).min(), np.abs(left - y).min()))


def max_abs_diff(original_min: float, original_max: float, synthetic_min: float, synthetic_max: float) -> float:
    """Largest |x - y| over all pairs of one column of one block, from the side extremes."""
    return float(max(original_max - synthetic_min, synthetic_max - original_min))
