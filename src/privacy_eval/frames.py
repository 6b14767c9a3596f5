"""DataFrame steps that several metrics share: column references, null-safe equality,
rows that occur once.

Equality is the spec's "exact and null-safe": two nulls match, two NaNs match, -0.0
matches 0.0. Spark's `<=>` and its grouping keys already behave this way for doubles
(NaN = NaN and -0.0 = 0.0 are normalised in joins and aggregations), so the helpers
below only have to use `<=>` instead of `=`; tests/test_frames.py pins that behaviour.
"""

from __future__ import annotations

from functools import reduce
from typing import Iterable, Sequence

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

# Internal column names carry this prefix so they cannot collide with user columns.
INTERNAL_PREFIX = "__pe_"
COUNT = INTERNAL_PREFIX + "count"


def qcol(name: str, frame: DataFrame | None = None) -> Column:
    """A column by its exact name, even with dots, spaces or backticks in it.

    `F.col("a.b")` would look for field `b` of a struct `a`.
    """
    quoted = "`" + name.replace("`", "``") + "`"
    return frame[quoted] if frame is not None else F.col(quoted)


def null_safe_equal(left: DataFrame, right: DataFrame, columns: Iterable[str]) -> Column:
    """Join condition: every column equal, nulls matching nulls."""
    conditions = [qcol(c, left).eqNullSafe(qcol(c, right)) for c in columns]
    return reduce(lambda a, b: a & b, conditions, F.lit(True))


def null_safe_semi_join(left: DataFrame, right: DataFrame, columns: Sequence[str], how: str = "left_semi") -> DataFrame:
    """Rows of `left` that have (or, with how='left_anti', lack) an equal row in `right`.

    The right side is aliased so that a self-join on the same lineage stays unambiguous.
    """
    right = right.select(*(qcol(c) for c in columns)).alias("__pe_right")
    left = left.alias("__pe_left")
    return left.join(right, null_safe_equal(left, right, columns), how)


def row_counts(frame: DataFrame, columns: Sequence[str]) -> DataFrame:
    """Distinct rows over `columns` with how often each occurs (column COUNT).

    groupBy keeps null as a key of its own, unlike pandas' default, so rows that differ
    only by missing values are told apart and never dropped.
    """
    return frame.groupBy(*(qcol(c) for c in columns)).agg(F.count(F.lit(1)).alias(COUNT))


def occurring_once(counts: DataFrame) -> DataFrame:
    """The rows of a `row_counts` result that occur exactly once (the set U)."""
    return counts.filter(F.col(COUNT) == 1).drop(COUNT)
