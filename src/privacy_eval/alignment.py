"""Alignment sanity check: are the rows that the row key pairs closer than random pairs?

Column Direct Match Protection and the linkage attack trust the row key (or the row
position) to say which synthetic row was generated from which original row. A release
whose rows were shuffled, or whose key was renumbered, turns both into noise that reads
as "protected": few aligned values match, few true originals are found. This check
tells such a release apart from an aligned one; evaluation reports the status
`misaligned` (docs/metrics.md, "Alignment check") for the alignment-based metrics when
it fails. It belongs to the prepared inputs: `EvaluationInputs.alignment()` runs it
once, on first use by a metric that trusts the row key.

**Statistic.** For every original record x whose key has a synthetic partner y, and a
pseudo-random other synthetic record y' (see below), the paired difference

    D = g(x, y) - g(x, y')

where g is Gower's dissimilarity: the mean over the compared columns of a per-column
disagreement in [0, 1],

- categorical (non-numeric, or declared categorical): 0 when equal (null-safe), else 1;
- numeric: 0 when equal (null-safe: null = null, NaN = NaN, -0.0 = 0.0); 1 when only one
  side is a finite number (null, NaN or infinity against something else); otherwise
  |x - y| / range, the range being max - min of the column's finite values over both
  tables (plain inequality when that range is 0 or not finite).

Gower, because a perturbed number (what avatars and most releases produce) still counts
as closer than a random one, where plain inequality would call it "different" like any
other value; every column is bounded by 1, so no column dominates through its unit; and
min and max are exact whatever the partitioning, unlike a standard deviation.

**Rule.** A one-sided z-test on the mean of D: z = mean(D) / (sd(D) / sqrt(n)). The
release is *aligned* when z <= -Z_CRITICAL (4) over at least MIN_PAIRS (30) pairs. Under
"no closer than random" D has mean 0 and P(z <= -4) is about 3e-5 for a normal z; the
partner chain makes neighbouring D negatively correlated, so sd(D)/sqrt(n) over-estimates
the spread of the mean and the test is conservative (over 100-200 random reorderings of
each bundled avatar release z had a standard deviation of 0.86-0.88 and |z| <= 2.4; the
most extreme of 300 reorderings of the WBCD avatars gives z = -1.5 to -2.8 depending on
the seed, so a threshold of 2 or 3 would be too close). Aligned releases sit far away:
z = -75.8 (AIDS avatars, n = 2139), -22.7 (WBCD avatars, n = 683).
There is deliberately no margin on the size of the effect: a release that is random
except for one copied identifier among many columns is only slightly closer on average,
yet is exactly what Column Direct Match Protection must get to see; significance, which
grows with n, catches it. Below MIN_PAIRS the test has little power and the normal
approximation is poor: the result says `conclusive = False` and `aligned = False`;
evaluation should then warn rather than mark the metrics misaligned.

**Random partner, distributed and exact.** The synthetic side gets, per row, the
compared values of its successor in a pseudo-random order: rows are spread over
`n_buckets(n_synthetic)` buckets by h = xxhash64(seed, key) and ordered by (h, key)
inside a bucket; `lead` over that window gives the successor. The last row of each
bucket has no successor and is left out of the comparison (one row per 10,000). No row
reaches the driver, no window spans the whole table, and since the order is a function
of the key alone the pairing is the same however Spark partitions the data. Every
per-row figure (g, D, D^2, all in [-1, 1]) is rounded to a multiple of 2^-30 and summed
as a 64-bit integer: the sums, and with them every number in the result, are
bit-for-bit independent of partitioning and row order (a float sum is not), the
rounding (below 1e-9 per row) is far below anything the verdict looks at, and integer
sums cost much less than decimal ones. The sums hold up to 2^33 (8.6 billion) rows.

**Sample.** Above MAX_PAIRS (200,000) synthetic rows, `alignment_check` keeps on both
sides only the keys whose hash (another seed) falls in a share of about MAX_PAIRS /
n_synthetic: aligned pairs stay pairs, the sample does not depend on partitioning, and
the share is reported as `sample_fraction`. z grows with the square root of the pairs,
so 200,000 pairs leave the test far more power than the bundled releases need, and a
weaker test could only withhold a figure, never pass a misaligned one.

**One join with CDMP.** `with_random_partner(synthetic)` keeps every column of the
synthetic table and only adds columns, so it can stand in for the synthetic side of
CDMP's aligned join; `pair_disagreements(...)` are two per-row columns over that join
(its sides aliased ORIGINAL_ALIAS and SYNTHETIC_ALIAS) and `alignment_aggregates()`
plain aggregates over them, to put in the same `agg` as CDMP's match counts (references
bound to `o` and `s` still resolve after the `select("*", ...)`):

    o = original.alias(ORIGINAL_ALIAS)
    s = with_random_partner(synthetic, columns, KEY, n_synthetic).alias(SYNTHETIC_ALIAS)
    ranges = numeric_ranges(original, synthetic, numeric_columns)
    row = (
        o.join(s, qcol(KEY, o) == qcol(KEY, s))
        .select("*", *pair_disagreements(columns, ranges))
        .agg(*cdm_aggregates, *alignment_aggregates())
        .collect()[0]
    )
    alignment = alignment_result(row, columns, ranges, n_synthetic)

`alignment_check` does exactly this on its own. Only counts and means are computed and
reported; no record value reaches the driver, the result or a message.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from pyspark.sql import Column, DataFrame, Row, Window
from pyspark.sql import functions as F

from privacy_eval.columns import INTERNAL_PREFIX
from privacy_eval.frames import finite_double, finite_sql, qcol, quote, sequential_sum_sql

__all__ = [
    "BUCKET_ROWS",
    "DEFAULT_SEED",
    "MAX_PAIRS",
    "MIN_PAIRS",
    "ORIGINAL_ALIAS",
    "SYNTHETIC_ALIAS",
    "Z_CRITICAL",
    "AlignmentResult",
    "alignment_aggregates",
    "alignment_check",
    "alignment_result",
    "pair_disagreements",
    "n_buckets",
    "numeric_ranges",
    "partner_column",
    "with_random_partner",
]

#: Seed of the random pairing; any fixed value gives a reproducible check.
DEFAULT_SEED = 20_251_129
#: Aligned when z <= -Z_CRITICAL (one-sided, about 3e-5 for a normal z).
Z_CRITICAL = 4.0
#: Fewer compared pairs than this cannot tell aligned from shuffled reliably.
MIN_PAIRS = 30
#: About this many synthetic rows per bucket of the random pairing.
BUCKET_ROWS = 10_000
#: Above about this many synthetic rows the check runs on a sample of the keys.
MAX_PAIRS = 200_000
_SAMPLE_GRAIN = 2**20

_P = INTERNAL_PREFIX + "al_"
_HASH = _P + "hash"
_BUCKET = _P + "bucket"
_HAS_PARTNER = _P + "has_partner"
_G_ALIGNED, _G_RANDOM = _P + "g_aligned", _P + "g_random"
_N_ALIGNED, _SUM_ALIGNED = _P + "n_aligned", _P + "sum_aligned"
_N_PAIRS, _SUM_RANDOM = _P + "n_pairs", _P + "sum_random"
_SUM_D, _SUM_D2 = _P + "sum_d", _P + "sum_d2"
# Exact sums: each per-row figure in [-1, 1] is rounded once to a multiple of 1/_SCALE
# (a function of the row only) and summed as a long, which is associative.
_SCALE = 2**30
_INF = float("inf")


@dataclass(frozen=True)
class AlignmentResult:
    n_aligned: int                 # aligned pairs (keys on both sides)
    n_pairs: int                   # aligned pairs that also got a random partner: the test's n
    aligned_disagreement: float | None   # mean g over all aligned pairs
    random_disagreement: float | None    # mean g of the same originals with a random synthetic row
    difference: float | None       # mean D over the n_pairs (negative: aligned pairs are closer)
    z: float | None                # mean(D) / (sd(D) / sqrt(n_pairs)); -inf/inf when sd(D) = 0
    n_columns: int
    n_scaled_columns: int          # numeric columns compared by |x - y| / range
    seed: int
    n_buckets: int
    sample_fraction: float = 1.0   # share of the keys the check looked at

    @property
    def ratio(self) -> float | None:
        """Aligned over random disagreement: about 1 when the key pairs rows at random."""
        if self.aligned_disagreement is None or not self.random_disagreement:
            return None
        return self.aligned_disagreement / self.random_disagreement

    @property
    def conclusive(self) -> bool:
        return self.n_pairs >= MIN_PAIRS and self.z is not None

    @property
    def aligned(self) -> bool:
        return self.conclusive and self.z <= -Z_CRITICAL

    def reason(self) -> str:
        """One line for logs and details: the verdict and the figures behind it."""
        figures = (
            f"mean disagreement {_fmt(self.aligned_disagreement)} for aligned pairs vs "
            f"{_fmt(self.random_disagreement)} for random pairs, z = {_fmt(self.z, 1)} "
            f"over {self.n_pairs} pairs"
        )
        if self.aligned:
            return f"rows paired by the row key are closer than random pairs ({figures})"
        if not self.conclusive:
            return (
                f"too few aligned pairs to check the row alignment ({figures}; "
                f"at least {MIN_PAIRS} needed)"
            )
        return (
            f"rows paired by the row key are no closer than random pairs ({figures}; "
            f"aligned needs z <= -{Z_CRITICAL:g}): the rows were probably reordered or the "
            "key renumbered, so figures that rely on the alignment would be noise"
        )

    def details(self) -> dict[str, Any]:
        """JSON-safe (no NaN or infinity): counts, means and the rule."""
        return {
            "aligned": self.aligned,
            "conclusive": self.conclusive,
            "statistic": "gower_dissimilarity",
            "aligned_disagreement": self.aligned_disagreement,
            "random_disagreement": self.random_disagreement,
            "ratio": self.ratio,
            "difference": self.difference,
            "z": self.z if self.z is None or math.isfinite(self.z) else None,
            "z_infinite": self.z is not None and not math.isfinite(self.z),
            "z_threshold": -Z_CRITICAL,
            "min_pairs": MIN_PAIRS,
            "n_aligned": self.n_aligned,
            "n_pairs": self.n_pairs,
            "n_columns": self.n_columns,
            "n_scaled_columns": self.n_scaled_columns,
            "seed": self.seed,
            "n_buckets": self.n_buckets,
            "sample_fraction": self.sample_fraction,
            "reason": self.reason(),
        }


def _fmt(value: float | None, digits: int = 4) -> str:
    return "n/a" if value is None else f"{value:.{digits}f}"


# --------------------------------------------------------------------------
# building blocks (shared with CDMP's join, see the module docstring)
# --------------------------------------------------------------------------


def partner_column(name: str) -> str:
    """Name of the column holding compared column `name` of the random partner row."""
    return _P + "partner_" + name


def n_buckets(n_synthetic: int) -> int:
    return max(1, math.ceil(n_synthetic / BUCKET_ROWS))


def with_random_partner(
    synthetic: DataFrame,
    columns: Sequence[str],
    key: str,
    n_synthetic: int,
    seed: int = DEFAULT_SEED,
) -> DataFrame:
    """`synthetic` with, per row, the `columns` of another synthetic row (its successor
    in a pseudo-random order of the keys) as `partner_column(c)`, and a flag column.

    Every existing column is kept, so the result can replace the synthetic side of any
    join on `key`. The order depends on the key and the seed only (ties in the 64-bit
    hash are broken by the key, which is unique), hence not on partitioning.
    """
    hashed = synthetic.withColumn(_HASH, F.xxhash64(F.lit(seed), qcol(key))).withColumn(
        _BUCKET, F.pmod(F.col(_HASH), F.lit(n_buckets(n_synthetic)))
    )
    order = Window.partitionBy(_BUCKET).orderBy(_HASH, qcol(key))
    return hashed.select(
        "*",
        *(F.lead(qcol(c)).over(order).alias(partner_column(c)) for c in columns),
        # The key is never null, so a null successor key means "last of its bucket".
        F.lead(qcol(key)).over(order).isNotNull().alias(_HAS_PARTNER),
    ).drop(_HASH, _BUCKET)


# The two sides of the aligned join: `pair_disagreements` names its columns through these
# aliases.
ORIGINAL_ALIAS, SYNTHETIC_ALIAS = _P + "o", _P + "s"


def _double(value: float) -> str:
    """A Spark SQL double literal of `value`, exactly (repr round-trips)."""
    return repr(float(value)) + "D"


def numeric_ranges(
    original: DataFrame, synthetic: DataFrame, numeric: Sequence[str]
) -> dict[str, float | None]:
    """Per numeric column, max - min of its finite values over both tables, or None
    where that is not a usable scale (all missing, one value, or an overflowing range).

    One aggregation over both (cached) tables; min and max do not depend on the order.
    """
    if not numeric:
        return {}

    values = [finite_double(c).alias(f"v{i}") for i, c in enumerate(numeric)]
    stacked = original.select(*values).unionByName(synthetic.select(*values))
    bounds = [F.min(f"v{i}").alias(f"lo{i}") for i in range(len(numeric))]
    bounds += [F.max(f"v{i}").alias(f"hi{i}") for i in range(len(numeric))]
    row = stacked.agg(*bounds).collect()[0]
    ranges: dict[str, float | None] = {}
    for i, c in enumerate(numeric):
        lo, hi = row[f"lo{i}"], row[f"hi{i}"]
        spread = hi - lo if lo is not None and hi is not None else None
        ranges[c] = spread if spread is not None and 0 < spread < _INF else None
    return ranges


def _disagreement(x: str, y: str, scale: float | None) -> str:
    """SQL: one column's disagreement of two values, in [0, 1] (see the module docstring)."""
    if scale is None:
        return f"CASE WHEN {x} <=> {y} THEN 0.0D ELSE 1.0D END"
    xd, yd = f"CAST({x} AS DOUBLE)", f"CAST({y} AS DOUBLE)"
    # A null makes finite_sql null, which WHEN takes as false: such pairs get 1.
    # least(): stays bounded even when `scale` comes from other data than x and y.
    scaled = f"least(abs({xd} - {yd}) / {_double(scale)}, 1.0D)"
    return f"CASE WHEN {x} <=> {y} THEN 0.0D WHEN {finite_sql(xd)} AND {finite_sql(yd)} THEN {scaled} ELSE 1.0D END"


