"""Reading and reconciling the two inputs: types, keys, compared columns, positions."""

from __future__ import annotations

import decimal
import math
from fractions import Fraction

import numpy as np
import pandas as pd
import pytest
from chispa import assert_df_equality
from pyspark.sql import functions as F

from privacy_eval.columns import KEY
from privacy_eval.config import Source
from privacy_eval.errors import InputError
from privacy_eval.frames import centred_sums, exact_moments
from privacy_eval.frames import from_slice_sums as _from_slice_sums
from privacy_eval.frames import long_slices as _long_slices
from privacy_eval.inputs import InputPassWork, prepare_inputs
from privacy_eval.reading import POSITION, read_table


def frames(spark, rows_o, schema_o, rows_s, schema_s):
    return spark.createDataFrame(rows_o, schema_o), spark.createDataFrame(rows_s, schema_s)


def test_number_against_text_is_an_error_naming_both_types(spark):
    o, s = frames(spark, [(1, 5)], "id long, x long", [(1, "5")], "id long, x string")
    with pytest.raises(InputError, match=r"column 'x' is bigint in the original and string in the synthetic"):
        prepare_inputs(o, s, row_key="id")


def test_configured_cast_makes_mismatched_types_comparable(spark):
    o, s = frames(spark, [(1, 5)], "id long, x long", [(1, "5")], "id long, x string")
    inputs = prepare_inputs(o, s, row_key="id", cast={"x": "double"})
    expected = spark.createDataFrame([(1, 5.0)], f"{KEY} long, x double")
    for side in (inputs.original, inputs.synthetic):
        assert_df_equality(side.select(KEY, "x"), expected, ignore_nullable=True)


def test_int_and_double_become_double(spark):
    o, s = frames(spark, [(1, 5)], "id long, x int", [(1, 5.0)], "id long, x double")
    inputs = prepare_inputs(o, s, row_key="id")
    expected = spark.createDataFrame([(1, 5.0)], f"{KEY} long, x double")
    for side in (inputs.original, inputs.synthetic):
        assert_df_equality(side.select(KEY, "x"), expected, ignore_nullable=True)
    assert inputs.numeric == frozenset({"x"})


def test_column_on_one_side_only_must_be_excluded(spark):
    o, s = frames(spark, [(1, 5, 9)], "id long, x long, secret long", [(1, 5)], "id long, x long")
    with pytest.raises(InputError, match="'secret' is in the original table but not in the synthetic"):
        prepare_inputs(o, s, row_key="id")
    inputs = prepare_inputs(o, s, row_key="id", exclude=["secret"])
    assert inputs.columns == ("x",)


def test_nothing_left_to_compare(spark):
    o, s = frames(spark, [(1, 5)], "id long, x long", [(1, 5)], "id long, x long")
    with pytest.raises(InputError, match="no column left"):
        prepare_inputs(o, s, row_key="id", exclude=["x"])


def test_duplicated_keys_are_reported_by_count(spark):
    o, s = frames(spark, [(1, 5), (1, 6), (1, 7), (2, 8)], "id long, x long", [(1, 5)], "id long, x long")
    with pytest.raises(InputError, match="1 key value.*occurs 3 times") as err:
        prepare_inputs(o, s, row_key="id")
    assert "5" not in str(err.value).replace("occurs 3", "")  # no record value in the message


def test_null_keys_are_refused(spark):
    o, s = frames(spark, [(None, 5), (2, 6)], "id long, x long", [(1, 5)], "id long, x long")
    with pytest.raises(InputError, match="null in 1 row"):
        prepare_inputs(o, s, row_key="id")


def test_missing_key_and_empty_table(spark):
    o, s = frames(spark, [(1, 5)], "id long, x long", [(5,)], "x long")
    with pytest.raises(InputError, match="missing from the synthetic"):
        prepare_inputs(o, s, row_key="id")
    o, s = frames(spark, [], "id long, x long", [(1, 5)], "id long, x long")
    with pytest.raises(InputError, match="original table has no rows"):
        prepare_inputs(o, s, row_key="id")


def test_odd_column_names_work(spark):
    names = ["a b", "c.d", "e`f", "g'h", "ünïcødé"]
    schema = ", ".join(["id long"] + [f"`{n.replace('`', '``')}` long" for n in names])
    o, s = frames(spark, [(1, 1, 2, 3, 4, 5)], schema, [(1, 1, 2, 3, 4, 6)], schema)
    inputs = prepare_inputs(o, s, row_key="id")
    assert inputs.columns == tuple(names)
    assert inputs.original.count() == 1


