"""The linkage kernel's kd-tree path against the brute-force path and a plain-Python
restatement of the per-record reduction (tests/support/linkage_oracle.py), so that neither
kernel path is checked against itself: random and near-tie blocks, empty and one-sided
blocks, long tie chains, skewed trees, bounded memory, and the single-column fast path.
"""

from __future__ import annotations

import time
import tracemalloc

import numpy as np
import pytest

from privacy_eval.linkage import kernel as lk
from privacy_eval.linkage.kernel import kdtree
from tests.support import linkage_oracle as oracle
from tests.support.linkage_oracle import TOL, reference_counts, reference_topk, summary_of

# --------------------------------------------------------------------------
# kd-tree path vs brute force vs plain-Python reference
# --------------------------------------------------------------------------


def _near_tie_block(rng, p, q, n_anon):
    """Originals placed around each synthetic record at near-equal and chained distances."""
    anon = rng.normal(size=(n_anon, q)) * 3
    raws = []
    for y in anon:
        base = rng.choice([0.4, 1.0, 7.0])
        radii = [base * (1 + e) for e in rng.uniform(-1e-12, 1e-12, size=4)]  # ties within 1e-12
        step = rng.choice([0.3, 0.7, 0.95, 1.05, 1.5]) * TOL  # chains just below/above the tolerance
        radii += [base * 1.3 + i * step * max(1, base * 1.3) for i in range(8)]
        for rad in radii:
            if p == 2:
                u = rng.normal(size=q)
                u /= np.linalg.norm(u)
            else:
                u = np.zeros(q)
                u[rng.integers(q)] = rng.choice([-1.0, 1.0])
            raws.append(y + rad * u)
    raw = np.array(raws)
    return raw, anon


def _random_block(rng, kind, p):
    q = int(rng.integers(1, 4))
    if kind == "continuous":
        raw = rng.normal(size=(int(rng.integers(20, 200)), q))
        anon = raw[: int(rng.integers(5, 60))] + rng.normal(scale=rng.choice([0.01, 0.3, 2.0]), size=(1, q))
        anon = anon + rng.normal(scale=0.3, size=anon.shape)
    elif kind == "integer":
        raw = rng.integers(0, 4, size=(int(rng.integers(10, 150)), q)).astype(float)
        anon = np.clip(raw[: int(rng.integers(5, 40))] + rng.integers(-1, 2, size=(1, q)), 0, 5).astype(float)
    elif kind == "duplicated":
        base = rng.normal(size=(int(rng.integers(3, 15)), q))
        raw = base[rng.integers(0, base.shape[0], size=int(rng.integers(20, 120)))]
        anon = raw[: int(rng.integers(5, 30))].copy()
        anon[::3] += 0.5
    elif kind == "near_ties":
        raw, anon = _near_tie_block(rng, p, q, int(rng.integers(2, 6)))
        raw = np.concatenate([raw, anon[:1] + 0.0, rng.normal(size=(10, q))])  # an exact twin too
    elif kind == "single":
        raw = rng.normal(size=(1, q))
        anon = rng.normal(size=(4, q))
    else:
        raise AssertionError(kind)
    n_r, n_a = raw.shape[0], anon.shape[0]
    raw_ids = rng.permutation(n_r).astype(np.int64) + 1
    anon_ids = raw_ids[rng.permutation(n_r)[:n_a]] if n_a <= n_r else rng.permutation(n_a) + 1
    if kind == "near_ties":
        # the record at the centre of each shell is linked to a random shell member
        anon_ids = raw_ids[rng.choice(n_r, size=n_a, replace=False)]
    if rng.random() < 0.3:  # some records without their truth in the block
        anon_ids = anon_ids.copy()
        anon_ids[rng.random(n_a) < 0.3] += 10_000
    if kind == "single" or rng.random() < 0.1:
        anon_ids = anon_ids.copy()
        anon_ids[:] = np.arange(n_a) + 50_000  # block without any truth...
        if kind == "single":
            anon_ids[0] = raw_ids[0]  # ...except one record
    return raw_ids, raw, anon_ids, anon


