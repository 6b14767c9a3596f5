"""Benchmark: the three exact metrics in Spark, DuckDB and pandas on the same data.

    scripts/bench --rows 1000000 [--seed 0] [--data bench-data] [--master local[2]]
    scripts/bench --linkage --rows N      the linkage attack against numpy + cKDTree
    scripts/bench --distance --rows N     the distance metrics against numpy + cKDTree (bench_distance.py)
    scripts/bench --small [--runs 3]      the WBCD job against a bare read-and-count and a Spark floor,
                                          whole processes (bench_small.py)
    scripts/bench --rows N --processes [--runs 3]
                                          the job (spark-submit) against DuckDB, plain Spark SQL and a
                                          Spark floor, whole processes (bench_processes.py)
    scripts/bench --disclosure --rows N   identity and attribute disclosure against DuckDB (bench_disclosure.py)
    scripts/bench --wide COLUMNS --rows N [--runs 3]
                                          the occurrence pass by whole rows and by row digests (bench_wide.py)

Generates a seeded original/synthetic pair with tests/support/datagen.py (the property test's
generator), writes it as Parquet, then times, in this one run:
  - Spark: privacy_eval.evaluation.evaluate (read + all three metrics), warm session;
  - DuckDB: the same formulas in SQL over the same Parquet files;
  - plain Spark SQL: DuckDB's queries run as they are by the same session (no checks);
  - a Spark floor: RDMP's and CDMP's counts by one shuffle and one join, nothing else;
  - pandas: tests/support/reference.py on the same files;
  - the KPR binning step alone, natively (the job's choice) and as a mapInPandas UDF.
All engines must agree on every count; the script fails loudly if they do not.
"""

from __future__ import annotations

import argparse
import logging
import math
import os
import platform
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from measure import PeakMemory, timed  # noqa: E402

from tests.support import datagen, reference  # noqa: E402

COLUMNS = datagen.COLUMNS
KNOWN = datagen.KNOWN
NUMERIC = datagen.NUMERIC


# Above this many rows per side the data is generated and written in parts of this size
# (seed + part number, keys offset), so that 1e8 rows never sit in pandas at once.
PART_ROWS = 10_000_000


def generate(rows: int, seed: int, folder: Path) -> tuple[Path, Path]:
    """Parquet files of `rows` rows per side; above PART_ROWS, a folder of part files
    per side (duplicates and leaks then fall within a part: the counts differ from a
    one-piece generation, and every engine reads the same parts)."""
    folder.mkdir(parents=True, exist_ok=True)
    original_path, synthetic_path = folder / f"original-{rows}-{seed}.parquet", folder / f"synthetic-{rows}-{seed}.parquet"
    if original_path.exists() and synthetic_path.exists():
        return original_path, synthetic_path
    if rows <= PART_ROWS:
        original, synthetic = datagen.generate(rows, seed)
        original.to_parquet(original_path, index=False)
        synthetic.to_parquet(synthetic_path, index=False)
        return original_path, synthetic_path
    for path in (original_path, synthetic_path):
        path.mkdir()
    for part, start in enumerate(range(0, rows, PART_ROWS)):
        original, synthetic = datagen.generate(min(PART_ROWS, rows - start), seed + part)
        for frame, path in ((original, original_path), (synthetic, synthetic_path)):
            frame["id"] += start
            frame.to_parquet(path / f"part-{part:05d}.parquet", index=False)
    return original_path, synthetic_path


def parquet_glob(path: Path) -> str:
    """What DuckDB's read_parquet needs for a file or a folder of parts."""
    return str(path / "*.parquet") if path.is_dir() else str(path)


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


def run_spark(spark, original_path: Path, synthetic_path: Path) -> tuple[dict, float]:
    from privacy_eval.config import (
        ColumnDirectMatchConfig,
        Config,
        KnowledgeProtectionConfig,
        MetricsConfig,
        RowDirectMatchConfig,
        Source,
    )
    from privacy_eval.evaluation import evaluate

    config = Config(
        dataset="bench",
        original=Source(path=str(original_path)),
        synthetic=Source(path=str(synthetic_path)),
        row_key="id",
        metrics=MetricsConfig(
            row_direct_match=RowDirectMatchConfig(),
            column_direct_match=ColumnDirectMatchConfig(),
            knowledge_protection=KnowledgeProtectionConfig(known_variables=KNOWN),
        ),
    )

    def work():
        evaluation = evaluate(spark, config)
        by_name = {m.metric: m for m in evaluation.metrics}
        return {
            "reproduced": by_name["row_direct_match_protection"].numerator,
            "matches": {c.column_name: c.matches for c in evaluation.columns},
            "exposed": by_name["knowledge_protection_rate"].numerator,
        }
    return timed(work)


