"""A single-process numpy reference of the linkage attack (docs/metrics.md, Linkage attack).

Independent of the Spark plumbing in ``privacy_eval.linkage`` on purpose: it
scores every candidate pair explicitly (Mahalanobis as the quadratic form
``sqrt(δᵀ S⁻¹ δ)`` with ``numpy.linalg.inv``, no whitening; weighted as the literal
sum of range-normalised |x - y|), finds candidates with a pandas group-by on the
blocking columns (``dropna=False``: null blocks together), and only borrows the
kernel's per-record reduction (``reduce_value_matrix``: snapping, N_BETTER, tie size,
eccentricity) and the test-only summary/PR arithmetic of tests/support/linkage_oracle.py, which have their own golden-fixture tests.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from privacy_eval.linkage import kernel as lk
from tests.support import linkage_oracle as oracle

TOL = 1.4901161193847656e-08


def _block_key(frame: pd.DataFrame, blocking: Sequence[str]) -> list[tuple]:
    if not blocking:
        return [()] * len(frame)
    out = []
    for row in frame[list(blocking)].itertuples(index=False):
        out.append(tuple(None if (v is None or (isinstance(v, float) and np.isnan(v))) else v for v in row))
    return out


def covariance(orig: pd.DataFrame, syn: pd.DataFrame, targets: Sequence[str], cov_from: str = "raw") -> np.ndarray:
    x = {
        "raw": orig[list(targets)].to_numpy(float),
        "anon": syn[list(targets)].to_numpy(float),
        "pooled": np.vstack([orig[list(targets)].to_numpy(float), syn[list(targets)].to_numpy(float)]),
    }[cov_from]
    return np.atleast_2d(np.cov(x, rowvar=False, ddof=1))


def candidate_blocks(orig: pd.DataFrame, syn: pd.DataFrame, blocking: Sequence[str]):
    """Yield (original row indices, synthetic row indices) per synthetic block."""
    ok = _block_key(orig, blocking)
    sk = _block_key(syn, blocking)
    by_o: dict[tuple, list[int]] = {}
    for i, k in enumerate(ok):
        by_o.setdefault(k, []).append(i)
    by_s: dict[tuple, list[int]] = {}
    for i, k in enumerate(sk):
        by_s.setdefault(k, []).append(i)
    for k, rows in by_s.items():
        yield np.array(by_o.get(k, []), dtype=np.int64), np.array(rows, dtype=np.int64)


def linkage_reference(
    orig: pd.DataFrame,
    syn: pd.DataFrame,
    key: str,
    targets: Sequence[str],
    blocking: Sequence[str] = (),
    *,
    method: str = "mahalanobis",
    cov_from: str = "raw",
    ridge: float = 1e-6,
    top_k: Sequence[int] = (1, 5, 10),
    tol: float = TOL,
    single_column_sd: bool = False,
) -> dict:
    """Summary of the attack with every candidate pair scored explicitly.

    ``single_column_sd``: score one target as |Δ| / sd(original) directly (the
    reference's one-column reduction of the Mahalanobis distance; docs/metrics.md, Scores).
    """
    targets = list(targets)
    xo_all = orig[targets].to_numpy(float)
    xs_all = syn[targets].to_numpy(float)
    if method == "mahalanobis":
        if single_column_sd:
            assert len(targets) == 1
            sd = np.std(xo_all[:, 0], ddof=1)
            sinv = np.array([[1.0 / sd**2]])
            kept = np.array([True])
        else:
            s = covariance(orig, syn, targets, cov_from)
            kept = np.diag(s) > 0
            s = s[np.ix_(kept, kept)]
            s = s + ridge * np.mean(np.diag(s)) * np.eye(s.shape[0])
            sinv = np.linalg.inv(s)
    blocks = list(candidate_blocks(orig, syn, blocking))
    if method == "weighted":
        lo = np.full(len(targets), np.inf)
        hi = np.full(len(targets), -np.inf)
        for bo, bs in blocks:
            if bo.size and bs.size:
                d = np.abs(xo_all[bo][None, :, :] - xs_all[bs][:, None, :])
                lo = np.minimum(lo, d.min(axis=(0, 1)))
                hi = np.maximum(hi, d.max(axis=(0, 1)))
        rng = hi - lo
    ko = orig[key].to_numpy()
    ks = syn[key].to_numpy()
    parts = []
    for bo, bs in blocks:
        if method == "mahalanobis":
            delta = (xo_all[bo][None, :, :] - xs_all[bs][:, None, :])[..., kept]
            q = np.einsum("abi,ij,abj->ab", delta, sinv, delta)
            vals = np.sqrt(np.maximum(q, 0.0))
        else:
            vals = np.zeros((bs.size, bo.size))
            for c in range(len(targets)):
                if rng[c] > 0:
                    d = np.abs(xo_all[bo][None, :, c] - xs_all[bs][:, None, c])
                    vals = vals + (d - lo[c]) / rng[c]
        true_col = np.full(bs.size, -1, dtype=np.int64)
        for i, k in enumerate(ks[bs]):
            hit = np.flatnonzero(ko[bo] == k)
            if hit.size:
                true_col[i] = hit[0]
        parts.append(lk.reduce_value_matrix(vals, true_col, tol=tol, confidence="margin"))
    fields = lk.RecordReduction.__dataclass_fields__
    red = lk.RecordReduction(**{f: np.concatenate([getattr(x, f) for x in parts]) for f in fields})
    summary = oracle.summarize_linkage(red.n_candidates, red.n_better, red.true_tie_size, top_k=top_k)
    pr = oracle.precision_recall(red.confidence, red.risk)
    return {
        "success": summary.success_analytic,
        "baseline": summary.baseline_random,
        "lift": summary.lift,
        "top_k": {int(k): v for k, v in summary.top_k.items()},
        "max_risk": summary.max_risk,
        "truth_coverage": summary.truth_coverage,
        "n_true_missing": summary.n_true_missing,
        "n_zero_candidate": summary.n_zero_candidate,
        "n_pairs": summary.n_pairs,
        "measurable": summary.truth_measurable,
        "pr": pr,
        "n_inf": int(np.isinf(red.confidence).sum()),
        "n_nan": int(np.isnan(red.confidence).sum()),
    }
