"""The Knowledge Protection Rate's bins: the attacker knows a numeric variable only to
within a bin of 5 % of its mean over the original records that occur once (U)
(docs/metrics.md, "Knowledge Protection Rate")."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from privacy_eval.errors import InputError
from privacy_eval.frames import (
    ExactMoments,
    binary_exponent,
    distinct_per_column,
    exact_moments,
    finite_double,
    qcol,
    rescaled,
)

RELATIVE_BIN_WIDTH = 0.05
# Fewest distinct values of a known variable in U from which its grid (step, origin) is
# published: fifty copies of one value give it back as surely as one.
MIN_GRID_SUPPORT = 10


@dataclass(frozen=True)
class BinGrid:
    """The grid of one numeric known variable: bin(x) = floor((x - origin) / step).

    Step and origin are in the variable's units x·2^-exponent (frames.binary_exponent:
    0, the values as they are, unless their size is beyond native moments); the bins,
    a ratio, are the same in any such units, and exactly so, powers of two being exact.
    """

    variable: str
    step: float
    origin: float
    step_source: str   # "mean" (0.05 * |mean| of U) or "configured"
    support: int | None = None  # distinct finite values of the variable in U; None: not counted
    exponent: int = 0

    def published(self) -> dict:
        """Step and origin for the results, unless they would disclose record values.

        The spec asks for both. But with one value in U, origin = that value and a
        mean-based step = 5 % of it; with two, mean and origin solve for both. Below
        MIN_GRID_SUPPORT distinct values the figures are withheld (a configured step is
        the user's own number and stays).
        """
        step, origin = math.ldexp(self.step, self.exponent), math.ldexp(self.origin, self.exponent)
        if self.support is None or self.support >= MIN_GRID_SUPPORT:
            return {"step": step, "origin": origin, "step_from": self.step_source}
        return {
            "step": step if self.step_source == "configured" else None,
            "origin": None,
            "step_from": self.step_source,
            "withheld": f"computed from {self.support} distinct value(s) (< {MIN_GRID_SUPPORT}); "
                        "they would disclose them",
        }


def bin_grids(
    singletons: DataFrame, numeric_known: Sequence[str], bin_width: Mapping[str, float]
) -> tuple[BinGrid, ...]:
    """Step and origin of each numeric known variable, from its values in U.

    One aggregation over U; only these few numbers reach the driver. Nulls, NaNs and
    infinities are left out of the statistics (NaN would poison the mean, an infinity
    the mean, sd and origin alike); each still gets a bin of its own in the profiles.
    Mean and sd come from exact sums (`frames.exact_moments`), rounded once: a value on
    a bin edge stays in its bin under any partitioning, which a sum of doubles, whose
    last bits follow the order of its additions, would not promise. A variable whose
    values are too large or too small in size for doubles' arithmetic (frames.RESCALE_ABOVE)
    gets its grid in units of 2^e.
    """
    if not numeric_known:
        return ()
    grids = []
    all_moments = exact_moments(singletons, numeric_known)
    distinct = _distinct_finite(singletons, numeric_known, all_moments)
    for v, moments, support in zip(numeric_known, all_moments, distinct):
        low = moments.low
        e = binary_exponent(max(abs(low), abs(moments.high))) if low is not None else 0
        mean, sd = moments.mean(e), moments.sd(e)
        if v in bin_width:
            step, source = math.ldexp(float(bin_width[v]), -e), "configured"
        else:
            step = RELATIVE_BIN_WIDTH * abs(mean) if mean is not None else float("nan")
            source = "mean"
            if not (math.isfinite(step) and step > 0):
                raise InputError(
                    f"knowledge_protection: known variable '{v}' has a mean of "
                    f"{'zero' if step == 0 else 'no finite value'} over the original records "
                    "that occur once, so 5 % of it is no bin width; declare it under "
                    f"'categorical' or give 'metrics.knowledge_protection.bin_width.{v}'"
                )
        if low is None:  # no finite value of v in U: only the null/NaN/inf bins occur
            low = 0.0
        # sd with n - 1 is undefined for a single value; the grid then starts at the min.
        spread = sd if sd is not None and math.isfinite(sd) else 0.0
        grid = BinGrid(
            variable=v, step=step, origin=math.ldexp(low, -e) - spread / 10.0, step_source=source,
            support=support, exponent=e,
        )
        try:
            grid.published()
        except OverflowError:  # min - sd/10 beyond the largest double: the grid cannot be reported
            raise InputError(
                f"knowledge_protection: known variable '{v}' has values so close to the largest double that its "
                "bin grid's origin (min - sd/10 over the original records that occur once) is beyond it; "
                f"declare it under 'categorical' or rescale it"
            ) from None
        grids.append(grid)
    return tuple(grids)


def _distinct_finite(singletons: DataFrame, names: Sequence[str], moments: Sequence[ExactMoments]) -> list[int]:
    """Distinct finite values of each variable in U: `frames.distinct_per_column` of the
    finite values (one pass), less the one group of the others where U has any."""
    counts = distinct_per_column(singletons.select(*(finite_double(v).alias(v) for v in names)), names)
    return [n - (m.count < m.rows) for n, m in zip(counts, moments)]


def bin_column(grid: BinGrid) -> Column:
    """floor((x - origin) / step) as a double, computed natively.

    Spark's floor() returns a bigint and fails under ANSI on values beyond 2^63, which a
    tiny step can produce, so the floor is taken in double arithmetic: x % 1.0 is exact,
    hence so is t - t % 1.0. Null stays null, NaN stays NaN and +-inf stay themselves,
    each a bin of its own.
    """
    t = _bin_position(grid)
    truncated = t - t % F.lit(1.0)
    floored = F.when(truncated > t, truncated - F.lit(1.0)).otherwise(truncated)
    infinite = F.abs(t) == F.lit(float("inf"))
    return F.when(infinite, t).otherwise(floored).alias(grid.variable)


def _bin_position(grid: BinGrid) -> Column:
    """(x - origin) / step, in the grid's units."""
    x = rescaled(qcol(grid.variable).cast("double"), grid.exponent)
    return (x - F.lit(grid.origin)) / F.lit(grid.step)


def beyond_grid(grid: BinGrid) -> Column:
    """Whether a finite value's bin is infinite: more than the largest double in bin
    widths from the origin, where distinct values could no longer be told apart."""
    return finite_double(grid.variable).isNotNull() & (F.abs(_bin_position(grid)) == F.lit(float("inf")))


def profiles(
    frame: DataFrame, known: Sequence[str], grids: Sequence[BinGrid], keep: Sequence[str] = (),
    flags: Sequence[str] = (),
) -> DataFrame:
    """Each record's tuple over the known variables, numeric ones binned (and the
    columns `keep` as they are); `flags[j]`, if given, the name of a column telling
    whether the record is `beyond_grid(grids[j])`."""
    by_name = {g.variable: g for g in grids}
    return frame.select(
        *(bin_column(by_name[v]) if v in by_name else qcol(v) for v in known), *keep,
        *(beyond_grid(g).alias(name) for g, name in zip(grids, flags)),
    )
