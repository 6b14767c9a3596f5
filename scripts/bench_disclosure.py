"""`scripts/bench disclosure --rows N`: identity and attribute disclosure in Spark against
DuckDB on the same counts.

The seeded pair of bench_data.py (tests/support/datagen.py, as Parquet), 3 keys (age,
city, score: about 2e6 combinations, so that many records are unique on them) and 3
targets (visits, sex, income, each as it is: income is nearly unique, the worst case
for the cell counts). In one warm session, timed in turn:
  - Spark: privacy_eval.evaluation.evaluate with `metrics.disclosure` alone (read, input
    checks, one grouped pass for the three targets, the checks);
  - DuckDB: the same cells and sums in SQL over the same files, one query per target;
  - Spark again with score grouped into 20 and income into 10 quantile groups (exact
    breaks): what the grouping costs (DuckDB has no R-exact breaks to compare with).
Every count must agree (DCAP's sums of fractions to 1e-9); the script fails otherwise.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

from bench_data import generate, generated, parquet_glob
from measure import machine, timed

KEYS = ["age", "city", "score"]
TARGETS = ["visits", "sex", "income"]
GROUPED = {"score": 20, "income": 10}
# Compared exactly; the CAP sums of fractions with a relative tolerance.
COUNTS = ("UiO", "UiS", "UiOiS", "repU", "Dorig", "Dsyn", "iS", "DiS", "DiSCO", "DiSDiO", "N_b", "denom_TCAP",
          "max_denom")
SUMS = ("DCAP", "CAPd")


def spark_counts(spark, original: Path, synthetic: Path, bins: dict | None = None) -> dict:
    from privacy_eval.config import Config, DisclosureConfig, MetricsConfig, Source
    from privacy_eval.evaluation import evaluate

    config = Config(
        dataset="bench", original=Source(path=str(original)), synthetic=Source(path=str(synthetic)), row_key="id",
        metrics=MetricsConfig(disclosure=DisclosureConfig(keys=KEYS, targets=TARGETS, bins=bins or {})),
    )
    rows = {m.metric: m.details for m in evaluate(spark, config).metrics}
    ident, nd = rows["replicated_uniques"], rows["attribute_disclosure"]["n_original"]
    return {
        target: {
            **{k: ident[f"{k}_records"] for k in ("UiO", "UiS", "UiOiS", "repU")},
            **t["records"], "max_denom": t["max_denom"],
            "DCAP": t["DCAPd"] * nd / 100, "CAPd": t["CAPd"] * nd / 100,
        }
        for target, t in rows["attribute_disclosure"]["per_target"].items()
    }


def duckdb_sql(target: str, original: str, synthetic: str) -> str:
    """One target's counts: cells (key, value) with d and s, then per key, then sums."""
    keys = ", ".join(KEYS)
    side = "SELECT {keys}, {target} AS v, {d} AS d, {s} AS s FROM read_parquet('{path}')"
    return f"""
    WITH stacked AS ({side.format(keys=keys, target=target, d=1, s=0, path=original)}
                     UNION ALL BY NAME {side.format(keys=keys, target=target, d=0, s=1, path=synthetic)}),
    cells AS (SELECT {keys}, v, sum(d) AS d, sum(s) AS s FROM stacked GROUP BY ALL),
    marked AS (SELECT *, sum(s) OVER (PARTITION BY {keys}) AS s_key FROM cells),
    q AS (SELECT {keys}, sum(d) AS d, sum(s) AS s, count(*) FILTER (WHERE d > 0) AS nd, max(s) AS smax,
                 sum(CASE WHEN s > 0 AND s = s_key THEN d ELSE 0 END) AS d_at_s,
                 sum(d::DOUBLE * d) AS d2, sum(d::DOUBLE * s) AS ds
          FROM marked GROUP BY ALL)
    SELECT count(*) FILTER (WHERE d = 1), count(*) FILTER (WHERE s = 1),
           count(*) FILTER (WHERE d = 1 AND s > 0), count(*) FILTER (WHERE d = 1 AND s = 1),
           sum(CASE WHEN nd = 1 THEN d ELSE 0 END), sum(CASE WHEN smax = s AND s > 0 THEN s ELSE 0 END),
           sum(CASE WHEN s > 0 THEN d ELSE 0 END), sum(CASE WHEN smax = s AND s > 0 THEN d ELSE 0 END),
           sum(d_at_s), sum(CASE WHEN smax = s AND s > 0 AND nd = 1 AND d_at_s = d THEN d ELSE 0 END),
           sum(CASE WHEN d > 0 THEN s ELSE 0 END), sum(CASE WHEN smax = s AND s > 0 THEN d ELSE 0 END),
           max(d_at_s), sum(CASE WHEN s > 0 THEN ds / s END), sum(CASE WHEN d > 0 THEN d2 / d END)
    FROM q"""


