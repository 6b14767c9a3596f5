"""Test-only companions of the linkage kernel: explicit-table forms of the reduction, the
per-record summary, the mode baseline and the precision-recall sweep, used by the tests
and the benchmark as independent checks of the production path (which reduces
histograms on the driver, privacy_eval.linkage.rates). Moved out of the
production kernel unchanged; the last section (the snapping tolerance, one record's
counts and top-k restated in plain Python) is shared by the kernel tests.

Naming follows the reference's explicit (ANON, RAW, SCORE) tables where a function
takes one: ``anon`` = synthetic, ``raw`` = original.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from privacy_eval.linkage.kernel.blocks import BlockResult
from privacy_eval.linkage.kernel.distances import (
    DEFAULT_TOL,
    RecordReduction,
    check_metric,
    check_tol,
    group_start,
    reduce_value_matrix,
    values_from_diff,
)
from privacy_eval.linkage.kernel.risk import (
    check_k_vs_cap,
    risk_from_counts,
    top_k_probability,
)
from privacy_eval.linkage.kernel.whitening import zero_constant


def covariance_from_sums(
    n: int,
    sum_x: np.ndarray,
    xtx: np.ndarray,
    *,
    shift: np.ndarray | None = None,
    col_min: np.ndarray | None = None,
    col_max: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Mean and sample covariance (n-1) from merged raw sums ``n, Σx, XᵀX``.

    ``XᵀX - n·x̄x̄ᵀ`` loses about ``log10(mean²/var)`` digits; when columns can
    have a large mean relative to their spread, accumulate the sums of
    ``x - shift`` (any rough per-column centre, e.g. one record's values) and
    pass ``shift``.  Pass the per-column ``col_min``/``col_max`` so that a
    constant column is detected exactly (its variance is set to 0), otherwise
    the cancellation residue would be taken for a tiny variance.
    """
    sum_x = np.asarray(sum_x, dtype=np.float64)
    xtx = np.asarray(xtx, dtype=np.float64)
    p = sum_x.shape[0]
    if xtx.shape != (p, p):
        raise ValueError("XᵀX must be p × p with p = len(sum_x)")
    if n < 2:
        raise ValueError(f"need at least 2 distinct records to estimate a covariance; got {n}")
    mean_shifted = sum_x / n
    cov = (xtx - np.outer(sum_x, sum_x) / n) / (n - 1)
    cov = 0.5 * (cov + cov.T)
    d = np.diag(cov).copy()
    d[d < 0] = 0.0  # rounding can push a (near-)zero variance below 0
    np.fill_diagonal(cov, d)
    mean = mean_shifted if shift is None else mean_shifted + np.asarray(shift, dtype=np.float64)
    if col_min is not None and col_max is not None:
        cov = zero_constant(cov, np.asarray(col_min) == np.asarray(col_max))
    return mean, cov



def pairwise_values(
    raw_coords: np.ndarray,
    anon_coords: np.ndarray,
    *,
    p: int = 2,
    squared: bool = False,
    value_offset: float = 0.0,
) -> np.ndarray:
    """All pair scores, shape (n_anon, n_raw): Minkowski-p distance minus ``value_offset``.

    On whitened coordinates with p = 2 this is the Mahalanobis distance (or its
    square); on :func:`weighted_scaling`-rescaled coordinates with p = 1 and
    the returned offset it is the range-normalised weighted sum.
    """
    check_metric(p, squared, value_offset)
    raw = np.asarray(raw_coords, dtype=np.float64)
    anon = np.asarray(anon_coords, dtype=np.float64)
    if raw.ndim != 2 or anon.ndim != 2 or raw.shape[1] != anon.shape[1] or raw.shape[1] == 0:
        raise ValueError("coordinates must be 2-d arrays with the same, non-zero number of columns")
    return values_from_diff(raw[None, :, :] - anon[:, None, :], p, squared, float(value_offset))



def snap_tied_values(values: Sequence[float] | np.ndarray, tol: float = DEFAULT_TOL) -> np.ndarray:
    """Single-linkage tie snapping of one record's candidate values (docs/metrics.md, Linkage attack: tie snapping).

    Sorted neighbours join when equal or when both are finite and
    ``b - a <= tol * max(1, |a|, |b|)``; each group is replaced by its minimum.
    NaN never joins; Inf only joins Inf.
    """
    tol = check_tol(tol)
    v = np.asarray(values, dtype=np.float64)
    if v.ndim != 1:
        raise ValueError("expected a 1-d array")
    if v.size < 2 or tol == 0:
        return v.copy()
    order = np.argsort(v, kind="stable")
    s = v[order][None, :]
    snapped_sorted = np.take_along_axis(s, group_start(s, tol), axis=1)[0]
    out = np.empty_like(v)
    out[order] = snapped_sorted
    return out



def _oriented(scores: np.ndarray, score_type: str) -> np.ndarray:
    if score_type == "distance":
        return scores
    if score_type == "similarity":
        return -scores  # negation, never inversion
    raise ValueError(f"unknown score_type {score_type!r}: must be 'distance' or 'similarity'")


