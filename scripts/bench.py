"""Benchmarks: the job's cost against other engines on the same data, one subcommand each.

    scripts/bench exact --rows N        the three exact metrics against DuckDB, plain Spark SQL,
                                        a Spark floor and pandas, in one warm session (bench_exact.py)
    scripts/bench linkage --rows N      the linkage attack against numpy + cKDTree (bench_linkage.py)
    scripts/bench distance --rows N [--cell-records M]
                                        the distance metrics against numpy + cKDTree (bench_distance.py)
    scripts/bench disclosure --rows N   identity and attribute disclosure against DuckDB (bench_disclosure.py)
    scripts/bench small [--runs 3]      the WBCD job against a bare read-and-count and a Spark floor,
                                        whole processes (bench_small.py)
    scripts/bench processes --rows N [--runs 3]
                                        the job (spark-submit) against DuckDB, plain Spark SQL and a
                                        Spark floor, whole processes (bench_processes.py)
    scripts/bench wide --columns C --rows N [--runs 3]
                                        the occurrence pass by whole rows and by row digests (bench_wide.py)

`scripts/bench SUBCOMMAND --help` lists a subcommand's options. Every benchmark checks
that the engines it compares agree on every figure, and fails loudly if they do not.
The shared pieces are below the subcommands: bench_data.py (the seeded data),
engines.py (the other engines' counts), processes.py (whole processes in turns) and
measure.py (time, memory, CPU).
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the benchmarks compare with the references in tests/support

import bench_disclosure  # noqa: E402
import bench_distance  # noqa: E402
import bench_exact  # noqa: E402
import bench_linkage  # noqa: E402
import bench_processes  # noqa: E402
import bench_small  # noqa: E402
import bench_wide  # noqa: E402

MODES = {
    "exact": bench_exact.main, "linkage": bench_linkage.main, "distance": bench_distance.main,
    "disclosure": bench_disclosure.main, "small": bench_small.main, "processes": bench_processes.main,
    "wide": bench_wide.main,
}


def argument_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="scripts/bench", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    modes = parser.add_subparsers(dest="mode", required=True, metavar="SUBCOMMAND")

    data = argparse.ArgumentParser(add_help=False)  # the generated data and where Spark runs
    data.add_argument("--rows", type=int, default=1_000_000, help="records per side (default: 1,000,000)")
    data.add_argument("--seed", type=int, default=0)
    data.add_argument("--data", default=str(ROOT / "bench-data"), help="folder of the generated files, kept for reuse")
    data.add_argument("--master", default="local[2]")
    master = argparse.ArgumentParser(add_help=False)
    master.add_argument("--master", default="local[2]")
    driver = argparse.ArgumentParser(add_help=False)
    driver.add_argument("--driver-memory", default="12g",
                        help="the Spark driver's memory (conf/spark/local.conf has 4g)")

    def runs(default: int = 3, what: str = "timed runs of each, alternated (median reported)") -> argparse.ArgumentParser:
        parent = argparse.ArgumentParser(add_help=False)
        parent.add_argument("--runs", type=int, default=default, help=what)
        return parent

    def out(what: str) -> argparse.ArgumentParser:
        parent = argparse.ArgumentParser(add_help=False)
        parent.add_argument("--out", help=f"output folder ({what}; default: a new temporary folder)")
        return parent

    def mode(name: str, parents: list[argparse.ArgumentParser], summary: str) -> argparse.ArgumentParser:
        return modes.add_parser(name, parents=parents, help=summary, description=summary)

    exact = mode("exact", [data, driver], "the three exact metrics in Spark, DuckDB and pandas")
    exact.add_argument("--skip-pandas", action="store_true", help="leave out the pandas reference")
    exact.add_argument("--skip-binning", action="store_true", help="leave out the KPR binning comparison")

    mode("linkage", [data], "the linkage attack in Spark against numpy + cKDTree")

    distance = mode("distance", [data, runs(what="with --cell-records: timed runs of each, alternated")],
                    "the distance metrics in Spark against numpy + cKDTree")
    distance.add_argument("--no-repeat", action="store_true", help="leave out the repeated Spark run")
    distance.add_argument("--profile", action="store_true",
                          help="also time the Spark steps one by one (with cells of M records with --cell-records)")
    distance.add_argument("--cell-records", type=int, metavar="M",
                          help="also run with cells of M records and compare with one cell")
    distance.add_argument("--cells-only", action="store_true",
                          help="with --cell-records: only the runs with cells of M, without the one-cell runs")
    distance.add_argument("--no-reference", action="store_true",
                          help="leave out the numpy reference (the Spark runs are compared with each other)")
    distance.add_argument("--redraw", type=float, default=0.0, help="share of synthetic records with a redrawn category")
    distance.add_argument("--constant-density", action="store_true",
                          help="synthetic noise shrinking with the rows like rows^(-1/5): cloaking balls hold about as "
                               "many records at any size (the noise of 1,000,000 rows)")

    mode("disclosure", [data, driver], "identity and attribute disclosure (3 keys x 3 targets) against DuckDB")

    small = mode("small", [master, runs(), out("config, scripts, results warehouse, logs")],
                 "the bundled WBCD job (RDMP, CDMP, KPR, linkage) against a bare Spark read-and-count and a Spark floor")
    small.add_argument("--jobs", action="store_true", help="also count the Spark jobs of each phase")

    mode("processes", [data, runs(), out("config, results warehouse, logs")],
         "the job (spark-submit), plain Spark SQL, a Spark floor and DuckDB as whole processes")

    wide = mode("wide", [data, runs()], "the occurrence pass on wide rows, by whole rows and by row digests")
    wide.add_argument("--columns", type=int, required=True, metavar="C", help="columns per row")
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = argument_parser()
    args = parser.parse_args(argv)
    if getattr(args, "cells_only", False) and not args.cell_records:
        parser.error("distance: --cells-only needs --cell-records M (the cells to run with)")
    # The job's per-phase timings (read, U, each metric) go to stderr.
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s: %(message)s")
    logging.getLogger("privacy_eval").setLevel(logging.INFO)
    return MODES[args.mode](args)


if __name__ == "__main__":
    sys.exit(main())
