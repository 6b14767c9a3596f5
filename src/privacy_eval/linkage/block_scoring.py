"""The per-block functions a worker applies to one (sub-)block (see :mod:`.block_stream`):
the scorer, which scores the block's candidate pairs with the kernel and reduces the
per-record results to histograms, and the weighted method's ranges. Everything they
need travels by closure.

Imported by the workers: numpy, pandas, the kernel and the internal names only,
nothing of the driver's modules.

See docs/metrics.md, Linkage attack: scores; per-record reduction and risk.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from privacy_eval.linkage import names as N
from privacy_eval.linkage.block_stream import BlockFn, BlockSide
from privacy_eval.linkage.kernel.blocks import (
    BlockResult,
    BruteForceResult,
    evaluate_block_bruteforce,
    truth_index,
)
from privacy_eval.linkage.kernel.kdtree import (
    evaluate_block_kdtree,
    evaluate_column_best,
)
from privacy_eval.linkage.kernel.weighted import max_abs_diff, min_abs_diff_sorted
from privacy_eval.linkage.kernel.whitening import Whitening

__all__ = ["block_ranges", "make_scorer", "range_columns"]

_HistPart = dict[str, np.ndarray]  # one histogram's columns of SCORE_SCHEMA


# --------------------------------------------------------------------------
# the weighted method's ranges
# --------------------------------------------------------------------------


def range_columns(p: int) -> list[str]:
    """The output columns of :func:`block_ranges` for ``p`` targets."""
    return [f"lo{j}" for j in range(p)] + [f"hi{j}" for j in range(p)]


def block_ranges(p: int) -> BlockFn:
    """Per block, the smallest and largest |x - y| of each of the ``p`` targets over its
    candidate pairs (no row for a block without originals)."""
    columns = range_columns(p)

    def ranges(o: BlockSide, s: BlockSide, block_pairs: float) -> dict[str, np.ndarray]:
        row: dict[str, np.ndarray] = {}
        if len(o) == 0:
            return {c: np.zeros(0) for c in columns}
        for j in range(p):
            row[f"lo{j}"] = np.array([min_abs_diff_sorted(np.sort(o.x[:, j]), np.sort(s.x[:, j]))])
        for j in range(p):
            xo, xs = o.x[:, j], s.x[:, j]
            row[f"hi{j}"] = np.array([max_abs_diff(xo.min(), xo.max(), xs.min(), xs.max())])
        return row

    return ranges


# --------------------------------------------------------------------------
# the scorer and its histograms
# --------------------------------------------------------------------------


def make_scorer(
    *,
    methods: Sequence[str],
    whitening: Whitening | None,
    mult: np.ndarray | None,
    offset: float | None,
    squared: bool,
    tol: float,
    max_k: int,
    bound: int,
    singles: bool,
) -> BlockFn:
    """The per-(block, sub-block) scoring function; everything it needs travels by closure."""
    codes = [N.MAHALANOBIS if m == "mahalanobis" else N.WEIGHTED for m in methods]

    def coords(code: int, x: np.ndarray) -> np.ndarray:
        if code == N.MAHALANOBIS:
            assert whitening is not None
            return whitening.transform(x)
        assert mult is not None
        return x * mult[None, :]

    def score(o: BlockSide, s: BlockSide, block_pairs: float) -> dict[str, np.ndarray]:
        parts: list[_HistPart] = []
        brute = block_pairs <= bound
        truth = truth_index(o.ids, s.ids)
        for code in codes:
            co, cs = coords(code, o.x), coords(code, s.x)
            kw: dict[str, Any] = (
                {"p": 2, "squared": squared, "value_offset": 0.0}
                if code == N.MAHALANOBIS
                else {"p": 1, "squared": False, "value_offset": float(offset or 0.0)}
            )
            if brute:
                r = evaluate_block_bruteforce(o.ids, co, s.ids, cs, tol=tol, confidence="margin", truth=truth, **kw)
            else:
                r = evaluate_block_kdtree(o.ids, co, s.ids, cs, max_k=max_k, tol=tol, truth=truth, **kw)
            parts.append(_hist_candidates(code, r))
            parts.append(_hist_ranks(code, r, max_k))
            if brute:
                parts.append(_hist_confidence(code, r))
        if singles:
            for j in range(o.x.shape[1]):
                col_o, col_s = o.x[:, j : j + 1], s.x[:, j : j + 1]
                r = evaluate_column_best(o.ids, col_o, s.ids, col_s, tol=tol, truth=truth)
                parts.append(_hist_ranks(N.SINGLE0 + j, r, 1))
        return {name: np.concatenate([part[name] for part in parts]) for name in parts[0]}

    return score


def _hist(method: int, kind: int, a: np.ndarray, b: np.ndarray, conf: np.ndarray | None, n: np.ndarray) -> _HistPart:
    # Plain arrays, one DataFrame per call of the scorer: building a DataFrame per
    # histogram cost much of the scoring time.
    size = len(n)
    return {
        "method": np.full(size, method, dtype=np.int32),
        "kind": np.full(size, kind, dtype=np.int32),
        "a": np.asarray(a, dtype=np.int64),
        "b": np.asarray(b, dtype=np.int64),
        "conf": np.full(size, np.nan) if conf is None else np.asarray(conf, dtype=np.float64),
        "n": np.asarray(n, dtype=np.int64),
    }


def _pairs_count(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Distinct (a, b) pairs of non-negative integers and how often each occurs."""
    if a.size == 0:
        z = np.zeros(0, dtype=np.int64)
        return z, z, z
    # One int64 code per pair (both are counts bounded by a block's size, so the code
    # cannot overflow); np.unique(axis=0) sorts a structured view, several times slower.
    width = int(b.max()) + 1
    codes, counts = np.unique(a * width + b, return_counts=True)
    return codes // width, codes % width, counts


def _hist_candidates(code: int, r: BlockResult) -> _HistPart:
    a, b, n = _pairs_count(r.n_candidates.astype(np.int64), r.has_true.astype(np.int64))
    return _hist(code, N.K_CAND, a, b, None, n)


def _hist_ranks(code: int, r: BlockResult, max_k: int) -> _HistPart:
    live = (r.n_better >= 0) & (r.n_better < max_k) & ~r.capped
    a, b, n = _pairs_count(r.n_better[live].astype(np.int64), r.true_tie_size[live].astype(np.int64))
    return _hist(code, N.K_RANK, a, b, None, n)


def _hist_confidence(code: int, r: BruteForceResult) -> _HistPart:
    hit = (r.n_better == 0)
    m = np.where(hit, r.true_tie_size, 0).astype(np.int64)
    frame = pd.DataFrame({"conf": r.confidence.astype(np.float64), "m": m})
    g = frame.groupby(["conf", "m"], dropna=False, sort=False).size().reset_index(name="n")
    return _hist(code, N.K_CONF, g["m"].to_numpy(), np.zeros(len(g), dtype=np.int64), g["conf"].to_numpy(), g["n"].to_numpy())
