"""Preparing the attack: its configuration checked against the data, the targets and
blocking values in the attack's own columns, which records are complete, and the
per-side counts and ranges (one native aggregation over both sides, or the figures
``prepare_inputs`` computed in its profile pass), and the moments of the side the
covariance comes from (exact sums: the same under any partitioning).

See docs/metrics.md, Linkage attack: candidates and blocking; truth coverage and "not
measurable".
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import TYPE_CHECKING, Any

import numpy as np
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from privacy_eval.columns import KEY
from privacy_eval.config import LinkageConfig
from privacy_eval.errors import InputError
from privacy_eval.frames import (
    as_double_sql,
    canonical_value,
    centred_sums,
    conjunction,
    finite_sql,
    qcol,
    quote,
    stacked_sides,
)
from privacy_eval.inputs import InputPassWork
from privacy_eval.linkage import names as N
from privacy_eval.linkage.kernel.whitening import Moments

if TYPE_CHECKING:
    from privacy_eval.inputs import EvaluationInputs, PairedWhere, SideAggregates

__all__ = [
    "METHODS",
    "AttackPlan",
    "PreparedSides",
    "SideStats",
    "check_linkage_inputs",
    "complete_targets",
    "covariance_moments",
    "input_pass_work",
    "prepare_sides",
    "side_statistics",
    "validated_plan",
]

METHODS = ("mahalanobis", "weighted")


@dataclass(frozen=True)
class AttackPlan:
    """The configuration once checked: targets, blocking columns, methods (deduplicated,
    in the configured order) and top-k (sorted, deduplicated)."""

    targets: tuple[str, ...]
    blocking: tuple[str, ...]
    methods: tuple[str, ...]
    top_k: tuple[int, ...]

    @property
    def target_columns(self) -> list[str]:
        return N.target_columns(len(self.targets))

    @property
    def blocking_columns(self) -> list[str]:
        return N.blocking_columns(len(self.blocking))


# --------------------------------------------------------------------------
# the configuration against the data
# --------------------------------------------------------------------------


def check_linkage_inputs(inputs: EvaluationInputs, config: LinkageConfig) -> None:
    """Every check of ``config`` against the prepared tables, without reading data:
    targets and blocking columns must be compared columns, then the configuration
    against the tables' schemas (:func:`validated_plan`). Raises :class:`InputError`."""
    checked_plan(inputs, config)


def checked_plan(inputs: EvaluationInputs, config: LinkageConfig) -> AttackPlan:
    """:func:`check_linkage_inputs`, returning the checked configuration."""
    for role, names in (("target", config.targets), ("blocking column", config.blocking)):
        for name in names:
            if name not in inputs.columns:
                raise InputError(
                    f"linkage: {role} '{name}' is not a compared column "
                    "(missing from the data, excluded, or the row key)"
                )
    return validated_plan(inputs.original, inputs.synthetic, KEY, config)


def validated_plan(original: DataFrame, synthetic: DataFrame, key: str, config: LinkageConfig) -> AttackPlan:
    """Check ``config`` against the two tables' schemas (no data read); raises
    :class:`InputError`."""
    targets = _checked_targets(original, synthetic, key, config)
    blocking = _checked_blocking(original, synthetic, config)
    methods = list(dict.fromkeys(config.methods))  # each once, in the order given
    top_k = config.top_k or [1]
    return AttackPlan(tuple(targets), tuple(blocking), tuple(methods), tuple(sorted(set(top_k))))


def _checked_targets(original: DataFrame, synthetic: DataFrame, key: str, config: LinkageConfig) -> list[str]:
    targets = list(config.targets)
    for side, frame in (("original", original), ("synthetic", synthetic)):
        if key not in frame.columns:
            raise InputError(f"linkage: row key column '{key}' is missing from the {side} table")
        for t in targets:
            if t not in frame.columns:
                raise InputError(f"linkage: target column '{t}' is missing from the {side} table")
            dtype = frame.schema[t].dataType
            if not isinstance(dtype, T.NumericType):
                raise InputError(
                    f"linkage: target column '{t}' is {dtype.simpleString()} in the {side} table, not "
                    "numeric; the distance needs numbers (cast it, or leave it out of 'targets' and "
                    "block on it instead)"
                )
    return targets


def _checked_blocking(original: DataFrame, synthetic: DataFrame, config: LinkageConfig) -> list[str]:
    blocking = list(config.blocking or [])
    twice = _first_repeated(blocking)
    if twice is not None:
        raise InputError(f"linkage: blocking column '{twice}' is listed twice")
    for b in blocking:
        for side, frame in (("original", original), ("synthetic", synthetic)):
            if b not in frame.columns:
                raise InputError(f"linkage: blocking column '{b}' is missing from the {side} table")
            if isinstance(frame.schema[b].dataType, T.MapType):
                raise InputError(f"linkage: blocking column '{b}' is a map and cannot be compared for equality")
    return blocking




