"""The distance metrics' figures from the per-record search results (docs/metrics.md,
"Distance-based metrics"): small histograms and exact order statistics, never the
records themselves.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from privacy_eval.distance.kernel import TIE
from privacy_eval.distance.order import lower_rank, median_ranks, order_statistics, value_at_rank

HISTOGRAM_BINS = 20


@dataclass(frozen=True)
class CloakingFigures:
    """Hidden rate and local cloaking (5.3) over the paired originals."""

    n_paired: int
    hits: float            # Σ hit_i
    unique_hits: int       # c_i = 0 and t_i = 0
    hidden_rate: float     # percent
    local_cloaking: float  # median of min(LC_i, cap)
    zero_share: float      # share with LC_i = 0
    p10: int
    p50: int
    p90: int
    capped: int            # records whose count reached the cap
    cap: int
    histogram: dict[str, list] = field(default_factory=dict)  # min(LC_i, cap): edges, counts

    @property
    def median_is_lower_bound(self) -> bool:
        return self.local_cloaking >= self.cap

    def details(self) -> dict[str, Any]:
        return {**asdict(self), "median_is_lower_bound": self.median_is_lower_bound}


@dataclass(frozen=True)
class ClosestFigures:
    """DCR and NNDR (5.4) over the synthetic records."""

    n_synthetic: int
    dcr: float
    zero_share: float          # d1 tied with 0: the synthetic record coincides with an original
    p05: float
    nndr: float | None         # None with fewer than two originals
    below_half_share: float | None
    histogram: dict[str, Any] = field(default_factory=dict)  # d1 > 0: edges, counts; and zeros

    def details(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class HoldoutFigures:
    """The holdout DCR share (5.5)."""

    share: float
    expected: float        # n / (n + n_H)
    n_holdout: int
    closer: int            # d_O closer than d_H
    tied: int

    def details(self) -> dict[str, Any]:
        return asdict(self)


def median(frame: DataFrame, column: str, n: int) -> float:
    lo, hi = median_ranks(n)
    values = order_statistics(frame, column, [lo, hi], n)
    return (values[lo] + values[hi]) / 2.0


def cloaking_figures(counts: DataFrame, cap: int) -> CloakingFigures:
    """From (hidden, others) per paired original: c_i = 0 unless hidden, and then every
    other record in the ball is tied, t_i = others; hit_i = 1/(1 + t_i) when c_i = 0,
    LC_i = min(others, cap). Both from histograms, summed here in a fixed order."""
    capped_lc = F.least(F.col("others"), F.lit(cap))
    lc = sorted((int(r["lc"]), int(r["count"])) for r in counts.groupBy(capped_lc.alias("lc")).count().collect())
    ties = counts.filter(~F.col("hidden")).groupBy("others").count().collect()
    n = sum(c for _, c in lc)
    hits = sum(int(r["count"]) / (1 + int(r["others"])) for r in sorted(ties, key=lambda r: int(r["others"])))
    unique = sum(int(r["count"]) for r in ties if int(r["others"]) == 0)

    def at(rank: int) -> int:
        return int(value_at_rank(lc, rank))

    lo, hi = median_ranks(n)
    return CloakingFigures(
        n_paired=n, hits=hits, unique_hits=unique, hidden_rate=100.0 * (1.0 - hits / n),
        local_cloaking=(at(lo) + at(hi)) / 2.0, zero_share=sum(c for v, c in lc if v == 0) / n,
        p10=at(lower_rank(0.1, n)), p50=at(lower_rank(0.5, n)), p90=at(lower_rank(0.9, n)),
        capped=sum(c for v, c in lc if v >= cap), cap=cap, histogram=_binned_counts(lc),
    )


def _binned_counts(counts: list[tuple[int, int]], bins: int = HISTOGRAM_BINS) -> dict[str, list]:
    """A histogram of whole numbers from their (value, count) pairs: one bin per value
    up to `bins` values, else `bins` bins of equal width; edges are [lo, hi)."""
    top = max((v for v, _ in counts), default=0) + 1
    width = max(1, math.ceil(top / bins))
    edges = list(range(0, top + width, width))[: math.ceil(top / width) + 1]
    binned = [0] * (len(edges) - 1)
    for value, count in counts:
        binned[value // width] += count
    return {"edges": edges, "counts": binned}


def closest_figures(nearest: DataFrame, n_original: int) -> ClosestFigures:
    """From (d1, d2) per synthetic record: the DCR and NNDR figures (5.4)."""
    # Every boundary under the tie rule (5.2): a ratio of exactly 1/2 in exact arithmetic
    # comes out 1/2 +- 1e-16 depending on the summation order of the fit, hence on the
    # partitioning, and so does a d2 of 0 (two distinct originals on one point of the
    # space) come out 0 or 1e-15, a ratio of 1 or 0; the tolerance makes the figures
    # independent of it.
    ratio = F.when(F.col("d2") <= TIE, 1.0).otherwise(F.col("d1") / F.col("d2"))
    frame = nearest.select("d1", ratio.alias("ratio"))
    counts = frame.agg(
        F.count(F.lit(1)).alias("m"), F.count(F.when(F.col("d1") <= TIE, 1)).alias("zero"),
        F.count(F.when(F.col("ratio") < 0.5 - TIE * 1.0, 1)).alias("below"), F.max("d1").alias("top"),
    ).collect()[0]
    m = int(counts["m"])
    histogram = _distance_histogram(frame, counts["top"] or 0.0, int(counts["zero"]))
    lo, hi = median_ranks(m)
    p05 = lower_rank(0.05, m)
    d1 = order_statistics(frame, "d1", [p05, lo, hi], m)  # one pass for the three ranks
    two = n_original >= 2
    return ClosestFigures(
        n_synthetic=m, dcr=(d1[lo] + d1[hi]) / 2.0, zero_share=int(counts["zero"]) / m, p05=d1[p05],
        nndr=median(frame, "ratio", m) if two else None,
        below_half_share=int(counts["below"]) / m if two else None, histogram=histogram,
    )


def _distance_histogram(frame: DataFrame, top: float, zeros: int, bins: int = HISTOGRAM_BINS) -> dict[str, Any]:
    """d1 in `bins` bins of equal width up to the largest d1 (`top`), those tied with 0 apart."""
    edges = [top * i / bins for i in range(bins + 1)]
    if top <= 0:
        return {"edges": edges, "counts": [0] * bins, "zeros": zeros}
    index = F.least(F.floor(F.col("d1") / F.lit(top) * bins).cast("int"), F.lit(bins - 1))
    found = {int(r["b"]): int(r["count"]) for r in frame.filter(F.col("d1") > TIE).groupBy(index.alias("b")).count().collect()}
    return {"edges": edges, "counts": [found.get(i, 0) for i in range(bins)], "zeros": zeros}


def holdout_figures(d_original: DataFrame, d_holdout: DataFrame, id_col: str, n_original: int, n_holdout: int) -> HoldoutFigures:
    """share = (#{d_O closer than d_H} + ½ #{tied}) / m (5.5); `d_original` holds
    (id, d1), `d_holdout` (id, d1) against the holdout."""
    both = d_original.select(id_col, F.col("d1").alias("o")).join(d_holdout.select(id_col, F.col("d1").alias("h")), id_col)
    tau = F.lit(TIE) * F.greatest(F.lit(1.0), F.col("h"))
    counts = both.agg(
        F.count(F.lit(1)).alias("m"),
        F.count(F.when(F.col("o") < F.col("h") - tau, 1)).alias("closer"),
        F.count(F.when(F.abs(F.col("o") - F.col("h")) <= tau, 1)).alias("tied"),
    ).collect()[0]
    m, closer, tied = int(counts["m"]), int(counts["closer"]), int(counts["tied"])
    return HoldoutFigures(
        share=(closer + 0.5 * tied) / m, expected=n_original / (n_original + n_holdout),
        n_holdout=n_holdout, closer=closer, tied=tied,
    )
