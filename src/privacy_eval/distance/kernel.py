"""What the executors compute for the distance metrics, on numpy arrays: the scaled and
projected coordinates of a batch of records, and the exact searches of one index
chunk (docs/metrics.md, "Distance-based metrics").

Imported by the Spark workers: numpy, pandas and scipy only.

Every coordinate of a record is computed by elementwise operations in a fixed column
order, never by a matrix product: a BLAS product may round a row differently with
the size of its batch, and equal records must get bit-for-bit equal coordinates under
any partitioning (a duplicated record then sits at distance exactly 0).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy.spatial import cKDTree

from privacy_eval.columns import INTERNAL_PREFIX

# 5.2: d and r are tied when |d - r| <= TIE * max(1, r).
TIE = 1e-9
# A column whose sd is at or below this (and which is not constant) is scaled by 1.
TINY_SD = 2.2e-308
# The sd of a column constant in the original: its coordinate is 1 where a value differs
# from the constant, 0 where it equals it (or is imputed). Scaled by 1 instead, a
# distance to a release that writes 0 there would read as the constant itself.
CONSTANT = 0.0
# A coordinate larger than this in size (a value that many of the original's standard
# deviations from its mean) is refused: the squared distances of up to MAX_WIDTH (2000)
# coordinates, each below 2 * sqrt(2000) * 1e150 once projected, stay below 1.6e307,
# short of the largest double (1.8e308).
MAX_COORDINATE = 1e150
# The metrics a search measures in, as Minkowski's p (scipy's cKDTree takes it): the
# distance suite's Euclidean distance, and the sum of absolute differences (L1), which on
# an embedding with range-scaled numbers and halved one-hot categoricals is Anonymeter's
# distance. A point's distance to a box, or across one of its faces, is taken in the same.
EUCLIDEAN, CITY_BLOCK = 2.0, 1.0


@dataclass(frozen=True)
class Scaling:
    """How a record becomes its scaled vector (5.1), in coordinate order: numeric
    columns first, then one coordinate per modality of each categorical column."""

    numeric: tuple[str, ...]
    means: tuple[float, ...]
    sds: tuple[float, ...]
    categorical: tuple[str, ...]
    # Per categorical column: its modalities (None = the null modality) and shares.
    modalities: tuple[tuple[str | None, ...], ...]
    shares: tuple[tuple[float, ...], ...]
    # Per numeric column, e: its values are read as x·2^-e, in which units its mean and
    # sd are given (frames.binary_exponent); empty: 0 for every column.
    exponents: tuple[int, ...] = ()

    @property
    def width(self) -> int:
        return len(self.numeric) + sum(len(m) for m in self.modalities)


def scaled(batch: pd.DataFrame, scaling: Scaling) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(Z, imputed, far): the batch's scaled vectors (rows x width); per row, how many
    numeric cells were null, NaN or infinite (imputed at the original's mean: 0); and
    per row the first numeric column whose coordinate exceeds MAX_COORDINATE in size,
    or -1."""
    n = len(batch)
    z = np.zeros((n, scaling.width))
    imputed = np.zeros(n, dtype=np.int64)
    far = np.full(n, -1, dtype=np.int64)
    exponents = scaling.exponents or (0,) * len(scaling.numeric)
    for j, (name, mean, sd, e) in enumerate(zip(scaling.numeric, scaling.means, scaling.sds, exponents)):
        x = pd.to_numeric(batch[name], errors="coerce").to_numpy(dtype=float, na_value=np.nan)
        bad = ~np.isfinite(x)
        imputed += bad
        with np.errstate(over="ignore", invalid="ignore"):  # what overflows is refused through `far`
            if e:
                x = np.ldexp(x, -e)  # exact: the column's units (Scaling.exponents)
            if sd == CONSTANT:
                z[:, j] = np.where(bad | (x == mean), 0.0, 1.0)
            else:
                z[:, j] = np.where(bad, 0.0, (np.where(bad, mean, x) - mean) / sd)
        far[(far < 0) & ~(np.abs(z[:, j]) <= MAX_COORDINATE)] = j
    j = len(scaling.numeric)
    for name, modalities, shares in zip(scaling.categorical, scaling.modalities, scaling.shares):
        values = batch[name]
        missing = values.isna().to_numpy()
        text = values.to_numpy(dtype=object)
        for modality, p in zip(modalities, shares):
            hit = missing if modality is None else (~missing & (text == modality))
            # (1[x = k] - p) / sqrt(p), with both constants computed once.
            z[:, j] = np.where(hit, (1.0 - p) / np.sqrt(p), -p / np.sqrt(p))
            j += 1
    return z, imputed, far


