"""Scores, tie snapping and the per-record reduction of a dense score matrix (kernel
sections "distances and snapping" and (c)), shared by every path so that the paths
agree bit for bit.

See docs/metrics.md, Linkage attack: tie snapping; per-record reduction and risk.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import numpy as np

from privacy_eval.linkage.kernel.risk import risk_from_counts

__all__ = [
    "DEFAULT_TOL", "RecordReduction", "check_metric", "check_tol", "group_start", "joins",
    "reduce_value_matrix", "values_from_diff",
]

#: sqrt(.Machine$double.eps), the reference's default relative tie tolerance.
DEFAULT_TOL: float = float(np.sqrt(np.finfo(np.float64).eps))


def values_from_diff(diff: np.ndarray, p: int, squared: bool, offset: float) -> np.ndarray:
    # A fixed column loop of elementwise ufuncs rounds identically whatever the
    # array's shape; numpy's axis reductions may switch to pairwise summation
    # and would make the kd path and the brute-force path differ in the last bit.
    q = diff.shape[-1]
    if p == 2:
        acc = diff[..., 0] * diff[..., 0]
        for c in range(1, q):
            acc = acc + diff[..., c] * diff[..., c]
        if not squared:
            acc = np.sqrt(acc)
    else:
        acc = np.abs(diff[..., 0])
        for c in range(1, q):
            acc = acc + np.abs(diff[..., c])
    return acc - offset


def check_metric(p: int, squared: bool, value_offset: float) -> None:
    if p not in (1, 2):
        raise ValueError("Minkowski p must be 1 (weighted) or 2 (Mahalanobis)")
    if squared and p != 2:
        raise ValueError("squared distances only apply to p = 2")
    if not math.isfinite(value_offset):
        raise ValueError("value_offset must be finite")


def check_tol(tol: float) -> float:
    if isinstance(tol, bool) or not isinstance(tol, (int, float, np.floating, np.integer)):
        raise ValueError("tolerance must be a single finite non-negative number")
    tol = float(tol)
    if not math.isfinite(tol) or tol < 0:
        raise ValueError("tolerance must be a single finite non-negative number (0 = exact ties)")
    return tol


def joins(a: np.ndarray, b: np.ndarray, tol: float) -> np.ndarray:
    """Whether sorted neighbours a <= b fall in one tie group (docs/metrics.md, Linkage attack: tie snapping)."""
    with np.errstate(invalid="ignore"):
        finite = np.isfinite(a) & np.isfinite(b)
        scale = np.maximum(1.0, np.maximum(np.abs(a), np.abs(b)))
        return (a == b) | (finite & (b - a <= tol * scale))


def group_start(sorted_rows: np.ndarray, tol: float) -> np.ndarray:
    """Index of each position's tie-group start, row-wise on sorted rows (n × m)."""
    n, m = sorted_rows.shape
    pos = np.broadcast_to(np.arange(m), (n, m))
    if m == 0:
        return np.zeros((n, 0), dtype=np.int64)
    brk = np.ones((n, m), dtype=bool)
    brk[:, 1:] = ~joins(sorted_rows[:, :-1], sorted_rows[:, 1:], tol)
    return np.maximum.accumulate(np.where(brk, pos, 0), axis=1)


