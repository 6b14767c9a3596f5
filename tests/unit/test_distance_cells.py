"""The cells of the distance search, without Spark: the k-d planes (balance, duplicates,
order) and the routing of queries to cells, against a brute-force scan of every box;
and the estimate that refuses a search in a space too wide for a k-d tree."""

from __future__ import annotations

import numpy as np
import pytest

from privacy_eval.distance import kernel
from privacy_eval.distance.kernel import CITY_BLOCK, EUCLIDEAN, ROUTE_SLACK, cells_within, kd_planes
from privacy_eval.distance.search import Cells


def leaves_of(points: np.ndarray, dims: np.ndarray, splits: np.ndarray, depth: int) -> np.ndarray:
    """Each point's leaf, following the planes one point at a time (the rule the Spark
    expression applies: right when the coordinate is greater than the split value)."""
    out = []
    for p in points:
        node = 1
        for _ in range(depth):
            node = 2 * node + int(p[dims[node]] > splits[node])
        out.append(node - 2**depth)
    return np.array(out)


def boxes(points: np.ndarray, leaves: np.ndarray, depth: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every heap node's box and count, from the points placed in the leaves."""
    nodes, k = 2 ** (depth + 1), points.shape[1]
    lo, hi, counts = np.full((nodes, k), np.inf), np.full((nodes, k), -np.inf), np.zeros(nodes, dtype=np.int64)
    for leaf in range(2**depth):
        mine = points[leaves == leaf]
        node = 2**depth + leaf
        while node >= 1:
            if len(mine):
                lo[node] = np.minimum(lo[node], mine.min(axis=0))
                hi[node] = np.maximum(hi[node], mine.max(axis=0))
            counts[node] += len(mine)
            node //= 2
    return lo, hi, counts


def pairs_within(queries: np.ndarray, bound: np.ndarray, lo: np.ndarray, hi: np.ndarray, counts: np.ndarray,
                 depth: int, p: float = EUCLIDEAN) -> set[tuple[int, int]]:
    """Brute force: every (query, cell) pair whose leaf box, non-empty, lies within the
    query's bound (times 1 + ROUTE_SLACK) in the metric `p`, scanning every box."""
    leaf = 2**depth + np.arange(2**depth)
    gap = np.maximum(np.maximum(lo[leaf][None] - queries[:, None], queries[:, None] - hi[leaf][None]), 0.0)
    distance = (gap**p).sum(axis=2) ** (1 / p)
    return {(q, c) for q in range(len(queries)) for c in range(2**depth)
            if counts[leaf[c]] > 0 and distance[q, c] <= bound[q] * (1 + ROUTE_SLACK)}


def test_planes_cut_spread_out_points_into_cells_of_equal_size():
    rng = np.random.default_rng(3)
    points = rng.normal(size=(4096, 3)) * [1.0, 10.0, 0.1]
    dims, splits = kd_planes(points, 4)
    sizes = np.bincount(leaves_of(points, dims, splits, 4), minlength=16)
    assert sizes.min() >= 255 and sizes.max() <= 257  # lower medians: halves within one point
    assert dims[1] == 1  # the first plane cuts the widest coordinate


def test_planes_depend_on_the_points_not_their_order():
    rng = np.random.default_rng(4)
    points = rng.integers(0, 5, size=(300, 2)).astype(float)
    a = kd_planes(points, 5)
    b = kd_planes(points[rng.permutation(len(points))], 5)
    assert (a[0] == b[0]).all() and (a[1] == b[1]).all()


def test_duplicates_stay_together_and_a_median_at_the_top_still_splits():
    points = np.array([[5.0, 0.0]] * 9 + [[6.0, 0.0]])  # the lower median is 5, the largest value 6
    dims, splits = kd_planes(points, 1)
    assert splits[1] == 5.0
    assert np.bincount(leaves_of(points, dims, splits, 1)).tolist() == [9, 1]
    top_heavy = np.array([[1.0]] + [[6.0]] * 9)  # the lower median is the largest value
    dims, splits = kd_planes(top_heavy, 1)
    assert splits[1] == 1.0 and np.bincount(leaves_of(top_heavy, dims, splits, 1)).tolist() == [1, 9]


def test_coinciding_points_make_one_cell_and_empty_ones():
    points = np.ones((50, 3))
    dims, splits = kd_planes(points, 3)
    assert np.isinf(splits[1:]).all()
    assert (leaves_of(points, dims, splits, 3) == 0).all()
    assert kd_planes(np.zeros((0, 2)), 2)[1][1:].tolist() == [np.inf] * 3  # no points at all


@pytest.mark.parametrize("p", [EUCLIDEAN, CITY_BLOCK])
@pytest.mark.parametrize("batch", [16_384, 7])  # 7: every level's candidates in many steps
@pytest.mark.parametrize("depth", [0, 1, 3, 6, 8])
def test_routing_finds_exactly_the_non_empty_cells_within_the_bound(depth, batch, p, monkeypatch):
    monkeypatch.setattr(kernel, "_ROUTE_BATCH", batch)
    rng = np.random.default_rng(depth)
    points = rng.integers(0, 6, size=(400, 3)).astype(float)  # a lattice: queries on planes, boxes touching
    dims, splits = kd_planes(points[::3], depth)  # planes from a sample, as the job draws them
    leaves = leaves_of(points, dims, splits, depth)
    lo, hi, counts = boxes(points, leaves, depth)
    queries = np.vstack([rng.integers(0, 6, size=(60, 3)).astype(float), rng.normal(2.5, 2.0, size=(60, 3))])
    bound = np.concatenate([rng.choice([0.0, 1.0, np.sqrt(2.0), 2.5], 100), np.full(20, np.inf)])
    query, cell = cells_within(queries, bound, lo, hi, counts, depth, p)
    got = set(zip(query.tolist(), cell.tolist()))
    assert len(got) == len(query) and (np.diff(query) >= 0).all()  # no pair twice, in query order
    want = pairs_within(queries, bound, lo, hi, counts, depth, p)
    assert got == want
    assert depth == 0 or len(want) > len(queries)  # some queries reach several cells
    # Every point within a query's bound lies in a cell it is routed to.
    for q in range(len(queries)):
        near = (np.abs(points - queries[q]) ** p).sum(axis=1) ** (1 / p) <= bound[q]
        assert set(leaves[near].tolist()) <= {c for qq, c in got if qq == q}


@pytest.mark.parametrize("depth", [1, 3, 6])
def test_a_point_is_routed_to_every_other_cell_within_its_bound_and_no_more(depth):
    rng = np.random.default_rng(10 + depth)
    # A lattice with one coordinate never cut (constant), points on planes, and bounds from
    # 0 to past the lattice: some stop short of their region's faces, some reach many cells.
    points = np.column_stack([rng.integers(0, 8, size=(600, 2)).astype(float), np.full(600, 3.0)])
    dims, splits = kd_planes(points[::2], depth)
    axes = tuple(sorted({int(d) for d, v in zip(dims[1:], splits[1:]) if np.isfinite(v)}))
    leaves = leaves_of(points, dims, splits, depth)
    lo, hi, counts = boxes(points, leaves, depth)
    cells = Cells(depth, tuple(dims), tuple(splits), axes, lo[:, list(axes)], hi[:, list(axes)], counts)
    queries = np.vstack([points[:100], rng.normal(3.5, 3.0, size=(100, 3))])
    home = leaves_of(queries, dims, splits, depth)
    bound = np.concatenate([rng.choice([0.0, 0.5, 1.0, np.sqrt(2.0), 3.0], 190), np.full(10, np.inf)])
    region_lo, region_hi = cells.regions
    assert ((queries[:, axes] > region_lo[home]) & (queries[:, axes] <= region_hi[home])).all()
    query, cell = cells.within(queries, bound, home)
    got = set(zip(query.tolist(), cell.tolist()))
    assert len(got) == len(query)
    a = list(axes)  # boxes on the coordinates the planes cut
    want = {(q, c) for q, c in pairs_within(queries[:, a], bound, lo[:, a], hi[:, a], counts, depth) if c != home[q]}
    assert got == want
    faces = np.minimum(queries[:, axes] - region_lo[home], region_hi[home] - queries[:, axes]).min(axis=1)
    assert (faces > bound).sum() >= 10 and len({q for q, _ in want}) >= 10  # both kinds of point


def test_a_space_too_wide_to_search_is_estimated_warned_about_and_refused():
    from privacy_eval.distance.pipeline import PAIR_COORDINATE_SECONDS, WIDE_SPACE, _scored_pairs, _wide_space_warnings
    from privacy_eval.errors import InputError

    every = ("hidden_rate", "distance_to_closest_record", "holdout_distance_share")
    assert _scored_pairs(every, 10, 20, 5) == 10 * 20 + 20 * 5 + 10 * 20
    assert _scored_pairs(("local_cloaking",), 10, 20, 5) == 200
    assert _wide_space_warnings(WIDE_SPACE - 1, 10**15, 10**7, 10**8, 1.0) == ()  # a tree still prunes
    pairs = int(3600 / PAIR_COORDINATE_SECONDS / 1001 * 2)  # two core-hours in 1,001 coordinates
    (warning,) = _wide_space_warnings(1001, pairs, 200_000, 200_000, 24.0)
    assert "1001 coordinates" in warning and "2.0 core-hours" in warning and "200,000" in warning
    assert _wide_space_warnings(1001, 1000, 10, 100, 24.0) == ()  # under a core-minute: no word
    with pytest.raises(InputError, match=r"2\.0 core-hours, more than 'metrics.distance.max_core_hours' \(1\)"):
        _wide_space_warnings(1001, pairs, 200_000, 200_000, 1.0)
