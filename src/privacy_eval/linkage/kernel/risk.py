"""Risk and top-k from per-record counts, and blocking recall (kernel section (d)).

See docs/metrics.md, Linkage attack: per-record reduction and risk; top-k; truth
coverage and "not measurable".
"""

from __future__ import annotations

import numpy as np

__all__ = ["blocking_recall", "check_k_vs_cap", "risk_from_counts", "top_k_probability"]

def top_k_probability(n_better: np.ndarray, tie_size: np.ndarray, k: float) -> np.ndarray:
    """P(true record among k guesses = the strictly better ones, then a uniform fill).

    0 when the truth is absent (``n_better < 0``) or ``n_better >= k``;
    1 when ``n_better + tie_size <= k``; ``(k - n_better)/tie_size`` otherwise
    (docs/metrics.md, Linkage attack: top-k).
    """
    b = np.asarray(n_better, dtype=np.float64)
    m = np.asarray(tie_size, dtype=np.float64)
    k = float(k)
    out = np.zeros(np.broadcast(b, m).shape)
    live = (b >= 0) & (b < k)
    full = live & (b + m <= k)
    part = live & ~full
    out[full] = 1.0
    with np.errstate(divide="ignore", invalid="ignore"):
        frac = (k - b) / m
    out[part] = np.broadcast_to(frac, out.shape)[part]
    return out


def risk_from_counts(n_better: np.ndarray, tie_size: np.ndarray) -> np.ndarray:
    """RISK = top_k_probability(b, m, 1): 1/m if nothing is strictly better, else 0."""
    return top_k_probability(n_better, tie_size, 1)


def check_k_vs_cap(k: float, n_better: np.ndarray, capped: np.ndarray | None) -> None:
    if capped is None:
        return
    capped = np.asarray(capped, dtype=bool)
    if capped.any() and k > np.asarray(n_better)[capped].min():
        raise ValueError(
            f"top-k with k = {k} exceeds the cap of a record whose N_BETTER was only bounded; "
            "evaluate the block with max_k >= k"
        )


def blocking_recall(n_true_pairs: int, n_true_pairs_kept: int) -> float | None:
    """Share of true pairs kept by blocking; ``None`` (R: NA, never 1) when there are none."""
    if n_true_pairs_kept > n_true_pairs or n_true_pairs_kept < 0:
        raise ValueError("kept true pairs must be between 0 and the number of true pairs")
    return None if n_true_pairs == 0 else n_true_pairs_kept / n_true_pairs