def test_fingerprint_ignores_row_order_but_not_values(spark):
    rows = [(i, i * 2, None if i % 3 else "x") for i in range(20)]
    schema = "id long, v long, s string"
    base = prepare_inputs(*frames(spark, rows, schema, rows, schema), row_key="id").fingerprint
    shuffled = prepare_inputs(*frames(spark, rows[::-1], schema, rows, schema), row_key="id").fingerprint
    changed_rows = rows[:-1] + [(19, 39, None)]
    changed = prepare_inputs(*frames(spark, changed_rows, schema, rows, schema), row_key="id").fingerprint
    # Swapping which column holds the null must change it too (xxhash64 skips nulls).
    moved = [(0, None, "0")] + rows[1:]
    moved_null = prepare_inputs(*frames(spark, moved, "id long, v long, s string", rows, schema), row_key="id").fingerprint
    assert base == shuffled
    assert len({base, changed, moved_null}) == 3


def test_reading_missing_file_names_it(spark, tmp_path):
    with pytest.raises(InputError, match="original: file not found: .*nope.csv"):
        read_table(spark, Source(path=str(tmp_path / "nope.csv")), "original")


def test_unknown_extension_asks_for_a_format(spark, tmp_path):
    path = tmp_path / "data.txt"
    path.write_text("a\n1\n")
    with pytest.raises(InputError, match="synthetic.format"):
        read_table(spark, Source(path=str(path)), "synthetic")


def test_position_differs_in_row_count(spark, tmp_path):
    (tmp_path / "o.csv").write_text("x\n1\n2\n3\n")
    (tmp_path / "s.csv").write_text("x\n1\n2\n")
    o = read_table(spark, Source(path=str(tmp_path / "o.csv")), "original", with_position=True)
    s = read_table(spark, Source(path=str(tmp_path / "s.csv")), "synthetic", with_position=True)
    with pytest.raises(InputError, match="original has 3 rows and the synthetic table 2"):
        prepare_inputs(o, s, row_key=POSITION)


@pytest.mark.slow
def test_position_is_exact_on_a_split_multi_file_input(spark, sql_conf, tmp_path):
    """A million rows in three files whose size order differs from their name order,
    read in many splits: every row's position must equal the number written in it."""
    sql_conf({"spark.sql.files.maxPartitionBytes": str(1 << 19)})
    folder = tmp_path / "parts"
    folder.mkdir()
    sizes = [150_000, 600_000, 250_000]  # the largest file is not the first by name
    start = 0
    for i, size in enumerate(sizes):
        pos = np.arange(start, start + size)
        pd.DataFrame({"pos": pos, "v": pos % 7}).to_csv(folder / f"part-{i}.csv", index=False)
        start += size
    frame = read_table(spark, Source(path=str(folder), format="csv"), "original", with_position=True)
    assert frame.rdd.getNumPartitions() > 10
    stats = frame.agg(
        F.count(F.lit(1)).alias("n"),
        F.count(F.when(F.col(POSITION) != F.col("pos"), 1)).alias("wrong"),
    ).collect()[0]
    assert stats["n"] == sum(sizes) and stats["wrong"] == 0

    # And through prepare_inputs, paired with a differently split copy of itself.
    inputs = prepare_inputs(frame, frame.select("pos", "v", POSITION).repartition(7), row_key=POSITION)
    joined = inputs.original.alias("o").join(inputs.synthetic.alias("s"), KEY)
    assert joined.filter(F.col("o.pos") != F.col("s.pos")).count() == 0


def test_position_of_one_file_in_one_split_and_in_several(spark, sql_conf, tmp_path):
    """One file read as one partition takes the positions straight from the row ids
    (no split collect, no join); the same file cut into several splits takes the
    general path. Both must give every row the number written in it."""
    path = tmp_path / "one.csv"
    pos = np.arange(60_000)
    pd.DataFrame({"pos": pos, "v": pos % 7}).to_csv(path, index=False)

    def wrong_positions(frame) -> tuple[int, int]:
        row = frame.agg(
            F.count(F.lit(1)).alias("n"), F.count(F.when(F.col(POSITION) != F.col("pos"), 1)).alias("wrong")
        ).collect()[0]
        return row["n"], row["wrong"]

    whole = read_table(spark, Source(path=str(path)), "original", with_position=True)
    assert whole.rdd.getNumPartitions() == 1
    assert "Join" not in whole._jdf.queryExecution().optimizedPlan().toString()
    assert wrong_positions(whole) == (len(pos), 0)

    sql_conf({"spark.sql.files.maxPartitionBytes": str(64 << 10), "spark.sql.files.openCostInBytes": "0"})
    split = read_table(spark, Source(path=str(path)), "original", with_position=True)
    assert split.rdd.getNumPartitions() > 3
    assert wrong_positions(split) == (len(pos), 0)


