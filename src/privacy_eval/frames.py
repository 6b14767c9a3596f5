"""DataFrame steps that several modules share: column references, counting equal rows
across the two tables (whole, or by row digests when they are wide), the task count of
shuffles of whole rows, distinct values per column, exact sums of 64-bit hashes and
exact moments of doubles, and small frames built on the driver.

Equality is the spec's "exact and null-safe": two nulls match, two NaNs match, -0.0
matches 0.0. Spark's grouping keys and `<=>` already behave this way for doubles
(NaN = NaN and -0.0 = 0.0 are normalised in joins and aggregations); tests pin it.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from fractions import Fraction

from pyspark.sql import Column, DataFrame, Row, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from privacy_eval.columns import INTERNAL_PREFIX

N_ORIGINAL = INTERNAL_PREFIX + "n_original"
N_SYNTHETIC = INTERNAL_PREFIX + "n_synthetic"
_CACHED_PARTITIONING = "spark.sql.optimizer.canChangeCachedPlanOutputPartitioning"
# Spark >= 4.3; older versions accept the key and ignore it.
_BYPASS_PARTIAL = "spark.sql.execution.bypassPartialAggregation"
_CONSTRAINTS = "spark.sql.constraintPropagation.enabled"
_SHUFFLE_PARTITIONS = "spark.sql.shuffle.partitions"
# Cells (rows x columns) per task of a shuffle of whole rows (whole_row_shuffles):
# 2.5e6 rows of six columns fit a task's share of a 4g local driver.
CELLS_PER_TASK = 15_000_000
# cached_row_occurrences counts rows by their digests from this width and size on
# (docs/benchmarks.md, "Wide rows"); below them whole rows are grouped.
DIGEST_MIN_COLUMNS = 24
DIGEST_MIN_ROWS = 2_000_000
# Undecided digests up to this many are broadcast to the rows that carry them.
BROADCAST_DIGESTS = 2_000_000
_DIGEST = INTERNAL_PREFIX + "digest"
_HASHED_ALIKE = (
    T.NumericType, T.StringType, T.BooleanType, T.DateType, T.TimestampType, T.TimestampNTZType, T.BinaryType,
)


@contextlib.contextmanager
def _session_setting(spark: SparkSession, key: str, value: str) -> Iterator[None]:
    """`key` set to `value` for the duration, then restored (unset if it was unset).

    The setting is the Spark session's: a query another thread plans meanwhile sees it too.
    Every use below costs time that way, never a wrong result."""
    conf = spark.conf
    before = conf.get(key, None)
    conf.set(key, value)
    try:
        yield
    finally:
        if before is None:
            conf.unset(key)
        else:
            conf.set(key, before)


def collect_grouped_by_key(frame: DataFrame) -> list[Row]:
    """`frame.collect()` for a query grouping by the row key (nearly one group per row).

    Partial aggregation before the shuffle cannot shrink such data: it builds a hash
    map of every row and spills it; skipping it makes the key check faster. Set for this
    one query.
    """
    with _session_setting(frame.sparkSession, _BYPASS_PARTIAL, "true"):
        return frame.collect()


def persist_aggregate(frame: DataFrame) -> DataFrame:
    """`frame.persist()` for a grouped result that is read a few times, not joined.

    Spark plans a cached query without coalescing its shuffle partitions by default, so
    that later queries may rely on its partitioning; a few hundred aggregated rows are
    then written and read by spark.sql.shuffle.partitions tasks. Allowing it (read when
    the cache is defined, so set for this call only) makes the linkage histograms' two
    jobs one task each.
    """
    with _session_setting(frame.sparkSession, _CACHED_PARTITIONING, "true"):
        return frame.persist()


def quote(identifier: str) -> str:
    """A Spark SQL identifier, quoted: `F.col("a.b")` would look for field `b` of a
    struct `a`, the quoted name for the column `a.b`."""
    return "`" + identifier.replace("`", "``") + "`"


def qcol(name: str, frame: DataFrame | None = None) -> Column:
    """A column by its exact name, even with dots, spaces or backticks in it."""
    return frame[quote(name)] if frame is not None else F.col(quote(name))


def canonical_value(frame: DataFrame, name: str) -> Column:
    """Column `name` of `frame` in the one form that equal values share: -0.0 as 0.0 and
    every NaN as one NaN (floating-point columns; others as they are), of the same type.

    Spark's grouping and `<=>` already treat those as equal; this form is for where a
    value is taken apart from them: its text (a categorical value of the distance space,
    a linkage key that is not integral), its hash (the linkage's blocks). Int 5 and double
    5.0 are equal by the type plan, which gives a column one type on both sides."""
    c = qcol(name, frame)
    kind = frame.schema[name].dataType
    if isinstance(kind, (T.FloatType, T.DoubleType)):
        zero, nan = F.lit(0.0).cast(kind), F.lit(float("nan")).cast(kind)
        return F.when(F.isnan(c), nan).when(c == zero, zero).otherwise(c)
    return c


# A sum written t1 + t2 + ... nests one level per term, and Spark's code generation
# overflows its stack at a few hundred (measured: 501 terms ran, 600 did not). From this
# many terms on, `sequential_sum_sql` folds them over an array instead.
FLAT_SUM_TERMS = 64


def sequential_sum_sql(terms: Sequence[str]) -> str:
    """SQL: 0.0 + t1 + t2 + ... + tn of doubles, added left to right whatever n (so the
    same rounding in either form), in an expression whose depth does not grow with n:
    beyond FLAT_SUM_TERMS, aggregate() over array(t1, ..., tn), a flat list."""
    if len(terms) < FLAT_SUM_TERMS:
        return "(" + " + ".join(["0.0D", *terms]) + ")"
    return f"aggregate(array({', '.join(terms)}), 0.0D, (acc, t) -> acc + t)"


def conjunction(conditions: Sequence[Column]) -> Column:
    """c1 AND c2 AND ... as a balanced tree: its depth grows with log2(n), not n (AND is
    associative, nulls included)."""
    if not conditions:
        return F.lit(True)
    level = list(conditions)
    while len(level) > 1:
        level = [level[i] & level[i + 1] if i + 1 < len(level) else level[i] for i in range(0, len(level), 2)]
    return level[0]


def finite_sql(x: str) -> str:
    """SQL text: the double `x` is a finite number. False for NaN and ±infinity, null for
    null (which CASE WHEN and WHERE take as false). The one test of "a finite number" of
    a column's values: alignment ranges, KPR's bins, the distance space, the linkage's
    complete records."""
    return f"(NOT isnan({x}) AND abs({x}) < CAST('Infinity' AS DOUBLE))"


def as_double_sql(name: str) -> str:
    """SQL text: column `name` cast to double."""
    return f"CAST({quote(name)} AS DOUBLE)"


def finite_double(name: str) -> Column:
    """Column `name` as a double where it is a finite number; null for null, NaN and ±inf."""
    x = as_double_sql(name)
    return F.expr(f"CASE WHEN {finite_sql(x)} THEN {x} END")


# A column whose largest magnitude lies outside [2^-400, 2^400) is read as x·2^-e, e its
# binary exponent (binary_exponent), wherever doubles compute with its values: its
# moments are exact whatever their size (exact_moments), but beyond the range (x -
# mean)^2 overflows from about 1.3e154 and a bin position (x - origin) / step can, and
# below it squared deviations vanish. Within the range nothing is rescaled: a sum of
# even 2^63 squared deviations below (2^401)^2 stays below 2^865, far from the largest
# double (about 2^1024), and two distinct values near a magnitude of 2^-400 or more
# differ by at least 2^-453, whose square, 2^-906, is still a normal double. Scaling by a
# power of two is exact (barring results below 2^-1022): on rescaled data every
# difference, square and quotient is the one an unbounded exponent would give, scaled by
# 2^-e.
RESCALE_ABOVE = 2.0**400
RESCALE_BELOW = 2.0**-400


def binary_exponent(largest: float) -> int:
    """The e by which a column whose largest magnitude is `largest` is rescaled (x·2^-e
    in [0.5, 1)); 0 (no rescaling) within [RESCALE_BELOW, RESCALE_ABOVE) and for 0."""
    if largest == 0 or RESCALE_BELOW <= largest < RESCALE_ABOVE:
        return 0
    return max(math.frexp(largest)[1], -1022)  # 2^1022 at most: a finite factor


def rescaled(column: Column, exponent: int) -> Column:
    """`column` (doubles) times 2^-exponent, exactly; the column itself for 0. Beyond a
    normal double (|exponent| > 1022) as two factors, each a normal double."""
    if exponent == 0:
        return column
    if abs(exponent) <= 1022:
        return column * F.lit(math.ldexp(1.0, -exponent))
    half = exponent // 2
    return column * F.lit(math.ldexp(1.0, -half)) * F.lit(math.ldexp(1.0, half - exponent))


# Exact moments: a finite double is m·2^q, m an integer below 2^53 and q the unit of its
# last place (-1074 at least). Summed per column and q, in slices of m small enough that
# long sums cannot overflow below 2^42 rows, then recombined on the driver as integers.
_UNIT_BITS, _UNITS = 18, 3    # m in 3 slices of 18 bits (its first moment)
_SQUARE_BITS, _SQUARES = 9, 6  # m in 6 slices of 9 bits: m^2 = sum over w of 2^(9w) sum_(i+j=w) s_i s_j
_LEAST_UNIT = -1074


@dataclass(frozen=True)
class ExactMoments:
    """The frame's rows, and the count, min, max, sum and sum of squares of a column's
    finite values, the sums exact (integers in units of 2^-2148): the same under any
    partitioning or row order, unlike a sum of doubles, whose last bits depend on the
    order of its additions."""

    rows: int
    count: int
    low: float | None
    high: float | None
    total: int    # sum of x, times 2^1074
    squares: int  # sum of x^2, times 2^2148

    def mean(self, exponent: int = 0) -> float | None:
        """The mean, in units of 2^exponent (frames.binary_exponent), rounded once."""
        if not self.count:
            return None
        return float(Fraction(self.total, self.count) * _power(-_LEAST_UNIT + exponent))

    def sd(self, exponent: int = 0, ddof: int = 1) -> float | None:
        """sqrt(sum of squared deviations / (count - ddof)), in units of 2^exponent:
        exact up to the square root's rounding; None below ddof + 1 values."""
        if self.count <= ddof:
            return None
        deviations = Fraction(self.squares) - Fraction(self.total * self.total, self.count)  # times 2^2148
        variance = deviations / (self.count - ddof) * _power(2 * (-_LEAST_UNIT + exponent))  # in units^2
        return _square_root(variance)


def _power(k: int) -> Fraction:
    """2^-k, exactly."""
    return Fraction(1, 1 << k) if k >= 0 else Fraction(1 << -k)


def _square_root(x: Fraction) -> float:
    """sqrt(x) for x >= 0, to 64 bits before the rounding to a double (math.isqrt)."""
    if x <= 0:
        return 0.0
    shift = max(0, 128 - (x.numerator.bit_length() - x.denominator.bit_length()))
    shift += shift % 2
    root = math.isqrt((x.numerator << shift) // x.denominator)
    return float(Fraction(root, 1 << (shift // 2)))


def exact_moments(frame: DataFrame, names: Sequence[str]) -> list[ExactMoments]:
    """`ExactMoments` of each column's finite values (`finite_double`), in one
    aggregation (grouped by column and q, null for the other values: a few thousand
    groups at most)."""
    if not names:
        return []
    value = F.explode(F.array(*(F.struct(F.lit(i).alias("i"), finite_double(c).alias("x")) for i, c in enumerate(names))))
    x = F.col("v.x")
    a = F.abs(x)
    guess = F.floor(F.log2(a)).cast("int")  # within one of the binary exponent
    exponent = (F.when(F.pow(F.lit(2.0), guess) > a, guess - 1)
                .when(F.pow(F.lit(2.0), guess + 1) <= a, guess + 1).otherwise(guess))
    q = F.when(a == 0, 0).when(x.isNotNull(), F.greatest(exponent - 52, F.lit(_LEAST_UNIT)))
    m = F.when(a == 0, 0).otherwise(a / F.pow(F.lit(2.0), q)).cast("long")  # exact: an integer below 2^53
    sign = F.signum(x).cast("long")

    def piece(bits: int, k: int) -> Column:
        return F.shiftright(F.col("m"), bits * k).bitwiseAND(F.lit((1 << bits) - 1))

    pieces = [piece(_SQUARE_BITS, k) for k in range(_SQUARES)]

    def weighing(w: int) -> Column:  # the products s_i s_j with i + j = w
        return sum(pieces[i] * pieces[w - i] for i in range(_SQUARES) if 0 <= w - i < _SQUARES)

    groups = (
        frame.select(value.alias("v"))
        .select(F.col("v.i").alias("i"), x.alias("x"), q.alias("q"), m.alias("m"), sign.alias("sign"))
        .groupBy("i", "q").agg(
            F.count(F.lit(1)).alias("rows"), F.count("x").alias("n"), F.min("x").alias("low"),
            F.max("x").alias("high"),
            *(F.sum(F.col("sign") * piece(_UNIT_BITS, k)).alias(f"u{k}") for k in range(_UNITS)),
            *(F.sum(weighing(w)).alias(f"w{w}") for w in range(2 * _SQUARES - 1)),
        ).collect()
    )
    n_rows, count, total, squares = ([0] * len(names) for _ in range(4))
    low: list[float | None] = [None] * len(names)
    high: list[float | None] = [None] * len(names)
    for row in groups:
        i, q_ = row["i"], row["q"]
        n_rows[i] += row["rows"]
        if q_ is None:  # null, NaN and infinities
            continue
        count[i] += row["n"]
        low[i] = row["low"] if low[i] is None else min(low[i], row["low"])
        high[i] = row["high"] if high[i] is None else max(high[i], row["high"])
        total[i] += sum(row[f"u{k}"] << (_UNIT_BITS * k) for k in range(_UNITS)) << (q_ - _LEAST_UNIT)
        squares[i] += sum(row[f"w{w}"] << (_SQUARE_BITS * w) for w in range(2 * _SQUARES - 1)) << 2 * (q_ - _LEAST_UNIT)
    return [ExactMoments(n_rows[i], count[i], low[i], high[i], total[i], squares[i]) for i in range(len(names))]


@dataclass(frozen=True)
class CentredSums:
    """The rows of a frame, and over them Σ d_j and Σ d_j·d_k (j <= k, in `second[j][k]`),
    d_j = x_j - centre_j: each difference and product rounded to a double as numpy would
    round it, every sum exact. The same under any partitioning or row order."""

    rows: int
    centres: tuple[float, ...]
    first: tuple[Fraction, ...]
    second: tuple[tuple[Fraction, ...], ...]


# A value w in (-1, 1) as two longs of 62 fractional bits each (its bits down to 2^-124,
# the rest truncated), each summed in `long_slices`.
_FIXED_BITS = 62


def centred_sums(frame: DataFrame, names: Sequence[str], lows: Sequence[float], highs: Sequence[float]) -> CentredSums:
    """`CentredSums` of the frame's finite columns `names`, whose values lie in [lows_j,
    highs_j] (their exact minima and maxima), centred on the middle of that range, in one
    aggregation. Each column is scaled by the power of two 2^e_j just above its largest
    |d_j| (exact), so that every d_j and product lies in (-1, 1) and becomes an integer
    in units of 2^-124 of its scale: long sums of a fixed-point number, not doubles
    added in the partitions' order."""
    centres = [lo if lo == hi else lo / 2 + hi / 2 for lo, hi in zip(lows, highs)]
    exponents = [math.frexp(max(hi - c, c - lo))[1] for lo, hi, c in zip(lows, highs, centres)]
    p = len(names)
    # One projection per step: inlined into each of the sums, the expressions would make
    # a task binary of megabytes for ten columns (330 sums).
    scaled = frame.select(*(
        rescaled(F.col(name) - F.lit(c), e).alias(f"u{j}")
        for j, (name, c, e) in enumerate(zip(names, centres, exponents))
    ))
    u = [F.col(f"u{j}") for j in range(p)]
    values = {f"{j}": u[j] for j in range(p)} | {f"{j}_{k}": u[j] * u[k] for j in range(p) for k in range(j, p)}
    fixed = scaled.select(*(_fixed_point(w).alias(name) for name, w in values.items()))
    parts = fixed.select(*(
        part.alias(f"v{name}_{i}") for name in values for i, part in enumerate(_two_longs(F.col(f"`{name}`")))
    ))
    row = parts.agg(
        F.count(F.lit(1)).alias("n"),
        *(F.sum(piece).alias(f"v{name}_{h}{i}") for name in values for h in range(2)
          for i, piece in enumerate(long_slices(F.col(f"v{name}_{h}")))),
    ).collect()[0]

    def total(name: str, exponent: int) -> Fraction:
        hi, lo = ([row[f"v{name}_{h}{i}"] or 0 for i in range(3)] for h in range(2))
        units = (from_slice_sums(hi) << _FIXED_BITS) + from_slice_sums(lo)
        return Fraction(units, 1 << 2 * _FIXED_BITS) * _power(-exponent)

    first = tuple(total(f"{j}", exponents[j]) for j in range(p))
    second = [[Fraction(0)] * p for _ in range(p)]
    for j in range(p):
        for k in range(j, p):
            second[j][k] = second[k][j] = total(f"{j}_{k}", exponents[j] + exponents[k])
    return CentredSums(int(row["n"]), tuple(centres), first, tuple(tuple(r) for r in second))


def _fixed_point(w: Column) -> Column:
    """w in (-1, 1) times 2^62: exact, below 2^62 in size."""
    return w * F.lit(2.0**_FIXED_BITS)


def _two_longs(a: Column) -> tuple[Column, Column]:
    """a (a `_fixed_point` value) as two longs of w's sign, w = (hi + lo * 2^-62) * 2^-62,
    truncated towards 0."""
    hi = a.cast("long")
    return hi, ((a - hi) * F.lit(2.0**_FIXED_BITS)).cast("long")  # a - hi is exact (Sterbenz)


def null_flagged(columns: Sequence[Column]) -> list[Column]:
    """Each column followed by its null flag: the arguments for a row hash.

    `F.xxhash64` skips null arguments, so without the flags (null, 1) and (1, null)
    would hash alike."""
    return [part for c in columns for part in (c, c.isNull())]


def stacked_sides(original: DataFrame, synthetic: DataFrame, columns: Sequence[str | Column], side: str) -> DataFrame:
    """`columns` of both tables in one frame, with column `side` = 0 for the original's
    rows and 1 for the synthetic table's: one pass (one shuffle, when grouped) serves
    both sides."""
    return original.select(*columns, F.lit(0).alias(side)).unionByName(
        synthetic.select(*columns, F.lit(1).alias(side))
    )


def occurrence_counts(original: DataFrame, synthetic: DataFrame, columns: Sequence[str]) -> DataFrame:
    """Every distinct row (over `columns`) of either table, with N_ORIGINAL and
    N_SYNTHETIC = how often it occurs in each.

    One aggregation over both tables stacked answers "occurs once in the original",
    "reproduced in the synthetic table" and "unique in the synthetic table" together:
    faster than a groupBy followed by a null-safe semi-join (docs/benchmarks.md, "Where the
    time goes").
    Grouping keeps null as a key of its own, unlike pandas' default, so rows that differ
    only by missing values are told apart, never dropped.
    """
    selected = [qcol(c) for c in columns]
    return _counted_sides(original, synthetic, selected).groupBy(*selected).agg(*_count_sums())


def _counted_sides(original: DataFrame, synthetic: DataFrame, columns: Sequence[Column]) -> DataFrame:
    """Both tables stacked, a row each: `columns`, and N_ORIGINAL, N_SYNTHETIC = 1, 0 for
    the original's rows and 0, 1 for the synthetic table's."""
    return original.select(*columns, F.lit(1).alias(N_ORIGINAL), F.lit(0).alias(N_SYNTHETIC)).unionByName(
        synthetic.select(*columns, F.lit(0).alias(N_ORIGINAL), F.lit(1).alias(N_SYNTHETIC))
    )


def _count_sums() -> list[Column]:
    """The aggregates that add :func:`_counted_sides`' counts up per group."""
    return [F.sum(N_ORIGINAL).alias(N_ORIGINAL), F.sum(N_SYNTHETIC).alias(N_SYNTHETIC)]


def cached_row_occurrences(
    original: DataFrame, synthetic: DataFrame, columns: Sequence[str], n_rows: int,
    keep: Sequence[str] | None = None,
) -> DataFrame:
    """:func:`occurrence_counts` over whole rows, cached (the caller unpersists it);
    `n_rows` is the number of rows of both tables together. `keep`, when given, names
    the only columns the caller reads besides the counts: wide inputs are then counted
    by :func:`digested_occurrences`, which holds those columns alone.

    Whole rows are nearly all distinct, so partial aggregation before the shuffle only
    builds a hash map of every row and spills it: skipping it makes the fill and count of
    the cached aggregate faster (docs/benchmarks.md, "Where the time goes").
    Each task then holds a hash map of every row it receives: sized by
    :func:`whole_row_shuffles`. A cached query is planned when it is defined, so both
    settings hold for this call only.
    """
    if keep is not None and digests_pay(original, synthetic, columns, n_rows):
        return digested_occurrences(original, synthetic, columns, keep, n_rows)
    frame = occurrence_counts(original, synthetic, columns)
    spark = frame.sparkSession
    with _session_setting(spark, _BYPASS_PARTIAL, "true"), whole_row_shuffles(spark, n_rows, len(columns)):
        return frame.cache()


def digests_pay(original: DataFrame, synthetic: DataFrame, columns: Sequence[str], n_rows: int) -> bool:
    """Whether :func:`digested_occurrences` should count these rows: wide and many
    (below that a digest is hardly narrower than the row, and its second pass costs more
    than it saves; docs/benchmarks.md, "Wide rows"), of one type per column on both sides
    (a digest is taken before the two tables are stacked, so 1 and 1.0 would hash apart),
    and of types whose equal values Spark hashes alike (atomic types; strings compared
    byte for byte)."""
    if len(columns) < DIGEST_MIN_COLUMNS or n_rows < DIGEST_MIN_ROWS:
        return False
    kinds = [original.schema[c].dataType for c in columns]
    return kinds == [synthetic.schema[c].dataType for c in columns] and all(
        isinstance(k, _HASHED_ALIKE) and getattr(k, "collation", "UTF8_BINARY") == "UTF8_BINARY"
        for k in kinds
    )


def row_digest(columns: Sequence[Column]) -> Column:
    """A 64-bit hash of the row: equal rows of one schema get equal digests (Spark hashes
    -0.0 as 0.0 and every NaN by one bit pattern; tests pin it), different rows rarely
    do. Nulls are skipped, so rows that differ only in which columns are null may share a
    digest: :func:`digested_occurrences` settles them like any collision. Null flags
    would avoid that, but hashing them costs several times the hashing of the values
    (docs/benchmarks.md, "Wide rows")."""
    return F.xxhash64(*columns)


def digested_occurrences(
    original: DataFrame, synthetic: DataFrame, columns: Sequence[str], keep: Sequence[str], n_rows: int
) -> DataFrame:
    """:func:`occurrence_counts` over whole rows with only the `keep` columns (and the
    counts) kept, cached: the same rows and counts, without shuffling whole rows.

    Every row travels as its digest (:func:`row_digest`) and its `keep` columns, grouped
    by digest. Equal rows have equal digests, so a digest of one row is a row that no
    other row of either table equals: its counts, (1, 0) or (0, 1), are exact whatever
    else collides. A digest of two or more rows (duplicates, rows found on both sides, and
    any collision of different rows) is undecided: its rows are found again and grouped
    on their real values, so a collision costs time, never a wrong count. On wide rows
    this is faster than grouping whole rows (docs/benchmarks.md, "Wide rows";
    :func:`digests_pay` decides). Both tables must hold one type per column.
    """
    spark = original.sparkSession
    row = [qcol(c) for c in columns]
    kept = [qcol(c) for c in keep]
    digest = row_digest(row).alias(_DIGEST)
    total = F.col(N_ORIGINAL) + F.col(N_SYNTHETIC)
    # The semi-join below makes the optimizer derive constraints from the typed inputs'
    # projections, which grow with every pair of their columns: at 40 columns that
    # filled a 4g driver before the query ran. It only infers filters; none is needed.
    with _session_setting(spark, _CONSTRAINTS, "false"):
        with _session_setting(spark, _BYPASS_PARTIAL, "true"), whole_row_shuffles(spark, n_rows, len(keep) + 3):
            # `first`: only the values of digests of one row are read.
            firsts = [F.first(k).alias(name) for k, name in zip(kept, keep)]
            groups = _counted_sides(original, synthetic, [digest, *kept]).groupBy(_DIGEST).agg(*_count_sums(), *firsts).cache()
        try:
            undecided = groups.filter(total > 1)
            n_digests, n_undecided_rows = undecided.agg(F.count(F.lit(1)), F.sum(total)).collect()[0]
            digests = undecided.select(_DIGEST)
            # Every task holds the broadcast digests; beyond that many (2e6 longs, ~32 MB
            # as a hashed relation) every row is shuffled whole to them instead.
            broadcast = n_digests <= BROADCAST_DIGESTS
            if broadcast:
                digests = F.broadcast(digests)
            settled = (
                _counted_sides(original, synthetic, [digest, *row]).join(digests, on=_DIGEST, how="left_semi")
                .groupBy(*row).agg(*_count_sums()).select(*kept, N_ORIGINAL, N_SYNTHETIC)
            )
            decided = groups.filter(total == 1).select(*kept, N_ORIGINAL, N_SYNTHETIC)
            with whole_row_shuffles(spark, (n_undecided_rows or 0) if broadcast else n_rows, len(columns)):
                result = decided.unionByName(settled).cache()
            try:
                result.count()  # filled while `groups` is still cached
            except BaseException:
                result.unpersist()
                raise
            return result
        finally:
            groups.unpersist()


def shuffle_partitions(spark: SparkSession) -> int:
    """spark.sql.shuffle.partitions, or the default parallelism where it is not a number."""
    try:
        return max(1, int(spark.conf.get(_SHUFFLE_PARTITIONS)))
    except (TypeError, ValueError):
        return max(1, spark.sparkContext.defaultParallelism)


@contextlib.contextmanager
def whole_row_shuffles(spark: SparkSession, n_rows: int, n_columns: int) -> Iterator[None]:
    """Queries planned meanwhile shuffle `n_rows` whole rows of `n_columns` columns in at
    least one task per CELLS_PER_TASK cells, or spark.sql.shuffle.partitions tasks if more.

    A task that aggregates or sorts whole rows holds all it receives: with conf/spark/
    local.conf's 8 tasks, at the largest sizes each spilled to disk. One task per
    CELLS_PER_TASK cells makes the occurrence aggregation and CDMP's join markedly faster
    there (docs/benchmarks.md, "Where the time goes") and changes nothing at smaller sizes.
    """
    tasks = max(shuffle_partitions(spark), math.ceil(n_rows * n_columns / CELLS_PER_TASK))
    with _session_setting(spark, _SHUFFLE_PARTITIONS, str(tasks)):
        yield


def occurring_once(occurrences: DataFrame) -> DataFrame:
    """The set U: original rows that no other original row equals, from
    occurrence_counts (one row each, with its counts)."""
    return occurrences.filter(F.col(N_ORIGINAL) == 1)


def distinct_per_column(frame: DataFrame, columns: Sequence[str]) -> list[int]:
    """How many distinct values each of `columns` holds, null counted as one value (CDMP's
    u_c), in one pass and two shuffles.

    One `count_distinct` per column is simpler, but Spark rewrites many distinct
    aggregates into an Expand whose plan and generated code grow with the square of the
    number of columns: at a few hundred columns that is several times slower. Here every
    row is unpivoted (:func:`unpivot_typed`) and the distinct pairs are counted per index.
    """
    unpivoted, _ = unpivot_typed(frame, columns, "column")
    counts = {
        int(r["column"]): int(r["count"])
        for r in unpivoted.distinct().groupBy("column").count().collect()
    }
    return [counts.get(i, 0) for i in range(len(columns))]  # an empty frame has none


def unpivot_typed(
    frame: DataFrame, columns: Sequence[str], index: str, keep: Sequence[str] = ()
) -> tuple[DataFrame, list[str]]:
    """`frame` with a row per row and column of `columns`: the `keep` columns, `index` =
    the column's position in `columns`, and its value; with the names of the value
    fields. A value sits in the field for its column's type, the other fields null, so
    equality is Spark's grouping equality for that type (NaN = NaN, -0.0 = 0.0), no
    value is cast, and a null value is one group of its own per index."""
    type_of = {c: frame.schema[c].dataType.simpleString() for c in columns}
    slots = sorted(set(type_of.values()))
    names = [f"{INTERNAL_PREFIX}v{k}" for k in range(len(slots))]
    pairs = [
        F.struct(
            F.lit(i).alias(index),
            *(
                (qcol(c) if t == type_of[c] else F.lit(None).cast(t)).alias(name)
                for name, t in zip(names, slots)
            ),
        )
        for i, c in enumerate(columns)
    ]
    pair = INTERNAL_PREFIX + "pair"
    kept = [qcol(c) for c in keep]
    unpivoted = frame.select(*kept, F.explode(F.array(*pairs)).alias(pair))
    return unpivoted.select(*kept, f"{pair}.*"), names


def counts_per_column_value(
    original: DataFrame, synthetic: DataFrame, fixed: Sequence[str], spread: Sequence[str], index: str
) -> tuple[DataFrame, list[str]]:
    """For each column of `spread` (its position in column `index`, its value in the
    fields named in the answer, as :func:`unpivot_typed` lays them out) and each
    combination of the `fixed` columns with one of its values: N_ORIGINAL and
    N_SYNTHETIC, how often the combination occurs in each table.

    One aggregation over both tables stacked and unpivoted counts every spread column at
    once; grouping keeps null as a value of its own, as :func:`occurrence_counts` does.
    """
    stacked = _counted_sides(original, synthetic, [qcol(c) for c in (*fixed, *spread)])
    unpivoted, slots = unpivot_typed(stacked, spread, index, keep=[*fixed, N_ORIGINAL, N_SYNTHETIC])
    return unpivoted.groupBy(*(qcol(c) for c in fixed), index, *slots).agg(*_count_sums()), slots


# Exact sums of row hashes (the inputs' fingerprint): a 64-bit value as three slices of
# 22 bits, low to high (the highest signed); the sums of the slices as longs cannot
# overflow below 2^41 rows, and recombine to the exact sum.
_SLICE_BITS = 22


def long_slices(x: Column) -> list[Column]:
    """`x` (a long) as the slices whose exact sums :func:`from_slice_sums` recombines.

    Summing 64-bit row hashes exactly as decimal(38,0) made Spark add a BigDecimal per
    row; three long sums give the same digest and a faster profile pass."""
    mask = F.lit((1 << _SLICE_BITS) - 1)
    return [x.bitwiseAND(mask), F.shiftright(x, _SLICE_BITS).bitwiseAND(mask), F.shiftright(x, 2 * _SLICE_BITS)]


def from_slice_sums(sums: Sequence[int]) -> int:
    return sum(int(total) << (_SLICE_BITS * k) for k, total in enumerate(sums))


def local_frame(spark: SparkSession, rows: Sequence[tuple], schema: T.StructType) -> DataFrame:
    """`rows` (tuples in `schema`'s field order) as a DataFrame, handed to the JVM as
    Arrow data: the results rows, the position shift table of a split input.

    `spark.createDataFrame(rows, schema)` makes them a Python RDD, which a Python worker
    must unpickle when the frame is first used, which made the job's first results write
    markedly slower (docs/benchmarks.md, "Small evaluations: WBCD as whole processes").
    Timestamps are instants: naive ones are read in local time, as `createDataFrame` does.
    """
    import pyarrow as pa  # here: configuration errors answer without importing it
    from pyspark.sql.pandas.types import to_arrow_schema

    arrow_schema = to_arrow_schema(schema, timezone="UTC")
    by_field = list(zip(*rows)) if rows else [()] * len(schema.fields)
    columns = [
        pa.array([_instant(v) for v in values] if isinstance(f.dataType, T.TimestampType) else values, type=a.type)
        for f, a, values in zip(schema.fields, arrow_schema, by_field)
    ]
    return spark.createDataFrame(pa.Table.from_arrays(columns, schema=arrow_schema), schema)


def _instant(value: datetime | None) -> datetime | None:
    return None if value is None else value.astimezone(timezone.utc)
