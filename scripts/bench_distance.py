"""`scripts/bench distance --rows N [--cell-records M]`: the distance metrics in Spark
against one process.

Generates a seeded original/synthetic pair (four numeric columns, one categorical; the
synthetic side is the original plus noise, row-aligned by `id`, shuffled; with
--constant-density, noise that shrinks with the rows), writes it as
Parquet, then times, in this one run:
  - Spark: read both files, `prepare_inputs`, `distance_metrics` (all four figures, 5
    components, cap 1,000, cells of the default size), after a 2,000-row warm-up; then
    the same run again in the session (leave it out with --no-repeat);
  - with --cell-records M instead: Spark with every side in one cell and with cells of M
    records, alternated --runs times in the same session: the figures must be equal, and
    the ratio of the two medians of the `distance_metrics` times is what the cells cost;
    with --cells-only too: the first item's runs, with cells of M instead of the default size;
  - numpy + scipy cKDTree in one process (tests/support/distance_fast.py) on the same
    files (leave it out with --no-reference: at 1e7 it takes over an hour).
Every figure must agree (integers exactly, floats to 1e-12 relative); the script fails
loudly if one does not. `--profile` adds one more Spark run, step by step (space, projection,
each search and its figures), each step forced and timed on its own, with cells of M
records when --cell-records is given.
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from measure import CpuTime, PeakMemory, machine, timed

NUMERIC = ["x1", "x2", "x3", "x4"]
CATEGORICAL = ["group"]
COLUMNS = NUMERIC + CATEGORICAL
CHOSEN = ["hidden_rate", "local_cloaking", "distance_to_closest_record", "nearest_neighbour_distance_ratio"]
COMPONENTS, CAP = 5, 1000
# Synthetic noise, in standard deviations of each numeric column; with constant density,
# at DENSITY_ROWS records per side.
NOISE = 0.08
DENSITY_ROWS = 1_000_000


def noise_sd(rows: int, constant_density: bool) -> float:
    """The synthetic noise of `rows` records per side, in standard deviations (`generate`)."""
    return NOISE * (DENSITY_ROWS / rows) ** (1 / COMPONENTS) if constant_density else NOISE


def generate(
    rows: int, seed: int, folder: Path, redraw: float = 0.0, constant_density: bool = False
) -> tuple[Path, Path]:
    """Original: four correlated numeric columns (one rounded to integers, one with 1 %
    nulls), a two-valued categorical depending on x1, ~2 % duplicated rows. Synthetic:
    each numeric plus normal noise (NOISE sd), the categorical redrawn for a `redraw`
    share of rows, ~1 % of rows copied verbatim from their own original; rows shuffled.

    With `constant_density`, the noise is NOISE (DENSITY_ROWS / rows)^(1/5) sd instead:
    the distance to a record's k-th nearest neighbour shrinks like rows^(-1/5) in 5
    dimensions, so a cloaking ball (whose radius is the noise) holds about as many
    synthetic records at any size, as with the avatar method, which draws each synthetic
    record among its original's nearest neighbours. With fixed noise, a ball holds about
    ten times the records at ten times the rows.

    A redrawn category puts a record's own synthetic record far away (the categorical
    coordinates dominate), so its local-cloaking ball holds a large share of all records.

    The categorical has two values and no nulls on purpose: a categorical with k
    modalities adds k - 1 eigenvalues of ZᵀZ all close to n (exactly n when independent
    of the rest), and a top-5 cut inside such a cluster makes the 5-dimensional space
    depend on rounding (see docs/benchmarks.md, "Distance metrics")."""
    folder.mkdir(parents=True, exist_ok=True)
    tag = f"{rows}-{seed}" + (f"-redraw{redraw:g}" if redraw else "") + ("-density" if constant_density else "")
    paths = folder / f"distance-original-{tag}.parquet", folder / f"distance-synthetic-{tag}.parquet"
    if all(p.exists() for p in paths):
        return paths
    rng = np.random.default_rng(seed)
    base = rng.normal(size=(rows, 4)) @ np.array([[1, .5, .2, 0], [0, 1, .4, .3], [0, 0, 1, .5], [0, 0, 0, 1]])
    o = pd.DataFrame({
        "id": np.arange(rows, dtype=np.int64),
        "x1": np.round(40 + 12 * base[:, 0]),
        "x2": np.exp(10 + 0.4 * base[:, 1]),
        "x3": -50 + 10 * base[:, 2],
        "x4": base[:, 3],
    })
    o.loc[rng.random(rows) < 0.01, "x4"] = np.nan
    groups = np.array(["a", "b"], dtype=object)
    o["group"] = groups[(rng.random(rows) < 1 / (1 + np.exp(-base[:, 0]))).astype(int)]
    dup = np.flatnonzero(rng.random(rows) < 0.02)
    o.loc[dup, COLUMNS] = o.loc[rng.integers(0, rows, len(dup)), COLUMNS].to_numpy()
    o = o.astype({c: "float64" for c in NUMERIC})
    s = o.copy()
    noise = noise_sd(rows, constant_density)
    for c in NUMERIC:
        s[c] = o[c] + rng.normal(0, noise * float(o[c].std()), rows)
    s["x1"] = np.round(s["x1"])
    redrawn = rng.random(rows) < redraw
    s.loc[redrawn, "group"] = groups[rng.integers(0, 2, int(redrawn.sum()))]
    leak = np.flatnonzero(rng.random(rows) < 0.01)
    s.loc[leak, COLUMNS] = o.loc[leak, COLUMNS].to_numpy()
    s = s.astype({c: "float64" for c in NUMERIC})
    s = s.iloc[rng.permutation(rows)].reset_index(drop=True)
    o.to_parquet(paths[0], index=False)
    s.to_parquet(paths[1], index=False)
    return paths


@dataclass(frozen=True)
class SparkRun:
    """One Spark run: its figures (and costs), its wall time end to end, and the time of
    `distance_metrics` alone."""

    name: str
    figures: dict
    seconds: float
    inner: float


def run_numpy(original_path: Path, synthetic_path: Path) -> tuple[dict, float, dict]:
    from tests.support.distance_fast import distance_fast

    steps: dict[str, float] = {}

    def work():
        o = pd.read_parquet(original_path)
        s = pd.read_parquet(synthetic_path)
        return distance_fast(o, s, columns=COLUMNS, categorical=CATEGORICAL, components=COMPONENTS, cap=CAP,
                             key="id", timings=steps)
    result, seconds = timed(work)
    return result, seconds, steps


def _inputs(spark, original_path: Path, synthetic_path: Path):
    from privacy_eval.inputs import prepare_inputs

    return prepare_inputs(spark.read.parquet(str(original_path)), spark.read.parquet(str(synthetic_path)),
                          row_key="id", cache=())


def run_spark(spark, original_path: Path, synthetic_path: Path, cell_records: int | None = None) -> tuple[dict, float, float]:
    """(figures, seconds end to end, seconds of `distance_metrics` alone), with cells of
    `cell_records` records (default: the job's). The figures include `cpu_seconds`, the
    CPU time of `distance_metrics` in every process (driver, JVM, Python workers)."""
    from privacy_eval.columns import KEY
    from privacy_eval.distance import distance_metrics
    from privacy_eval.distance.search import CELL_RECORDS

    started = time.perf_counter()
    inputs = _inputs(spark, original_path, synthetic_path)
    metrics_started = time.perf_counter()
    try:
        with CpuTime() as cpu_time:
            r = distance_metrics(inputs.original, inputs.synthetic, KEY, list(inputs.columns), inputs.numeric, CHOSEN,
                                 components=COMPONENTS, cap=CAP, cell_records=cell_records or CELL_RECORDS)
    finally:
        inputs.unpersist()
    ended, cpu = time.perf_counter(), cpu_time.seconds
    cl, near = r.cloaking, r.closest
    figures = {
        "width": r.space.width, "components": r.space.components, "variance_kept": r.space.variance_kept,
        "imputed_original": r.imputed["original"], "imputed_synthetic": r.imputed["synthetic"],
        "n_original": r.n_original, "n_synthetic": r.n_synthetic, "n_paired": cl.n_paired,
        "hits": cl.hits, "unique_hits": cl.unique_hits, "hidden_rate": cl.hidden_rate,
        "local_cloaking": cl.local_cloaking, "lc_zero_share": cl.zero_share, "lc_p10": cl.p10, "lc_p50": cl.p50,
        "lc_p90": cl.p90, "capped": cl.capped, "dcr": near.dcr, "dcr_zero_share": near.zero_share,
        "dcr_p05": near.p05, "nndr": near.nndr, "nndr_below_half_share": near.below_half_share,
    }
    costs = {f"{name}_{part}": getattr(cost, part) for name, cost in r.costs.items() for part in ("cells", "cells_per_query")}
    return {**figures, **costs, "cpu_seconds": cpu}, ended - started, ended - metrics_started


def profile_spark(
    spark, original_path: Path, synthetic_path: Path, cell_records: int | None = None
) -> list[tuple[str, float]]:
    """`distance_metrics`' steps one at a time (as privacy_eval/distance/pipeline.py runs
    them), each forced by its own action, with cells of `cell_records` (default: the
    job's): where the time goes."""
    from pyspark import StorageLevel

    from privacy_eval.columns import KEY
    from privacy_eval.distance import pipeline as dm
    from privacy_eval.distance.figures import cloaking_figures, closest_figures
    from privacy_eval.distance.kernel import coordinate_names
    from privacy_eval.distance.search import CELL_RECORDS, ID, cloaking_counts, nearest_distances
    from privacy_eval.distance.space import counted, fit_space, project

    steps: list[tuple[str, float]] = []
    clock = [time.perf_counter()]

    def lap(name: str) -> None:
        now = time.perf_counter()
        steps.append((name, now - clock[0]))
        clock[0] = now

    inputs = _inputs(spark, original_path, synthetic_path)
    lap("prepare_inputs (read, key check)")
    columns, numeric = list(inputs.columns), [c for c in inputs.columns if c in inputs.numeric]
    space = fit_space(inputs.original, columns, numeric, COMPONENTS)
    lap("fit_space (moments, modalities, ZᵀZ)")
    k, tasks = space.components, spark.sparkContext.defaultParallelism
    names = coordinate_names(k)
    o = project(inputs.original.withColumnRenamed(KEY, ID), space, columns, numeric, [ID]).persist(StorageLevel.MEMORY_AND_DISK)
    s = project(inputs.synthetic.withColumnRenamed(KEY, ID), space, columns, numeric, [ID]).persist(StorageLevel.MEMORY_AND_DISK)
    n, m = counted(o, "original", space.scaling)[0], counted(s, "synthetic", space.scaling)[0]
    lap("project both sides + cache + count")
    of_original, of_synthetic = dm._cut_both(o, n, s, m, names, cell_records or CELL_RECORDS)
    o, s = of_original.records, of_synthetic.records
    lap(f"cells of both sides ({of_original.cells.n_cells})")
    near, cost = nearest_distances(of_original, s, names, 2, tasks, m)
    lap(f"DCR/NNDR search, k = 2 ({cost.cells} cells, {cost.cells_per_query:.2f} per query)")
    closest_figures(near, n)
    lap("DCR/NNDR figures (exact medians, histogram)")
    paired = dm._paired_radii(o, s, names, of_synthetic.cells).persist(StorageLevel.MEMORY_AND_DISK)
    paired.count()
    lap("paired radii (join on the key)")
    counts, cost = cloaking_counts(of_synthetic, paired, names, CAP, tasks)
    lap(f"cloaking ball counts ({cost.cells} cells, {cost.cells_per_query:.2f} per query)")
    cloaking_figures(counts, CAP)
    lap("cloaking figures")
    for frame in (o, s, near, paired, counts):
        frame.unpersist()
    inputs.unpersist()
    return steps


def compare(spark_figures: dict, reference: dict) -> tuple[list[str], float]:
    """(names that differ, largest relative difference of a float figure)."""
    differing, worst = [], 0.0
    for name, value in spark_figures.items():
        if name.endswith(("_cells", "_cells_per_query", "cpu_seconds")):  # what a run cost, not a figure
            continue
        expected = reference[name]
        if isinstance(expected, float) and value is not None:
            diff = abs(value - expected) / max(abs(expected), 1e-300) if value != expected else 0.0
            worst = max(worst, diff)
            if diff > 1e-12 and not (math.isnan(value) and math.isnan(expected)):
                differing.append(name)
        elif value != expected:
            differing.append(name)
    return differing, worst


def main(args: argparse.Namespace) -> int:
    from privacy_eval.session import build_session

    (original_path, synthetic_path), gen_s = timed(
        lambda: generate(args.rows, args.seed, Path(args.data), args.redraw, args.constant_density))
    noise = noise_sd(args.rows, args.constant_density)
    print(f"data: {args.rows:,} records per side ({', '.join(COLUMNS)}), seed {args.seed}, noise {noise:.4g} sd, "
          f"category redrawn for {args.redraw:.0%} of synthetic records, generated/cached in {gen_s:.1f} s")
    spark, session_s = timed(lambda: build_session("privacy-eval-bench", {
        "spark.master": args.master, "spark.driver.memory": "12g",
        "spark.sql.shuffle.partitions": "8", "spark.ui.enabled": "false",
    }))
    spark.sparkContext.setLogLevel("ERROR")
    run_spark(spark, *generate(2_000, args.seed, Path(args.data)))  # warm-up
    runs: list[SparkRun] = []
    one_cell = set()  # names of the runs with every side in one cell
    if args.cell_records and not args.cells_only:
        # One cell and cells of the size asked for, alternated: the same session, the same files.
        for turn in range(1, args.runs + 1):
            name = f"Spark, one cell, run {turn}"
            one_cell.add(name)
            runs.append(SparkRun(name, *run_spark(spark, original_path, synthetic_path, cell_records=args.rows)))
            with PeakMemory() as memory:
                runs.append(SparkRun(f"Spark, cells of {args.cell_records:,}, run {turn}",
                                     *run_spark(spark, original_path, synthetic_path, cell_records=args.cell_records)))
    else:
        size = f", cells of {args.cell_records:,}" if args.cell_records else ""
        with PeakMemory() as memory:
            runs.append(SparkRun(f"Spark (privacy_eval){size}",
                                 *run_spark(spark, original_path, synthetic_path, cell_records=args.cell_records)))
        if not args.no_repeat:
            runs.append(SparkRun(f"Spark, the same run repeated in the session{size}",
                                 *run_spark(spark, original_path, synthetic_path, cell_records=args.cell_records)))
    steps = profile_spark(spark, original_path, synthetic_path, args.cell_records) if args.profile else []
    spark.stop()
    if args.no_reference:
        reference, numpy_s, numpy_steps = runs[0].figures, math.nan, {}
    else:
        reference, numpy_s, numpy_steps = run_numpy(original_path, synthetic_path)

    print(f"{machine()}, Spark master {args.master}; Spark session start {session_s:.1f} s (not included below)")
    print()
    base_s, base_name = numpy_s, "numpy"
    if one_cell:
        base_s = one_cell_s = statistics.median(r.inner for r in runs if r.name in one_cell)
        base_name = "the one-cell median"
    print("| distance metrics (5 components, cap 1,000) | records per side | wall time (s) | of which distance_metrics (s) "
          f"| vs {base_name} | its CPU time (s) | cells (original / synthetic) | cells per query (DCR / cloaking) "
          "| hidden rate (%) | local cloaking | capped | DCR | NNDR |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in runs:
        f = r.figures
        ratio = f"{r.inner / base_s:.2f}x" if math.isfinite(base_s) else "—"
        print(f"| {r.name} | {args.rows:,} | {r.seconds:.1f} | {r.inner:.1f} | {ratio} | {f['cpu_seconds']:.0f} "
              f"| {f['closest_cells']} / {f['cloaking_cells']} "
              f"| {f['closest_cells_per_query']:.2f} / {f['cloaking_cells_per_query']:.2f} | {f['hidden_rate']:.4f} "
              f"| {f['local_cloaking']:g} | {f['capped']:,} | {f['dcr']:.6g} | {f['nndr']:.6g} |")
    if one_cell:
        cells_s = statistics.median(r.inner for r in runs if r.name not in one_cell)
        cpu = {kind: statistics.median(r.figures["cpu_seconds"] for r in runs if (r.name in one_cell) == one)
               for kind, one in (("one", True), ("cells", False))}
        print(f"\nmedians of `distance_metrics` over {args.runs} alternated runs: one cell {one_cell_s:.1f} s, cells of "
              f"{args.cell_records:,} {cells_s:.1f} s: **{cells_s / one_cell_s:.2f}x**; CPU time {cpu['one']:.0f} s "
              f"and {cpu['cells']:.0f} s: {cpu['cells'] / cpu['one']:.2f}x")
    r = reference
    if not args.no_reference:
        print(f"| numpy + cKDTree, one process (tests/support/distance_fast.py) | {args.rows:,} | {numpy_s:.1f} | | | | | "
              f"| {r['hidden_rate']:.4f} | {r['local_cloaking']:g} | {r['capped']:,} | {r['dcr']:.6g} | {r['nndr']:.6g} |")
        print(f"\nnumpy steps (s): read Parquet {numpy_s - sum(numpy_steps.values()):.1f}, "
              + ", ".join(f"{k} {v:.1f}" for k, v in numpy_steps.items()))
        print(f"local cloaking: p10/p50/p90 {r['lc_p10']}/{r['lc_p50']}/{r['lc_p90']}, "
              f"median a lower bound (half or more capped): {r['lc_median_lower_bound']}; "
              f"largest LC_i {int(r['lc'].max()):,}, mean LC_i {float(r['lc'].mean()):.1f}")
    print(f"\npeak resident memory during the run '{runs[-1 if one_cell else 0].name}': "
          f"JVM (driver = executor in local mode) {memory.jvm / 2**20:.0f} MiB, largest Python worker "
          f"{memory.worker / 2**20:.0f} MiB")
    if steps:
        print("\n| Spark step (forced and timed one at a time) | seconds |\n|---|---:|")
        for name, seconds in steps:
            print(f"| {name} | {seconds:.1f} |")
        print(f"| total | {sum(s for _, s in steps):.1f} |")
    against = "the first Spark run" if args.no_reference else "numpy"
    failed = False
    for r in runs:
        differing, worst = compare(r.figures, reference)
        print(f"\n{r.name}: largest relative difference of a float figure {worst:.3g}")
        if differing:
            failed = True
            print(f"ERROR: {r.name} differs from {against} on "
                  f"{', '.join(f'{d} ({r.figures[d]!r} vs {reference[d]!r})' for d in differing)}", file=sys.stderr)
    if failed:
        return 1
    print(f"\nevery figure agrees with {against} (integers exactly, floats to 1e-12 relative)")
    return 0
