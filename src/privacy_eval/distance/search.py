"""The exact searches of the distance metrics, on Spark (docs/operations.md, "Distance
metrics: routes and limits").

Every search asks, for each record of a *query* side, about its neighbours on an
*indexed* side. The indexed side is cut into P chunks of at most `chunk_rows` records,
the query side into Q groups; task (p, q) builds a k-d tree over chunk p and answers
every query of group q against it. Each query thus meets every chunk exactly once, so
the answer is exact by construction, with no argument about records near a partition
boundary: the nearest two over the chunks are the nearest two overall, and counts add
up. Rows shuffled: n·Q + m·P; when the indexed side fits one chunk (P = 1, up to
`chunk_rows` records) the queries are not copied at all and only the index is, once
per group of queries.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from privacy_eval.distance.kernel import as_matrix, cloaking_in_chunk, coordinate_names, nearest

P, Q = "__p", "__q"
ID = "__id"          # the query's identity (its row key)
OWN = "__own"        # the chunk holding the query's own synthetic record (cloaking)
RADIUS = "__r"
# Index records per k-d tree. One tree answers a query for about what a tree of a fifth
# of the records does (the cost is the tree's depth and the ball's boundary), so chunks
# are as large as a Python worker holds comfortably: 1e7 points of 5 coordinates are
# 400 MB, about 2 GB with the tree and the group's frame (docs/operations.md).
CHUNK_ROWS = 10_000_000
QUERY_ROWS = 1_000_000


@dataclass(frozen=True)
class Grid:
    chunks: int   # P
    groups: int   # Q

    @classmethod
    def sized(cls, n_index: int, n_query: int, tasks: int, chunk_rows: int | None = None) -> Grid:
        chunks = max(1, math.ceil(n_index / (chunk_rows or CHUNK_ROWS)))
        groups = max(1, min(max(tasks, math.ceil(n_query / QUERY_ROWS)), max(1, n_query)))
        return cls(chunks, groups)


# Both sides' group keys must have one type: cogroup does not unify them, and an int
# and a long of equal value hash to different partitions (the groups would never meet).
def chunk_of(key: Column, chunks: int) -> Column:
    return (F.pmod(F.xxhash64(key, F.lit("chunk")), F.lit(chunks)) if chunks > 1 else F.lit(0)).cast("int")


def _group_of(key: Column, groups: int) -> Column:
    return (F.pmod(F.xxhash64(key, F.lit("group")), F.lit(groups)) if groups > 1 else F.lit(0)).cast("int")


def _gridded(
    index: DataFrame, queries: DataFrame, grid: Grid, k: int, index_chunk: Column, query_cols: list[str],
    fn: Callable[[pd.DataFrame, pd.DataFrame], pd.DataFrame], schema: str,
) -> DataFrame:
    names = coordinate_names(k)
    every_group = F.explode(F.sequence(F.lit(0), F.lit(grid.groups - 1)))  # ints, like chunk_of
    every_chunk = F.explode(F.sequence(F.lit(0), F.lit(grid.chunks - 1)))
    idx = index.select(index_chunk.alias(P), every_group.alias(Q), *names)
    qry = queries.select(every_chunk.alias(P), _group_of(F.col(ID), grid.groups).alias(Q), *query_cols, *names)
    return idx.groupBy(P, Q).cogroup(qry.groupBy(P, Q)).applyInPandas(fn, schema)


def nearest_distances(index: DataFrame, queries: DataFrame, k: int, n_nearest: int, grid: Grid) -> DataFrame:
    """(ID, d1[, d2]) per query: its `n_nearest` (1 or 2) smallest distances to the
    indexed records (inf when there are fewer). `index` and `queries` hold the
    coordinates (`__c0`...), `queries` also ID."""
    names = coordinate_names(k)
    outs = [f"d{j + 1}" for j in range(n_nearest)]

    def search(idx: pd.DataFrame, qry: pd.DataFrame) -> pd.DataFrame:
        d = nearest(as_matrix(idx, names), as_matrix(qry, names), n_nearest)
        return pd.DataFrame({ID: qry[ID].to_numpy(), **{o: d[:, j] for j, o in enumerate(outs)}})

    schema = f"{ID} {_id_type(queries)}, " + ", ".join(f"{o} double" for o in outs)
    index_chunk = chunk_of(F.xxhash64(*(F.col(c) for c in names)), grid.chunks)
    found = _gridded(index, queries, grid, k, index_chunk, [ID], search, schema)
    if grid.chunks == 1:
        return found
    # The nearest over the chunks: the smallest n_nearest of every chunk's candidates.
    merged = F.array_sort(F.flatten(F.collect_list(F.array(*(F.col(o) for o in outs)))))
    return found.groupBy(ID).agg(merged.alias("__all")).select(
        ID, *(F.col("__all")[j].alias(o) for j, o in enumerate(outs))
    )


def cloaking_counts(index: DataFrame, queries: DataFrame, k: int, grid: Grid, cap: int) -> DataFrame:
    """(ID, hidden, others) per query: whether a synthetic record other than its own is
    closer than its radius RADIUS (5.2), and how many other synthetic records are closer
    than or tied with it (LC_i). `index` holds ID and the coordinates; `queries` ID,
    RADIUS and the coordinates. The own record is tied with the radius by construction
    (RADIUS is its distance), so the chunk that holds it (OWN) counts one fewer.
    `others` is exact up to `cap` and at least `cap` + 1 above it, and exact whenever
    `hidden` is false."""
    names = coordinate_names(k)

    def count(idx: pd.DataFrame, qry: pd.DataFrame) -> pd.DataFrame:
        # cap + 1 others, and the own record: a count past the cap is told from one at it.
        closer, either = cloaking_in_chunk(
            as_matrix(idx, names), as_matrix(qry, names), qry[RADIUS].to_numpy(dtype=float), cap + 2
        )
        own = qry[OWN].to_numpy() == qry[P].to_numpy()
        if np.any(own & (either < 1)):  # impossible unless the coordinates changed between passes
            raise RuntimeError("distance: a record's own synthetic record was not found at its own distance")
        return pd.DataFrame({ID: qry[ID].to_numpy(), "hidden": closer, "others": either - own})

    schema = f"{ID} {_id_type(queries)}, hidden boolean, others long"
    found = _gridded(index, queries, grid, k, chunk_of(F.col(ID), grid.chunks), [ID, RADIUS, OWN], count, schema)
    if grid.chunks == 1:
        return found
    return found.groupBy(ID).agg(F.bool_or("hidden").alias("hidden"), F.sum("others").alias("others"))


def with_own_chunk(queries: DataFrame, grid: Grid) -> DataFrame:
    return queries.withColumn(OWN, chunk_of(F.col(ID), grid.chunks))


def _id_type(frame: DataFrame) -> str:
    return frame.schema[ID].dataType.simpleString()
