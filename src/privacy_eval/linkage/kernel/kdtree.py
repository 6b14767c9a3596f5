"""Exact per-record counts without scoring every pair (kernel section (b)): the kd-tree
search of a block, and its one-column form for the single-column check.

See docs/metrics.md, Linkage attack: tie snapping; per-record reduction and risk.
"""

from __future__ import annotations

import numpy as np
from scipy.spatial import cKDTree

from privacy_eval.linkage.kernel.blocks import BlockResult, block_inputs, distinct_rows
from privacy_eval.linkage.kernel.distances import (
    DEFAULT_TOL,
    check_metric,
    check_tol,
    group_start,
    joins,
    values_from_diff,
)

__all__ = ["evaluate_block_kdtree", "evaluate_column_best"]

# Relative slack between a kd-tree distance and the same distance recomputed
# here.  Both are sums of p non-negative rounded terms (error <= ~p ulps) and
# the tree's pruning bounds carry a few more ulps per level; 1e-9 dwarfs all of
# that and only costs a second kNN round for records sitting right at an edge.
_KD_REL_SLACK = 1e-9
_KD_ABS_SLACK = 1e-150  # squares below ~1e-300 underflow; stay clear of them


def _join_upper_bound(a: np.ndarray, tol: float) -> np.ndarray:
    """A value strictly above every v >= a that could join a in one tie group.

    v - a <= tol·max(1, |a|, |v|) implies v <= a + tol·max(1, |a|)/(1 - tol);
    the extra factors only cover the rounding of this bound itself.
    """
    if tol >= 1.0:
        return np.full(a.shape, np.inf)
    inc = tol * np.maximum(1.0, np.abs(a)) / (1.0 - tol)
    return a + inc * (1.0 + 1e-6) + np.abs(a) * 1e-15 + 1e-300


def _closed_above(
    end: np.ndarray, nk: np.ndarray, last: np.ndarray, bound: np.ndarray, tol: float, everything: bool
) -> np.ndarray:
    """Whether a tie group ending at sorted position ``end`` (value ``last``) is complete
    upwards: a gap follows it inside the complete prefix of ``nk`` values (everything
    unseen scores at least ``bound``), nothing from ``bound`` up could join it, or every
    original is known."""
    if everything:
        return np.ones(end.shape, dtype=bool)
    return (end < nk - 1) | ((end == nk - 1) & (bound > _join_upper_bound(last, tol)))