def test_paired_keys_are_counted_by_the_key_check(spark):
    # keys 1..4 against 3..7: 3 and 4 are on both sides
    o, s = frames(spark, [(k, k) for k in (1, 2, 3, 4)], "id long, x long",
                  [(k, k) for k in (3, 4, 5, 6, 7)], "id long, x long")
    assert prepare_inputs(o, s, row_key="id").n_paired_keys == 2
    # int against long, and a double key: compared after the one-type cast
    o2, s2 = frames(spark, [(1, 0), (2, 0)], "id int, x long", [(2, 0), (9, 0)], "id long, x long")
    assert prepare_inputs(o2, s2, row_key="id").n_paired_keys == 1
    o3, s3 = frames(spark, [(-0.0, 0), (1.5, 0)], "id double, x long", [(0.0, 0), (2.5, 0)], "id double, x long")
    assert prepare_inputs(o3, s3, row_key="id").n_paired_keys == 1


def test_side_aggregates_see_the_typed_columns_in_the_profile_pass(spark):
    """The caller's aggregates run over each side as returned, with the per-row columns
    they add: x is int in the original and long in the synthetic table, y text made
    numbers by a configured cast. Their values come back per side, next to the profile,
    and the fingerprint is unchanged."""
    o, s = frames(spark, [(1, 2, "1.5"), (2, 3, "2.5")], "id long, x int, y string",
                  [(1, 10, "4"), (2, 20, None), (3, 30, "8")], "id long, x long, y string")
    seen = []

    def aggregates(frame):
        seen.append({f.name: f.dataType.simpleString() for f in frame.schema.fields if f.name in ("x", "y")})
        # A per-row column of its own, which the aggregates then read by name.
        flagged = frame.select("*", F.col("y").isNull().alias("y_missing"))
        return flagged, {"x_sum": F.sum("x"), "y_sum": F.sum("y"), "y_null": F.count(F.when(F.col("y_missing"), 1))}

    plain = prepare_inputs(o, s, row_key="id", cast={"y": "double"})
    inputs = prepare_inputs(o, s, row_key="id", cast={"y": "double"}, work=InputPassWork("mine", side_aggregates=aggregates))
    assert seen == [{"x": "bigint", "y": "double"}] * 2
    assert inputs.pass_figures.made_for == "mine" and inputs.pass_figures.n_paired_where is None
    assert inputs.pass_figures.side_aggregates == {
        "original": {"x_sum": 5, "y_sum": 4.0, "y_null": 0},
        "synthetic": {"x_sum": 60, "y_sum": 12.0, "y_null": 1},
    }
    assert plain.pass_figures is None and plain.fingerprint == inputs.fingerprint
    nothing = prepare_inputs(o, s, row_key="id", cast={"y": "double"},
                             work=InputPassWork("mine", side_aggregates=lambda frame: None))
    assert nothing.pass_figures.side_aggregates is None
    for done in (plain, inputs, nothing):
        done.unpersist()


def test_row_hashes_are_summed_exactly_beyond_the_range_of_a_long(spark):
    """The fingerprint sums 64-bit row hashes; the slices' long sums recombine to the
    exact total, here far outside what one long sum could hold (Python's integers are
    the expectation)."""
    values = [2**63 - 1, 2**63 - 1, 2**63 - 1, -(2**63), -1, 0, 1, 123456789012345678, -(2**62) - 7, 2**44, 2**22 - 1]
    frame = spark.createDataFrame([(v,) for v in values], "h long")
    row = frame.agg(*(F.sum(part).alias(f"s{k}") for k, part in enumerate(_long_slices(F.col("h"))))).collect()[0]
    assert _from_slice_sums([row[f"s{k}"] for k in range(3)]) == sum(values)
    for v in values:  # and each value alone
        one = spark.createDataFrame([(v,)], "h long").select(*_long_slices(F.col("h"))).collect()[0]
        assert _from_slice_sums(list(one)) == v


@pytest.mark.parametrize("partitions", [1, 4])
def test_moments_are_summed_exactly_from_the_smallest_to_the_largest_double(spark, partitions):
    """exact_moments: count, min, max, and mean and sd rounded once from exact sums
    (Python's fractions are the expectation), over subnormals, the largest doubles,
    zeros of both signs and values whose double sums would cancel; nulls, NaN and
    infinities left out."""
    finite = [5e-324, -5e-324, 2.2250738585072014e-308, 1.7976931348623157e308, -1.7976931348623157e308, 0.0, -0.0,
              1e-300, 3.0, 2.0**52 + 1, 0.1, 0.2, 0.3, -7.25]
    rows = [(x, 1.0 if i % 2 else None) for i, x in enumerate(finite + [float("nan"), float("inf"), None])]
    frame = spark.createDataFrame(rows, "x double, y double").repartition(partitions)
    x, y = exact_moments(frame, ["x", "y"])
    exact = [Fraction(v) for v in finite]
    n, mean = len(exact), sum(exact) / len(exact)
    variance = (sum(v * v for v in exact) - sum(exact) ** 2 / n) / (n - 1)
    assert (x.rows, x.count, x.low, x.high) == (len(rows), n, min(finite), max(finite))
    assert x.mean() == float(mean) and x.mean(10) == float(mean / 2**10)

    def root(v: Fraction) -> float:  # to 60 digits, then rounded
        with decimal.localcontext(decimal.Context(prec=60)):
            return float((decimal.Decimal(v.numerator) / decimal.Decimal(v.denominator)).sqrt())

    # in units of 2^1024, where the variance of values near the largest double fits a double
    assert x.sd(1024) == root(variance / 2**2048)
    assert x.sd(1024, ddof=0) == root(variance * (n - 1) / n / 2**2048)
    assert (y.rows, y.count, y.mean(), y.sd()) == (len(rows), 8, 1.0, 0.0)
    (nothing,) = exact_moments(frame.filter("x IS NULL"), ["x"])
    assert (nothing.rows, nothing.count, nothing.low, nothing.mean(), nothing.sd()) == (1, 0, None, None, None)



