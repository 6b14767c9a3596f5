"""Per-block evaluation by scoring every pair (kernel section (b)), and what every block
evaluator shares: the per-record result types, the input checks, the true original of
each synthetic record.

See docs/metrics.md, Linkage attack: per-record reduction and risk; eccentricity and
precision-recall.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

from privacy_eval.linkage.kernel.distances import (
    DEFAULT_TOL,
    RecordReduction,
    check_metric,
    reduce_value_matrix,
    values_from_diff,
)
from privacy_eval.linkage.kernel.risk import (
    check_k_vs_cap,
    risk_from_counts,
    top_k_probability,
)

__all__ = [
    "BlockResult", "BruteForceResult", "block_inputs", "distinct_rows", "evaluate_block_bruteforce", "truth_index",
]

@dataclass(frozen=True)
class BlockResult:
    """Per synthetic record of one block, in the input order of the synthetic side.

    ``n_better`` is exact unless ``capped``; a capped record has at least
    ``n_better >= max_k`` strictly better candidates (so RISK and every top-k
    probability with k <= max_k are exactly 0) and ``true_tie_size == -1``.
    """

    n_candidates: np.ndarray  # int64
    has_true: np.ndarray  # bool
    true_score: np.ndarray  # float64 (unsnapped distance to the true original), NaN if absent
    n_better: np.ndarray  # int64, -1 if absent, lower bound if capped
    true_tie_size: np.ndarray  # int64, -1 if absent or capped
    capped: np.ndarray  # bool

    @property
    def risk(self) -> np.ndarray:
        return risk_from_counts(self.n_better, self.true_tie_size)

    def top_k_probability(self, k: float) -> np.ndarray:
        """Exact per-record top-k hit probability; refuses a k beyond a capped record's bound."""
        check_k_vs_cap(k, self.n_better, self.capped)
        return top_k_probability(self.n_better, self.true_tie_size, k)


@dataclass(frozen=True)
class BruteForceResult(BlockResult):
    """:class:`BlockResult` plus the quantities that need every candidate score."""

    best_score: np.ndarray
    best_tie_size: np.ndarray
    second_score: np.ndarray
    margin: np.ndarray
    sd_score: np.ndarray
    eccentricity: np.ndarray
    confidence: np.ndarray


def _check_coords(coords: np.ndarray, n: int, side: str) -> np.ndarray:
    coords = np.asarray(coords, dtype=np.float64)
    if coords.ndim != 2:
        raise ValueError(f"{side} coordinates must be a 2-d array")
    if coords.shape[0] != n:
        raise ValueError(f"{side} ids must be 1-d with one id per record")
    if not np.all(np.isfinite(coords)):
        raise ValueError(
            f"NA/NaN/Inf in the {side} coordinates: a missing coordinate would shorten a distance "
            "and overstate a match; remove or impute first"
        )
    return coords


def _check_ids(ids: np.ndarray, side: str) -> np.ndarray:
    ids = np.asarray(ids)
    if ids.ndim != 1:
        raise ValueError(f"{side} ids must be 1-d with one id per record")
    if ids.size and np.unique(ids).size != ids.size:
        raise ValueError(
            f"duplicated {side} record ids in a block: candidate pairs must be a set "
            "(duplicates bias the analytic rate and the baselines in the same direction)"
        )
    return ids


def truth_index(original_ids: np.ndarray, synthetic_ids: np.ndarray) -> np.ndarray:
    """Row of each synthetic record's true original among the block's originals, or -1.

    Refuses repeated ids on either side. Pass the result as ``truth=`` to the block
    evaluators when one block is evaluated several times (two methods, single columns):
    the checks and the search then run once.
    """
    original_ids = _check_ids(original_ids, "original")
    synthetic_ids = _check_ids(synthetic_ids, "synthetic")
    if original_ids.size == 0 or synthetic_ids.size == 0:
        return np.full(synthetic_ids.size, -1, dtype=np.int64)
    rk, ak = original_ids.dtype.kind, synthetic_ids.dtype.kind
    if not (rk == ak or {rk, ak} <= {"i", "u"}):
        raise TypeError(
            f"original and synthetic ids have different types ({original_ids.dtype} vs {synthetic_ids.dtype}); "
            "cast both to one type before joining"
        )
    order = np.argsort(original_ids, kind="stable")
    sorted_ids = original_ids[order]
    pos = np.searchsorted(sorted_ids, synthetic_ids)
    posc = np.minimum(pos, sorted_ids.size - 1)
    found = (pos < sorted_ids.size) & (sorted_ids[posc] == synthetic_ids)
    return np.where(found, order[posc], -1).astype(np.int64)


