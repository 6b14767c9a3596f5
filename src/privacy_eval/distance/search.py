"""The exact searches of the distance metrics, on Spark, in cells of space
(docs/operations.md, "Distance metrics: routes and limits").

Every search asks, for each record of a *query* side, about its neighbours on an
*indexed* side. The indexed side is cut into cells (`cut_into_cells`): k-d planes
chosen on a deterministic sample of it (of both sides, where each side is searched
for the other's queries: `cut_together`), each record placed in its cell by a Spark
expression, each cell's exact bounding box from one aggregation. A query is sent only
to the cells whose box lies within its bound; there a k-d tree over the cell's records
answers it, and the answers are merged per query. A record of a cell not searched lies
in that cell's box, farther from the query than the bound, so:

- known radius (local cloaking: the bound is the record's radius with the tie
  tolerance): every record the ball holds is in a searched cell, and the counts add up
  (a first pass in the query's own cell may settle it: see `cloaking_counts`);
- unknown radius (the nearest one or two): a first search in the query's own cell (the
  one the planes place it in) gives an upper bound on its n-th nearest distance (inf
  when that cell holds fewer than n records); a second pass searches every other cell
  within that bound, and the nearest over all searched cells are the nearest overall.

Rows shuffled per search: the indexed side once per pass and each query once per cell
it visits (`SearchCost.cells_per_query`); a task holds one cell's records and at most
QUERY_ROWS of its queries, whatever the size of the sides.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from pyspark import StorageLevel
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from privacy_eval.columns import INTERNAL_PREFIX
from privacy_eval.config import DistanceConfig
from privacy_eval.distance.kernel import (
    EUCLIDEAN,
    HOME_K,
    VISIT_K,
    as_matrix,
    cells_within,
    cloaking_in_cell,
    face_distances,
    kd_planes,
    leaf_regions,
    nearest,
    route_limit,
    tie_tolerance,
)

CELL, PART, TASK = INTERNAL_PREFIX + "cell", INTERNAL_PREFIX + "part", INTERNAL_PREFIX + "task"
ID = INTERNAL_PREFIX + "id"          # the query's identity (its row key)
OWN = INTERNAL_PREFIX + "own"        # the cell holding the query's own synthetic record (cloaking)
RADIUS = INTERNAL_PREFIX + "r"
_ALL = INTERNAL_PREFIX + "all"
# A query's result row after its first search (nearest neighbours), in CELL: final, or
# to be merged with the results of other cells.
DONE, MERGE = -1, -2
# Records of the indexed side per cell, by default.
CELL_RECORDS = DistanceConfig.cell_records
# Queries per task at most: a cell with more queries is searched in several parts.
QUERY_ROWS = 1_000_000
# The planes come from a sample of about SAMPLE_PER_CELL records per cell, and of at
# most SAMPLE_VALUES coordinates (80 MB), held by one Python task.
SAMPLE_PER_CELL = 128
SAMPLE_VALUES = 10_000_000
# At most 2^MAX_DEPTH cells: past it, cells hold more records than asked.
MAX_DEPTH = 16
# Levels of the planes placed by a nested CASE expression (`Cells.of`): 2^CASE_LEVELS - 1
# comparisons, compiled in a fraction of a second.
CASE_LEVELS = 5
_HASH_RANGE = 2**31
# A face's distance is computed to a relative error of about 1e-16, as a box's.
FACE_SLACK = 1e-12


@dataclass(frozen=True)
class Cells:
    """The indexed side's cells: the leaves of a complete k-d tree of `depth` levels.
    `dims` and `splits` are the planes of its inner nodes in heap order (entry 0 unused;
    `kernel.kd_planes`). `lo`, `hi` and `counts` describe every node, leaves at
    2^depth + cell: the exact bounding box of its records on the `axes` (the coordinates
    the planes cut; empty: lo +inf, hi -inf) and their number. A box on some of the
    coordinates is nearer to a point than the box on all of them, so routing by it is as
    exact, and costs the same in any dimension: on the other coordinates every cell
    spans about the whole range, and would prune next to nothing."""

    depth: int
    dims: tuple[int, ...]
    splits: tuple[float, ...]
    axes: tuple[int, ...]
    lo: np.ndarray  # nodes x axes
    hi: np.ndarray
    counts: np.ndarray
    # Per leaf, the part of space its planes give it on the axes (`kernel.leaf_regions`):
    # computed once where the cells are made, and shipped with them to every task.
    regions: tuple[np.ndarray, np.ndarray] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(
            self, "regions", leaf_regions(np.asarray(self.dims), np.asarray(self.splits), self.depth, self.axes))

    @property
    def n_cells(self) -> int:
        return 2**self.depth

    def within(
        self, points: np.ndarray, bound: np.ndarray, home: np.ndarray, p: float = EUCLIDEAN
    ) -> tuple[np.ndarray, np.ndarray]:
        """(point, cell) pairs: every non-empty cell other than the point's `home` (the
        cell the planes place it in) whose box lies within the point's bound in the metric
        `p` (`kernel.cells_within`); `points` hold every coordinate. Every other cell's box
        lies beyond a face of the home region, so a point whose bound stops short of those
        faces reaches none of them: only the others descend the tree of boxes (most
        points, in cells much wider than the bounds)."""
        on_axes = points[:, list(self.axes)]
        lo, hi = self.regions
        # The faces' distances are rounded as the boxes' are; FACE_SLACK keeps the skip on the safe side.
        rest = np.flatnonzero(~(face_distances(on_axes, lo[home], hi[home]) * (1.0 - FACE_SLACK) > route_limit(bound)))
        query, cell = cells_within(on_axes[rest], bound[rest], self.lo, self.hi, self.counts, self.depth, p)
        other = cell != home[rest][query]
        return rest[query[other]], cell[other]

    def of(self, coordinates: Sequence[Column]) -> Column:
        """The cell of a point (an int column): the planes followed from the root, a
        point going right when its coordinate is greater than the split value. The first
        CASE_LEVELS levels are one nested CASE expression, which Spark compiles; the
        levels below, if any, a loop expression, which it interprets record by record
        (about three times the cost a level) but which does not double with each level."""
        if self.depth == 0:
            return F.lit(0).cast("int")
        top = min(self.depth, CASE_LEVELS)

        def case(node: int, level: int) -> Column:
            if level == top:
                return F.lit(node)
            goes_right = coordinates[self.dims[node]] > F.lit(self.splits[node])
            return F.when(goes_right, case(2 * node + 1, level + 1)).otherwise(case(2 * node, level + 1))

        node = case(1, 0)
        if self.depth > top:
            point = F.array(*coordinates)
            dims = F.array(*(F.lit(d) for d in self.dims))
            splits = F.array(*(F.lit(v) for v in self.splits))

            def down(node: Column, _: Column) -> Column:
                return node * 2 + F.when(point[dims[node]] > splits[node], 1).otherwise(0)

            node = F.aggregate(F.sequence(F.lit(top + 1), F.lit(self.depth)), node, down)
        return (node - self.n_cells).cast("int")


@dataclass(frozen=True)
class SearchCost:
    """What a search cost: the indexed side's cells, and the mean number of cells a
    query was searched in."""

    cells: int
    cells_per_query: float


@dataclass(frozen=True)
class CutIndex:
    """The indexed side cut into cells: the `cells`; its `records` (CELL and the
    coordinates, with the side's other columns where `cut_together` placed them),
    persisted when there is more than one cell (`release` frees them; in one cell they
    read the side as given); and `homes`, per
    cell, how many queries it is the own cell of, or more (counted over the queries or a
    superset of them): it sizes the first pass's tasks, and an overcount only cuts a
    cell's queries into more parts."""

    cells: Cells
    records: DataFrame
    homes: np.ndarray

    def release(self) -> None:
        self.records.unpersist()


def cut_into_cells(
    index: DataFrame, names: Sequence[str], n: int, cell_records: int, queries: DataFrame, m: int
) -> CutIndex:
    """The indexed side (n records, coordinates `names`) cut into 2^depth cells, depth =
    ceil(log2(n / cell_records)) (at most MAX_DEPTH), by planes chosen on a sample of it;
    the `queries` (m records, or more) counted per home cell (`_cut`)."""
    return _cut(index, n, queries, m, names, cell_records, shared=False)[0]


def cut_together(
    a: DataFrame, n: int, b: DataFrame, m: int, names: Sequence[str], cell_records: int
) -> tuple[CutIndex, CutIndex]:
    """Two sides that are each searched for the other's queries (n and m records), cut
    by the same planes, chosen on a sample of both, into 2^depth cells, depth =
    ceil(log2(max(n, m) / cell_records)) (`_cut`): (a's cells, homes counting b's
    records; b's cells, homes counting a's). Each side's `records` keep all its columns
    with CELL, its cell in either search: the other search's queries, read with their
    home cell. One job places both sides, where two cuts would each count the other
    side's records anyway, and each record's cell is computed once. A cell then holds
    about `cell_records` of each side where the sides lie alike, and at most about twice
    that of one side where they lie apart."""
    return _cut(a, n, b, m, names, cell_records, shared=True)


def _cut(
    a: DataFrame, n: int, b: DataFrame, m: int, names: Sequence[str], cell_records: int, shared: bool
) -> tuple[CutIndex, CutIndex]:
    """Both sides cut by the planes chosen on a sample of `a` (of both when `shared`),
    each box exact: one job places the records in their cells (persisted: `a`'s, and
    `b`'s when `shared`; the searches read them from there) and takes each side's boxes
    and counts per cell."""
    size = max(n, m) if shared else n
    depth = 0 if size <= cell_records else min(MAX_DEPTH, math.ceil(math.log2(size / cell_records)))
    sampled = a.select(*names).unionByName(b.select(*names)) if shared else a.select(*names)
    dims, splits = _planes(sampled, names, n + m if shared else n, depth)
    axes = tuple(sorted({d for d, v in zip(dims[1:], splits[1:]) if math.isfinite(v)}))
    nodes, leaves = 2 ** (depth + 1), 2**depth
    boxes = [(np.full((nodes, len(axes)), np.inf), np.full((nodes, len(axes)), -np.inf),
              np.zeros(nodes, dtype=np.int64)) for _ in range(2)]
    if depth == 0:
        boxes[0][2][1], boxes[1][2][1] = n, m
        cells = [Cells(0, dims, splits, axes, *box) for box in boxes]
        placed = [frame.select(F.lit(0).cast("int").alias(CELL), *(frame.columns if shared else names))
                  for frame in (a, b)]
        return CutIndex(cells[0], placed[0], np.array([m])), CutIndex(cells[1], placed[1], np.array([n]))
    planes = Cells(depth, dims, splits, axes, *boxes[0])  # boxes filled below
    cell = planes.of([F.col(c) for c in names]).alias(CELL)
    placed = [frame.select(cell, *(frame.columns if shared else names)) for frame in (a, b)]
    kept = placed if shared else placed[:1]
    for frame in kept:
        frame.persist(StorageLevel.MEMORY_AND_DISK)
    side = INTERNAL_PREFIX + "side"
    both = placed[0].select(F.lit(0).alias(side), CELL, *names).unionByName(
        placed[1].select(F.lit(1).alias(side), CELL, *names))
    try:
        rows = both.groupBy(side, CELL).agg(
            F.count(F.lit(1)).alias("n"),
            *(F.min(names[j]).alias(f"lo{j}") for j in axes),
            *(F.max(names[j]).alias(f"hi{j}") for j in axes),
        ).collect()
    except BaseException:
        for frame in kept:
            frame.unpersist()
        raise
    for row in rows:
        lo, hi, counts = boxes[int(row[side])]
        leaf = leaves + int(row[CELL])
        counts[leaf] = int(row["n"])
        lo[leaf] = [float(row[f"lo{j}"]) for j in axes]
        hi[leaf] = [float(row[f"hi{j}"]) for j in axes]
    for lo, hi, counts in boxes:
        for node in range(leaves - 1, 0, -1):  # a node's box holds its children's
            lo[node] = np.minimum(lo[2 * node], lo[2 * node + 1])
            hi[node] = np.maximum(hi[2 * node], hi[2 * node + 1])
            counts[node] = counts[2 * node] + counts[2 * node + 1]
    cells = [Cells(depth, dims, splits, axes, *box) for box in boxes]
    return (CutIndex(cells[0], placed[0], boxes[1][2][leaves:].copy()),
            CutIndex(cells[1], placed[1], boxes[0][2][leaves:].copy()))


def home_cells(queries: DataFrame, cells: Cells, names: Sequence[str]) -> Column:
    """The queries' home cells: their CELL column where they carry one (records placed by
    `cut_together`, whose planes every search of that cut shares), else placed by `cells`."""
    return F.col(CELL) if CELL in queries.columns else cells.of([F.col(c) for c in names])


def _planes(index: DataFrame, names: Sequence[str], n: int, depth: int) -> tuple[tuple[int, ...], tuple[float, ...]]:
    """The planes of `depth` levels, from the records whose coordinates hash below a
    threshold: the same sample under any partitioning and row order. Only the planes
    (split values: medians of sampled coordinates) reach the driver."""
    inner = 2**depth
    if depth == 0:
        return (0,), (math.inf,)
    size = min(n, SAMPLE_PER_CELL * inner, max(1, SAMPLE_VALUES // max(1, len(names))))
    threshold = min(_HASH_RANGE, math.ceil(size / n * _HASH_RANGE))
    sampled = index.select(*names).filter(F.pmod(F.xxhash64(*names, F.lit("sample")), F.lit(_HASH_RANGE)) < threshold)

    def build(sample: pd.DataFrame) -> pd.DataFrame:
        dims, splits = kd_planes(as_matrix(sample, names), depth)
        return pd.DataFrame({"node": np.arange(1, inner), "dim": dims[1:], "split": splits[1:]})

    rows = sampled.groupBy(F.lit(0).alias("g")).applyInPandas(build, "node int, dim int, split double").collect()
    dims, splits = [0] * inner, [math.inf] * inner  # no sample (it can be empty): one cell in effect
    for row in rows:
        dims[row["node"]], splits[row["node"]] = int(row["dim"]), float(row["split"])
    return tuple(dims), tuple(splits)


def nearest_distances(
    index: CutIndex, queries: DataFrame, names: Sequence[str], n_nearest: int, tasks: int, m: int,
    p: float = EUCLIDEAN,
) -> tuple[DataFrame, SearchCost]:
    """(ID, d1, ..., dn) per query: its `n_nearest` smallest distances, in the metric `p`
    (kernel.EUCLIDEAN or CITY_BLOCK), to the indexed records (inf when there are fewer),
    persisted; and what the search cost. `queries` (m records) hold ID and the
    coordinates `names` (and CELL: `home_cells`). A face of a cell is as far in either
    metric, so the cells' routing holds for both."""
    cells = index.cells
    outs = [f"d{j + 1}" for j in range(n_nearest)]

    def first_search(idx: pd.DataFrame, qry: pd.DataFrame) -> pd.DataFrame:
        """The nearest in the query's own cell: its result row (CELL = DONE, or MERGE
        when other cells lie within the n-th nearest distance) and a row per such cell."""
        points = as_matrix(qry, names)
        d = nearest(as_matrix(idx, names), points, n_nearest, p)
        ids = qry[ID].to_numpy()
        if not cells.depth:
            return pd.DataFrame({ID: ids, **{o: d[:, j] for j, o in enumerate(outs)}})
        query, cell = cells.within(points, d[:, -1], qry[CELL].to_numpy(), p)
        return _first_pass_rows({ID: ids, **{o: d[:, j] for j, o in enumerate(outs)}}, query, cell,
                                {ID: ids, **{c: points[:, j] for j, c in enumerate(names)}})

    def later_search(idx: pd.DataFrame, qry: pd.DataFrame) -> pd.DataFrame:
        d = nearest(as_matrix(idx, names), as_matrix(qry, names), n_nearest, p)
        return pd.DataFrame({ID: qry[ID].to_numpy(), **{o: d[:, j] for j, o in enumerate(outs)}})

    found = {o: "double" for o in outs}
    at_home = queries.select(ID, *names, home_cells(queries, cells, names).alias(CELL))
    carried = [ID, CELL, *names] if cells.depth else [ID]
    searched = _searched(index, names, at_home, index.homes, tasks, first_search,
                         _schema(queries, carried, found))
    if not cells.depth:
        return _persisted(searched)[0], SearchCost(1, 1.0)
    first, routes = _persisted_routes(searched, cells)
    merged = F.array_sort(F.flatten(F.collect_list(F.array(*(F.col(o) for o in outs)))))

    def nearest_over_cells(answers: DataFrame) -> DataFrame:
        return answers.groupBy(ID).agg(merged.alias(_ALL)).select(
            ID, *(F.col(_ALL)[j].alias(o) for j, o in enumerate(outs))
        )

    result, _ = _second_pass(index, names, first, routes, [ID, *names], tasks, later_search,
                             _schema(queries, [ID], found), outs, nearest_over_cells)
    return result, SearchCost(cells.n_cells, (m + int(routes.sum())) / max(1, m))


def cloaking_counts(
    index: CutIndex, queries: DataFrame, names: Sequence[str], cap: int, tasks: int
) -> tuple[DataFrame, SearchCost]:
    """(ID, hidden, others) per query, persisted, and what the search cost: whether a
    synthetic record other than its own is closer than its radius RADIUS (5.2), and how
    many other synthetic records are closer than or tied with it (LC_i). `queries` hold
    ID, RADIUS, OWN (the cell of its own synthetic record) and the coordinates (and CELL:
    `home_cells`). The own
    record is tied with the radius by construction (RADIUS is its distance), so its cell
    counts one fewer. min(`others`, `cap`) is exact, and `others` itself whenever
    `hidden` is false.

    In cells, a first pass counts in each query's home cell; a query that cell settles
    (see `first_count`) is not sent further, so a record whose ball holds many records
    pays for them in one cell, not in every cell its ball reaches."""
    cells = index.cells

    def counted(idx: pd.DataFrame, qry: pd.DataFrame, first_k: int) -> pd.DataFrame:
        # The own record and up to cap + 1 others: enough to tell whether a cell reaches the cap.
        closer, either = cloaking_in_cell(
            as_matrix(idx, names), as_matrix(qry, names), qry[RADIUS].to_numpy(dtype=float), cap + 2, first_k
        )
        own = qry[OWN].to_numpy() == qry[CELL].to_numpy()
        if np.any(own & (either < 1)):  # impossible unless the coordinates changed between passes
            raise RuntimeError("distance: a record's own synthetic record was not found at its own distance")
        return pd.DataFrame({ID: qry[ID].to_numpy(), "hidden": closer, "others": either - own})

    # Two arguments each: a cogroup's function of three is handed the group's key first.
    def count(idx: pd.DataFrame, qry: pd.DataFrame) -> pd.DataFrame:
        return counted(idx, qry, HOME_K)

    def visit(idx: pd.DataFrame, qry: pd.DataFrame) -> pd.DataFrame:
        """The counts of balls that reach into the cell from another."""
        return counted(idx, qry, VISIT_K)

    def first_count(idx: pd.DataFrame, qry: pd.DataFrame) -> pd.DataFrame:
        """The counts in the query's home cell (the one the planes place it in): final
        (CELL = DONE) when that cell alone settles both figures — a record closer than the
        radius, and at least `cap` others, so that LC_i is the cap whatever the other
        cells hold — or when no other cell is within the ball; otherwise (MERGE) to be
        added to the counts of every other cell within the ball, to which the query is
        routed (rows with CELL >= 0), and always to its own record's cell."""
        found = count(idx, qry)
        hidden, others = found["hidden"].to_numpy(), found["others"].to_numpy()
        points, home = as_matrix(qry, names), qry[CELL].to_numpy()
        open_ = np.flatnonzero(~(hidden & (others >= cap)))
        query, cell = ball_routes(points[open_], qry[RADIUS].to_numpy(dtype=float)[open_], qry[OWN].to_numpy()[open_],
                                  home[open_])
        query = open_[query]
        carried = {c: qry[c].to_numpy() for c in (ID, RADIUS, OWN)}
        # Every column in both kinds of row: NaN in `others` would make it a float column.
        return _first_pass_rows(
            {**carried, **{c: np.full(len(qry), np.nan) for c in names}, "hidden": hidden, "others": others},
            query, cell,
            {**carried, **{c: points[:, j] for j, c in enumerate(names)},
             "hidden": np.zeros(len(qry), dtype=bool), "others": np.zeros(len(qry), dtype=others.dtype)},
        )

    def ball_routes(
        points: np.ndarray, r: np.ndarray, own: np.ndarray, home: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """(query, cell) pairs: every cell but the home one within the query's ball, and its
        own record's cell always (when not home): that record lies on the ball's boundary,
        which rounding must not lose."""
        query, cell = cells.within(points, r + tie_tolerance(r), home)  # the kernel's ball, to the bit
        missing = np.setdiff1d(np.flatnonzero(own != home), query[cell == own[query]])
        return np.concatenate([query, missing]), np.concatenate([cell, own[missing]])

    schema = _schema(queries, [ID], {"hidden": "boolean", "others": "long"})
    at_home = queries.withColumn(CELL, home_cells(queries, cells, names))
    if cells.depth == 0:
        found, _ = _persisted(_searched(index, names, at_home, index.homes, tasks, count, schema))
        return found, SearchCost(1, 1.0)
    first_schema = _schema(queries, [ID, RADIUS, OWN, CELL, *names], {"hidden": "boolean", "others": "long"})
    first, routes = _persisted_routes(
        _searched(index, names, at_home, index.homes, tasks, first_count, first_schema), cells)

    def summed_over_cells(answers: DataFrame) -> DataFrame:
        return answers.groupBy(ID).agg(F.bool_or("hidden").alias("hidden"), F.sum("others").alias("others"))

    result, n = _second_pass(index, names, first, routes, [ID, RADIUS, OWN, *names], tasks, visit, schema,
                             ["hidden", "others"], summed_over_cells)
    return result, SearchCost(cells.n_cells, (n + int(routes.sum())) / max(1, n))


def _first_pass_rows(
    answers: dict[str, np.ndarray], query: np.ndarray, cell: np.ndarray, carried: dict[str, np.ndarray]
) -> pd.DataFrame:
    """A first pass's rows: one per query with its `answers` in its own cell (CELL = DONE,
    or MERGE when it goes on to other cells), then one per (query, cell) pair it goes on
    to, with the query's `carried` columns and CELL = that cell."""
    status = np.full(len(next(iter(answers.values()))), DONE, dtype=np.int32)
    status[query] = MERGE
    results = pd.DataFrame({**answers, CELL: status})
    routes = pd.DataFrame({**{c: v[query] for c, v in carried.items()}, CELL: cell.astype(np.int32)})
    return pd.concat([results, routes], ignore_index=True)


def _second_pass(
    index: CutIndex, names: Sequence[str], first: DataFrame, routes: np.ndarray,
    carried: Sequence[str], tasks: int, fn: Callable[[pd.DataFrame, pd.DataFrame], pd.DataFrame], schema: str,
    outs: Sequence[str], over_cells: Callable[[DataFrame], DataFrame],
) -> tuple[DataFrame, int]:
    """The queries a first pass (`_first_pass_rows`, persisted; released here) sends on
    (`routes`: how many to each cell), searched by `fn` in their other cells; their
    answers there and in their own cell (`outs`) combined per query by `over_cells`, with
    the answers the first pass settled: (the result, persisted; its rows).

    The result is cached in max(`tasks`, queries / QUERY_ROWS) partitions, as the one-cell
    search's parts (one per core, at most about QUERY_ROWS queries each), not in the union's
    one per cell and more: the figures read it in several small jobs, each paying per partition."""
    try:
        routed = first.filter(F.col(CELL) >= 0).select(*carried, CELL)
        later = _searched(index, names, routed, routes, tasks, fn, schema)
        to_merge = first.filter(F.col(CELL) == MERGE).select(ID, *outs).unionByName(later)
        merged = first.filter(F.col(CELL) == DONE).select(ID, *outs).unionByName(over_cells(to_merge))
        parts = max(tasks, math.ceil(int(index.homes.sum()) / QUERY_ROWS))
        result, n = _persisted(merged.coalesce(parts))
    finally:
        first.unpersist()
    return result, n


def _searched(
    index: CutIndex, names: Sequence[str], routed: DataFrame, route_counts: np.ndarray, tasks: int,
    fn: Callable[[pd.DataFrame, pd.DataFrame], pd.DataFrame], schema: str,
) -> DataFrame:
    """`fn(cell's records, its queries)` per cell and part: the queries (CELL = the cell
    to search) cut into parts of at most QUERY_ROWS, and into enough parts overall to
    keep `tasks` cores busy; each part meets a copy of its cell's records (`index.records`:
    CELL and the coordinates).

    Each part is a task of its own, the largest first (rows handled: queries and
    records): hashed into the shuffle's partitions, a few large parts would share a task
    while other cores wait, and the last large part to start sets the stage's end. Both
    sides are partitioned by task (`_by_task`), so the cogroup shuffles nothing more."""
    total = int(route_counts.sum())
    per_part = max(1, min(QUERY_ROWS, math.ceil(total / max(1, tasks))))
    n_parts = -(-route_counts // per_part)
    cell, parts = F.col(CELL), F.array(*(F.lit(int(p)) for p in n_parts))
    task, n_tasks = _largest_first(n_parts, route_counts, index.cells.counts[index.cells.n_cells:])
    idx = index.records.filter(parts[cell] > 0).select(
        CELL, F.explode(F.sequence(F.lit(0), parts[cell] - 1)).alias(PART), *names).withColumn(TASK, task)
    qry = routed.withColumn(PART, F.pmod(F.xxhash64(F.col(ID), F.lit("part")), parts[cell]).cast("int")).withColumn(
        TASK, task)
    return (_by_task(idx, n_tasks).groupBy(TASK)
            .cogroup(_by_task(qry, n_tasks).groupBy(TASK))
            .applyInPandas(fn, schema))


# Spark 4.1 on: a row's partition can be given directly (`repartitionById`).
DIRECT_PARTITIONS = hasattr(DataFrame, "repartitionById")


def _by_task(frame: DataFrame, n_tasks: int) -> DataFrame:
    """`frame` in `n_tasks` partitions, partition i holding task i; before Spark 4.1, the
    tasks hashed into them (some share a partition: correct, less evenly spread)."""
    return frame.repartitionById(n_tasks, TASK) if DIRECT_PARTITIONS else frame.repartition(n_tasks, TASK)


def _largest_first(n_parts: np.ndarray, queries: np.ndarray, records: np.ndarray) -> tuple[Column, int]:
    """(the task of a row, as a column of CELL and PART; the number of tasks): a task per
    part of a cell (`n_parts`, `queries` and `records` per cell), numbered from the part
    that handles the most rows down (its share of the cell's queries, and a copy of the
    cell's records)."""
    cell_of = np.repeat(np.arange(len(n_parts)), n_parts)  # parts numbered cell by cell
    if not len(cell_of):
        return F.lit(0), 1
    task = np.empty(len(cell_of), dtype=np.int64)
    rows = queries[cell_of] / n_parts[cell_of] + records[cell_of]
    task[np.argsort(-rows, kind="stable")] = np.arange(len(cell_of))
    first = np.concatenate([[0], np.cumsum(n_parts)[:-1]])
    part = F.array(*(F.lit(int(f)) for f in first))[F.col(CELL)] + F.col(PART)
    return F.array(*(F.lit(int(t)) for t in task))[part].cast("int"), len(cell_of)


def _route_counts(routed: DataFrame, cells: Cells) -> np.ndarray:
    """Queries per cell (CELL: the cell to search; the rows with CELL < 0 are not routes)."""
    counts = np.zeros(cells.n_cells, dtype=np.int64)
    for row in routed.groupBy(CELL).count().collect():
        if row[CELL] >= 0:
            counts[int(row[CELL])] = int(row["count"])
    return counts


def _persisted_routes(frame: DataFrame, cells: Cells) -> tuple[DataFrame, np.ndarray]:
    """(`frame` cached and computed, its route counts), in one job."""
    return _persisted(frame, lambda cached: _route_counts(cached, cells))


def _persisted(frame: DataFrame, measure: Callable[[DataFrame], Any] = DataFrame.count) -> tuple[DataFrame, Any]:
    """(`frame` cached and computed, `measure` of it: by default its row count), the
    action that measures it computing the cache; its cache released if that fails."""
    frame = frame.persist(StorageLevel.MEMORY_AND_DISK)
    try:
        return frame, measure(frame)
    except BaseException:
        frame.unpersist()
        raise


def _schema(frame: DataFrame, carried: Sequence[str], added: dict[str, str]) -> str:
    """A DDL schema: the `carried` columns with their types in `frame` (CELL an int,
    any other name not in `frame` a coordinate: double), then `added`."""
    types: dict[str, Any] = {f.name: f.dataType.simpleString() for f in frame.schema.fields}
    types.setdefault(CELL, "int")
    return ", ".join([f"{c} {types.get(c, 'double')}" for c in carried] + [f"{c} {t}" for c, t in added.items()])