def _gower(
    x: Callable[[str], str],
    y: Callable[[str], str],
    columns: Sequence[str],
    ranges: Mapping[str, float | None],
) -> str:
    """SQL: the mean disagreement over `columns`; x(c) and y(c) name the two values of
    column c."""
    terms = sequential_sum_sql([_disagreement(x(c), y(c), ranges.get(c)) for c in columns])
    return f"{terms} / {_double(len(columns))}"


def pair_disagreements(columns: Sequence[str], ranges: Mapping[str, float | None]) -> list[Column]:
    """Per row of the join of the original (aliased ORIGINAL_ALIAS) with the output of
    `with_random_partner` (aliased SYNTHETIC_ALIAS) on the key: g of the aligned pair,
    and g of the original with the random partner (null for the rows without one).

    Select these before `alignment_aggregates`: each g is a long expression over every
    column, and computing it once per row in a projection, rather than inside every
    aggregate that needs it, keeps the generated code small. Each is written as one SQL
    expression: built from Column objects, it took one call into the JVM per operator,
    tens of thousands of calls at a few hundred columns.
    """
    def original(c: str) -> str:
        return f"{ORIGINAL_ALIAS}.{quote(c)}"

    def synthetic(c: str) -> str:
        return f"{SYNTHETIC_ALIAS}.{quote(c)}"

    aligned = _gower(original, synthetic, columns, ranges)
    random = _gower(original, lambda c: synthetic(partner_column(c)), columns, ranges)
    return [
        F.expr(aligned).alias(_G_ALIGNED),
        F.expr(f"CASE WHEN {synthetic(_HAS_PARTNER)} THEN {random} END").alias(_G_RANDOM),
    ]


