"""Exact order statistics of a column of per-record figures, without the records on the
driver: numpy's median and `np.quantile(method="lower")`, at any size.

Two passes: Spark's `approxQuantile` (a bounded-error sketch) brackets each wanted
rank between two values; one aggregation then counts the values below each bracket
and brings the distinct values inside the brackets with their counts, a few thousand
numbers whatever the size, from which the driver reads the exact rank. Should a
bracket miss its rank (the sketch's bound makes that impossible, but it is checked),
the bracket is widened to everything.
"""

from __future__ import annotations

import functools
import math
import operator
from collections.abc import Sequence
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

# The sketch's relative error: a bracket holds about 4·EPS·n values.
_EPS_VALUES = 1000


def lower_rank(q: float, n: int) -> int:
    """0-based rank of numpy's quantile q with method "lower"."""
    return int(math.floor(q * (n - 1)))


def median_ranks(n: int) -> tuple[int, int]:
    """The one or two 0-based ranks whose mean is numpy's median."""
    return ((n - 1) // 2, n // 2)


def order_statistics(frame: DataFrame, column: str, ranks: Sequence[int], n: int) -> dict[int, float]:
    """The value at each 0-based rank of `column` sorted ascending (n values, no null)."""
    wanted = sorted(set(ranks))
    if not wanted:
        return {}
    if n <= 4 * _EPS_VALUES:
        everything = _counts(frame, column)
        return {k: value_at_rank(everything, k) for k in wanted}
    eps = max(1e-7, _EPS_VALUES / n)
    probs = [p for k in wanted for p in (max(0.0, k / n - 2 * eps), min(1.0, (k + 1) / n + 2 * eps))]
    values = frame.approxQuantile(column, probs, eps)
    brackets = [(k, values[2 * i], values[2 * i + 1]) for i, k in enumerate(wanted)]
    x = F.col(column)
    below = frame.agg(*(F.count(F.when(x < lo, 1)).alias(f"b{i}") for i, (_, lo, _) in enumerate(brackets))).collect()[0]
    inside = _counts(frame.filter(functools.reduce(operator.or_, [(x >= lo) & (x <= hi) for _, lo, hi in brackets])), column)
    found: dict[int, float | None] = {
        k: value_at_rank([vc for vc in inside if lo <= vc[0] <= hi], k - int(below[f"b{i}"]))
        for i, (k, lo, hi) in enumerate(brackets)
    }
    if any(v is None for v in found.values()):
        everything = _counts(frame, column)
        found = {k: value_at_rank(everything, k) if v is None else v for k, v in found.items()}
    return found  # type: ignore[return-value]


def _counts(frame: DataFrame, column: str) -> list[tuple[float, int]]:
    """The distinct values of `column` with their counts, ascending."""
    return sorted((float(r[column]), int(r["count"])) for r in frame.groupBy(column).count().collect())


def value_at_rank(counts: Sequence[tuple[Any, int]], rank: int) -> Any:
    """The value at 0-based `rank` of the values `counts` describes; None outside them."""
    if rank < 0:
        return None
    seen = 0
    for value, count in counts:
        seen += count
        if rank < seen:
            return value
    return None