def _first_repeated(names: Sequence[str]) -> str | None:
    seen: set[str] = set()
    for name in names:
        if name in seen:
            return name
        seen.add(name)
    return None


# --------------------------------------------------------------------------
# complete records
# --------------------------------------------------------------------------


def is_finite_number(x: str) -> Column:
    """True where the double of SQL text `x` is a finite number; false (never null) for
    null, NaN and ±inf."""
    return F.expr(f"({x} IS NOT NULL AND {finite_sql(x)})")


def _all_finite(xs: Sequence[str]) -> Column:
    return conjunction([is_finite_number(x) for x in xs])


def complete_condition(tcols: Sequence[str]) -> Column:
    """Every target of the attack's own columns is a finite number."""
    return _all_finite([quote(c) for c in tcols])


def input_pass_work(config: LinkageConfig) -> InputPassWork:
    """What the attack of ``config`` asks of the input passes (``prepare_inputs(work=...)``):
    its true pairs, counted by the key check (:func:`complete_targets`), and its per-side
    statistics, by the profile pass (:func:`side_statistics`). They spare it a join on
    the key and a pass over both tables of its own."""
    return InputPassWork(made_for=config, paired_where=complete_targets(config), side_aggregates=side_statistics(config))


def complete_targets(config: LinkageConfig) -> PairedWhere:
    """``InputPassWork.paired_where``: a record can be half of a true pair when every
    target is a finite number, as the attack requires (it drops or refuses the
    others). None while a target is missing or not a number: the attack's own
    validation then says so."""

    def condition(frame: DataFrame) -> Column | None:
        xs = _target_values(config, frame)
        return None if xs is None else _all_finite(xs)

    return condition


def _target_values(config: LinkageConfig, frame: DataFrame) -> list[str] | None:
    """The targets of ``frame`` as doubles (SQL text), as the attack reads them; None
    while one is missing or not a number (the attack's own validation then says so)."""
    fields = {f.name: f.dataType for f in frame.schema.fields}
    if not all(isinstance(fields.get(t), T.NumericType) for t in config.targets):
        return None
    return [as_double_sql(t) for t in config.targets]


# --------------------------------------------------------------------------
# per-side statistics
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class SideStats:
    """One side's record count, records with a non-finite target, such values per
    target, and the minima and maxima of its complete records per target (+inf and
    -inf without any)."""

    n_rows: int
    n_incomplete: int
    bad: np.ndarray  # int64 (p,): null/NaN/inf values per target
    col_min: np.ndarray
    col_max: np.ndarray

    @property
    def n(self) -> int:
        """Complete records."""
        return self.n_rows - self.n_incomplete

    @classmethod
    def from_values(cls, values: Mapping[str, Any] | None, p: int) -> SideStats:
        """From the values of :func:`_stat_aggregates` (None: a side without rows)."""
        if values is None:
            return cls(0, 0, np.zeros(p, dtype=np.int64), np.full(p, np.inf), np.full(p, -np.inf))
        n_rows, n_incomplete = int(values["n_rows"]), int(values["n_incomplete"])
        complete = n_rows > n_incomplete
        return cls(
            n_rows, n_incomplete, np.array([values[f"bad{j}"] for j in range(p)], dtype=np.int64),
            np.array([values[f"min{j}"] if complete else np.inf for j in range(p)], dtype=np.float64),
            np.array([values[f"max{j}"] if complete else -np.inf for j in range(p)], dtype=np.float64),
        )


def side_statistics(config: LinkageConfig) -> SideAggregates:
    """``InputPassWork.side_aggregates``: the attack's per-side statistics as aggregates
    of the profile pass over the data; given them, the attack makes no pass of its own
    over both tables. None while a target is missing or not a number: the attack's own
    validation then says so."""

    def aggregates(frame: DataFrame) -> tuple[DataFrame, dict[str, Column]] | None:
        xs = _target_values(config, frame)
        return None if xs is None else _stat_aggregates(frame, xs)

    return aggregates