@pytest.mark.parametrize("partitions", [1, 3])
def test_centred_sums_are_exact_sums_of_the_rounded_differences_and_products(spark, partitions):
    """centred_sums: Σ d_j and Σ d_j d_k with d_j = x_j - (the middle of x_j's range),
    each difference and product rounded as numpy rounds them and the sums exact
    (Python's fractions are the expectation), up to 2^-124 of each column's scale per
    value; the same under any partitioning. x has a large mean (its double sums would
    cancel), y spans 1e150 in size, z is constant."""
    x = [1e9 + k / 10 for k in range(21)]
    y = [-3e150, 2.5e-150, 7.0, -0.0, 1e-10, 4e149, -1.25, 3e150, 9.75e-5, -2.0**-1000, 0.1, 0.3, 5e140, -6e130,
         1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.5]
    z = [0.25] * 21
    frame = spark.createDataFrame(list(zip(x, y, z)), "x double, y double, z double").repartition(partitions)
    columns = np.array([x, y, z]).T
    lows, highs = columns.min(axis=0), columns.max(axis=0)
    sums = centred_sums(frame, ["x", "y", "z"], list(lows), list(highs))
    centres = lows / 2 + highs / 2
    centres[2] = 0.25
    d = columns - centres  # numpy's rounding of each difference
    scales = [2.0 ** math.frexp(max(h - c, c - lo))[1] if h > lo else 1.0 for lo, h, c in zip(lows, highs, centres)]
    assert sums.rows == 21 and sums.centres == tuple(centres)
    for j in range(3):
        assert abs(sums.first[j] - sum(Fraction(v) for v in d[:, j])) <= Fraction(21 * scales[j]) / 2**124
        for k in range(3):
            products = sum(Fraction(v) for v in d[:, j] * d[:, k])
            assert abs(sums.second[j][k] - products) <= Fraction(21 * scales[j] * scales[k]) / 2**124, (j, k)
    assert sums.first[0] == sum(Fraction(v) for v in d[:, 0])  # x's differences and products are exact there
    assert sums.second[0][0] == sum(Fraction(v) for v in d[:, 0] ** 2)
    assert sums.first[2] == 0 and sums.second[2][2] == 0 and sums.second[0][2] == 0
    again = centred_sums(frame.repartition(7).orderBy("y"), ["x", "y", "z"], list(lows), list(highs))
    assert again == sums


def test_repeated_keys_on_the_synthetic_side_name_that_side(spark):
    o, s = frames(spark, [(1, 5), (2, 6)], "id long, x long", [(2, 5), (2, 6), (3, 7), (3, 8)], "id long, x long")
    with pytest.raises(InputError, match="not unique in the synthetic table: 2 key value.*occurs 2 times"):
        prepare_inputs(o, s, row_key="id")


def test_only_the_named_sides_are_cached(spark):
    o, s = frames(spark, [(1, 5)], "id long, x long", [(1, 5)], "id long, x long")
    both = prepare_inputs(o, s, row_key="id")
    assert len(both.cached) == 2 and all(f.is_cached for f in both.cached)
    both.unpersist()
    assert not any(f.is_cached for f in both.cached)
    one = prepare_inputs(o, s, row_key="id", cache=["synthetic"])
    assert len(one.cached) == 1 and one.cached[0].is_cached
    none = prepare_inputs(o, s, row_key="id", cache=())
    assert none.cached == () and none.n_original == 1 and none.n_paired_keys == 1
    none.unpersist()  # nothing to release, no error


def test_parquet_and_orc_files_are_read_again_not_cached(spark, tmp_path):
    from privacy_eval.reading import rereads_cheaply

    assert rereads_cheaply(Source(path="data/original.parquet"))
    assert rereads_cheaply(Source(path="data/original", format="orc"))
    assert not rereads_cheaply(Source(path="data/original.csv"))
    assert not rereads_cheaply(Source(path="data/original.parquet", format="csv"))
    assert not rereads_cheaply(Source(table="db.original"))  # may be a view over anything