def projected(z: np.ndarray, basis: np.ndarray | None) -> np.ndarray:
    """Z's coordinates on the basis (width x K), or Z itself without one; accumulated
    one input coordinate at a time (see the module docstring)."""
    if basis is None:
        return z
    out = np.zeros((z.shape[0], basis.shape[1]))
    for j in range(basis.shape[0]):
        out += z[:, j : j + 1] * basis[j]
    return out


def nearest(index: np.ndarray, queries: np.ndarray, k: int, p: float = EUCLIDEAN) -> np.ndarray:
    """Distances (Minkowski `p`: EUCLIDEAN or CITY_BLOCK) from each query to its k nearest
    index points, ascending (queries x k); inf where the index has fewer than k points.
    Exact (eps = 0)."""
    out = np.full((len(queries), k), np.inf)
    if len(index) and len(queries):
        order = _nearby_first(queries)
        d, _ = _tree(index).query(queries[order], k=k, p=p)
        out[order] = np.asarray(d).reshape(len(queries), k)
    return out


def _nearby_first(points: np.ndarray) -> np.ndarray:
    """A permutation of the points that puts points close in space close in order: the
    leaf order of a k-d tree over them. A tree searched for queries in that order finds
    the nodes it reads in cache; in random order each search reads cold memory, at about
    three times the cost (docs/operations.md, "Queries in space order")."""
    if len(points) < 2 or not points.shape[1]:
        return np.arange(len(points))
    return cKDTree(points, balanced_tree=False, compact_nodes=False).indices


# Points per leaf of the nearest-neighbour trees: the nearest two cost about 6 % less
# than with scipy's default of 16, and no less with 24 or 48.
LEAF_SIZE = 32


def _tree(index: np.ndarray) -> cKDTree:
    return cKDTree(index, leafsize=LEAF_SIZE)


# Points per leaf of the trees counted in: with the points in space order, a ball count
# costs less per point than with leaves of 32 (docs/operations.md, "Queries in space order").
COUNT_LEAF_SIZE = 48


def _counting_tree(index: np.ndarray) -> cKDTree:
    """A tree for ball counts, over the points in space order: scipy keeps the points in
    the order given and reaches a leaf's points through an index, so in space order a
    leaf's points lie close together in memory, and a count, which reads every point of the
    leaves its ball cuts, reads them in sequence rather than scattered (about a tenth
    faster on cells that outgrow the processor's caches). The same points: the same counts."""
    return cKDTree(index[_nearby_first(index)], leafsize=COUNT_LEAF_SIZE)


# The first query's k (`cloaking_in_cell`): for balls around records of the cell searched
# (docs/operations.md, "Local cloaking: a count that stops at the cap"), and for balls
# that reach into a cell from outside it (the cloaking's second pass), which hold few: on
# the benchmark's data at 1e6, 45 % of them none and 7 on average, where k = 4 costs 0.75x
# k = 16 (docs/operations.md, "Cells, and why the search is exact").
HOME_K, VISIT_K = 16, 4


def cloaking_in_cell(
    index: np.ndarray, queries: np.ndarray, r: np.ndarray, limit: int, first_k: int = HOME_K
) -> tuple[np.ndarray, np.ndarray]:
    """Per query q with radius r_q, against the index points: (whether one is closer than
    r_q, how many are closer than or tied with it), under the tie rule (5.2). The count
    is exact up to `limit`; above it, it is `limit` or more, except where no point is
    closer, where it is exact (every point counted is then tied: the hit needs it).

    A ball count costs as many steps as it counts, and counts grow with the data; a
    k-nearest query costs about k steps, each dearer than a ball count's. So: a k =
    `first_k` query bounded by r_q + tau settles the balls that hold few (16 suits balls
    around their centre's own records; 4 suits balls that only reach into the cell,
    about half of which hold none: `VISIT_K`); for the others, the k-th distance
    estimates the ball's count (k (r_q / d_k)^dims, a uniform density);
    balls estimated below BALL_FACTOR x limit are counted, the rest take a `limit`
    query, whose cost does not grow with the ball. The estimate only routes the work:
    both routes count the same points.
    """
    closer = np.zeros(len(queries), dtype=bool)
    either = np.zeros(len(queries), dtype=np.int64)
    if len(index) and len(queries):
        order = _nearby_first(queries)
        closer[order], either[order] = _cloaking_in_order(
            _counting_tree(index), queries[order], r[order], limit, first_k)
    return closer, either


