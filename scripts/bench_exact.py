"""`scripts/bench exact --rows N`: the three exact metrics in Spark, DuckDB and pandas on
the same data.

Generates a seeded original/synthetic pair (bench_data.py), writes it as Parquet, then
times, in this one run:
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
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from bench_data import KNOWN, NUMERIC, generate, generated
from engines import run_duckdb, run_pandas, run_spark_floor, run_spark_sql, same_counts
from measure import PeakMemory, machine, timed


@dataclass(frozen=True)
class EngineRun:
    """One engine's timed run and the counts it found."""

    engine: str
    seconds: float
    counts: dict


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


def main(args: argparse.Namespace) -> int:
    """The exact metrics in one warm session against DuckDB (and pandas): a table of
    wall times and counts; fails when the engines disagree. The Spark rows run in turn in
    one session, the job first: the later ones find the files in the page cache."""
    from privacy_eval.session import build_session

    original_path, synthetic_path = generated(args)
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

    def engine(name: str, measured: tuple[dict, float]) -> EngineRun:
        counts, seconds = measured
        return EngineRun(name, seconds, counts)

    with PeakMemory() as peak:
        runs = [engine("Spark (privacy_eval)", run_spark(spark, original_path, synthetic_path))]
    runs += [
        engine("Spark SQL, plain (the DuckDB queries)", run_spark_sql(spark, original_path, synthetic_path)),
        engine("Spark floor: RDMP + CDMP only, one shuffle + one join", run_spark_floor(spark, original_path, synthetic_path)),
        engine("DuckDB", run_duckdb(original_path, synthetic_path)),
    ]
    duck_s = runs[-1].seconds
    if not args.skip_pandas:
        runs.append(engine("pandas (tests/support/reference.py)", run_pandas(original_path, synthetic_path)))
    binning = {} if args.skip_binning else run_binning(spark, synthetic_path)
    spark.stop()

    print(f"{machine()}, Spark master {args.master}, driver memory {args.driver_memory}; Spark session start "
          f"{session_s:.1f} s (not included below); peak resident memory of the JVM during the "
          f"Spark run {peak.jvm / 2**20:,.0f} MiB")
    print()
    print("| engine | rows per side | wall time (s) | vs DuckDB | reproduced | exposed |")
    print("|---|---:|---:|---:|---:|---:|")
    for run in runs:
        print(f"| {run.engine} | {args.rows:,} | {run.seconds:.1f} | {run.seconds / duck_s:.2f}x | "
              f"{run.counts['reproduced']} | {run.counts.get('exposed', '-')} |")
    if binning:
        print()
        print("| KPR binning + profile count (synthetic side, cached) | seconds (best of 2) | unique profiles |")
        print("|---|---:|---:|")
        for name, (count, seconds) in binning.items():
            print(f"| {name} | {seconds:.2f} | {count} |")

    job = runs[0].counts
    disagreements = [run.engine for run in runs[1:] if not same_counts(run.counts, job)]
    if len({count for count, _ in binning.values()}) > 1:
        disagreements.append("binning variants")
    if disagreements:
        print(f"\nERROR: results differ from Spark's: {', '.join(disagreements)}", file=sys.stderr)
        return 1
    print("\nall engines agree on every count")
    return 0