def _stat_aggregates(frame: DataFrame, xs: Sequence[str]) -> tuple[DataFrame, dict[str, Column]]:
    """``frame`` with per-record columns the statistics need, and over it, by name: the
    null/NaN/inf counts per target (``xs``: their doubles, SQL text) and the minima and
    maxima of the complete records.

    The per-record flags and masked values are columns of their own, computed once per
    record, rather than expressions repeated inside the aggregates (the completeness
    test sat in 21 of them), which costs the pass's tasks less CPU. The covariance is not
    among them: Spark's ``avg`` and ``covar_pop`` add doubles in the partitions' order,
    whose last bits would then follow the partitioning (see :func:`covariance_moments`).
    """
    p = len(xs)
    ok = [f"{N.PREFIX}ok{j}" for j in range(p)]
    x = [f"{N.PREFIX}x{j}" for j in range(p)]
    complete = N.PREFIX + "complete"
    masked = (
        frame.select(
            "*", *(is_finite_number(c).alias(name) for c, name in zip(xs, ok)), *(F.expr(c).alias(name) for c, name in zip(xs, x))
        )
        .withColumn(complete, conjunction([F.col(name) for name in ok]))
        .withColumns({name: F.when(F.col(complete), F.col(name)) for name in x})
    )
    v = [F.col(name) for name in x]
    return masked, {
        "n_rows": F.count(F.lit(1)),
        "n_incomplete": F.count(F.when(~F.col(complete), 1)),
        **{f"bad{j}": F.count(F.when(~F.col(name), 1)) for j, name in enumerate(ok)},
        **{f"min{j}": F.min(v[j]) for j in range(p)},
        **{f"max{j}": F.max(v[j]) for j in range(p)},
    }


def measure_sides(orig: DataFrame, syn: DataFrame, tcols: Sequence[str]) -> tuple[SideStats, SideStats]:
    """:class:`SideStats` of both sides, from one aggregation over both."""
    stacked, aggregates = _stat_aggregates(stacked_sides(orig, syn, tcols, N.SIDE), [quote(c) for c in tcols])
    rows = stacked.groupBy(N.SIDE).agg(*(c.alias(name) for name, c in aggregates.items())).collect()
    values = {r[N.SIDE]: r.asDict() for r in rows}
    return SideStats.from_values(values.get(0), len(tcols)), SideStats.from_values(values.get(1), len(tcols))


def _hinted_stats(side_aggregates: Mapping[str, Mapping[str, Any]], p: int) -> tuple[SideStats, SideStats]:
    try:
        return SideStats.from_values(side_aggregates["original"], p), SideStats.from_values(side_aggregates["synthetic"], p)
    except (KeyError, TypeError):
        raise ValueError(
            "the input passes' side_aggregates must be those of InputPassWork(side_aggregates=side_statistics(config))"
        ) from None


# --------------------------------------------------------------------------
# the two sides, ready to block
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class PreparedSides:
    """Both sides in the attack's own columns (row key, blocking values, targets as
    doubles), incomplete records dropped, with their statistics."""

    original: DataFrame
    synthetic: DataFrame
    integral_key: bool  # the row key is an integer (else compared by its string form)
    stats: tuple[SideStats, SideStats]
    warnings: tuple[str, ...]

    @property
    def n_original(self) -> int:
        return self.stats[0].n

    @property
    def n_synthetic(self) -> int:
        return self.stats[1].n


# The records the covariance comes from, per cov_from: 0 the original side, 1 the synthetic.
_COVARIANCE_SIDES = {"raw": (0,), "anon": (1,), "pooled": (0, 1)}


def covariance_moments(sides: PreparedSides, tcols: Sequence[str], cov_from: str) -> Moments:
    """The moments of the records ``cov_from`` names (``pooled``: both sides' together),
    from exact sums over them (:func:`frames.centred_sums`, one aggregation): mean and
    centred cross-products rounded once, the same under any partitioning."""
    picked = _COVARIANCE_SIDES[cov_from]
    if not sum(sides.stats[i].n for i in picked):
        return Moments.from_array(np.zeros((0, len(tcols))))
    lows = np.min([sides.stats[i].col_min for i in picked], axis=0)
    highs = np.max([sides.stats[i].col_max for i in picked], axis=0)
    both = (sides.original, sides.synthetic)
    records = functools.reduce(DataFrame.unionByName, (both[i].select(*tcols) for i in picked))
    sums = centred_sums(records, tcols, list(lows), list(highs))
    n, d, dd = sums.rows, sums.first, sums.second
    mean = [_rounded(c + total / n) for c, total in zip(sums.centres, d)]
    m2 = [[_rounded(dd[j][k] - d[j] * d[k] / n) for k in range(len(tcols))] for j in range(len(tcols))]
    return Moments(n, np.array(mean), np.array(m2), lows, highs)


def _rounded(x: Fraction) -> float:
    """x to the nearest double; +-inf beyond the largest."""
    try:
        return float(x)
    except OverflowError:
        return math.inf if x > 0 else -math.inf