def test_persist_aggregate_lets_the_cache_coalesce_and_restores_the_setting(spark, sql_conf):
    """A cached aggregate keeps spark.sql.shuffle.partitions partitions unless the cache
    may change its output partitioning; persist_aggregate allows that for its one call."""
    from privacy_eval.frames import _CACHED_PARTITIONING, persist_aggregate

    sql_conf({"spark.sql.shuffle.partitions": "8", "spark.sql.adaptive.enabled": "true"})
    before = spark.conf.get(_CACHED_PARTITIONING)
    plain = spark.range(100).groupBy((F.col("id") % 3).alias("g")).count().persist()
    small = persist_aggregate(spark.range(100).groupBy((F.col("id") % 4).alias("g")).count())
    try:
        assert sorted(r["count"] for r in plain.collect()) == [33, 33, 34]
        assert sorted(r["count"] for r in small.collect()) == [25, 25, 25, 25]
        assert plain.rdd.getNumPartitions() == 8
        assert small.rdd.getNumPartitions() == 1
        assert small.is_cached and spark.conf.get(_CACHED_PARTITIONING) == before
    finally:
        plain.unpersist()
        small.unpersist()


def test_collect_grouped_by_key_restores_the_session_setting(spark):
    from privacy_eval.frames import _BYPASS_PARTIAL, collect_grouped_by_key

    frame = spark.range(10).groupBy((F.col("id") % 3).alias("k")).count()
    assert spark.conf.get(_BYPASS_PARTIAL, None) in (None, "false")
    before = spark.conf.get(_BYPASS_PARTIAL, None)
    assert sorted(r["count"] for r in collect_grouped_by_key(frame)) == [3, 3, 4]
    assert spark.conf.get(_BYPASS_PARTIAL, None) == before
    spark.conf.set(_BYPASS_PARTIAL, "false")
    try:
        with pytest.raises(Exception, match="boom"):
            collect_grouped_by_key(spark.range(3).select(F.raise_error(F.lit("boom"))))
        assert spark.conf.get(_BYPASS_PARTIAL) == "false"
    finally:
        spark.conf.unset(_BYPASS_PARTIAL)


def test_cached_row_occurrences_counts_like_occurrence_counts_and_restores_the_settings(spark):
    from privacy_eval.frames import _BYPASS_PARTIAL, cached_row_occurrences, occurrence_counts

    original = spark.createDataFrame([(1, "a"), (1, "a"), (2, None), (3, "c")], "x long, y string")
    synthetic = spark.createDataFrame([(2, None), (2, None), (4, "d")], "x long, y string")
    before = (spark.conf.get(_BYPASS_PARTIAL, None), spark.conf.get("spark.sql.shuffle.partitions"))
    cached = cached_row_occurrences(original, synthetic, ["x", "y"], n_rows=7)
    try:
        assert cached.is_cached
        assert (spark.conf.get(_BYPASS_PARTIAL, None), spark.conf.get("spark.sql.shuffle.partitions")) == before
        # 14 cells, far below a task's share: the session's number of shuffle partitions.
        assert cached.rdd.getNumPartitions() == int(before[1]) == 2
        assert_df_equality(cached, occurrence_counts(original, synthetic, ["x", "y"]), ignore_row_order=True)
        # (x, y, in the original, in the synthetic table), by hand
        assert sorted(map(tuple, cached.collect()), key=str) == sorted(
            [(1, "a", 2, 0), (2, None, 1, 2), (3, "c", 1, 0), (4, "d", 0, 1)], key=str
        )
    finally:
        cached.unpersist()


def test_cached_row_occurrences_gives_large_inputs_more_tasks_and_the_same_counts(spark, monkeypatch):
    from privacy_eval import frames
    from privacy_eval.metrics.knowledge_protection import knowledge_protection_rate

    original = spark.createDataFrame([(1, "a"), (1, "a"), (2, None), (3, "c")], "x long, y string")
    synthetic = spark.createDataFrame([(2, None), (2, None), (4, "d"), (3, "c")], "x long, y string")
    # 8 rows of 2 columns at 3 cells per task: ceil(16 / 3) = 6 tasks, above the session's 2.
    monkeypatch.setattr(frames, "CELLS_PER_TASK", 3)
    cached = frames.cached_row_occurrences(original, synthetic, ["x", "y"], n_rows=8)
    try:
        assert cached.rdd.getNumPartitions() == 6
        assert spark.conf.get("spark.sql.shuffle.partitions") == "2"
        assert sorted(map(tuple, cached.collect()), key=str) == sorted(
            [(1, "a", 2, 0), (2, None, 1, 2), (3, "c", 1, 1), (4, "d", 0, 1)], key=str
        )
        # KPR reads the aggregate in fewer tasks than it has partitions, with the same
        # figures. By hand: singletons (2, None) and (3, "c"); each x value has a bin of its
        # own, so the synthetic profiles occurring once are those of (4, "d") and (3, "c"),
        # and the singleton (3, "c") is exposed.
        kpr = knowledge_protection_rate(cached, ["x", "y"], ["x"], n_original=4, n_singletons=2)
        assert (kpr.exposed, kpr.unique_synthetic_profiles) == (1, 2)
    finally:
        cached.unpersist()