def evaluate_block_kdtree(
    original_ids: np.ndarray,
    original_coords: np.ndarray,
    synthetic_ids: np.ndarray,
    synthetic_coords: np.ndarray,
    *,
    max_k: int,
    p: int = 2,
    tol: float = DEFAULT_TOL,
    squared: bool = False,
    value_offset: float = 0.0,
    chunk_bytes: int = 64 * 2**20,
    k_initial: int | None = None,
    workers: int = 1,
    leafsize: int = 16,
    truth: np.ndarray | None = None,
) -> BlockResult:
    """Exact N_BETTER / TRUE_TIE_SIZE per synthetic record without scoring all pairs.

    One kd-tree over the block's distinct original coordinates (duplicated
    originals collapse to one point with a multiplicity).  Each synthetic
    record with a true original in the block runs kNN queries with growing k:

    * The tree's k-th distance r_k bounds a *complete region*: every original
      whose (directly recomputed) distance is below r_k·(1 - 1e-9) is among
      the k returned, so within that region the sorted values are the true
      prefix of the record's candidate values.  All decisions use values
      recomputed here with the same arithmetic as :func:`values_from_diff`,
      never the tree's own distances (those may differ in the last bits).
    * If the true value lies in the region, its single-linkage tie group is
      followed downwards (always inside the region) and upwards; the group
      is settled when a gap follows it inside the region, or when the region
      extends past the largest value that could still join it.  Then
      N_BETTER and TRUE_TIE_SIZE are exact.
    * If the true value lies beyond the region, a gap inside the region after
      at least ``max_k`` candidates proves those candidates are in groups
      strictly better than the truth: N_BETTER is reported as that lower
      bound with ``capped = True`` (RISK and top-k for k <= max_k are then
      exactly 0, and an exact count would cost O(n_orig) per record).
    * Anything else is retried with 4× more neighbours, ending at all
      originals, where everything is known.

    Memory is O(n_orig + chunk_bytes); the synthetic side is processed in
    chunks sized from ``chunk_bytes``.  Records whose true original is absent
    get ``n_better = true_tie_size = -1`` and ``has_true = False``. ``truth`` is
    :func:`truth_index` of the ids, when the caller already has it.
    """
    check_metric(p, squared, value_offset)
    tol = check_tol(tol)
    if isinstance(max_k, bool) or int(max_k) != max_k or max_k < 1:
        raise ValueError("max_k must be an integer >= 1")
    max_k = int(max_k)
    offset = float(value_offset)
    orig, syn, truth = block_inputs(original_ids, original_coords, synthetic_ids, synthetic_coords, truth)
    n_s, n_o = syn.shape[0], orig.shape[0]
    has = truth >= 0
    n_better = np.full(n_s, -1, dtype=np.int64)
    tie = np.full(n_s, -1, dtype=np.int64)
    capped = np.zeros(n_s, dtype=bool)
    true_score = np.full(n_s, np.nan)
    result = BlockResult(np.full(n_s, n_o, dtype=np.int64), has, true_score, n_better, tie, capped)
    if n_o == 0 or not has.any():
        return result

    uniq, inverse, counts = distinct_rows(orig)
    n_u, q = uniq.shape
    tree = cKDTree(uniq, leafsize=leafsize, balanced_tree=False)
    true_u = np.where(has, inverse[np.maximum(truth, 0)], -1)

    todo = np.flatnonzero(has)
    # true distances: same arithmetic as the candidates' (original minus synthetic)
    for s in range(0, todo.size, 65536):
        rows = todo[s : s + 65536]
        true_score[rows] = values_from_diff(uniq[true_u[rows]] - syn[rows], p, squared, offset)

    k0 = max(max_k + 4, 8) if k_initial is None else max(int(k_initial), 2)
    row_bytes0 = 8 * min(k0, n_u) * (q + 14)
    outer = max(1, chunk_bytes // row_bytes0)
    for s in range(0, todo.size, outer):
        pending = todo[s : s + outer]
        k = k0
        while pending.size:
            k = min(k, n_u)
            step = max(1, chunk_bytes // (8 * k * (q + 14)))
            left = []
            for t in range(0, pending.size, step):
                sub = pending[t : t + step]
                done = _kd_round(
                    tree, uniq, counts, syn[sub], true_score[sub], k, n_u, p, squared, offset, tol,
                    max_k, workers, sub, n_better, tie, capped,
                )
                left.append(sub[~done])
            pending = np.concatenate(left)
            if k == n_u and pending.size:  # pragma: no cover - everything is known at k = n_u
                raise AssertionError("kd-tree evaluation failed to settle with every original known")
            k *= 4
    return result


def _kd_round(
    tree: cKDTree,
    uniq: np.ndarray,
    counts: np.ndarray,
    y: np.ndarray,
    dt: np.ndarray,
    k: int,
    n_u: int,
    p: int,
    squared: bool,
    offset: float,
    tol: float,
    max_k: int,
    workers: int,
    rows: np.ndarray,
    n_better: np.ndarray,
    tie: np.ndarray,
    capped: np.ndarray,
) -> np.ndarray:
    """One kNN round (k neighbours) for the synthetic records ``rows``.

    ``y`` are their coordinates and ``dt`` their true values.  Writes the
    settled records into ``n_better``/``tie``/``capped`` and returns the
    settled mask; the rest need a larger k.
    """
    c = y.shape[0]
    dkd, idx = tree.query(y, k=k, p=p, workers=workers)
    dkd = dkd.reshape(c, k)
    idx = idx.reshape(c, k)
    vals = values_from_diff(uniq[idx] - y[:, None, :], p, squared, offset)
    order = np.argsort(vals, axis=1, kind="stable")
    vs = np.take_along_axis(vals, order, axis=1)
    cum = np.cumsum(counts[np.take_along_axis(idx, order, axis=1)], axis=1)
    r = np.arange(c)

    if k == n_u:
        bound = np.full(c, np.inf)
    else:
        rl = dkd[:, -1] * (1.0 - _KD_REL_SLACK) - _KD_ABS_SLACK
        fl = rl * rl if (p == 2 and squared) else rl
        bound = np.where(rl > 0, fl - offset, -np.inf)
    nk = (vs < bound[:, None]).sum(axis=1)  # vs is sorted: the complete prefix has length nk

    gstart = group_start(vs, tol)
    pos = np.arange(k)
    brk_after = np.ones((c, k), dtype=bool)  # brk_after[:, i]: no join between i and i+1
    if k > 1:
        brk_after[:, :-1] = ~joins(vs[:, :-1], vs[:, 1:], tol)
    gend = np.minimum.accumulate(np.where(brk_after, pos, k - 1)[:, ::-1], axis=1)[:, ::-1]

    inside = dt < bound
    tpos = np.minimum((vs < dt[:, None]).sum(axis=1), k - 1)
    glo = gstart[r, tpos]
    ghi = gend[r, tpos]
    top = vs[r, ghi]
    ok_in = inside & _closed_above(ghi, nk, top, bound, tol, everything=k == n_u)
    below = np.where(glo > 0, cum[r, np.maximum(glo - 1, 0)], 0)

    # Truth beyond the complete region: last gap strictly inside the region.
    internal = brk_after & (pos[None, :] < (nk - 1)[:, None])
    any_gap = internal.any(axis=1)
    last_gap = (k - 1) - np.argmax(internal[:, ::-1], axis=1)
    lower = np.where(any_gap, cum[r, last_gap], 0)
    ok_out = ~inside & any_gap & (lower >= max_k)

    i_in = rows[ok_in]
    n_better[i_in] = below[ok_in]
    tie[i_in] = cum[r, ghi][ok_in] - below[ok_in]
    i_out = rows[ok_out]
    n_better[i_out] = lower[ok_out]
    capped[i_out] = True
    return ok_in | ok_out


def evaluate_column_best(
    original_ids: np.ndarray,
    original_values: np.ndarray,
    synthetic_ids: np.ndarray,
    synthetic_values: np.ndarray,
    *,
    tol: float = DEFAULT_TOL,
    truth: np.ndarray | None = None,
) -> BlockResult:
    """:func:`evaluate_block_kdtree` with ``max_k=1, p=1`` on one column, faster.

    With max_k = 1 only the records whose truth is in their best tie group matter
    (N_BETTER = 0, and that group's size); the others are reported with N_BETTER >= 1
    and ``capped``, as the kd-tree path reports a lower bound. On a line most records
    are settled from the sorted originals alone: with d* the nearest value, d the true
    one and c the number of originals no farther than the truth, a single-linkage chain
    from d* up to d has at most c - 1 links of at most tol·max(1, d) each; when d - d*
    exceeds c·tol·max(1, d) there is a gap, so d*'s group is strictly better. The block
    size bounds c and settles nearly every such record; c itself is counted for the
    rest. The remaining few per cent, truths at or next to the nearest value, get their
    best group from :func:`_best_group_1d`. ``original_values``/``synthetic_values`` are (n, 1)
    arrays.
    """
    tol = check_tol(tol)
    orig, syn, truth = block_inputs(original_ids, original_values, synthetic_ids, synthetic_values, truth)
    if orig.shape[1] != 1 or syn.shape[1] != 1:
        raise ValueError("evaluate_column_best takes one column")
    n_s, n_o = syn.shape[0], orig.shape[0]
    has = truth >= 0
    if n_o == 0 or not has.any():
        return evaluate_block_kdtree(original_ids, orig, synthetic_ids, syn, max_k=1, p=1, tol=tol, truth=truth)
    x = np.sort(orig[:, 0])
    y = syn[:, 0]
    # Same arithmetic as values_from_diff(p=1): |orig - syn|, monotone in orig, so the
    # nearest value is next to y's insertion point.
    d_true = np.where(has, np.abs(orig[np.maximum(truth, 0), 0] - y), np.inf)
    pos = np.searchsorted(x, y)
    left = np.where(pos > 0, np.abs(x[np.maximum(pos - 1, 0)] - y), np.inf)
    right = np.where(pos < n_o, np.abs(x[np.minimum(pos, n_o - 1)] - y), np.inf)
    d_best = np.minimum(left, right)
    with np.errstate(invalid="ignore"):
        settled = has & (d_true - d_best > n_o * tol * np.maximum(1.0, d_true) * (1.0 + 1e-6))
        near = np.flatnonzero(has & ~settled)
        dn, yn = d_true[near], y[near]
        reach = dn * (1.0 + 1e-12) + np.abs(yn) * 1e-15 + 1e-300  # a superset: more links
        c = np.searchsorted(x, yn + reach, side="right") - np.searchsorted(x, yn - reach, side="left")
        settled[near] = dn - d_best[near] > c * tol * np.maximum(1.0, dn) * (1.0 + 1e-6)
    kept = np.flatnonzero(has & ~settled)
    n_better = np.where(has, 1, -1).astype(np.int64)
    tie = np.full(n_s, -1, dtype=np.int64)
    capped = settled.copy()
    true_score = np.where(has, d_true, np.nan)
    if kept.size and max(abs(x[0]), abs(x[-1]), float(np.abs(y[kept]).max())) < _NO_OVERFLOW:
        first = np.flatnonzero(np.r_[True, x[1:] != x[:-1]])
        top, size = _best_group_1d(x[first], np.diff(np.r_[first, n_o]), y[kept], tol)
        best = d_true[kept] <= top
        n_better[kept] = np.where(best, 0, size)
        tie[kept] = np.where(best, size, -1)
        capped[kept] = ~best
    elif kept.size:  # differences could overflow to inf, which _best_group_1d leaves out
        sub = evaluate_block_kdtree(
            original_ids, orig, np.asarray(synthetic_ids)[kept], syn[kept], max_k=1, p=1, tol=tol, truth=truth[kept]
        )
        n_better[kept] = sub.n_better
        tie[kept] = sub.true_tie_size
        capped[kept] = sub.capped
    return BlockResult(np.full(n_s, n_o, dtype=np.int64), has, true_score, n_better, tie, capped)


#: Below this magnitude a difference of two values cannot overflow to inf.
_NO_OVERFLOW = 1e300


def _best_group_1d(
    u: np.ndarray, counts: np.ndarray, y: np.ndarray, tol: float, chunk_bytes: int = 64 * 2**20
) -> tuple[np.ndarray, np.ndarray]:
    """For each value of ``y``, the largest value in its best tie group and the number
    of originals in that group; ``u`` are the distinct original values, sorted, with
    multiplicities ``counts``; values are |u - y| (p = 1, one column), all finite.

    The kd-tree search of :func:`_kd_round` on a line, with exact values: the k distinct
    originals on either side of y's insertion point hold every candidate scoring below
    ``bound``, the next value on either side beyond them. The best group is settled
    when a gap follows it below the bound, or when nothing from the bound up could join
    it; otherwise k grows 4x, up to every original. Cheaper than a kd-tree built per
    block and column (docs/benchmarks.md, "Linkage attack").
    """
    n_u, m = u.size, y.size
    top = np.empty(m)
    size = np.empty(m, dtype=np.int64)
    pos = np.searchsorted(u, y)
    pending = np.arange(m)
    k = 4
    while pending.size:
        k = min(k, n_u)
        everything = k == n_u
        step = max(1, chunk_bytes // (2 * k * 64))
        left = []
        for s in range(0, pending.size, step):
            rows = pending[s : s + step]
            p, yr = pos[rows], y[rows]
            idx = np.concatenate([p[:, None] - 1 - np.arange(k), p[:, None] + np.arange(k)], axis=1)
            valid = (idx >= 0) & (idx < n_u)
            at = np.clip(idx, 0, n_u - 1)
            vals = np.where(valid, np.abs(u[at] - yr[:, None]), np.inf)
            order = np.argsort(vals, axis=1, kind="stable")
            vs = np.take_along_axis(vals, order, axis=1)
            cum = np.cumsum(np.take_along_axis(np.where(valid, counts[at], 0), order, axis=1), axis=1)
            nl, nr = p - 1 - k, p + k
            bound = np.minimum(
                np.where(nl >= 0, np.abs(u[np.maximum(nl, 0)] - yr), np.inf),
                np.where(nr < n_u, np.abs(u[np.minimum(nr, n_u - 1)] - yr), np.inf),
            )
            nk = (vs < bound[:, None]).sum(axis=1)  # vs is sorted: the complete prefix
            brk = np.ones(vs.shape, dtype=bool)
            brk[:, :-1] = ~joins(vs[:, :-1], vs[:, 1:], tol)
            end = np.argmax(brk, axis=1)  # the best group is vs[:, :end + 1]
            r = np.arange(rows.size)
            last = vs[r, end]
            done = (nk >= 1) & _closed_above(end, nk, last, bound, tol, everything)
            top[rows[done]] = last[done]
            size[rows[done]] = cum[r, end][done]
            left.append(rows[~done])
        pending = np.concatenate(left)
        if everything and pending.size:  # pragma: no cover - everything is known at k = n_u
            raise AssertionError("the best group failed to settle with every original known")
        k *= 4
    return top, size