def prepare_sides(
    original: DataFrame,
    synthetic: DataFrame,
    key: str,
    plan: AttackPlan,
    config: LinkageConfig,
    side_aggregates: Mapping[str, Mapping[str, Any]] | None,
) -> PreparedSides:
    """Shape both sides, measure them (or read ``side_aggregates``), refuse or drop the
    incomplete records, and refuse what cannot be attacked. Raises :class:`InputError`."""
    tcols = plan.target_columns
    integral_key = isinstance(original.schema[key].dataType, (T.ByteType, T.ShortType, T.IntegerType, T.LongType))
    orig = _shaped(original, key, plan, integral_key)
    syn = _shaped(synthetic, key, plan, integral_key)
    if side_aggregates is not None:
        stats = _hinted_stats(side_aggregates, len(tcols))
    else:
        stats = measure_sides(orig, syn, tcols)
    _check_complete(stats, plan.targets, config)
    warnings: list[str] = []
    dropped_o, dropped_s = stats[0].n_incomplete, stats[1].n_incomplete
    if dropped_o or dropped_s:
        complete = complete_condition(tcols)
        orig = orig.filter(complete)
        syn = syn.filter(complete)
        warnings.append(
            f"linkage: dropped {dropped_o} original and {dropped_s} synthetic record(s) with a "
            "null/NaN/infinite target value (drop_incomplete)"
        )
    _check_attackable(stats, plan.targets)
    _check_spans(stats, plan.targets)
    return PreparedSides(orig, syn, integral_key, stats, tuple(warnings))


def _shaped(frame: DataFrame, key: str, plan: AttackPlan, integral_key: bool) -> DataFrame:
    # Keys of one type on both sides; non-integral ones are compared by their string
    # form, canonical (-0.0 as 0.0) like the blocking values.
    k = qcol(key).cast("long") if integral_key else canonical_value(frame, key).cast("string")
    bcols = plan.blocking_columns
    if plan.blocking:
        blocks = [canonical_value(frame, b).alias(c) for b, c in zip(plan.blocking, bcols)]
    else:
        blocks = [F.lit(0).alias(bcols[0])]
    xs = [qcol(t).cast("double").alias(c) for t, c in zip(plan.targets, plan.target_columns)]
    return frame.select(k.alias(N.KEY), *blocks, *xs)


def _check_complete(stats: tuple[SideStats, SideStats], targets: Sequence[str], config: LinkageConfig) -> None:
    bad_o, bad_s = stats[0].bad, stats[1].bad
    if (bad_o.any() or bad_s.any()) and not config.drop_incomplete:
        j = int(np.flatnonzero((bad_o + bad_s) > 0)[0])
        n_cols = int(((bad_o + bad_s) > 0).sum())
        raise InputError(
            f"linkage: target column '{targets[j]}' has {int(bad_o[j])} null/NaN/infinite value(s) "
            f"in the original table and {int(bad_s[j])} in the synthetic table ({n_cols} target "
            "column(s) affected); a missing coordinate would shorten a distance and overstate a "
            "match: impute them, or set metrics.linkage.drop_incomplete: true to drop such records "
            "(their count is reported)"
        )


def _check_attackable(stats: tuple[SideStats, SideStats], targets: Sequence[str]) -> None:
    n_o, n_s = stats[0].n, stats[1].n
    if n_s == 0:
        raise InputError("linkage: no synthetic record left to attack (every one has a missing target value)")
    if n_o < 2:
        raise InputError(
            f"linkage: need at least 2 original records with every target present to attack; got {n_o}"
        )
    if np.all(stats[0].col_min == stats[0].col_max):
        raise InputError(
            f"linkage: fewer than 2 distinct original records on the targets: every target column "
            f"({', '.join(repr(t) for t in targets)}) is constant over the originals, so no "
            "candidate can be told apart"
        )


def _check_spans(stats: tuple[SideStats, SideStats], targets: Sequence[str]) -> None:
    """Refuse a target whose values, over both sides, span more than the largest double:
    the differences the scores are made of (and the weighted method's range) would be
    infinite, and the column would drop out of the weighted score."""
    with np.errstate(over="ignore"):
        spans = np.maximum(stats[0].col_max, stats[1].col_max) - np.minimum(stats[0].col_min, stats[1].col_min)
    if not np.isfinite(spans).all():
        j = int(np.flatnonzero(~np.isfinite(spans))[0])
        raise InputError(
            f"linkage: target column '{targets[j]}' has values too large in size for the attack's arithmetic: "
            "their span (max - min over both tables) is beyond the largest double, 1.8e308; divide the column by a "
            "power of ten on both sides, or leave it out of 'targets'"
        )