def run_binning(spark, synthetic_path: Path) -> dict[str, tuple[int, float]]:
    """The KPR binning + profile count on the synthetic side: native vs mapInPandas."""
    from pyspark.sql import functions as F

    from privacy_eval.metrics.binning import bin_grids, profiles

    synthetic = spark.read.parquet(str(synthetic_path)).select(*KNOWN).cache()
    synthetic.count()
    numeric_known = [v for v in KNOWN if v in NUMERIC]
    grids = bin_grids(synthetic, numeric_known, {})  # any grid will do for timing
    by_name = {g.variable: g for g in grids}

    def native():
        return profiles(synthetic, KNOWN, grids).groupBy(*KNOWN).count().filter(F.col("count") == 1).count()

    def udf_bins(batches):
        for batch in batches:
            out = batch.copy()
            for v, g in by_name.items():
                out[v] = np.floor((batch[v].astype("float64") - g.origin) / g.step)
            yield out

    schema = ", ".join(f"`{v}` double" if v in by_name else f"`{v}` {dict(synthetic.dtypes)[v]}" for v in KNOWN)

    def pandas_udf():
        binned = synthetic.mapInPandas(udf_bins, schema)
        return binned.groupBy(*KNOWN).count().filter(F.col("count") == 1).count()

    results = {}
    for name, fn in (("native floor", native), ("mapInPandas", pandas_udf)):
        fn()  # warm-up: Python workers, JIT
        runs = [timed(fn) for _ in range(2)]
        results[name] = (runs[0][0], min(t for _, t in runs))
    synthetic.unpersist()
    return results


LINK_TARGETS = ["age", "income", "score"]
LINK_BLOCKING = ["city", "sex", "visits"]


def linkage_numpy(original_path: Path, synthetic_path: Path) -> tuple[float, float]:
    """Single-process reference: same analytic success rate, blocks by pandas groupby."""
    from privacy_eval.linkage import kernel as lk
    from tests.support.linkage_oracle import concat_block_results, summarize_linkage

    def work():
        cols = ["id"] + LINK_TARGETS + LINK_BLOCKING
        o = pd.read_parquet(original_path, columns=cols).dropna(subset=LINK_TARGETS)
        s = pd.read_parquet(synthetic_path, columns=cols).dropna(subset=LINK_TARGETS)
        for frame in (o, s):  # null blocks together; NaN keys would never match across frames
            for c in LINK_BLOCKING:
                frame[c] = frame[c].astype(object).where(frame[c].notna(), "\0null")
        _, cov = lk.Moments.from_array(o[LINK_TARGETS].to_numpy(float)).covariance()
        whitening = lk.whitening_from_covariance(cov, 1e-6)
        groups_o = o.groupby(LINK_BLOCKING, dropna=False, sort=False).indices
        groups_s = s.groupby(LINK_BLOCKING, dropna=False, sort=False).indices
        xo = whitening.transform(o[LINK_TARGETS].to_numpy(float))
        xs = whitening.transform(s[LINK_TARGETS].to_numpy(float))
        ido, ids = o["id"].to_numpy(), s["id"].to_numpy()
        results = []
        for block, rows_s in groups_s.items():
            rows_o = groups_o.get(block, np.array([], dtype=np.int64))
            results.append(lk.evaluate_block_kdtree(ido[rows_o], xo[rows_o], ids[rows_s], xs[rows_s], max_k=10, p=2))
        r = concat_block_results(results)
        return summarize_linkage(r.n_candidates, r.n_better, r.true_tie_size, capped=r.capped).success_analytic
    return timed(work)


def linkage_spark(spark, original_path: Path, synthetic_path: Path) -> tuple[float, float]:
    from privacy_eval.config import LinkageConfig
    from privacy_eval.inputs import prepare_inputs
    from privacy_eval.linkage.attack import linkage_attack
    from privacy_eval.linkage.prepare import input_pass_work

    config = LinkageConfig(targets=LINK_TARGETS, blocking=LINK_BLOCKING, methods=["mahalanobis"],
                           drop_incomplete=True)

    def work():
        # As the job does it (evaluation.load_inputs): Parquet sides are not cached, the
        # key check counts the true pairs and the profile pass the moments for the attack.
        cols = ["id"] + LINK_TARGETS + LINK_BLOCKING
        inputs = prepare_inputs(spark.read.parquet(str(original_path)).select(*cols),
                                spark.read.parquet(str(synthetic_path)).select(*cols), row_key="id", cache=(),
                                work=input_pass_work(config))
        try:
            return linkage_attack(inputs, config).methods["mahalanobis"].success_rate
        finally:
            inputs.unpersist()
    return timed(work)