def _check_against_reference(raw_ids, raw, anon_ids, anon, p, max_k, squared=False, offset=0.0, k_initial=None):
    kw = dict(p=p, squared=squared, value_offset=offset)
    bf = lk.evaluate_block_bruteforce(raw_ids, raw, anon_ids, anon, **kw)
    kd = lk.evaluate_block_kdtree(raw_ids, raw, anon_ids, anon, max_k=max_k, k_initial=k_initial, **kw)
    vals = oracle.pairwise_values(raw, anon, **kw)
    col = {rid: j for j, rid in enumerate(raw_ids.tolist())}
    for i, aid in enumerate(anon_ids.tolist()):
        j = col.get(aid)
        assert kd.has_true[i] == bf.has_true[i] == (j is not None)
        assert kd.n_candidates[i] == bf.n_candidates[i] == raw.shape[0]
        if j is None:
            assert kd.n_better[i] == bf.n_better[i] == -1 and kd.risk[i] == 0
            continue
        b, m = reference_counts(vals[i].tolist(), j, TOL)
        assert (bf.n_better[i], bf.true_tie_size[i]) == (b, m)
        assert kd.true_score[i] == vals[i, j]
        if kd.capped[i]:
            assert max_k <= kd.n_better[i] <= b
        else:
            assert (kd.n_better[i], kd.true_tie_size[i]) == (b, m)
        assert kd.risk[i] == bf.risk[i] == reference_topk(b, m, 1)
        for k in range(1, max_k + 1):
            assert kd.top_k_probability(k)[i] == reference_topk(b, m, k)
    return kd


@pytest.mark.parametrize("p", [1, 2])
@pytest.mark.parametrize("kind", ["continuous", "integer", "duplicated", "near_ties", "single"])
def test_kdtree_agrees_with_brute_force(kind, p):
    rng = np.random.default_rng([11, 29][p - 1] * 100 + len(kind))
    n_capped = 0
    for rep in range(6):
        raw_ids, raw, anon_ids, anon = _random_block(rng, kind, p)
        max_k = int(rng.choice([1, 2, 3, 10]))
        k_initial = int(rng.choice([2, 3])) if rep % 2 else None  # force widening rounds
        kd = _check_against_reference(raw_ids, raw, anon_ids, anon, p, max_k, k_initial=k_initial)
        n_capped += int(kd.capped.sum())
        if p == 2 and rep % 3 == 0:
            _check_against_reference(raw_ids, raw, anon_ids, anon, p, max_k, squared=True)
        if p == 1 and rep % 3 == 0:
            _check_against_reference(raw_ids, raw, anon_ids, anon, p, max_k, offset=float(rng.uniform(0.1, 3)))
    if kind == "continuous":
        assert n_capped > 0  # the cap path is exercised


def test_kdtree_empty_and_one_sided_blocks():
    ids = np.arange(3)
    x = np.arange(6.0).reshape(3, 2)
    r = lk.evaluate_block_kdtree(ids[:0], x[:0], ids, x, max_k=5)
    assert r.n_candidates.tolist() == [0, 0, 0] and not r.has_true.any() and r.n_better.tolist() == [-1] * 3
    b = lk.evaluate_block_bruteforce(ids[:0], x[:0], ids, x)
    assert b.n_candidates.tolist() == [0, 0, 0] and b.risk.tolist() == [0, 0, 0]
    r = lk.evaluate_block_kdtree(ids, x, ids[:0], x[:0], max_k=5)
    assert r.n_candidates.size == 0
    with pytest.raises(TypeError):
        lk.evaluate_block_kdtree(ids, x, ids.astype(str), x, max_k=1)
    with pytest.raises(ValueError):
        lk.evaluate_block_kdtree(ids, x, ids, x, max_k=0)