def _check_unique_pairs(anon_ids: np.ndarray, raw_ids: np.ndarray) -> None:
    key = np.stack([np.unique(anon_ids, return_inverse=True)[1], np.unique(raw_ids, return_inverse=True)[1]], axis=1)
    uniq, counts = np.unique(key, axis=0, return_counts=True)
    if (counts > 1).any():
        n_rep = int((counts[counts > 1] - 1).sum())
        raise ValueError(
            f"candidate pairs must be a set: {n_rep} repeated (ANON, RAW) row(s); duplicates bias the "
            "analytic rate, the simulated rate and the random baseline in the same direction"
        )


def reduce_score_pairs(
    anon_ids: np.ndarray,
    raw_ids: np.ndarray,
    scores: np.ndarray,
    *,
    tol: float = DEFAULT_TOL,
    score_type: Literal["distance", "similarity"] = "distance",
    confidence: Literal["margin", "tie"] = "margin",
) -> tuple[np.ndarray, RecordReduction]:
    """The per-record reduction of an explicit (ANON, RAW, SCORE) table with uneven candidate sets.

    Returns the sorted distinct ANON ids and their reduction.  Meant for small
    tables (fixtures, checks); loops over records.
    """
    a = np.asarray(anon_ids)
    r = np.asarray(raw_ids)
    sc = _oriented(np.asarray(scores, dtype=np.float64), score_type)
    if not (a.shape == r.shape == sc.shape) or a.ndim != 1:
        raise ValueError("anon_ids, raw_ids and scores must be 1-d arrays of one length")
    if a.size == 0:
        raise ValueError("empty score table")
    _check_unique_pairs(a, r)
    ids, inv = np.unique(a, return_inverse=True)
    parts: list[RecordReduction] = []
    for g in range(ids.size):
        rows = np.flatnonzero(inv == g)
        truth = np.flatnonzero(r[rows] == ids[g])
        tc = np.array([truth[0] if truth.size else -1])
        parts.append(reduce_value_matrix(sc[rows][None, :], tc, tol=tol, confidence=confidence))
    fields = RecordReduction.__dataclass_fields__
    return ids, RecordReduction(**{f: np.concatenate([getattr(x, f) for x in parts]) for f in fields})


def mode_baseline_from_pairs(
    anon_ids: np.ndarray,
    raw_ids: np.ndarray,
    scores: np.ndarray,
    *,
    tol: float = DEFAULT_TOL,
    score_type: Literal["distance", "similarity"] = "distance",
) -> float:
    """Mode baseline of an explicit score table (docs/metrics.md, Linkage attack: rates and baselines).

    The modal RAW id is the one most often at its record's (snapped) best,
    ties broken by the smallest id in sort order; the baseline is the share of
    ANON ids equal to it.  Needs every record's whole best tie group, so it is
    only offered on explicit tables (small blocks), not by the kd-tree path.
    """
    a = np.asarray(anon_ids)
    r = np.asarray(raw_ids)
    sc = _oriented(np.asarray(scores, dtype=np.float64), score_type)
    _check_unique_pairs(a, r)
    ids, inv = np.unique(a, return_inverse=True)
    flagged: list[np.ndarray] = []
    for g in range(ids.size):
        rows = np.flatnonzero(inv == g)
        s = snap_tied_values(sc[rows], tol)
        flagged.append(r[rows][s == s.min()])
    if not flagged:
        return 0.0
    best_ids = np.concatenate(flagged)
    if best_ids.size == 0:
        return 0.0
    uniq, counts = np.unique(best_ids, return_counts=True)  # sorted => argmax picks the smallest id
    modal = uniq[int(np.argmax(counts))]
    return float(np.sum(ids.astype(str) == str(modal))) / ids.size



def concat_block_results(results: Iterable[BlockResult]) -> BlockResult:
    """Concatenate the per-record arrays of several blocks (base fields only)."""
    results = list(results)
    fields = BlockResult.__dataclass_fields__
    if not results:
        return BlockResult(
            np.zeros(0, np.int64), np.zeros(0, bool), np.zeros(0), np.zeros(0, np.int64),
            np.zeros(0, np.int64), np.zeros(0, bool),
        )
    return BlockResult(**{f: np.concatenate([getattr(x, f) for x in results]) for f in fields})



def precision_recall(confidence: np.ndarray, risk: np.ndarray) -> dict[str, np.ndarray]:
    """Precision-recall sweep over distinct confidence values, decreasing (expected counts from RISK).

    Records with a NaN confidence are never selected but stay in the denominator.
    """
    conf = np.asarray(confidence, dtype=np.float64)
    risk = np.asarray(risk, dtype=np.float64)
    n = conf.size
    thr = np.unique(conf[~np.isnan(conf)])[::-1]
    n_att = np.array([(conf >= t).sum() for t in thr], dtype=np.int64)
    hits = np.array([risk[conf >= t].sum() for t in thr], dtype=np.float64)
    return {
        "threshold": thr,
        "n_attacked": n_att,
        "coverage": n_att / n if n else n_att.astype(float),
        "precision": hits / n_att,
        "recall": hits / n if n else hits,
    }