def _cloaking_in_order(
    tree: cKDTree, queries: np.ndarray, r: np.ndarray, limit: int, first_k: int
) -> tuple[np.ndarray, np.ndarray]:
    """`cloaking_in_cell` for queries in the order they are to be searched."""
    n, n_index = len(queries), tree.n
    closer = np.zeros(n, dtype=bool)
    either = np.zeros(n, dtype=np.int64)
    tau = tie_tolerance(r)
    outer = r + tau
    k = min(first_k, limit, n_index)
    either[:], nearest_distance, kth = _bounded_counts(tree, queries, outer, k)
    closer[:] = nearest_distance < r - tau
    full = np.flatnonzero(either >= k) if k < n_index else np.zeros(0, dtype=np.int64)
    if len(full) and k < min(limit, n_index):
        with np.errstate(divide="ignore", over="ignore"):
            estimate = k * (outer[full] / kth[full]) ** tree.m
        by_ball = estimate <= BALL_FACTOR * limit
        small, full = full[by_ball], full[~by_ball]
        either[small] = tree.query_ball_point(queries[small], outer[small], return_length=True)
        k = min(limit, n_index)
        either[full], _, _ = _bounded_counts(tree, queries[full], outer[full], k)
        full = full[either[full] >= k] if k < n_index else full[:0]
    tied_only = full[~closer[full]]
    if len(tied_only):
        either[tied_only] = tree.query_ball_point(queries[tied_only], outer[tied_only], return_length=True)
    return closer, either


def tie_tolerance(r: np.ndarray) -> np.ndarray:
    """τ(r) of the tie rule (5.2): d is tied with r when |d - r| <= τ(r)."""
    return TIE * np.maximum(1.0, r)


# The estimate runs high, and a ball count of a few thousand points costs about what a
# `limit` query does (docs/operations.md, "Local cloaking: a count that stops at the cap").
BALL_FACTOR = 16
_QUERY_BATCH = 4096