@pytest.mark.parametrize("p", [1, 2])
def test_kdtree_long_single_linkage_chain(p):
    """A 300-long chain of sub-tolerance steps forces several widening rounds in both directions."""
    step = 0.9 * TOL
    dists = np.concatenate([
        [0.5, 0.6, 0.7, 0.8, 0.9],  # clearly better
        1.0 + step * np.arange(300),  # one tie group by single linkage (its span is 2.7e-6)
        [1.1 + 0.01 * i for i in range(50)],  # clearly worse
    ])
    rng = np.random.default_rng(4)
    if p == 1:
        raw = dists[:, None]
    else:
        ang = rng.uniform(0, 2 * np.pi, size=dists.size)
        raw = np.column_stack([dists * np.cos(ang), dists * np.sin(ang)])
    ids = np.arange(dists.size)
    truth = np.array([5, 150, 304, 305, 354, 0])  # chain start, middle, end; first and last after it; best
    anon = np.zeros((truth.size, raw.shape[1]))
    vals = oracle.pairwise_values(raw, anon, p=p)
    for max_k in (3, 10, 400):
        kd = lk.evaluate_block_kdtree(ids, raw, truth, anon, p=p, max_k=max_k, k_initial=2)
        for i, j in enumerate(truth):
            b, m = reference_counts(vals[i].tolist(), int(j), TOL)
            if kd.capped[i]:
                assert max_k <= kd.n_better[i] <= b
            else:
                assert (kd.n_better[i], kd.true_tie_size[i]) == (b, m)
            for k in (1, 2, 3):
                assert kd.top_k_probability(min(k, max_k))[i] == reference_topk(b, m, min(k, max_k))
        if p == 1 and max_k > 5:  # 5 better candidates < max_k: nothing may be capped
            assert not kd.capped[:3].any() and kd.true_tie_size[:3].tolist() == [300] * 3
            assert kd.risk.tolist() == [0, 0, 0, 0, 0, 1]
    if p == 1:
        assert reference_counts(vals[0].tolist(), 5, TOL) == (5, 300)


class _SkewedTree:
    """Stand-in for cKDTree: exact kNN, but on distances skewed by a per-point factor.

    A real tree's distances differ from the kernel's recomputed ones only in the
    last bits, which random data almost never turns into a different neighbour
    set.  Skewing by up to 1e-10 (inside the kernel's declared 1e-9 slack)
    reorders near-ties on purpose, so the kernel's guards against a neighbour
    that was left out although its true value is below the k-th one are tested.
    """

    def __init__(self, data, skew):
        self.data = np.asarray(data)
        self.skew = np.asarray(skew, dtype=float)

    def query(self, y, k, p=2, workers=1):
        diff = np.abs(self.data[None, :, :] - y[:, None, :])
        d = diff.sum(-1) if p == 1 else np.sqrt((diff**2).sum(-1))
        d = d * (1.0 + self.skew[None, :])
        idx = np.argsort(d, axis=1, kind="stable")[:, :k]
        return np.take_along_axis(d, idx, axis=1), idx


def _with_skew(monkeypatch, skew_for):
    monkeypatch.setattr(kdtree, "cKDTree", lambda data, **kw: _SkewedTree(data, skew_for(np.asarray(data))))


def test_kdtree_group_continues_past_a_left_out_neighbour(monkeypatch):
    # values 1, 1+tol, 1+tol+5e-11: one group by single linkage.  The skew makes
    # the tree return the third and leave the second out at k = 2; the first
    # then looks separated from everything seen, which must not settle it.
    v = np.array([1.0, 1.0 + TOL, 1.0 + TOL + 5e-11, 3.0, 4.0, 5.0])
    _with_skew(monkeypatch, lambda data: np.where(data[:, 0] == v[1], 1e-10, np.where(data[:, 0] == v[2], -1e-10, 0)))
    kd = lk.evaluate_block_kdtree(np.arange(6), v[:, None], np.array([0]), np.zeros((1, 1)), p=1, max_k=3, k_initial=2)
    assert (kd.n_better[0], kd.true_tie_size[0], kd.capped[0]) == (0, 3, False)
    assert kd.risk[0] == 1 / 3


