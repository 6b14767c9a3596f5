"""synthpop's grouping of a numeric column into about `n` groups for its disclosure
measures (docs/metrics.md, "Identity and attribute disclosure"), exactly.

synthpop (`group_num`) takes the breaks from the original's and the synthetic table's
non-missing values pooled, with classInt's `classIntervals(style = "quantile")`, which
is R's `quantile(type = 7)` at probabilities seq(0, 1, 1/n); duplicate breaks are
dropped; each value goes to [b_k, b_k+1), the last group closed on the right
(`cut(right = FALSE, include.lowest = TRUE)`). With fewer distinct values than `n`
every value is a group of its own (classInt's "unique" style, breaks at the
midpoints), and when the quantile breaks leave fewer than 3 groups synthpop takes `n`
groups of equal width instead. Here the breaks are computed from exact order
statistics (privacy_eval.distance.order), never from approximate percentiles, with R's
arithmetic in the same order, so that each value lands in the group R gives it.

Missing values (null, and NaN, which R counts as missing) stay missing: a level of their
own. Where synthpop stops (no value, a single distinct value, an infinite value) this
module goes on and says so (`Grouping.published`): no value gives no group, a single
value one group, and ±infinity joins the missing level (outside every group, as `cut`
places values beyond the breaks).

The breaks are order statistics of the data: they stay in memory, never in results.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from privacy_eval.columns import INTERNAL_PREFIX
from privacy_eval.frames import as_double_sql, finite_double, qcol

# synthpop switches from quantile to equal-width breaks below this many groups.
FEWEST_QUANTILE_GROUPS = 3
_X = INTERNAL_PREFIX + "x"


@dataclass(frozen=True)
class Grouping:
    """How one numeric column is grouped: group k holds [breaks[k], breaks[k+1]), the last
    group [breaks[-2], breaks[-1]]; anything else is missing."""

    column: str
    asked: int                    # the configured number of groups
    breaks: tuple[float, ...]     # never published: they are order statistics of the data
    style: str                    # quantile | equal | unique | single | none
    non_finite: int               # ±inf values (both tables) put with the missing ones

    @property
    def groups(self) -> int:
        return max(len(self.breaks) - 1, 0)

    def published(self) -> dict:
        """What the results may say about the grouping: counts and the style, no break."""
        return {"groups_asked": self.asked, "groups": self.groups, "style": self.style,
                "infinite_values": self.non_finite}

    def warning(self) -> str | None:
        """Where synthpop would have stopped or grouped otherwise, in words."""
        name = f"'{self.column}'"
        if self.style == "none":
            return f"bins: {name} has no finite value on either side: every record is in its missing level"
        if self.style == "single":
            return f"bins: {name} has a single distinct value: one group (synthpop stops here)"
        if self.non_finite:
            return (f"bins: {name} has {self.non_finite} infinite value(s): they are grouped with the missing "
                    "values (synthpop stops on them)")
        return None

    def column_expr(self) -> Column:
        """The group index (an int) of each value, null for missing and out-of-range values."""
        x = F.expr(as_double_sql(self.column))
        if not self.breaks:
            return F.lit(None).cast("int").alias(self.column)
        inner = [F.when(x >= F.lit(b), 1).otherwise(0) for b in self.breaks[1:-1]]
        index = sum(inner, F.lit(0)) if inner else F.lit(0)
        outside = x.isNull() | F.isnan(x) | (x < F.lit(self.breaks[0])) | (x > F.lit(self.breaks[-1]))
        return F.when(outside, F.lit(None).cast("int")).otherwise(index).alias(self.column)


def quantile_groups(original: DataFrame, synthetic: DataFrame, asked: Mapping[str, int]) -> tuple[Grouping, ...]:
    """The grouping of each column of `asked` (column -> number of groups), from the
    values of both tables pooled. One aggregation for the counts and ranges of every
    column; then per column a distinct-value probe and, when it has more distinct values
    than groups, the exact order statistics of the quantile breaks."""
    from privacy_eval.distance.order import order_statistics  # numpy: only when grouping

    if not asked:
        return ()
    columns = list(asked)
    stats = original.select(*(qcol(c) for c in columns)).unionByName(
        synthetic.select(*(qcol(c) for c in columns))
    ).agg(*(
        part
        for i, c in enumerate(columns)
        for part in (
            F.count(finite_double(c)).alias(f"n{i}"),
            F.min(finite_double(c)).alias(f"lo{i}"),
            F.max(finite_double(c)).alias(f"hi{i}"),
            F.count(F.when(F.abs(F.expr(as_double_sql(c))) == F.lit(math.inf), 1)).alias(f"inf{i}"),
        )
    )).collect()[0]
    groupings = []
    for i, c in enumerate(columns):
        n, groups = int(stats[f"n{i}"]), int(asked[c])
        pooled = original.select(finite_double(c).alias(_X)).unionByName(
            synthetic.select(finite_double(c).alias(_X))
        ).filter(F.col(_X).isNotNull())
        breaks, style = _breaks(pooled, n, groups, stats[f"lo{i}"], stats[f"hi{i}"], order_statistics)
        groupings.append(Grouping(c, groups, breaks, style, int(stats[f"inf{i}"])))
    return tuple(groupings)


def _breaks(pooled: DataFrame, n: int, groups: int, low: float | None, high: float | None,
            order_statistics) -> tuple[tuple[float, ...], str]:
    if n == 0:
        return (), "none"
    few = sorted(float(r[_X]) for r in pooled.select(_X).distinct().limit(groups + 1).collect())
    if len(few) == 1:
        return (few[0], few[0]), "single"
    if len(few) <= groups:
        return unique_breaks(few), "unique"
    probs = quantile_probabilities(groups)
    ranks = {r for p in probs for r in type7_ranks(n, p)}
    at = order_statistics(pooled, _X, [r - 1 for r in ranks], n)
    breaks = sorted(set(type7_quantile(n, p, lambda r: at[r - 1]) for p in probs))
    if len(breaks) - 1 < FEWEST_QUANTILE_GROUPS:
        return equal_breaks(float(low), float(high), groups), "equal"
    return tuple(breaks), "quantile"


def quantile_probabilities(groups: int) -> list[float]:
    """R's seq(0, 1, 1/groups): (0:groups) * (1/groups), capped at 1 (for 49 groups the
    last one is 0.9999999999999999, as in R)."""
    step = 1.0 / groups
    return [min(i * step, 1.0) for i in range(groups + 1)]


def type7_ranks(n: int, p: float) -> tuple[int, int]:
    """The 1-based ranks R's type-7 quantile at `p` reads: floor and ceiling of 1 + (n-1) p."""
    index = 1.0 + (n - 1) * p
    return math.floor(index), math.ceil(index)


def type7_quantile(n: int, p: float, at) -> float:
    """R's quantile(type = 7) at `p` of n values, `at(rank)` giving the value at a 1-based
    rank: x[lo], or (1 - h) x[lo] + h x[hi] where the index lies between two different
    values (R's expression, in R's order of operations)."""
    index = 1.0 + (n - 1) * p
    lo, hi = type7_ranks(n, p)
    value = at(lo)
    if index > lo and at(hi) != value:
        h = index - lo
        value = (1 - h) * value + h * at(hi)
    return value


def unique_breaks(values: Sequence[float]) -> tuple[float, ...]:
    """classInt's "unique" style for sorted distinct values: the midpoints between them,
    and half the mean gap beyond each end."""
    gaps = [b - a for a, b in zip(values[:-1], values[1:])]
    half = math.fsum(gaps) / len(gaps) / 2
    return (values[0] - half, *(a + g / 2 for a, g in zip(values[:-1], gaps)), values[-1] + half)


def equal_breaks(low: float, high: float, groups: int) -> tuple[float, ...]:
    """R's seq(low, high, length.out = groups + 1): c(low, low + (1:(groups-1)) * by, high)."""
    by = (high - low) / groups
    return (low, *(low + i * by for i in range(1, groups)), high)