def _bounded_counts(
    tree: cKDTree, queries: np.ndarray, outer: np.ndarray, k: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per query, #points within its radius `outer` among its k nearest, its nearest
    distance and its k-th (inf past the radius). scipy takes one distance bound per
    call: the queries go in batches in their order, each bounded just above its largest
    radius (a looser bound costs little next to searching in space order)."""
    found = np.zeros(len(queries), dtype=np.int64)
    nearest_distance = np.full(len(queries), np.inf)
    kth = np.full(len(queries), np.inf)
    for s in range(0, len(queries), _QUERY_BATCH):
        batch = slice(s, s + _QUERY_BATCH)
        bound = np.nextafter(outer[batch].max(), np.inf)  # scipy's bound is strict
        d, _ = tree.query(queries[batch], k=k, distance_upper_bound=bound)
        d = np.asarray(d).reshape(-1, k)
        found[batch] = (d <= outer[batch, None]).sum(axis=1)
        nearest_distance[batch] = d[:, 0]
        kth[batch] = d[:, -1]
    return found, nearest_distance, kth


def kd_planes(points: np.ndarray, depth: int) -> tuple[np.ndarray, np.ndarray]:
    """The split planes of a complete k-d tree of `depth` levels over `points`, in heap
    order (node 1 the root, node i's children 2i and 2i + 1; entry 0 unused): per node,
    the coordinate along which its points spread widest and their lower median there. A
    point goes to the right child when its coordinate is greater than the split value.
    The value moves below the largest when the median is the largest (many equal
    values), so that both children keep points; a node whose points all coincide, or
    that has none, splits at +inf (everything goes left, the right child stays empty).

    Only the balance of the cells depends on the planes, never a figure: the search is
    exact for any planes. The result depends on the points as a multiset, not on their
    order."""
    nodes = 2**depth
    dims = np.zeros(nodes, dtype=np.int64)
    splits = np.full(nodes, np.inf)
    members = {1: points}
    for node in range(1, nodes):
        p = members.pop(node)
        if len(p) > 1:
            spread = p.max(axis=0) - p.min(axis=0)
            dim = int(np.argmax(spread))
            if spread[dim] > 0:
                x = p[:, dim]
                value = np.partition(x, (len(x) - 1) // 2)[(len(x) - 1) // 2]
                if value >= x.max():
                    value = x[x < value].max()
                dims[node], splits[node] = dim, value
        right = p[:, dims[node]] > splits[node]
        if 2 * node < nodes:
            members[2 * node], members[2 * node + 1] = p[~right], p[right]
    return dims, splits


# A cell is searched when its box lies within the bound times (1 + ROUTE_SLACK): the box's
# and the tree's distances are each rounded (a relative error of a few 1e-16 per
# coordinate); the slack keeps every record the tree would count in a searched cell.
ROUTE_SLACK = 1e-9


def route_limit(bound: np.ndarray) -> np.ndarray:
    """The distance up to which a box counts as within the bound (ROUTE_SLACK)."""
    return bound * (1.0 + ROUTE_SLACK)


def cells_within(
    points: np.ndarray, bound: np.ndarray, lo: np.ndarray, hi: np.ndarray, counts: np.ndarray, depth: int,
    p: float = EUCLIDEAN,
) -> tuple[np.ndarray, np.ndarray]:
    """(query, cell) pairs: for each point, every non-empty leaf cell whose box lies
    within its bound in the metric `p` (an inf bound reaches every non-empty cell). `lo`, `hi` and
    `counts` describe every node of the heap (leaves at 2^depth + cell); a node's box
    holds its children's, so the descent drops a subtree as soon as its box is too far.
    It goes down up to _JUMP levels at a time, all of a node's descendants there at once
    (one array operation instead of _JUMP), for _ROUTE_BATCH (point, node) candidates at
    a time: a step's arrays hold candidates x 2^_JUMP boxes, so its memory stays bounded
    however many points there are."""
    limit = route_limit(bound)
    query = np.arange(len(points))
    node = np.ones(len(points), dtype=np.int64)
    keep = (counts[node] > 0) & (box_distances(points, lo[node], hi[node], p) <= limit)
    query, node, level = query[keep], node[keep], 0
    while level < depth:
        jump = min(_JUMP, depth - level)
        steps = [
            _descended(points, limit, query[s : s + _ROUTE_BATCH], node[s : s + _ROUTE_BATCH], jump, lo, hi, counts, p)
            for s in range(0, len(query), _ROUTE_BATCH)
        ]
        query = np.concatenate([q for q, _ in steps]) if steps else query
        node = np.concatenate([n for _, n in steps]) if steps else node
        level += jump
    return query, node - 2**depth


_JUMP = 6
# 16,384 candidates x 64 boxes x 8 bytes: 8 MB per cut coordinate for each array of a step.
_ROUTE_BATCH = 16_384


def _descended(
    points: np.ndarray, limit: np.ndarray, query: np.ndarray, node: np.ndarray, jump: int,
    lo: np.ndarray, hi: np.ndarray, counts: np.ndarray, p: float,
) -> tuple[np.ndarray, np.ndarray]:
    """The (query, node) candidates `jump` levels below the given ones, in the same order."""
    below = node[:, None] * 2**jump + np.arange(2**jump)[None, :]  # candidates x 2^jump
    # Below the root, every candidate has the same descendants: their boxes broadcast.
    boxes = below[:1] if (node == 1).all() else below
    near = box_distances(points[query][:, None, :], lo[boxes], hi[boxes], p) <= limit[query][:, None]
    keep = near & (counts[below] > 0)
    return np.broadcast_to(query[:, None], below.shape)[keep], below[keep]


def leaf_regions(dims: np.ndarray, splits: np.ndarray, depth: int, axes: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
    """(lo, hi), leaves x axes: the part of space the planes (`kd_planes`) give each leaf,
    lo < x <= hi on each axis (a point goes right when its coordinate is greater than the
    split value), +-inf where no plane bounds it."""
    column = {a: j for j, a in enumerate(axes)}
    lo, hi = np.full((2 ** (depth + 1), len(axes)), -np.inf), np.full((2 ** (depth + 1), len(axes)), np.inf)
    for node in range(1, 2**depth):
        lo[2 * node : 2 * node + 2], hi[2 * node : 2 * node + 2] = lo[node], hi[node]
        if np.isfinite(splits[node]):  # an infinite split bounds nothing: its right child is empty
            j = column[int(dims[node])]
            hi[2 * node, j] = min(hi[node, j], splits[node])
            lo[2 * node + 1, j] = max(lo[node, j], splits[node])
    return lo[2**depth :], hi[2**depth :]


def face_distances(points: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """The distance from each point to the nearest face of its region [lo, hi] (the point
    inside it; inf for a region without faces)."""
    gaps = np.minimum(points - lo, hi - points)
    return gaps.min(axis=-1) if gaps.shape[-1] else np.full(len(points), np.inf)


def box_distances(points: np.ndarray, lo: np.ndarray, hi: np.ndarray, p: float = EUCLIDEAN) -> np.ndarray:
    """The distance (Minkowski `p`) from each point to its box [lo, hi] (0 inside it),
    over the last axis."""
    gap = np.maximum(np.maximum(lo - points, points - hi), 0.0)
    if p == CITY_BLOCK:
        return gap.sum(axis=-1)
    return np.sqrt((gap * gap).sum(axis=-1))


def coordinate_names(k: int) -> list[str]:
    return [f"{INTERNAL_PREFIX}c{j}" for j in range(k)]


def as_matrix(frame: pd.DataFrame, names: Sequence[str]) -> np.ndarray:
    return frame[list(names)].to_numpy(dtype=float) if len(names) else np.zeros((len(frame), 0))