# x double, y and z text. By hand, (x, in the original, in the synthetic table):
# (1.0, "a", "a") twice in the original; (2.0, None, "b") once and twice; the two rows of
# x = 3.0 differ only in which column is null, so the row hash (nulls skipped) collides;
# 0.0 and -0.0 are one value, and so are two NaNs.
_DIGEST_ORIGINAL = [(1.0, "a", "a"), (1.0, "a", "a"), (2.0, None, "b"), (3.0, "c", None), (0.0, "z", "z"),
                    (float("nan"), "n", "n"), (5.0, "e", "e")]
_DIGEST_SYNTHETIC = [(2.0, None, "b"), (2.0, None, "b"), (3.0, None, "c"), (-0.0, "z", "z"),
                     (float("nan"), "n", "n"), (4.0, "d", "d")]
_DIGEST_COUNTS = [(1.0, 2, 0), (2.0, 1, 2), (3.0, 1, 0), (3.0, 0, 1), (0.0, 1, 1), ("NaN", 1, 1),
                  (5.0, 1, 0), (4.0, 0, 1)]


@pytest.mark.parametrize("digest", ["row hash", "every row colliding", "undecided rows shuffled"])
def test_digested_occurrences_count_exactly_whatever_collides(spark, sql_conf, monkeypatch, digest):
    from privacy_eval import frames as f
    from tests.support.jobrun import persisted_rdds

    original, synthetic = frames(spark, _DIGEST_ORIGINAL, "x double, y string, z string",
                                 _DIGEST_SYNTHETIC, "x double, y string, z string")
    columns = ["x", "y", "z"]
    hashed = original.select(f.row_digest([F.col(c) for c in columns]).alias("h")).collect()
    other = synthetic.select(f.row_digest([F.col(c) for c in columns]).alias("h")).collect()
    assert hashed[3] == other[2]                                   # the forced-by-nulls collision
    assert hashed[4] == other[3] and hashed[5] == other[4]         # -0.0 as 0.0, NaN as NaN
    if digest == "every row colliding":
        monkeypatch.setattr(f, "row_digest", lambda cols: F.lit(7).cast("long"))
    if digest == "undecided rows shuffled":
        monkeypatch.setattr(f, "BROADCAST_DIGESTS", 0)
        sql_conf({"spark.sql.autoBroadcastJoinThreshold": "-1"})  # or the planner broadcasts them anyway
    held = persisted_rdds(spark)
    counted = f.digested_occurrences(original, synthetic, columns, keep=["x"], n_rows=13)
    try:
        assert counted.columns == ["x", f.N_ORIGINAL, f.N_SYNTHETIC]
        assert persisted_rdds(spark) == held + 1                   # the result; its groups released
        got = [("NaN" if r["x"] != r["x"] else r["x"], r[1], r[2]) for r in counted.collect()]
        assert sorted(got, key=str) == sorted(_DIGEST_COUNTS, key=str)
    finally:
        counted.unpersist()
    counts_only = f.digested_occurrences(original, synthetic, columns, keep=[], n_rows=13)  # RDMP alone
    try:
        assert sorted(map(tuple, counts_only.collect())) == sorted(c[1:] for c in _DIGEST_COUNTS)
    finally:
        counts_only.unpersist()


def test_digested_occurrences_of_every_hashed_type_count_like_whole_rows(spark):
    from decimal import Decimal

    from privacy_eval import frames as f

    schema = "a float, b decimal(10,2), c timestamp, d binary, e date, g boolean, h tinyint"
    at = pd.Timestamp("2026-01-02 03:04:05").to_pydatetime()
    day = at.date()
    rows = [(-0.0, None, at, b"x", day, True, 1), (0.0, None, at, b"x", day, True, 1),
            (1.5, Decimal("2.25"), None, b"", day, False, None), (None, Decimal("2.25"), at, None, None, None, 1)]
    original = spark.createDataFrame(rows, schema)
    synthetic = spark.createDataFrame([rows[0], rows[2], rows[2], (2.5, Decimal("1"), at, b"y", day, True, 2)], schema)
    columns = list(original.columns)
    counted = f.digested_occurrences(original, synthetic, columns, keep=columns, n_rows=8)
    try:
        # -0.0 and 0.0 are one float row, found twice in the original and once in the synthetic table.
        assert_df_equality(counted, f.occurrence_counts(original, synthetic, columns), ignore_row_order=True)
        assert sorted(r[f.N_ORIGINAL] * 10 + r[f.N_SYNTHETIC] for r in counted.collect()) == [1, 10, 12, 21]
    finally:
        counted.unpersist()


