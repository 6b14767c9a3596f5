"""The passes over the blocks, on the driver: both sides stacked and sorted by block,
streamed through ``mapInArrow`` one (sub-)block at a time (the workers' side is
:mod:`.block_stream` and :mod:`.block_scoring`), each block reduced to histograms on
the worker; the driver collects a few hundred summed rows.

The unsplit pass goes over the blocks as they are: it gives the block figures, finds
the blocks too big to score in one piece and the ids two blocks share, and is either
the weighted method's ranges or, without that method, the scoring itself. The blocks
too big for it are then scored split.

See docs/metrics.md, Linkage attack: candidates and blocking; scores; per-record
reduction and risk.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from privacy_eval.errors import InputError
from privacy_eval.frames import persist_aggregate, shuffle_partitions, stacked_sides
from privacy_eval.linkage import block_stream, blocking
from privacy_eval.linkage import names as N
from privacy_eval.linkage.block_scoring import block_ranges, make_scorer, range_columns
from privacy_eval.linkage.block_stream import BlockFn
from privacy_eval.linkage.blocking import BlockFigures
from privacy_eval.linkage.kernel.weighted import weighted_scaling
from privacy_eval.linkage.kernel.whitening import Whitening

__all__ = ["Scored", "map_blocks", "score_blocks", "stacked_blocks"]

# --------------------------------------------------------------------------
# one pass per block
# --------------------------------------------------------------------------


def stacked_blocks(
    orig: DataFrame, syn: DataFrame, tcols: Sequence[str], tasks: int, split: bool, check: bool = False
) -> DataFrame:
    """Both sides in one frame, the rows of each (block, sub-block) next to each other
    in one partition; with ``split``, the sides come from :func:`blocking.salted`.

    One shuffle and a sort, then :func:`map_blocks` streams the rows: a task holds one
    (sub-)block at a time. Faster than ``cogroup(...).applyInPandas``, which shuffles,
    sorts and serialises the two sides separately. Unless some block is split, the rows
    are sorted by the block id alone, one 64-bit key that Spark radix-sorts (a sort by
    block, sub-block and side takes a slower comparison sort), and the constant
    sub-block and pair count are neither shuffled nor sent to Python. With ``check``
    (the unsplit pass) the check hash goes along, to find ids that two blocks share.
    The partition count is explicit because adaptive execution would coalesce the
    shuffle to a few partitions of equal bytes, while the cost of scoring a block grows
    faster than its size: a few uneven tasks left a core idle for most of the stage.
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

    With ``split_rows`` this is the unsplit pass, which also measures the blocks (no
    pass over the data of its own does): per block one meta row with the block's id and
    sizes, from which :func:`blocking.figure_aggregates` computes the block figures. A
    block with more than ``split_rows`` synthetic records is not buffered and not
    scored: its meta row marks it big, for a second pass over it, split
    (:func:`blocking.big_blocks`, :func:`blocking.salted`). An id whose rows carry
    different check hashes belongs to two blocks: it is not scored either, and its meta
    row tells the caller to hash again with another seed.
    """
    from pyspark.sql.pandas.types import to_arrow_schema

    out_schema = to_arrow_schema(T._parse_datatype_string(f"{schema}, {N.META_SCHEMA}"))
    # FLUSH_ROWS read here, on the driver, travels with the function.
    run = block_stream.stream_blocks(fn, out_schema, tcols, integral_key, split_rows, block_stream.FLUSH_ROWS)
    return blocks.mapInArrow(run, f"{schema}, {N.META_SCHEMA}")


# --------------------------------------------------------------------------
# the weighted method's ranges
# --------------------------------------------------------------------------


def weighted_ranges(
    blocks: DataFrame, tcols: Sequence[str], integral_key: bool, split_rows: int | None = None
) -> tuple[np.ndarray, np.ndarray, BlockFigures | None]:
    """Per target, the smallest and largest |x - y| over the candidate pairs of
    ``blocks`` (NaN where there is none), for ``weighted_scaling``; with ``split_rows``
    the unsplit pass (:func:`map_blocks`), which also gives the block figures."""
    p = len(tcols)
    unsplit_pass = split_rows is not None
    row = (
        map_blocks(blocks, block_ranges(p), ", ".join(f"{c} double" for c in range_columns(p)), tcols, integral_key,
                   split_rows)
        .agg(
            *[F.min(f"lo{j}").alias(f"lo{j}") for j in range(p)],
            *[F.max(f"hi{j}").alias(f"hi{j}") for j in range(p)],
            *(blocking.figure_aggregates() if unsplit_pass else []),
        )
        .collect()[0]
    )
    lo = np.array([row[f"lo{j}"] for j in range(p)], dtype=np.float64)
    hi = np.array([row[f"hi{j}"] for j in range(p)], dtype=np.float64)
    return lo, hi, BlockFigures.from_row(row) if unsplit_pass else None


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
    targets: tuple[str, ...]  # the user's names of the target columns tcols
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

    def scoring(self, blocks: DataFrame, fn: BlockFn, unsplit_pass: bool = False) -> DataFrame:
        return (
            map_blocks(blocks, fn, N.SCORE_SCHEMA, self.tcols, self.integral_key, self.split_rows if unsplit_pass else None)
            .groupBy("method", "kind", "a", "b", "conf", N.META, N.M_BLOCK, N.M_NO, N.M_NS)
            .agg(F.sum("n").alias("n"))
        )


def collect_histograms(scored: DataFrame) -> tuple[list[tuple[int, int, int, int, int]], dict[int, int], BlockFigures]:
    """The bounded histograms (all kinds but confidence), the size of each confidence
    histogram and the block figures of the unsplit pass's meta rows, as one aggregated
    row: one job fewer after the scoring stage than a union of the two histograms."""
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
class _UnsplitPass:
    """What the unsplit pass gave: the weighted method's ranges (``lo``, ``hi``) when
    that method is asked for, else the scoring itself (``frame``, cached, and its
    histograms)."""

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
    unsplit = _unsplit_pass(orig, syn, setup, tasks, persisted)
    orig, syn, figures = unsplit.original, unsplit.synthetic, unsplit.figures
    # Big blocks, split: the ranges and the scoring of what the unsplit pass left.
    big = big_only = None
    if figures.big:
        big = blocking.big_blocks(orig, syn, setup.split_rows).persist()
        persisted.append(big)
        big_only = stacked_blocks(*blocking.salted(orig, syn, big, only=True), setup.tcols, tasks, split=True)
    if "weighted" in setup.methods:
        scored = _weighted_scoring(unsplit, big, big_only, setup, tasks)
    elif big_only is not None:
        assert unsplit.frame is not None
        scored = unsplit.frame.unionByName(setup.scoring(big_only, setup.scorer()))
    else:
        assert unsplit.frame is not None
        scored = unsplit.frame
    if scored is unsplit.frame:
        assert unsplit.histograms is not None and unsplit.n_confidence_rows is not None
        return Scored(scored, unsplit.histograms, unsplit.n_confidence_rows, figures, orig, syn)
    if figures.smallest_pairs <= setup.bound:
        # Some block is scored pair by pair: its confidence histogram, unbounded in
        # size, is read again after the bounded ones.
        scored = persist_aggregate(scored)
        persisted.append(scored)
    small, n_conf_rows, _ = collect_histograms(scored)
    return Scored(scored, small, n_conf_rows, figures, orig, syn)


def _unsplit_pass(
    orig: DataFrame, syn: DataFrame, setup: ScoringSetup, tasks: int, persisted: list[DataFrame]
) -> _UnsplitPass:
    """The unsplit pass; made again with the next seed of the block id while two blocks
    share an id."""
    for attempt in range(blocking.BLOCK_ID_ATTEMPTS):
        orig_b, syn_b = blocking.with_block_ids(orig, syn, setup.bcols, attempt)
        blocks = stacked_blocks(orig_b, syn_b, setup.tcols, tasks, split=False, check=True)
        if "weighted" in setup.methods:
            lo, hi, figures = weighted_ranges(blocks, setup.tcols, setup.integral_key, setup.split_rows)
            assert figures is not None
            result = _UnsplitPass(figures, orig_b, syn_b, lo=lo, hi=hi)
        else:
            # Cached: the confidence rows and the big blocks' rest are read after.
            frame = persist_aggregate(setup.scoring(blocks, setup.scorer(), unsplit_pass=True))
            small, n_conf_rows, figures = collect_histograms(frame)
            if figures.shared:
                frame.unpersist()
            else:
                persisted.append(frame)
            result = _UnsplitPass(figures, orig_b, syn_b, frame=frame, histograms=small, n_confidence_rows=n_conf_rows)
        if not figures.shared:
            return result
    raise RuntimeError(  # pragma: no cover - needs repeated 64-bit hash collisions
        f"linkage: two blocking values share a 64-bit block id under {blocking.BLOCK_ID_ATTEMPTS} different seeds"
    )


def _weighted_scoring(
    unsplit: _UnsplitPass, big: DataFrame | None, big_only: DataFrame | None, setup: ScoringSetup, tasks: int
) -> DataFrame:
    assert unsplit.lo is not None and unsplit.hi is not None
    lo, hi = unsplit.lo, unsplit.hi
    if big_only is not None:
        lo_big, hi_big, _ = weighted_ranges(big_only, setup.tcols, setup.integral_key)
        lo, hi = np.fmin(lo, lo_big), np.fmax(hi, hi_big)
    mult, offset = weighted_scaling(lo, hi) if unsplit.figures.pairs else (np.ones(len(setup.tcols)), 0.0)
    if not np.isfinite(mult).all():  # 1 / range overflows
        tiny = [t for t, m in zip(setup.targets, mult) if not np.isfinite(m)]
        raise InputError(
            f"linkage (weighted): the differences |x - y| of {', '.join(repr(t) for t in tiny)} span less than "
            "about 5.6e-309 (1 / the largest double), too narrow a range to normalise; rescale the column "
            "(for instance in units of 1e-300) or leave it out of metrics.linkage.targets"
        )
    orig, syn = unsplit.original, unsplit.synthetic
    if big is not None:
        blocks = stacked_blocks(*blocking.salted(orig, syn, big), setup.tcols, tasks, split=True)
    else:  # as in the unsplit pass, without the check hash it no longer needs
        blocks = stacked_blocks(orig, syn, setup.tcols, tasks, split=False)
    return setup.scoring(blocks, setup.scorer(mult, offset))