def main_linkage(args, original_path: Path, synthetic_path: Path) -> int:
    from privacy_eval.session import build_session

    spark = build_session("privacy-eval-bench", {
        "spark.master": args.master, "spark.driver.memory": "8g",
        "spark.sql.shuffle.partitions": "8", "spark.ui.enabled": "false",
    })
    spark.sparkContext.setLogLevel("ERROR")
    linkage_spark(spark, *generate(2_000, args.seed, Path(args.data)))  # warm-up
    with PeakMemory() as memory:
        spark_rate, spark_s = linkage_spark(spark, original_path, synthetic_path)
    # The same run again in the same session: JIT-compiled code and Python workers warm,
    # as in a long-lived session evaluating several releases.
    again_rate, again_s = linkage_spark(spark, original_path, synthetic_path)
    spark.stop()
    numpy_rate, numpy_s = linkage_numpy(original_path, synthetic_path)
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
          f"Spark master {args.master}")
    print()
    print("| linkage (Mahalanobis, blocking city+sex+visits) | records per side | wall time (s) | vs numpy | success rate |")
    print("|---|---:|---:|---:|---:|")
    print(f"| Spark (privacy_eval) | {args.rows:,} | {spark_s:.1f} | {spark_s / numpy_s:.2f}x | {spark_rate!r} |")
    print(f"| Spark, same run repeated in the session | {args.rows:,} | {again_s:.1f} | {again_s / numpy_s:.2f}x | {again_rate!r} |")
    print(f"| numpy + cKDTree, one process | {args.rows:,} | {numpy_s:.1f} | 1.00x | {numpy_rate!r} |")
    print(f"\npeak resident memory during the Spark run: JVM (driver = executor in local mode) "
          f"{memory.jvm / 2**20:.0f} MiB, largest Python worker {memory.worker / 2**20:.0f} MiB")
    if not spark_rate == again_rate == numpy_rate:
        print("\nERROR: the success rates differ", file=sys.stderr)
        return 1
    print("\nboth agree exactly")
    return 0


def argument_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--data", default=str(ROOT / "bench-data"))
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--driver-memory", default="12g",
                        help="the exact metrics' Spark driver memory (conf/spark/local.conf has 4g)")
    parser.add_argument("--skip-pandas", action="store_true", help="leave out the pandas reference")
    parser.add_argument("--skip-binning", action="store_true", help="leave out the KPR binning comparison")
    parser.add_argument("--linkage", action="store_true", help="benchmark the linkage attack instead")
    parser.add_argument("--distance", action="store_true", help="benchmark the distance metrics instead")
    parser.add_argument("--disclosure", action="store_true",
                        help="benchmark identity and attribute disclosure (3 keys x 3 targets) against DuckDB instead")
    parser.add_argument("--no-repeat", action="store_true", help="--distance: leave out the repeated Spark run")
    parser.add_argument("--profile", action="store_true", help="--distance: also time the Spark steps one by one")
    parser.add_argument("--cell-records", type=int, metavar="M",
                        help="--distance: also run with cells of M records and compare with one cell")
    parser.add_argument("--no-reference", action="store_true",
                        help="--distance: leave out the numpy reference (the Spark runs are compared with each other)")
    parser.add_argument("--redraw", type=float, default=0.0, help="--distance: share of synthetic records with a redrawn category")
    parser.add_argument("--small", action="store_true",
                        help="benchmark the bundled WBCD job (seed metrics) against a bare Spark read-and-count "
                             "and a Spark floor of the same metrics")
    parser.add_argument("--processes", action="store_true",
                        help="time the job (spark-submit), plain Spark SQL, a Spark floor and DuckDB as whole "
                             "processes instead")
    parser.add_argument("--runs", type=int, default=3,
                        help="--small, --processes, --wide, --distance --cell-records: timed runs of each, "
                             "alternated (median reported)")
    parser.add_argument("--out", help="--small, --processes: output folder (default: a new temporary folder)")
    parser.add_argument("--jobs", action="store_true", help="--small: also count the Spark jobs of each phase")
    parser.add_argument("--wide", type=int, metavar="COLUMNS",
                        help="time the occurrence pass on rows of COLUMNS columns, by whole rows and by digests")
    return parser


