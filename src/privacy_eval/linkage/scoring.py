"""The scoring pass: both sides stacked and sorted by block, streamed through
``mapInArrow`` one (sub-)block at a time, each block scored by the kernel and reduced
to histograms on the worker; the driver collects a few hundred summed rows.

This module is imported by the Spark workers (the functions shipped to them live here
and in :mod:`privacy_eval.linkage.kernel`): keep it free of driver-only imports.

See docs/metrics.md, Linkage attack: candidates and blocking; scores; per-record
reduction and risk.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from privacy_eval.frames import persist_aggregate, shuffle_partitions, stacked_sides
from privacy_eval.linkage import blocking
from privacy_eval.linkage import names as N
from privacy_eval.linkage.blocking import BlockFigures
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
from privacy_eval.linkage.kernel.weighted import (
    max_abs_diff,
    min_abs_diff_sorted,
    weighted_scaling,
)
from privacy_eval.linkage.kernel.whitening import Whitening

__all__ = ["Scored", "map_blocks", "score_blocks", "stacked_blocks"]

_HistPart = dict[str, np.ndarray]  # one histogram's columns of SCORE_SCHEMA


@dataclass(frozen=True)
class BlockSide:
    """One side of a (sub-)block as arrays: row keys and targets (records x columns)."""

    ids: np.ndarray
    x: np.ndarray

    def __len__(self) -> int:
        return len(self.ids)


#: A per-block function: (originals, synthetic records, candidate pairs of the whole
#: block) -> output columns.
BlockFn = Callable[[BlockSide, BlockSide, float], dict[str, np.ndarray]]
#: Output rows a task buffers before handing them to Spark.
_FLUSH_ROWS = 1 << 16


# --------------------------------------------------------------------------
# one pass per block
# --------------------------------------------------------------------------


def stacked_blocks(
    orig: DataFrame, syn: DataFrame, tcols: Sequence[str], tasks: int, split: bool, check: bool = False
) -> DataFrame:
    """Both sides in one frame, the rows of each (block, sub-block) next to each other
    in one partition; with ``split``, the sides come from :func:`blocking.salted`.

    One shuffle and a sort, then :func:`map_blocks` streams the rows: a task holds one
    (sub-)block at a time. Measured against ``cogroup(...).applyInPandas``, which
    shuffles, sorts and serialises the two sides separately: 3.4 s instead of 4.7 s for
    scoring 1e6 records per side. Unless some block is split, the rows are sorted by
    the block id alone, one 64-bit key that Spark radix-sorts (a sort by block,
    sub-block and side took a comparison sort, 0.5 s instead of 0.2 s on 1.85e6 rows),
    and the constant sub-block and pair count are neither shuffled nor sent to Python.
    With ``check`` (a first pass) the check hash goes along, to find ids that two blocks
    share.
    The partition count is explicit because adaptive execution would coalesce the
    shuffle to partitions of equal bytes (2-3 on two cores at 1e6 rows), while the cost
    of scoring a block grows faster than its size: a few uneven tasks left a core idle
    for most of the stage.
    """
    if not split:
        return (
            stacked_sides(orig, syn, [N.BLOCK_ID, *([N.CHECK_HASH] if check else []), N.KEY, *tcols], N.SIDE)
            .repartition(tasks, N.BLOCK_ID)
            .sortWithinPartitions(N.BLOCK_ID)
        )
    o = orig.withColumn(N.BLOCK_PAIRS, F.lit(None).cast("double"))
    return (
        stacked_sides(o, syn, [N.BLOCK_ID, N.SALT, N.KEY, *tcols, N.BLOCK_PAIRS], N.SIDE)
        .repartition(tasks, N.BLOCK_ID, N.SALT)
        .sortWithinPartitions(N.BLOCK_ID, N.SALT)
    )


def map_blocks(
    blocks: DataFrame,
    fn: BlockFn,
    schema: str,
    tcols: Sequence[str],
    integral_key: bool,
    split_rows: int | None = None,
) -> DataFrame:
    """``fn`` applied to every (block, sub-block) of :func:`stacked_blocks` holding a
    synthetic record, its outputs as rows of ``schema`` plus the meta columns
    (``names.META_SCHEMA``, null on these rows).

    With ``split_rows`` this is a first pass over unsplit blocks, which does the work a
    separate pass over the data did before (at 1e6 records per side it cost 0.9 s of a
    session's first run of 6.8 s, medians of three): per block it adds one meta row with
    the block's id and sizes, from which :func:`blocking.figure_aggregates` computes the
    block figures. A block with more than ``split_rows`` synthetic records is not
    buffered and not scored: its meta row marks it big, for a second pass over it, split
    (:func:`blocking.big_blocks`, :func:`blocking.salted`). An id whose rows carry
    different check hashes belongs to two blocks: it is not scored either, and its meta
    row tells the caller to hash again with another seed.
    """
    from pyspark.sql.pandas.types import to_arrow_schema

    out_schema = to_arrow_schema(T._parse_datatype_string(f"{schema}, {N.META_SCHEMA}"))
    names = list(tcols)

    def run(batches: Iterator[Any]) -> Iterator[Any]:
        # _FLUSH_ROWS read here, on the driver, travels with the closure.
        stream = _BlockStream(fn, out_schema, names, integral_key, split_rows, _FLUSH_ROWS)
        for batch in batches:
            yield from stream.feed(batch)
        yield from stream.close()

    return blocks.mapInArrow(run, f"{schema}, {N.META_SCHEMA}")


@dataclass
class _Run:
    """What the rows of one (sub-)block have shown so far, while :func:`map_blocks`
    streams them: its sizes, the first check hash, whether another one came (two
    blocks share the id) and whether it is too big for the first pass."""

    key: tuple[int, int]  # (block id, sub-block)
    n_o: int = 0
    n_s: int = 0
    check: int | None = None
    shared: bool = False
    big: bool = False


class _BlockStream:
    """One task of :func:`map_blocks`: cuts the sorted Arrow batches into (sub-)blocks,
    buffers one block's slices at a time, scores it, and hands out the outputs and meta
    rows every ``flush_rows`` output rows."""

    _META_NAMES = (N.META, N.M_BLOCK, N.M_NO, N.M_NS)

    def __init__(
        self, fn: BlockFn, out_schema: Any, names: list[str], integral_key: bool, split_rows: int | None, flush_rows: int
    ):
        import pyarrow as pa

        self.pa = pa
        self.fn, self.out_schema, self.names, self.integral_key = fn, out_schema, names, integral_key
        self.split_rows, self.flush_rows = split_rows, flush_rows
        self.first_pass = split_rows is not None
        self.out: list[dict[str, np.ndarray]] = []
        self.out_rows = 0
        self.meta: list[tuple[int, int, int, int]] = []
        self.pending: list[Any] = []  # slices of the current (sub-)block
        self.group: _Run | None = None

    def feed(self, batch: Any) -> Iterator[Any]:
        bid = batch.column(N.BLOCK_ID).to_numpy()
        salt = batch.column(N.SALT).to_numpy() if N.SALT in batch.schema.names else np.zeros_like(bid)
        synthetic = batch.column(N.SIDE).to_numpy()
        check = batch.column(N.CHECK_HASH).to_numpy() if self.first_pass else None
        cuts = np.flatnonzero((bid[1:] != bid[:-1]) | (salt[1:] != salt[:-1])) + 1
        for start, stop in zip([0, *cuts.tolist()], [*cuts.tolist(), len(bid)]):
            key = (int(bid[start]), int(salt[start]))
            if self.group is None or key != self.group.key:
                if self.group is not None:
                    self._finish(self.group)
                    self.pending = []
                    if self.out_rows >= self.flush_rows:
                        yield from self._flushed()
                self.group = _Run(key)
            group = self.group
            n_s = int(synthetic[start:stop].sum())
            group.n_s += n_s
            group.n_o += stop - start - n_s
            if self.first_pass:
                assert check is not None and self.split_rows is not None
                if group.check is None:
                    group.check = int(check[start])
                group.shared = group.shared or bool((check[start:stop] != group.check).any())
                group.big = group.n_s > self.split_rows
            if group.shared or group.big:
                self.pending = []  # not scored: nothing to keep
            else:
                self.pending.append(batch.slice(start, stop - start))

    def close(self) -> Iterator[Any]:
        if self.group is not None:
            self._finish(self.group)
        yield from self._flushed()

    def _finish(self, g: _Run) -> None:
        if g.shared:
            self.meta.append((N.SHARED_ID, g.key[0], g.n_o, g.n_s))
            return
        if not g.n_s:
            return  # nobody attacks these originals
        if g.big:
            self.meta.append((N.BIG_BLOCK, g.key[0], g.n_o, g.n_s))
            return
        o, s, bp = block_sides(self.pa.Table.from_batches(self.pending), self.names, self.integral_key)
        cols = self.fn(o, s, float(len(o)) * float(len(s)) if bp is None else float(bp))
        self.out.append(cols)
        self.out_rows += len(next(iter(cols.values()), ()))
        if self.first_pass:
            self.meta.append((N.SCORED_BLOCK, g.key[0], g.n_o, g.n_s))

    def _flushed(self) -> Iterator[Any]:
        pa, out_schema, meta_names = self.pa, self.out_schema, self._META_NAMES
        if self.out:
            yield pa.RecordBatch.from_arrays([
                pa.nulls(self.out_rows, f.type) if f.name in meta_names
                else pa.array(np.concatenate([c[f.name] for c in self.out]), type=f.type)
                for f in out_schema
            ], schema=out_schema)
        if self.meta:
            columns = dict(zip(meta_names, zip(*self.meta)))
            yield pa.RecordBatch.from_arrays([
                pa.array(columns[f.name], type=f.type) if f.name in meta_names else pa.nulls(len(self.meta), f.type)
                for f in out_schema
            ], schema=out_schema)
        self.out, self.out_rows, self.meta = [], 0, []


def block_sides(table: Any, names: Sequence[str], integral_key: bool) -> tuple[BlockSide, BlockSide, float | None]:
    """A block's originals, its synthetic records, and its pairs if it was split."""
    synthetic = table.column(N.SIDE).to_numpy().astype(bool)
    ids = table.column(N.KEY).to_numpy()
    ids = ids.astype(np.int64) if integral_key else ids.astype(object)
    x = np.column_stack([table.column(c).to_numpy() for c in names]).astype(np.float64, copy=False)
    x = x.reshape(len(ids), len(names))
    first_s = int(np.argmax(synthetic))
    split = N.BLOCK_PAIRS in table.column_names and synthetic[first_s]
    pairs = table.column(N.BLOCK_PAIRS)[first_s].as_py() if split else None
    return BlockSide(ids[~synthetic], x[~synthetic]), BlockSide(ids[synthetic], x[synthetic]), pairs


# --------------------------------------------------------------------------
# the weighted method's ranges
# --------------------------------------------------------------------------


def weighted_ranges(
    blocks: DataFrame, tcols: Sequence[str], integral_key: bool, split_rows: int | None = None
) -> tuple[np.ndarray, np.ndarray, BlockFigures | None]:
    """Per target, the smallest and largest |x - y| over the candidate pairs of
    ``blocks`` (NaN where there is none), for ``weighted_scaling``; with ``split_rows``
    a first pass (:func:`map_blocks`), which also gives the block figures."""
    p = len(tcols)
    columns = [f"lo{j}" for j in range(p)] + [f"hi{j}" for j in range(p)]

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

    first = split_rows is not None
    row = (
        map_blocks(blocks, ranges, ", ".join(f"{c} double" for c in columns), tcols, integral_key, split_rows)
        .agg(
            *[F.min(f"lo{j}").alias(f"lo{j}") for j in range(p)],
            *[F.max(f"hi{j}").alias(f"hi{j}") for j in range(p)],
            *(blocking.figure_aggregates() if first else []),
        )
        .collect()[0]
    )
    lo = np.array([row[f"lo{j}"] for j in range(p)], dtype=np.float64)
    hi = np.array([row[f"hi{j}"] for j in range(p)], dtype=np.float64)
    return lo, hi, BlockFigures.from_row(row) if first else None


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
    # histogram took a third of the scoring time.
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


# --------------------------------------------------------------------------
# the passes, and what the driver collects
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class Scored:
    """The summed scoring output and what the driver collected of it.

    ``histograms`` holds every bounded histogram row (all kinds but confidence) as
    (method, kind, a, b, n), sorted; ``n_confidence_rows`` the size of each method's
    confidence histogram, which stays in ``frame`` until read. ``original`` and
    ``synthetic`` carry the block ids the scoring used.
    """

    frame: DataFrame
    histograms: list[tuple[int, int, int, int, int]]
    n_confidence_rows: dict[int, int]
    figures: BlockFigures
    original: DataFrame
    synthetic: DataFrame


@dataclass(frozen=True)
class ScoringSetup:
    """What every scoring pass of one attack shares."""

    methods: tuple[str, ...]
    whitening: Whitening | None
    tcols: list[str]
    bcols: list[str]
    integral_key: bool
    squared: bool
    tol: float
    max_k: int
    bound: int
    singles: bool
    split_rows: int

    def scorer(self, mult: np.ndarray | None = None, offset: float | None = None) -> BlockFn:
        return make_scorer(
            methods=self.methods, whitening=self.whitening, mult=mult, offset=offset, squared=self.squared,
            tol=self.tol, max_k=self.max_k, bound=self.bound, singles=self.singles,
        )

    def scoring(self, blocks: DataFrame, fn: BlockFn, first_pass: bool = False) -> DataFrame:
        return (
            map_blocks(blocks, fn, N.SCORE_SCHEMA, self.tcols, self.integral_key, self.split_rows if first_pass else None)
            .groupBy("method", "kind", "a", "b", "conf", N.META, N.M_BLOCK, N.M_NO, N.M_NS)
            .agg(F.sum("n").alias("n"))
        )


def collect_histograms(scored: DataFrame) -> tuple[list[tuple[int, int, int, int, int]], dict[int, int], BlockFigures]:
    """The bounded histograms (all kinds but confidence), the size of each confidence
    histogram and the block figures of a first pass's meta rows, as one aggregated row:
    at 1e6 records per side three jobs after the scoring stage (0.26 s), where a union
    of the two histograms took four (0.45 s)."""
    hist, conf = F.col(N.META).isNull(), F.col("kind") == N.K_CONF
    row = scored.agg(
        F.collect_list(F.when(hist & ~conf, F.struct("method", "kind", "a", "b", "n"))).alias("small"),
        *(
            F.count(F.when(hist & conf & (F.col("method") == code), 1)).alias(f"conf{code}")
            for code in (N.MAHALANOBIS, N.WEIGHTED)
        ),
        *blocking.figure_aggregates(),
    ).collect()[0]
    small = sorted((r["method"], r["kind"], r["a"], r["b"], r["n"]) for r in row["small"])
    n_conf = {code: int(row[f"conf{code}"]) for code in (N.MAHALANOBIS, N.WEIGHTED)}
    return small, n_conf, BlockFigures.from_row(row)


@dataclass(frozen=True)
class _FirstPass:
    """The first pass over the unsplit blocks: the weighted method's ranges (``lo``,
    ``hi``) when that method is asked for, else the scoring itself (``frame``, cached,
    and its histograms)."""

    figures: BlockFigures
    original: DataFrame
    synthetic: DataFrame
    lo: np.ndarray | None = None
    hi: np.ndarray | None = None
    frame: DataFrame | None = None
    histograms: list[tuple[int, int, int, int, int]] | None = None
    n_confidence_rows: dict[int, int] | None = None


def score_blocks(orig: DataFrame, syn: DataFrame, setup: ScoringSetup, persisted: list[DataFrame]) -> Scored:
    """Every scoring pass over the blocks of the prepared sides. Frames it caches are
    appended to ``persisted``: the caller unpersists them once done reading ``frame``."""
    tasks = shuffle_partitions(orig.sparkSession)
    first = _first_pass(orig, syn, setup, tasks, persisted)
    orig, syn, figures = first.original, first.synthetic, first.figures
    # Big blocks, split: the ranges and the scoring of what the first pass left.
    big = big_only = None
    if figures.big:
        big = blocking.big_blocks(orig, syn, setup.split_rows).persist()
        persisted.append(big)
        big_only = stacked_blocks(*blocking.salted(orig, syn, big, only=True), setup.tcols, tasks, split=True)
    if "weighted" in setup.methods:
        scored = _weighted_scoring(first, big, big_only, setup, tasks)
    elif big_only is not None:
        assert first.frame is not None
        scored = first.frame.unionByName(setup.scoring(big_only, setup.scorer()))
    else:
        assert first.frame is not None
        scored = first.frame
    if scored is first.frame:
        assert first.histograms is not None and first.n_confidence_rows is not None
        return Scored(scored, first.histograms, first.n_confidence_rows, figures, orig, syn)
    if figures.smallest_pairs <= setup.bound:
        # Some block is scored pair by pair: its confidence histogram, unbounded in
        # size, is read again after the bounded ones.
        scored = persist_aggregate(scored)
        persisted.append(scored)
    small, n_conf_rows, _ = collect_histograms(scored)
    return Scored(scored, small, n_conf_rows, figures, orig, syn)


def _first_pass(
    orig: DataFrame, syn: DataFrame, setup: ScoringSetup, tasks: int, persisted: list[DataFrame]
) -> _FirstPass:
    """Also gives the block figures and finds the blocks too big to score in one
    piece, and the ids two blocks share (then hash again with the next seed)."""
    for attempt in range(blocking.BLOCK_ID_ATTEMPTS):
        orig_b, syn_b = blocking.with_block_ids(orig, syn, setup.bcols, attempt)
        unsplit = stacked_blocks(orig_b, syn_b, setup.tcols, tasks, split=False, check=True)
        if "weighted" in setup.methods:
            lo, hi, figures = weighted_ranges(unsplit, setup.tcols, setup.integral_key, setup.split_rows)
            assert figures is not None
            result = _FirstPass(figures, orig_b, syn_b, lo=lo, hi=hi)
        else:
            # Cached: the confidence rows and the big blocks' rest are read after.
            frame = persist_aggregate(setup.scoring(unsplit, setup.scorer(), first_pass=True))
            small, n_conf_rows, figures = collect_histograms(frame)
            if figures.shared:
                frame.unpersist()
            else:
                persisted.append(frame)
            result = _FirstPass(figures, orig_b, syn_b, frame=frame, histograms=small, n_confidence_rows=n_conf_rows)
        if not figures.shared:
            return result
    raise RuntimeError(  # pragma: no cover - needs repeated 64-bit hash collisions
        f"linkage: two blocking values share a 64-bit block id under {blocking.BLOCK_ID_ATTEMPTS} different seeds"
    )


def _weighted_scoring(
    first: _FirstPass, big: DataFrame | None, big_only: DataFrame | None, setup: ScoringSetup, tasks: int
) -> DataFrame:
    assert first.lo is not None and first.hi is not None
    lo, hi = first.lo, first.hi
    if big_only is not None:
        lo_big, hi_big, _ = weighted_ranges(big_only, setup.tcols, setup.integral_key)
        lo, hi = np.fmin(lo, lo_big), np.fmax(hi, hi_big)
    mult, offset = weighted_scaling(lo, hi) if first.figures.pairs else (np.ones(len(setup.tcols)), 0.0)
    orig, syn = first.original, first.synthetic
    if big is not None:
        blocks = stacked_blocks(*blocking.salted(orig, syn, big), setup.tcols, tasks, split=True)
    else:  # as the first pass, without the check hash it no longer needs
        blocks = stacked_blocks(orig, syn, setup.tcols, tasks, split=False)
    return setup.scoring(blocks, setup.scorer(mult, offset))