def duckdb_counts(original: Path, synthetic: Path) -> dict:
    import duckdb

    con = duckdb.connect()
    names = ("UiO", "UiS", "UiOiS", "repU", "Dorig", "Dsyn", "iS", "DiS", "DiSCO", "DiSDiO", "N_b", "denom_TCAP",
             "max_denom", "DCAP", "CAPd")
    out = {}
    for target in TARGETS:
        row = con.execute(duckdb_sql(target, parquet_glob(original), parquet_glob(synthetic))).fetchone()
        out[target] = {name: (float(v) if name in SUMS else int(v)) for name, v in zip(names, row)}
    con.close()
    return out


def differences(a: dict, b: dict) -> list[str]:
    out = []
    for target in TARGETS:
        for key in COUNTS:
            if a[target][key] != b[target][key]:
                out.append(f"{target}.{key}: {a[target][key]} vs {b[target][key]}")
        for key in SUMS:
            if not math.isclose(a[target][key], b[target][key], rel_tol=1e-9):
                out.append(f"{target}.{key}: {a[target][key]!r} vs {b[target][key]!r}")
    return out


def main(args: argparse.Namespace) -> int:
    from privacy_eval.session import build_session

    original, synthetic = generated(args)
    spark, session_s = timed(lambda: build_session("privacy-eval-bench-disclosure", {
        "spark.master": args.master, "spark.driver.memory": args.driver_memory,
        "spark.sql.shuffle.partitions": "8", "spark.ui.enabled": "false",
    }))
    spark.sparkContext.setLogLevel("ERROR")
    warm = generate(2_000, args.seed, Path(args.data))
    spark_counts(spark, *warm)  # JVM and workers warm: steady-state work below
    spark_counts(spark, *warm, bins=GROUPED)
    duckdb_counts(*warm)
    spark_result, spark_s = timed(lambda: spark_counts(spark, original, synthetic))
    duck_result, duck_s = timed(lambda: duckdb_counts(original, synthetic))
    grouped_result, grouped_s = timed(lambda: spark_counts(spark, original, synthetic, bins=GROUPED))
    spark.stop()

    print(f"{machine()}, Spark master {args.master}, driver memory {args.driver_memory}; Spark session start "
          f"{session_s:.1f} s (not included below)")
    print(f"\nkeys {', '.join(KEYS)}; targets {', '.join(TARGETS)}\n")
    print("| engine | rows per side | wall time (s) | vs DuckDB | " + " | ".join(f"DiSCO {t}" for t in TARGETS)
          + " | repU |")
    print("|---|---:|---:|---:|" + "---:|" * (len(TARGETS) + 1))
    for name, result, seconds in (
        ("Spark (privacy_eval, read + checks + 3 targets)", spark_result, spark_s),
        ("DuckDB (the same cells and sums, one query per target)", duck_result, duck_s),
        (f"Spark, {' and '.join(f'{c} in {n}' for c, n in GROUPED.items())} quantile groups", grouped_result,
         grouped_s),
    ):
        print(f"| {name} | {args.rows:,} | {seconds:.1f} | {seconds / duck_s:.2f}x | "
              + " | ".join(str(result[t]["DiSCO"]) for t in TARGETS) + f" | {result[TARGETS[0]]['repU']} |")
    errors = differences(spark_result, duck_result)
    if errors:
        print("\nERROR: Spark and DuckDB differ: " + "; ".join(errors), file=sys.stderr)
        return 1
    print(f"\nSpark and DuckDB agree on every count of every target ({', '.join(COUNTS)}; {', '.join(SUMS)} to 1e-9)")
    return 0