def main() -> int:
    args = argument_parser().parse_args()
    # The job's per-phase timings (read, U, each metric) go to stderr.
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s: %(message)s")
    logging.getLogger("privacy_eval").setLevel(logging.INFO)

    if args.small:
        sys.path.insert(0, str(ROOT / "scripts"))
        import bench_small

        return bench_small.main_small(args)
    if args.wide:
        sys.path.insert(0, str(ROOT / "scripts"))
        import bench_wide

        return bench_wide.main_wide(args)
    if args.distance:
        sys.path.insert(0, str(ROOT / "scripts"))
        import bench_distance

        return bench_distance.main_distance(args)
    (original_path, synthetic_path), gen_s = timed(lambda: generate(args.rows, args.seed, Path(args.data)))
    print(f"data: {args.rows:,} rows per side, seed {args.seed}, generated/cached in {gen_s:.1f} s")
    if args.linkage:
        return main_linkage(args, original_path, synthetic_path)
    if args.disclosure:
        sys.path.insert(0, str(ROOT / "scripts"))
        import bench_disclosure

        return bench_disclosure.main_disclosure(args, original_path, synthetic_path, timed, generate)
    if args.processes:
        sys.path.insert(0, str(ROOT / "scripts"))
        import bench_processes

        return bench_processes.main_processes(args, original_path, synthetic_path, KNOWN)
    return main_exact(args, original_path, synthetic_path)


def main_exact(args, original_path: Path, synthetic_path: Path) -> int:
    """The exact metrics in one warm session against DuckDB (and pandas): a table of
    wall times and counts; fails when the engines disagree. The Spark rows run in turn in
    one session, the job first: the later ones find the files in the page cache."""
    from privacy_eval.session import build_session

    spark, session_s = timed(lambda: build_session("privacy-eval-bench", {
        "spark.master": args.master,
        "spark.driver.memory": args.driver_memory,
        "spark.sql.shuffle.partitions": "8",
        "spark.ui.enabled": "false",
    }))
    spark.sparkContext.setLogLevel("ERROR")
    # Warm the JVM and Python workers once, so the table compares steady-state work.
    warm_up = generate(2_000, args.seed, Path(args.data))
    run_spark(spark, *warm_up)
    run_spark_sql(spark, *warm_up)
    run_spark_floor(spark, *warm_up)

    rows = []
    with PeakMemory() as peak:
        spark_result, spark_s = run_spark(spark, original_path, synthetic_path)
    rows.append(("Spark (privacy_eval)", spark_s, spark_result))
    plain_result, plain_s = run_spark_sql(spark, original_path, synthetic_path)
    rows.append(("Spark SQL, plain (the DuckDB queries)", plain_s, plain_result))
    floor_result, floor_s = run_spark_floor(spark, original_path, synthetic_path)
    rows.append(("Spark floor: RDMP + CDMP only, one shuffle + one join", floor_s, floor_result))
    duck_result, duck_s = run_duckdb(original_path, synthetic_path)
    rows.append(("DuckDB", duck_s, duck_result))
    if not args.skip_pandas:
        pandas_result, pandas_s = run_pandas(original_path, synthetic_path)
        rows.append(("pandas (tests/support/reference.py)", pandas_s, pandas_result))
    binning = {} if args.skip_binning else run_binning(spark, synthetic_path)
    spark.stop()

    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
          f"Spark master {args.master}, driver memory {args.driver_memory}; Spark session start "
          f"{session_s:.1f} s (not included below); peak resident memory of the JVM during the "
          f"Spark run {peak.jvm / 2**20:,.0f} MiB")
    print()
    print("| engine | rows per side | wall time (s) | vs DuckDB | reproduced | exposed |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, seconds, result in rows:
        print(f"| {name} | {args.rows:,} | {seconds:.1f} | {seconds / duck_s:.2f}x | "
              f"{result['reproduced']} | {result.get('exposed', '-')} |")
    if binning:
        print()
        print("| KPR binning + profile count (synthetic side, cached) | seconds (best of 2) | unique profiles |")
        print("|---|---:|---:|")
        for name, (count, seconds) in binning.items():
            print(f"| {name} | {seconds:.2f} | {count} |")

    first = rows[0][2]
    disagreements = [name for name, _, result in rows[1:] if not same_counts(result, first)]
    if len({count for count, _ in binning.values()}) > 1:
        disagreements.append("binning variants")
    if disagreements:
        print(f"\nERROR: results differ from Spark's: {', '.join(disagreements)}", file=sys.stderr)
        return 1
    print("\nall engines agree on every count")
    return 0


if __name__ == "__main__":
    sys.exit(main())