def test_kdtree_cap_ignores_a_gap_next_to_a_left_out_neighbour(monkeypatch):
    # the truth (1+tol) is left out of the first k = 5 neighbours; the apparent
    # gap between 1.0 and 1+tol+5e-11 is bridged by the truth itself, so only
    # 3 candidates are provably better and max_k = 4 must not be capped.
    v = np.array([0.1, 0.2, 0.3, 1.0, 1.0 + TOL, 1.0 + TOL + 5e-11, 2.0, 3.0])
    _with_skew(monkeypatch, lambda data: np.where(data[:, 0] == v[4], 1e-10, np.where(data[:, 0] == v[5], -1e-10, 0)))
    kd = lk.evaluate_block_kdtree(np.arange(8), v[:, None], np.array([4]), np.zeros((1, 1)), p=1, max_k=4, k_initial=5)
    assert (kd.n_better[0], kd.true_tie_size[0], kd.capped[0]) == (3, 3, False)
    assert kd.top_k_probability(4)[0] == pytest.approx(1 / 3, abs=0)


def test_kdtree_left_out_neighbour_below_the_truth_with_exact_ties(monkeypatch):
    # tol = 0: the left-out 2(1+1e-10) is strictly better than the truth
    # 2(1+1.5e-10), which the skewed tree ranks ahead of it; without the slack on
    # the k-th distance the truth would look settled with one better candidate.
    v = np.array([1.0, 2.0 * (1 + 1e-10), 2.0 * (1 + 1.5e-10), 5.0])
    _with_skew(monkeypatch, lambda data: np.where(data[:, 0] == v[1], 1e-10, np.where(data[:, 0] == v[2], 0.2e-10, 0)))
    kd = lk.evaluate_block_kdtree(np.arange(4), v[:, None], np.array([2]), np.zeros((1, 1)), p=1, max_k=3, tol=0,
                                  k_initial=2)
    assert (kd.n_better[0], kd.true_tie_size[0]) == (2, 1)
    assert kd.top_k_probability(2)[0] == 0 and kd.top_k_probability(3)[0] == 1


@pytest.mark.parametrize("p", [1, 2])
def test_kdtree_robust_to_skewed_tree_distances(monkeypatch, p):
    rng = np.random.default_rng(77 + p)
    _with_skew(monkeypatch, lambda data: rng.uniform(-1e-10, 1e-10, size=data.shape[0]))
    for rep in range(12):
        kind = ["near_ties", "integer", "duplicated", "continuous"][rep % 4]
        raw_ids, raw, anon_ids, anon = _random_block(rng, kind, p)
        _check_against_reference(raw_ids, raw, anon_ids, anon, p, int(rng.choice([1, 2, 4])), k_initial=2)


def test_kdtree_large_tie_group_is_exact():
    # 3000 originals at exactly the same point as the truth's twin, plus spread ones
    rng = np.random.default_rng(1)
    raw = np.concatenate([np.zeros((3000, 2)), rng.normal(size=(2000, 2)) + 5])
    ids = np.arange(raw.shape[0])
    anon = np.array([[0.0, 0.0], [0.1, 0.0], [5.0, 5.0]])
    kd = lk.evaluate_block_kdtree(ids, raw, np.array([7, 2999, 4000]), anon, max_k=10)
    assert kd.true_tie_size[:2].tolist() == [3000, 3000]
    assert kd.risk[0] == kd.risk[1] == 1 / 3000
    bf = lk.evaluate_block_bruteforce(ids, raw, np.array([7, 2999, 4000]), anon)
    assert bf.n_better.tolist()[:2] == kd.n_better.tolist()[:2] == [0, 0]
    assert kd.risk[2] == bf.risk[2]


# --------------------------------------------------------------------------
# bounded memory at scale
# --------------------------------------------------------------------------