def alignment_aggregates() -> list[Column]:
    """Counts and exact sums over the columns of `pair_disagreements`, for
    `alignment_result`."""
    aligned, random = F.col(_G_ALIGNED), F.col(_G_RANDOM)
    d = aligned - random  # null without a partner: left out of the sums below

    def exact_sum(x: Column, name: str) -> Column:
        return F.sum(F.round(x * F.lit(float(_SCALE))).cast("long")).alias(name)

    return [
        F.count(F.lit(1)).alias(_N_ALIGNED),
        exact_sum(aligned, _SUM_ALIGNED),
        F.count(random).alias(_N_PAIRS),
        exact_sum(random, _SUM_RANDOM),
        exact_sum(d, _SUM_D),
        exact_sum(d * d, _SUM_D2),
    ]


def alignment_result(
    row: Row,
    columns: Sequence[str],
    ranges: Mapping[str, float | None],
    n_synthetic: int,
    seed: int = DEFAULT_SEED,
    sample_fraction: float = 1.0,
) -> AlignmentResult:
    """The result from the collected row of `alignment_aggregates` (exact arithmetic).
    `n_synthetic` is the number of synthetic rows the random pairing ran over."""
    n_aligned, n = int(row[_N_ALIGNED]), int(row[_N_PAIRS])

    def exact(name: str) -> Fraction:
        value = row[name]  # None: no row to sum
        return Fraction(value or 0, _SCALE)

    def mean(total: Fraction, count: int) -> float | None:
        return float(total / count) if count else None

    sum_d = exact(_SUM_D)
    z: float | None = None
    if n >= 2:
        # Rounding each D and D^2 separately can leave a variance a hair below 0.
        variance = max(Fraction(0), (exact(_SUM_D2) - sum_d * sum_d / n) / (n - 1))
        if variance > 0:
            z = float(sum_d / n) / math.sqrt(float(variance / n))
        else:  # every D equal: certain, in whichever direction D points
            z = -_INF if sum_d < 0 else _INF if sum_d > 0 else 0.0
    return AlignmentResult(
        n_aligned=n_aligned,
        n_pairs=n,
        aligned_disagreement=mean(exact(_SUM_ALIGNED), n_aligned),
        random_disagreement=mean(exact(_SUM_RANDOM), n),
        difference=mean(sum_d, n),
        z=z,
        n_columns=len(columns),
        n_scaled_columns=sum(1 for c in columns if ranges.get(c) is not None),
        seed=seed,
        n_buckets=n_buckets(n_synthetic),
        sample_fraction=sample_fraction,
    )