@dataclass(frozen=True)
class RecordReduction:
    """Per-record reduction of a full candidate score matrix (one row per record).

    ``true_score`` is the *unsnapped* value of the true pair (R's TRUE_SCORE
    is the snapped one; they differ by less than ``tol`` relative).
    """

    n_candidates: np.ndarray  # int64
    has_true: np.ndarray  # bool
    true_score: np.ndarray  # float64, NaN if absent
    n_better: np.ndarray  # int64, -1 if absent
    true_tie_size: np.ndarray  # int64, -1 if absent
    best_score: np.ndarray  # snapped min (= min), NaN without candidates
    best_tie_size: np.ndarray  # int64, 0 without candidates
    second_score: np.ndarray  # second smallest snapped value, NaN with < 2 candidates
    margin: np.ndarray  # second - best, 0 with < 2 candidates
    sd_score: np.ndarray  # sd of unsnapped values (n-1), 0 with < 2 candidates
    eccentricity: np.ndarray  # margin / sd; Inf with one candidate; 0 if sd == 0
    confidence: np.ndarray  # eccentricity ("margin") or 1 / best_tie_size ("tie")

    @property
    def risk(self) -> np.ndarray:
        """RISK = 1/TRUE_TIE_SIZE if nothing is strictly better than the truth, else 0."""
        return risk_from_counts(self.n_better, self.true_tie_size)


def reduce_value_matrix(
    values: np.ndarray,
    true_col: np.ndarray,
    *,
    tol: float = DEFAULT_TOL,
    confidence: Literal["margin", "tie"] = "margin",
) -> RecordReduction:
    """Reduce a dense (n_records × n_candidates) matrix of minimised values.

    ``true_col[i]`` is the column of record i's true candidate, or -1 if the
    truth is not a candidate.  Snapping is per row (never across records).
    Values must not be NaN (the reference refuses NA scores).
    """
    tol = check_tol(tol)
    if confidence not in ("margin", "tie"):
        raise ValueError("confidence must be 'margin' or 'tie'")
    v = np.asarray(values, dtype=np.float64)
    if v.ndim != 2:
        raise ValueError("values must be a 2-d matrix")
    if np.isnan(v).any():
        raise ValueError("NA/NaN scores cannot be ranked")
    n, m = v.shape
    tc = np.asarray(true_col, dtype=np.int64)
    if tc.shape != (n,) or np.any(tc >= m) or np.any(tc < -1):
        raise ValueError("true_col must hold one column index (or -1) per record")
    rows = np.arange(n)
    n_cand = np.full(n, m, dtype=np.int64)
    has = tc >= 0
    if m == 0:
        nan = np.full(n, np.nan)
        neg = np.full(n, -1, dtype=np.int64)
        return RecordReduction(
            n_cand, has, nan, neg, neg.copy(), nan.copy(), np.zeros(n, dtype=np.int64),
            nan.copy(), np.zeros(n), np.zeros(n), nan.copy(), nan.copy(),
        )
    order = np.argsort(v, axis=1, kind="stable")
    s = np.take_along_axis(v, order, axis=1)
    snapped_sorted = np.take_along_axis(s, group_start(s, tol), axis=1)
    snapped = np.empty_like(v)
    np.put_along_axis(snapped, order, snapped_sorted, axis=1)

    best = snapped_sorted[:, 0]
    best_tie = (snapped == best[:, None]).sum(axis=1).astype(np.int64)
    if m > 1:
        second = snapped_sorted[:, 1]
        margin = second - best
        sd = np.std(s, axis=1, ddof=1)  # of the sorted scores: the same in any order of the candidates
        with np.errstate(divide="ignore", invalid="ignore"):
            ecc = np.where(sd > 0, margin / np.where(sd > 0, sd, 1.0), 0.0)
    else:
        second = np.full(n, np.nan)
        margin = np.zeros(n)
        sd = np.zeros(n)
        ecc = np.full(n, np.inf)
    conf = ecc.copy() if confidence == "margin" else 1.0 / best_tie

    tcc = np.where(has, tc, 0)
    ts = snapped[rows, tcc]
    n_better = np.where(has, (snapped < ts[:, None]).sum(axis=1), -1).astype(np.int64)
    tie = np.where(has, (snapped == ts[:, None]).sum(axis=1), -1).astype(np.int64)
    true_score = np.where(has, v[rows, tcc], np.nan)
    return RecordReduction(n_cand, has, true_score, n_better, tie, best, best_tie, second, margin, sd, ecc, conf)