def test_kdtree_200k_block_bounded_memory():
    rng = np.random.default_rng(0)
    n = 200_000
    raw = rng.normal(size=(n, 3))
    anon = raw + rng.normal(scale=0.05, size=raw.shape)
    ids = np.arange(n, dtype=np.int64)
    tracemalloc.start()
    t0 = time.perf_counter()
    res = lk.evaluate_block_kdtree(ids, raw, ids, anon, max_k=10, chunk_bytes=32 * 2**20)
    elapsed = time.perf_counter() - t0
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert elapsed < 60
    assert peak < 400 * 2**20  # an n × n float64 matrix would need 320 GB
    assert res.has_true.all()
    s = summary_of(res, top_k=(1, 5, 10))
    assert 0 < s.success_analytic < 1
    # spot-check a sample of records against direct full scans
    for i in rng.choice(n, size=20, replace=False):
        vals = oracle.pairwise_values(raw, anon[i : i + 1])[0]
        b, m = reference_counts(vals.tolist(), int(i), TOL)
        if res.capped[i]:
            assert 10 <= res.n_better[i] <= b
        else:
            assert (res.n_better[i], res.true_tie_size[i]) == (b, m)


# --------------------------------------------------------------------------
# single-column fast path (the "best single column" check)
# --------------------------------------------------------------------------


@pytest.mark.parametrize("tol", [0.0, TOL, 1e-3, 0.05])
def test_column_best_agrees_with_brute_force_on_the_best_group(tol):
    """Whether the truth is in the record's best tie group, and that group's size, as
    the brute-force reduction says; other records only need N_BETTER >= 1. Ties,
    duplicates, magnitudes from 1e-9 to 1e9, sub-tolerance chains longer than the first
    window, and values so large (1e305) that their differences could overflow."""
    rng = np.random.default_rng(int(tol * 1e6) + 7)
    n_hits = 0
    for rep in range(60):
        n_r, n_a = int(rng.integers(1, 120)), int(rng.integers(1, 120))
        scale = float(rng.choice([1e-9, 1e-3, 1.0, 1e3, 1e9, 1e305]))
        decimals = int(rng.integers(0, 4))
        raw = np.round(rng.normal(size=n_r) * 3, decimals) * scale
        anon = np.round(rng.normal(size=n_a) * 3, decimals) * scale
        if rep % 5 == 0:  # a chain of steps just inside the tolerance around 1
            raw = 1.0 + np.arange(n_r) * 0.9 * max(tol, 1e-12)
            anon = rng.choice(raw, size=n_a) + rng.choice([0.0, 1e-14], size=n_a)
        raw_ids = rng.permutation(400)[:n_r]
        anon_ids = 1000 + rng.permutation(400)[:n_a]  # no truths but the twins below
        # Most synthetic records near their own original, so that many truths are best.
        twins = rng.permutation(min(n_r, n_a))[: min(n_r, n_a) * 3 // 4]
        anon_ids[twins] = raw_ids[twins]
        anon[twins] = raw[twins] + rng.choice([0.0, 0.0, 1e-3 * scale], size=twins.size)
        fast = lk.evaluate_column_best(raw_ids, raw[:, None], anon_ids, anon[:, None], tol=tol)
        with np.errstate(over="ignore"):  # its confidence spread overflows at 1e305; ranks are compared
            full = lk.evaluate_block_bruteforce(raw_ids, raw[:, None], anon_ids, anon[:, None], p=1, tol=tol)
        assert np.array_equal(fast.has_true, full.has_true)
        assert np.array_equal(fast.n_candidates, full.n_candidates)
        best = full.has_true & (full.n_better == 0)
        fast_best = (fast.n_better == 0) & ~fast.capped
        assert np.array_equal(fast_best, best)
        assert np.array_equal(fast.true_tie_size[best], full.true_tie_size[best])
        assert np.all(fast.n_better[full.has_true & ~best] >= 1)
        assert np.all(fast.n_better[~full.has_true] == -1)
        n_hits += int(best.sum())
    assert n_hits > 50  # the kept records exist, not only the settled ones