def block_inputs(
    original_ids: np.ndarray,
    original_coords: np.ndarray,
    synthetic_ids: np.ndarray,
    synthetic_coords: np.ndarray,
    truth: np.ndarray | None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    if truth is None:
        truth = truth_index(original_ids, synthetic_ids)
    truth = np.asarray(truth, dtype=np.int64)
    orig = _check_coords(original_coords, np.shape(original_ids)[0], "original")
    syn = _check_coords(synthetic_coords, np.shape(synthetic_ids)[0], "synthetic")
    if truth.shape != (syn.shape[0],) or np.any(truth >= orig.shape[0]):
        raise ValueError("truth must hold one original row (or -1) per synthetic record")
    if orig.shape[0] and syn.shape[0] and orig.shape[1] != syn.shape[1]:
        raise ValueError("original and synthetic coordinates have different numbers of columns")
    q = orig.shape[1] if orig.shape[0] else syn.shape[1]
    if q == 0:
        raise ValueError("no target columns")
    return orig, syn, truth


def distinct_rows(x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Distinct rows of ``x``, the index of each row among them, and their counts.

    Column by column on 1-d arrays, combining codes as it goes: ``np.unique(axis=0)``
    sorts a structured view, several times slower. -0.0 and 0.0
    are one value, as in ``np.unique``.
    """
    n, q = x.shape
    if q == 1:
        _, first, inverse, counts = np.unique(x[:, 0], return_index=True, return_inverse=True, return_counts=True)
        return x[first], inverse.reshape(-1), counts.astype(np.int64)
    code = np.zeros(n, dtype=np.int64)
    for c in range(q):
        values, col = np.unique(x[:, c], return_inverse=True)
        code = code * values.size + col.reshape(-1)
        if 0 < c < q - 1:  # renumber so that the next product stays below n * n
            code = np.unique(code, return_inverse=True)[1].reshape(-1)
    _, first, inverse, counts = np.unique(code, return_index=True, return_inverse=True, return_counts=True)
    return x[first], inverse.reshape(-1), counts.astype(np.int64)


def evaluate_block_bruteforce(
    original_ids: np.ndarray,
    original_coords: np.ndarray,
    synthetic_ids: np.ndarray,
    synthetic_coords: np.ndarray,
    *,
    p: int = 2,
    tol: float = DEFAULT_TOL,
    squared: bool = False,
    value_offset: float = 0.0,
    confidence: Literal["margin", "tie"] = "margin",
    chunk_pairs: int = 4_000_000,
    truth: np.ndarray | None = None,
) -> BruteForceResult:
    """Score every pair of a (small) block and reduce per synthetic record.

    The reference path: direct distances, tie snapping, the per-record reduction and
    the eccentricity/margin/confidence (docs/metrics.md, Linkage attack: tie snapping;
    eccentricity and precision-recall).  Memory is O(chunk_pairs · p); time is
    O(n_orig · n_syn · log n_orig), so use it only where every pair may be scored.
    ``truth`` is :func:`truth_index` of the ids, when the caller already has it.
    """
    check_metric(p, squared, value_offset)
    orig, syn, truth = block_inputs(original_ids, original_coords, synthetic_ids, synthetic_coords, truth)
    n_s, n_o = syn.shape[0], orig.shape[0]
    step = max(1, chunk_pairs // max(1, n_o))
    parts: list[RecordReduction] = []
    for s in range(0, n_s, step):
        e = min(n_s, s + step)
        if n_o:
            vals = values_from_diff(orig[None, :, :] - syn[s:e, None, :], p, squared, float(value_offset))
        else:
            vals = np.zeros((e - s, 0))
        parts.append(reduce_value_matrix(vals, truth[s:e], tol=tol, confidence=confidence))
    if not parts:
        parts.append(reduce_value_matrix(np.zeros((0, n_o)), np.zeros(0, dtype=np.int64), tol=tol, confidence=confidence))
    cat = {f: np.concatenate([getattr(x, f) for x in parts]) for f in RecordReduction.__dataclass_fields__}
    return BruteForceResult(capped=np.zeros(n_s, dtype=bool), **cat)

