"""The exact metrics' counts (RDMP's reproduced singletons, CDMP's per-column matches,
KPR's exposed singletons) by the engines the benchmarks compare the job with: DuckDB
and plain Spark SQL running the same SQL, a Spark floor doing less than the job must,
and the pandas reference. Each returns (counts, seconds); every engine must agree."""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd
from bench_data import COLUMNS, KNOWN, NUMERIC, parquet_glob
from measure import timed

from tests.support import reference


def run_pandas(original_path: Path, synthetic_path: Path) -> tuple[dict, float]:
    def work():
        original = pd.read_parquet(original_path)
        synthetic = pd.read_parquet(synthetic_path)
        return {
            "reproduced": reference.row_direct_match(original, synthetic, COLUMNS)["reproduced"],
            "matches": {c: v["matches"] for c, v in
                        reference.column_direct_match(original, synthetic, COLUMNS, "id")["per_column"].items()},
            "exposed": reference.knowledge_protection(original, synthetic, COLUMNS, KNOWN, NUMERIC)["exposed"],
        }
    return timed(work)


def sql_counts(query: Callable[[str], Any], materialize: str) -> dict:
    """The three metrics' counts by plain SQL that DuckDB and Spark SQL both run, over
    views `o` and `s` of the two files. `query` runs one statement and returns its first
    row; `materialize` is the dialect's "keep this result" prefix for the table `u`."""
    def same(a: str, b: str, cols) -> str:
        return " AND ".join(f"{a}.{c} IS NOT DISTINCT FROM {b}.{c}" for c in cols)

    cols = ", ".join(COLUMNS)
    query(f"{materialize} u AS SELECT {cols} FROM o GROUP BY ALL HAVING count(*) = 1")
    reproduced = query(f"SELECT count(*) FROM u SEMI JOIN s ON {same('u', 's', COLUMNS)}")[0]
    match_exprs = ", ".join(f"count(*) FILTER (WHERE o.{c} IS NOT DISTINCT FROM s.{c})" for c in COLUMNS)
    matches = dict(zip(COLUMNS, query(f"SELECT {match_exprs} FROM o JOIN s USING (id)")))
    # KPR: grid from U, then binned profiles.
    numeric_known = [v for v in KNOWN if v in NUMERIC]
    stats = query("SELECT " + ", ".join(f"avg({v}), stddev_samp({v}), min({v})" for v in numeric_known) + " FROM u")
    binned = []
    for i, v in enumerate(numeric_known):
        mean, sd, low = stats[3 * i: 3 * i + 3]
        step, origin = 0.05 * abs(mean), low - (sd or 0.0) / 10.0
        if not (math.isfinite(step) and math.isfinite(origin) and step > 0):
            raise ValueError(f"{v}: no finite bin grid (step {step}, origin {origin}); the SQL needs numbers")
        binned.append(f"floor(({v}::DOUBLE - {origin!r}) / {step!r}) AS {v}")
    profile = ", ".join(binned + [v for v in KNOWN if v not in numeric_known])
    exposed = query(
        f"WITH sp AS (SELECT {profile} FROM s), up AS (SELECT {profile} FROM u), "
        f"b1 AS (SELECT * FROM sp GROUP BY ALL HAVING count(*) = 1) "
        f"SELECT count(*) FROM up SEMI JOIN b1 ON {same('up', 'b1', KNOWN)}"
    )[0]
    return {"reproduced": reproduced, "matches": matches, "exposed": exposed}


def run_duckdb(original_path: Path, synthetic_path: Path) -> tuple[dict, float]:
    import duckdb

    def work():
        con = duckdb.connect()
        con.execute(f"CREATE VIEW o AS SELECT * FROM read_parquet('{parquet_glob(original_path)}')")
        con.execute(f"CREATE VIEW s AS SELECT * FROM read_parquet('{parquet_glob(synthetic_path)}')")
        counts = sql_counts(lambda sql: con.execute(sql).fetchone(), "CREATE TEMP TABLE")
        con.close()
        return counts
    return timed(work)


def run_spark_sql(spark, original_path: Path, synthetic_path: Path) -> tuple[dict, float]:
    """The DuckDB queries above run by Spark SQL as they are: what plain Spark costs for
    the same counts, without the job's checks, caching choices and results."""
    def first(sql: str):
        rows = spark.sql(sql).take(1)
        return tuple(rows[0]) if rows else None

    def work():
        for view, path in (("o", original_path), ("s", synthetic_path)):
            spark.read.parquet(str(path)).createOrReplaceTempView(view)
        counts = sql_counts(first, "CACHE TABLE")
        spark.catalog.dropTempView("u")  # uncaches it too
        return counts
    return timed(work)


# The counts run_spark_floor computes (no KPR).
FLOOR_COUNTS = ("reproduced", "matches")


def same_counts(result: dict, expected: dict) -> bool:
    """Whether an engine's counts equal `expected`: all of them, or exactly the floor's."""
    return result == expected or (
        result.keys() == set(FLOOR_COUNTS) and all(result[k] == expected[k] for k in FLOOR_COUNTS)
    )


def run_spark_floor(spark, original_path: Path, synthetic_path: Path) -> tuple[dict, float]:
    """A floor for exact RDMP and CDMP counts in Spark: both files read, one shuffle of
    whole rows (both sides stacked, counted per side), one join on the key; no checks, no
    KPR (its counts leave "exposed" out), default settings. Less work than the job does."""
    from pyspark.sql import functions as F

    def work():
        sides = [spark.read.parquet(str(path)) for path in (original_path, synthetic_path)]
        # One type per column, as the job's type plan gives: datagen's sides differ only by
        # integer against double.
        differ = {c for c in COLUMNS if sides[0].schema[c].dataType != sides[1].schema[c].dataType}
        o, s = (
            side.select("id", *(F.col(c).cast("double") if c in differ else F.col(c) for c in COLUMNS)).alias(name)
            for side, name in zip(sides, ("o", "s"))
        )
        stacked = o.drop("id").withColumn("side", F.lit(0)).unionByName(s.drop("id").withColumn("side", F.lit(1)))
        per_row = stacked.groupBy(*COLUMNS).agg(
            F.count_if(F.col("side") == 0).alias("n_o"), F.count_if(F.col("side") == 1).alias("n_s")
        )
        reproduced = per_row.filter("n_o = 1 AND n_s > 0").count()
        matches = o.join(s, "id").agg(
            *(F.count_if(F.col(f"o.{c}").eqNullSafe(F.col(f"s.{c}"))).alias(c) for c in COLUMNS)
        ).first()
        return {"reproduced": reproduced, "matches": matches.asDict()}
    return timed(work)
