"""`scripts/bench wide --columns COLUMNS --rows N [--runs 3]`: the occurrence pass on wide rows.

The aggregate RDMP and KPR read (frames.cached_row_occurrences) counted both ways on the
same Parquet files, in one warm session (driver 4g as in conf/spark/local.conf, 8 shuffle
partitions), in turns after one untimed warm-up of each: grouping whole rows, and
grouping row digests (frames.digested_occurrences), keeping three columns as KPR's known
variables would. Each run fills the cache and counts the singletons, the reproduced ones
and the distinct rows from it; both routes must give the same counts in every run.

The data (made with Spark, seeded): N rows per side of COLUMNS columns, a third each text
(50 values), integers (1,000 values) and doubles (two decimals, 0 to 100), so rows are
nearly all distinct; the synthetic table copies every twentieth original row and draws
the others afresh.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

from measure import machine
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from privacy_eval import frames
from privacy_eval.session import build_session

KEEP = 3  # the first columns, kept as KPR's known variables would be


def _columns(width: int, seed: int) -> list[Column]:
    out = []
    for i in range(width):
        r = F.rand(seed * 1000 + i)
        kinds = (F.floor(r * 50).cast("string"), F.floor(r * 1000).cast("long"), F.round(r * 100, 2))
        out.append(kinds[i % 3].alias(f"c{i}"))
    return out


def generate(spark: SparkSession, rows: int, width: int, seed: int, folder: Path) -> tuple[str, str]:
    original, synthetic = str(folder / "original"), str(folder / "synthetic")
    if not (folder / "synthetic" / "_SUCCESS").exists():
        spark.range(rows).select(F.col("id"), *_columns(width, seed)).write.mode("overwrite").parquet(original)
        leaked = spark.read.parquet(original).filter(F.col("id") % 20 == 0)
        fresh = spark.range(rows).filter(F.col("id") % 20 != 0).select(F.col("id"), *_columns(width, seed + 1))
        leaked.unionByName(fresh).write.mode("overwrite").parquet(synthetic)
    return original, synthetic


def _counted(
    original: DataFrame, synthetic: DataFrame, columns: list[str], n_rows: int, digests: bool
) -> tuple[float, tuple]:
    started = time.perf_counter()
    if digests:
        aggregate = frames.digested_occurrences(original, synthetic, columns, columns[:KEEP], n_rows)
    else:
        aggregate = frames.cached_row_occurrences(original, synthetic, columns, n_rows)
    once = F.col(frames.N_ORIGINAL) == 1
    counts = aggregate.agg(
        F.count(F.when(once, 1)), F.count(F.when(once & (F.col(frames.N_SYNTHETIC) > 0), 1)), F.count(F.lit(1))
    ).collect()[0]
    seconds = time.perf_counter() - started
    aggregate.unpersist()
    return seconds, tuple(counts)


def main(args: argparse.Namespace) -> int:
    spark = build_session("privacy-eval-bench-wide", {
        "spark.master": args.master, "spark.driver.memory": "4g",
        "spark.sql.shuffle.partitions": "8", "spark.ui.enabled": "false",
    })
    spark.sparkContext.setLogLevel("ERROR")
    folder = Path(args.data) / f"wide-{args.rows}x{args.columns}-seed{args.seed}"
    paths = generate(spark, args.rows, args.columns, args.seed, folder)
    original, synthetic = (spark.read.parquet(p) for p in paths)
    columns = [f"c{i}" for i in range(args.columns)]
    times: dict[bool, list[float]] = {False: [], True: []}
    seen = set()
    for run in range(args.runs + 1):  # the first round warms up, untimed
        for digests in (False, True):
            seconds, counts = _counted(original, synthetic, columns, 2 * args.rows, digests)
            seen.add(counts)
            if run:
                times[digests].append(seconds)
    spark.stop()
    if len(seen) != 1:
        print(f"the routes disagree: {sorted(seen)}")
        return 1
    singletons, reproduced, distinct = seen.pop()
    print(f"{machine()}, Spark master {args.master}, driver memory 4g; {args.rows:,} rows per side of {args.columns} columns; "
          f"counts in every run: {singletons} singletons, {reproduced} reproduced, {distinct} distinct rows")
    print()
    print("| occurrence pass (fill + counts) | runs (s) | median (s) |")
    print("|---|---|---:|")
    for digests, name in ((False, "whole rows"), (True, "row digests")):
        runs = ", ".join(f"{s:.1f}" for s in times[digests])
        print(f"| {name} | {runs} | {statistics.median(times[digests]):.1f} |")
    return 0