def test_digested_occurrences_release_their_caches_when_a_job_fails(spark, monkeypatch):
    from privacy_eval import frames as f

    original, synthetic = frames(spark, _DIGEST_ORIGINAL, "x double, y string, z string",
                                 _DIGEST_SYNTHETIC, "x double, y string, z string")
    cache_manager = spark._jsparkSession.sharedState().cacheManager()
    spark.catalog.clearCache()

    def failing(self):
        raise RuntimeError("job failed")

    monkeypatch.setattr(type(original), "count", failing)  # the fill of the result, the last job
    with pytest.raises(RuntimeError, match="job failed"):
        f.digested_occurrences(original, synthetic, ["x", "y", "z"], keep=["x"], n_rows=13)
    assert cache_manager.isEmpty()  # neither the digest groups nor the result stay registered


def test_wide_and_large_inputs_of_hashable_types_are_counted_by_digests(spark, monkeypatch):
    from privacy_eval import frames as f

    frame = spark.createDataFrame([(1, "a", 1.5)], "x long, y string, z double").select(
        "x", "y", "z", F.col("y").cast("string collate UTF8_LCASE").alias("folded"),
        F.array("x").alias("listed"), F.lit(None).cast("decimal(10,2)").alias("amount"),
        F.current_date().alias("day"), F.current_timestamp().alias("at"),
    )
    plain = ["x", "y", "z", "amount", "day", "at"]
    assert not f.digests_pay(frame, frame, plain, n_rows=10 ** 9)        # 6 columns: too narrow
    assert not f.digests_pay(frame, frame, plain * 4, n_rows=f.DIGEST_MIN_ROWS - 1)
    assert f.digests_pay(frame, frame, plain * 4, n_rows=f.DIGEST_MIN_ROWS)
    # Equal values must hash alike: arrays (of doubles, -0.0) and strings equal under a
    # collation other than byte equality are counted on whole rows, and so are columns
    # typed differently on the two sides (1 and 1.0 hash apart).
    assert not f.digests_pay(frame, frame, plain * 4 + ["listed"], n_rows=10 ** 9)
    assert not f.digests_pay(frame, frame, plain * 4 + ["folded"], n_rows=10 ** 9)
    as_double = frame.withColumn("x", F.col("x").cast("double"))
    assert not f.digests_pay(frame, as_double, plain * 4, n_rows=10 ** 9)
    # Whether it pays or not, the figures are the same: cached_row_occurrences routes.
    routes = []
    monkeypatch.setattr(f, "digested_occurrences", lambda *args: routes.append(args[3]) or "digests")
    monkeypatch.setattr(f, "DIGEST_MIN_COLUMNS", 2)
    monkeypatch.setattr(f, "DIGEST_MIN_ROWS", 2)
    assert f.cached_row_occurrences(frame, frame, ["x", "y"], n_rows=2, keep=["y"]) == "digests"
    assert routes == [["y"]]
    whole = f.cached_row_occurrences(frame, frame, ["x", "y"], n_rows=2)  # no `keep`: whole rows
    whole.unpersist()
    assert routes == [["y"]] and whole.columns == ["x", "y", f.N_ORIGINAL, f.N_SYNTHETIC]


