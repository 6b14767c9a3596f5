"""Blocks: the candidates of a synthetic record are the originals with the same blocking
values. Block ids and the check hash, the block figures from the unsplit pass's meta rows,
the split of blocks too big to score in one piece, and the count of true pairs.

See docs/metrics.md, Linkage attack: candidates and blocking; truth coverage and "not
measurable".
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from privacy_eval.frames import null_flagged, stacked_sides
from privacy_eval.linkage import names as N

__all__ = [
    "BLOCK_ID_ATTEMPTS",
    "BlockFigures",
    "big_blocks",
    "block_check_hash",
    "block_id",
    "figure_aggregates",
    "salted",
    "true_pairs",
    "with_block_ids",
]

#: Seeds tried for the block id before giving up: a collision among n blocks has odds of
#: about n²/2^65 per seed, so a second attempt is already a once-in-a-lifetime event.
BLOCK_ID_ATTEMPTS = 4


def block_id(bcols: Sequence[str], attempt: int) -> Column:
    """A 64-bit hash of the (normalised) blocking values and their null flags
    (``null_flagged``); ``attempt`` seeds it.

    Scoring groups by it instead of by the values: shuffling, sorting and handing to
    Python one long costs a fraction of what text columns cost. The unsplit pass over the blocks checks that no two
    blocks share an id; if two do, the next attempt hashes with another seed.
    """
    return F.xxhash64(F.lit(attempt), *null_flagged([F.col(c) for c in bcols]))


def block_check_hash(bcols: Sequence[str]) -> Column:
    """A second hash of the blocking values, independent of every :func:`block_id`
    seed: blocks sharing an id differ in it (see ``scoring.map_blocks``); a collision of
    both has odds of about n²/2^129 among n blocks."""
    return F.xxhash64(F.lit(-1), *null_flagged([F.col(c) for c in bcols]))


def with_block_ids(orig: DataFrame, syn: DataFrame, bcols: Sequence[str], attempt: int) -> tuple[DataFrame, DataFrame]:
    """Both sides with the block id of seed ``attempt`` and the check hash, which tells
    blocks apart that share an id."""
    bid, check = block_id(bcols, attempt).alias(N.BLOCK_ID), block_check_hash(bcols).alias(N.CHECK_HASH)
    return orig.select("*", bid, check), syn.select("*", bid, check)


# --------------------------------------------------------------------------
# block figures
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class BlockFigures:
    """What the unsplit pass over the blocks measured, from its meta rows."""

    shared: int  # ids that two blocks share (then hash again)
    blocks: int  # blocks with a synthetic record
    with_candidates: int  # ... that also hold an original
    pairs: int  # candidate pairs
    largest_pairs: int
    smallest_pairs: int
    largest_original: int
    largest_synthetic: int
    big: int  # blocks with more than split_rows synthetic records (scored split)

    @classmethod
    def from_row(cls, row: Any) -> BlockFigures:
        """From a collected row holding :func:`figure_aggregates`."""
        v = {name[2:]: int(value or 0) for name, value in row.asDict().items() if name.startswith("f_")}
        return cls(
            shared=v["shared"], blocks=v["blocks"], with_candidates=v["with"], pairs=v["pairs"],
            largest_pairs=v["largest_pairs"], smallest_pairs=v["smallest_pairs"],
            largest_original=v["largest_o"], largest_synthetic=v["largest_s"], big=v["big"],
        )


def figure_aggregates() -> list[Column]:
    """The block figures, aggregated over the meta rows of the unsplit pass: one row per
    block with a synthetic record, and one per id that two blocks share."""
    meta, no, ns = F.col(N.META), F.col(N.M_NO), F.col(N.M_NS)
    block = meta.isin(N.SCORED_BLOCK, N.BIG_BLOCK)
    pairs = no.cast("decimal(38,0)") * ns.cast("decimal(38,0)")
    return [
        F.count(F.when(meta == N.SHARED_ID, 1)).alias("f_shared"),
        F.count(F.when(block, 1)).alias("f_blocks"),
        F.count(F.when(block & (no > 0), 1)).alias("f_with"),
        F.sum(F.when(block, pairs)).alias("f_pairs"),
        F.max(F.when(block, pairs)).alias("f_largest_pairs"),
        F.min(F.when(block, pairs)).alias("f_smallest_pairs"),
        F.max(F.when(block, no)).alias("f_largest_o"),
        F.max(F.when(block, ns)).alias("f_largest_s"),
        F.count(F.when(meta == N.BIG_BLOCK, 1)).alias("f_big"),
    ]


# --------------------------------------------------------------------------
# big blocks, split
# --------------------------------------------------------------------------


def big_blocks(orig: DataFrame, syn: DataFrame, split_rows: int) -> DataFrame:
    """The blocks with more than ``split_rows`` synthetic records, with their number of
    splits and candidate pairs: a small DataFrame for a broadcast join, never collected.

    Only an unsplit pass that found such blocks asks for it (one grouped pass with partial
    aggregation; most data has no block that big).
    """
    per_block = stacked_sides(orig, syn, [N.BLOCK_ID], N.SIDE).groupBy(N.BLOCK_ID).agg(
        F.count(F.when(F.col(N.SIDE) == 0, 1)).alias(N.N_ORIGINAL),
        F.count(F.when(F.col(N.SIDE) == 1, 1)).alias(N.N_SYNTHETIC),
    )
    return per_block.filter(F.col(N.N_SYNTHETIC) > split_rows).select(
        N.BLOCK_ID,
        F.ceil(F.col(N.N_SYNTHETIC) / F.lit(float(split_rows))).cast("long").alias(N.N_SPLITS),
        (F.col(N.N_ORIGINAL).cast("double") * F.col(N.N_SYNTHETIC).cast("double")).alias(N.BLOCK_PAIRS),
    )


def salted(orig: DataFrame, syn: DataFrame, big: DataFrame, only: bool = False) -> tuple[DataFrame, DataFrame]:
    """Split big blocks: synthetic records by a hash of their key, originals replicated;
    with ``only``, the records of the big blocks alone."""
    table = F.broadcast(big)
    how = "inner" if only else "left"
    s = syn.join(table, N.BLOCK_ID, how).withColumn(
        N.SALT,
        F.when(F.col(N.N_SPLITS).isNull(), F.lit(0)).otherwise(
            F.pmod(F.xxhash64(F.col(N.KEY)), F.col(N.N_SPLITS)).cast("int")
        ),
    )
    o = orig.join(table, N.BLOCK_ID, how).withColumn(
        N.SALT,
        F.explode(
            F.when(F.col(N.N_SPLITS).isNull(), F.array(F.lit(0))).otherwise(
                F.sequence(F.lit(0), (F.col(N.N_SPLITS) - 1).cast("int"))
            )
        ),
    )
    return o.drop(N.N_SPLITS, N.BLOCK_PAIRS), s.drop(N.N_SPLITS)


# --------------------------------------------------------------------------
# true pairs
# --------------------------------------------------------------------------


def true_pairs(orig: DataFrame, syn: DataFrame) -> tuple[int, int]:
    """Synthetic records with an original of the same key, and those in the same block."""
    o = orig.select(F.col(N.KEY).alias(N.KEY + "_o"), F.col(N.BLOCK_ID).alias(N.BLOCK_ID + "_o"))
    row = (
        syn.select(N.KEY, N.BLOCK_ID)
        .join(o, F.col(N.KEY) == F.col(N.KEY + "_o"), "inner")
        .agg(
            F.count(F.lit(1)).alias("n_true"),
            F.count(F.when(F.col(N.BLOCK_ID) == F.col(N.BLOCK_ID + "_o"), 1)).alias("kept"),
        )
        .collect()[0]
    )
    return int(row["n_true"]), int(row["kept"])