@dataclass(frozen=True)
class LinkageSummary:
    """Evaluation summary over all synthetic records (docs/metrics.md, Linkage attack: rates and baselines).

    The denominator is every synthetic record, including records with no
    candidate at all (``n_zero_candidate``; R cannot see those because they are
    absent from its score table).  ``None`` where the reference gives NA.
    """

    n_anon: int
    n_pairs: int
    n_zero_candidate: int
    n_true_missing: int
    truth_coverage: float | None
    truth_measurable: bool
    success_analytic: float | None
    baseline_random: float | None
    lift: float | None
    top_k: dict[float, float]
    max_risk: float | None
    n_capped: int
    candidate_coverage: float | None
    blocked: bool | None


def _clean_k(k: float) -> float:
    k = float(k)
    if not math.isfinite(k):
        raise ValueError("top_k values must be finite numbers")
    return int(k) if k.is_integer() else k


def summarize_linkage(
    n_candidates: np.ndarray,
    n_better: np.ndarray,
    true_tie_size: np.ndarray,
    *,
    capped: np.ndarray | None = None,
    top_k: Sequence[float] = (1, 5, 10),
    n_raw: int | None = None,
) -> LinkageSummary:
    """success_analytic, random baseline, lift, top-k, max_risk and truth coverage.

    Inputs are concatenated per-record arrays (``n_better < 0`` = truth absent).
    top-k values are sorted, de-duplicated and kept when 1 <= k <= max
    N_CANDIDATES.  ``n_raw`` (originals in the candidate universe) enables
    ``candidate_coverage = n_pairs / (n_anon · n_raw)`` and ``blocked``.
    """
    nc = np.asarray(n_candidates, dtype=np.int64)
    b = np.asarray(n_better, dtype=np.int64)
    m = np.asarray(true_tie_size, dtype=np.int64)
    if not (nc.shape == b.shape == m.shape) or nc.ndim != 1:
        raise ValueError("per-record arrays must be 1-d and of one length")
    n = int(nc.size)
    has = b >= 0
    n_pairs = int(nc.sum())
    missing = int((~has).sum())
    risk = risk_from_counts(b, m)
    if n:
        success = float(risk.mean())
        with np.errstate(divide="ignore", invalid="ignore"):
            base = float(np.where(has & (nc > 0), 1.0 / np.maximum(nc, 1), 0.0).mean())
        lift = success / base if base > 0 else None
        max_risk = float(risk.max())
        coverage = 1.0 - missing / n
    else:
        success = base = lift = max_risk = coverage = None
    ks = sorted({_clean_k(k) for k in top_k})
    max_nc = int(nc.max()) if n else 0
    ks = [k for k in ks if 1 <= k <= max_nc]
    topk: dict[float, float] = {}
    for k in ks:
        check_k_vs_cap(k, b, capped)
        topk[k] = float(top_k_probability(b, m, k).mean())
    cand_cov = blocked = None
    if n_raw is not None:
        full = n * int(n_raw)
        cand_cov = n_pairs / full if full > 0 else None
        blocked = bool(n_pairs < full or missing > 0)
    return LinkageSummary(
        n_anon=n,
        n_pairs=n_pairs,
        n_zero_candidate=int((nc == 0).sum()),
        n_true_missing=missing,
        truth_coverage=coverage,
        truth_measurable=bool(n > 0 and missing < n),
        success_analytic=success,
        baseline_random=base,
        lift=lift,
        top_k=topk,
        max_risk=max_risk,
        n_capped=int(np.asarray(capped, dtype=bool).sum()) if capped is not None else 0,
        candidate_coverage=cand_cov,
        blocked=blocked,
    )


# --------------------------------------------------------------------------
# per-record restatements shared by the kernel tests
# --------------------------------------------------------------------------

#: The default snapping tolerance (sqrt of the double epsilon, as the reference package), written out here
#: rather than read from the kernel.
TOL = 1.4901161193847656e-08


def summary_of(res, **kw):
    return summarize_linkage(res.n_candidates, res.n_better, res.true_tie_size, capped=res.capped, **kw)


def reference_counts(values: list[float], true_col: int, tol: float) -> tuple[int, int]:
    """Tie snapping and the per-record reduction (docs/metrics.md) restated in plain Python:
    (N_BETTER, TRUE_TIE_SIZE) of one record."""
    order = sorted(range(len(values)), key=lambda i: values[i])
    snapped = [0.0] * len(values)
    group_min = values[order[0]]
    snapped[order[0]] = group_min
    for prev, cur in zip(order, order[1:]):
        a, b = values[prev], values[cur]
        same = a == b or (math.isfinite(a) and math.isfinite(b) and b - a <= tol * max(1.0, abs(a), abs(b)))
        if not same:
            group_min = b
        snapped[cur] = group_min
    t = snapped[true_col]
    return sum(s < t for s in snapped), sum(s == t for s in snapped)


def reference_topk(b: int, m: int, k: int) -> float:
    if b >= k:
        return 0.0
    if b + m <= k:
        return 1.0
    return (k - b) / m