def test_whole_row_shuffles_sets_the_task_count_for_its_duration(spark):
    from privacy_eval.frames import CELLS_PER_TASK, whole_row_shuffles

    assert spark.conf.get("spark.sql.shuffle.partitions") == "2"
    with whole_row_shuffles(spark, n_rows=10, n_columns=3):
        assert spark.conf.get("spark.sql.shuffle.partitions") == "2"  # the setting is more
    # 1e8 rows per side of six columns; restored when the work fails too.
    with pytest.raises(RuntimeError, match="boom"), whole_row_shuffles(spark, n_rows=2 * 10**8, n_columns=6):
        assert spark.conf.get("spark.sql.shuffle.partitions") == str(2 * 10**8 * 6 // CELLS_PER_TASK) == "80"
        raise RuntimeError("boom")
    assert spark.conf.get("spark.sql.shuffle.partitions") == "2"


def test_the_job_caches_a_csv_side_but_not_a_parquet_side(spark, tmp_path):
    from privacy_eval.config import Config, MetricsConfig, RowDirectMatchConfig
    from privacy_eval.evaluation import load_inputs

    table = pd.DataFrame({"id": [1, 2, 3], "x": [5, 6, 7]})
    table.to_parquet(tmp_path / "original.parquet", index=False)
    table.iloc[1:].to_csv(tmp_path / "synthetic.csv", index=False)
    config = Config(
        dataset="t", original=Source(path=str(tmp_path / "original.parquet")),
        synthetic=Source(path=str(tmp_path / "synthetic.csv")), row_key="id",
        metrics=MetricsConfig(row_direct_match=RowDirectMatchConfig()),
    )
    inputs = load_inputs(spark, config)
    try:
        assert len(inputs.cached) == 1 and inputs.cached[0].is_cached
        assert inputs.cached[0].count() == 2  # the CSV side
        assert (inputs.n_original, inputs.n_synthetic, inputs.n_paired_keys) == (3, 2, 2)
        assert inputs.pass_figures is None  # no linkage configured
    finally:
        inputs.unpersist()


@pytest.mark.parametrize("kind", ["map<string,int>", "array<map<string,int>>", "struct<m:map<string,int>>"])
def test_a_map_anywhere_in_a_column_is_refused_naming_it(spark, kind):
    o = spark.createDataFrame([(1, 5)], "id long, x long").selectExpr("id", "x", f"cast(null as {kind}) as m")
    with pytest.raises(InputError, match=r"column 'm' is .*map.* in the original table.*'exclude'"):
        prepare_inputs(o, o, row_key="id")
    assert prepare_inputs(o, o, row_key="id", exclude=["m"]).columns == ("x",)


def test_arrays_and_structs_are_compared(spark):
    o = spark.createDataFrame([(1, [1, 2], (3, "a"))], "id long, a array<int>, s struct<n:int,t:string>")
    inputs = prepare_inputs(o, o, row_key="id")
    assert inputs.columns == ("a", "s") and inputs.n_original == 1


def test_glob_characters_in_a_path_are_literal(spark, tmp_path):
    (tmp_path / "o[1].csv").write_text("id,x\n1,5\n")
    (tmp_path / "o1.csv").write_text("id,x\n1,6\n2,7\n")
    frame = read_table(spark, Source(path=str(tmp_path / "o[1].csv")), "original")
    assert [tuple(r) for r in frame.collect()] == [(1, 5)]


def test_a_folder_linking_to_itself_is_refused_naming_the_link(spark, tmp_path):
    (tmp_path / "o").mkdir()
    (tmp_path / "o" / "part.csv").write_text("id,x\n1,5\n")
    (tmp_path / "o" / "again").symlink_to(tmp_path / "o")
    with pytest.raises(InputError, match=r"original: .*o/again is a symbolic link to a folder that contains it"):
        read_table(spark, Source(path=str(tmp_path / "o"), format="csv"), "original")


def test_a_header_that_looks_renamed_but_is_not_is_kept(spark, tmp_path):
    """Spark renames repeated names to name + position; a header that really reads
    `x0,x1` must not be taken for one."""
    (tmp_path / "o.csv").write_text("id,x1,x2\n1,5,6\n")
    assert read_table(spark, Source(path=str(tmp_path / "o.csv")), "original").columns == ["id", "x1", "x2"]


def test_quotes_that_close_on_their_line_are_not_line_breaks(spark, tmp_path):
    (tmp_path / "o.csv").write_text('id,x,y\n1,"a, b",5\'10"\n2,"say ""hi""",3\n')
    assert read_table(spark, Source(path=str(tmp_path / "o.csv")), "original").count() == 2
    (tmp_path / "m.csv").write_text('id,x\n1,"a\nb"\n')
    with pytest.raises(InputError, match="spans lines"):
        read_table(spark, Source(path=str(tmp_path / "m.csv")), "original")
    multi = Source(path=str(tmp_path / "m.csv"), options={"multiLine": True, "escape": '"'})
    assert read_table(spark, multi, "original").count() == 1


def test_a_line_break_deep_in_a_file_of_many_splits_is_found(spark, sql_conf, tmp_path):
    """The check reads a file of one partition and one of several in two ways (one Spark
    job, or all partitions in one job): both find the broken line, here near the end."""
    rows = "".join(f"{i},x{i}\n" for i in range(20_000))
    (tmp_path / "m.csv").write_text("id,x\n" + rows + '20000,"a\nb"\n')
    (tmp_path / "ok.csv").write_text("id,x\n" + rows)
    sql_conf({"spark.sql.files.maxPartitionBytes": str(16 << 10), "spark.sql.files.openCostInBytes": "0"})
    assert spark.read.text(str(tmp_path / "m.csv")).rdd.getNumPartitions() > 3
    with pytest.raises(InputError, match="spans lines"):
        read_table(spark, Source(path=str(tmp_path / "m.csv")), "original")
    assert read_table(spark, Source(path=str(tmp_path / "ok.csv")), "original").count() == 20_000