def alignment_check(
    original: DataFrame,
    synthetic: DataFrame,
    columns: Sequence[str],
    numeric: Collection[str],
    key: str,
    n_synthetic: int,
    seed: int = DEFAULT_SEED,
) -> AlignmentResult:
    """Are rows paired by `key` closer than random pairs? Two Spark jobs: the numeric
    ranges (no shuffle), then the aligned join with the random partner and one
    aggregation.

    `original` and `synthetic` are prepared inputs (`EvaluationInputs.original` etc.):
    `key` unique and non-null, `columns` of one type on both sides, `numeric` the
    columns to compare by distance rather than by equality.

    Above MAX_PAIRS synthetic rows, both sides keep only the keys whose hash falls in a
    share of about MAX_PAIRS / n_synthetic (the same keys on both sides, so aligned
    pairs stay pairs; a function of the key, so the same whatever the partitioning).
    Unsampled, it was the job's slowest phase at large sizes, and a sanity check needs
    no more: z grows with the square root of the pairs, and the aligned bundled
    releases already reach z = -22.7 with 683 pairs. A weaker test could only call an
    aligned release misaligned (value withheld, gate failed), never the reverse.
    """
    ranges = numeric_ranges(original, synthetic, [c for c in columns if c in numeric])
    fraction = 1.0
    if n_synthetic > MAX_PAIRS:
        kept = math.ceil(_SAMPLE_GRAIN * MAX_PAIRS / n_synthetic)
        fraction = kept / _SAMPLE_GRAIN
        # Another seed than the partner order's, so that the two do not correlate.
        sampled = F.pmod(F.xxhash64(F.lit(seed + 1), qcol(key)), F.lit(_SAMPLE_GRAIN)) < F.lit(kept)
        original, synthetic = original.filter(sampled), synthetic.filter(sampled)
        n_synthetic = max(1, round(n_synthetic * fraction))  # sizes the buckets only
    o = original.alias(ORIGINAL_ALIAS)
    s = with_random_partner(synthetic, columns, key, n_synthetic, seed).alias(SYNTHETIC_ALIAS)
    row = (
        o.join(s, qcol(key, o) == qcol(key, s), "inner")
        .select(*pair_disagreements(columns, ranges))
        .agg(*alignment_aggregates())
        .collect()[0]
    )
    return alignment_result(row, columns, ranges, n_synthetic, seed, fraction)
