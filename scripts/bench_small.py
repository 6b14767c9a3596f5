"""`scripts/bench small [--runs 3]`: the fixed cost of a small evaluation, as a user pays it.

Whole processes, each started with spark-submit the way scripts/example starts the job
(same master, same properties file conf/spark/local.conf, same environment), run in
turns (job, floor, bare, job, ...) after one untimed warm-up of each:
  - the job: jobs/evaluate_privacy.py on the bundled WBCD pair with four metrics
    only (RDMP, CDMP, KPR, linkage): conf/examples/wbcd.yaml without its `distance`
    entry, paths made absolute, results written to a warehouse in the output folder;
  - floor: a program of the same shape as the job's four metrics (their shuffles and
    joins, one Python pass, one Parquet write) without any of the job's checks and
    statistics (FLOOR below): what the ratio costs before the job's own work;
  - bare: a tiny PySpark script that reads the same two CSV files with the job's CSV
    read options (header, inferSchema, and the config's own options) and counts them.
Every wall time includes the JVM and session start. Reports the medians, their ratios to
bare, the job's phase log of its median run and,
from the log's timestamps, the time before the first phase (JVM + session start) and
after the last (writing the results, shutdown). The job's and the floor's row counts must
equal the bare counts and every job run must print the same figures; the script fails
otherwise.

`--jobs` adds one in-process run of the job (plain python, same master and properties
file) that counts the Spark jobs and tasks each phase starts (SparkContext.statusTracker;
no listener), for the phase breakdown.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

from processes import JOB, PROPERTIES, ROOT, alternate, disagreements, ratio_report, submit

from tests.support.examples import example_config

METRICS = ("row_direct_match", "column_direct_match", "knowledge_protection", "linkage")

# The bare job: session start, both files read as the job reads them, a count of each.
BARE = '''\
import json, sys
from pyspark.sql import SparkSession

spark = SparkSession.builder.appName("bare-count").getOrCreate()
counts = [spark.read.options(**json.loads(options)).csv(path).count()
          for path, options in zip(sys.argv[1::2], sys.argv[2::2])]
print("counts", *counts)
spark.stop()
'''

# A yardstick of the four metrics' shape with none of the job's checks or statistics: the
# bare job's reads, with positions; whole rows grouped (RDMP), a join on the position
# (CDMP), binned profiles grouped (KPR, on a fixed grid, not the spec's), one mapInArrow
# pass over the synthetic rows blocked like the linkage's scoring (an identity: Python
# workers started, nothing scored), one Parquet row written. Its figures are not the job's:
# it prints the row counts, as bare does. monotonically_increasing_id gives positions only
# for a file read as one partition (the bundled WBCD files are), as in the job's shortcut.
# Its RDMP and CDMP steps have the shape of engines.run_spark_floor's, on CSV and positions;
# a script of its own so that it imports nothing the bare job does not.
FLOOR = '''\
import json, sys, tempfile
from pyspark.sql import SparkSession, functions as F

spec = json.loads(sys.argv[1])
spark = SparkSession.builder.appName("floor").getOrCreate()
o, s = (spark.read.options(**options).csv(path).withColumn("pos", F.monotonically_increasing_id())
        for path, options in zip(spec["paths"], spec["options"]))
cols = [c for c in o.columns if c not in ["pos", *spec["exclude"]]]
stacked = o.select(*cols, F.lit(1).alias("side")).unionByName(s.select(*cols, F.lit(2).alias("side")))
reproduced = (stacked.groupBy(*cols).agg(F.count_if(F.col("side") == 1).alias("a"), F.count_if(F.col("side") == 2).alias("b"))
              .filter("a = 1 AND b > 0").count())
matches = o.alias("o").join(s.alias("s"), "pos").agg(
    *(F.count_if(F.col(f"o.{c}").eqNullSafe(F.col(f"s.{c}"))) for c in cols)).first()
known = spec["known"]
binned = [side.select(*(F.floor(F.col(c) / 0.5).alias(c) for c in known)) for side in (o, s)]
exposed = binned[0].join(binned[1].groupBy(*known).count().filter("count = 1"), known, "left_semi").count()
blocks = s.repartition(8, *spec["blocking"]).mapInArrow(lambda batches: batches, s.schema)
blocks.groupBy(*spec["blocking"]).count().collect()
# Not createDataFrame of a list: that starts a Python worker for the write (the job's
# results avoid it too).
spark.range(1).select(F.lit(reproduced).alias("reproduced"), F.lit(exposed).alias("exposed")).write.parquet(
    tempfile.mkdtemp() + "/results")
print("counts", o.count(), s.count())
spark.stop()
'''

# The job in this process, counting the Spark jobs (and their tasks) each phase starts.
COUNTING = '''\
import runpy, sys, time
from contextlib import contextmanager
from unittest import mock

import privacy_eval.evaluation as evaluation
import privacy_eval.session as session

sessions, phases = [], []
build_session, phase = session.build_session, evaluation.phase


def counted_build_session(*args, **kwargs):
    sessions.append(build_session(*args, **kwargs))
    return sessions[-1]


def jobs():
    tracker = sessions[0].sparkContext.statusTracker()
    return set(tracker.getJobIdsForGroup(None))


@contextmanager
def counted_phase(name, **counts):
    before, started = jobs(), time.perf_counter()
    with phase(name, **counts):
        yield
    new = jobs() - before
    tracker = sessions[0].sparkContext.statusTracker()
    tasks = 0
    for job in new:
        info = tracker.getJobInfo(job)
        for stage in (info.stageIds if info else ()):
            stage_info = tracker.getStageInfo(stage)
            tasks += stage_info.numTasks if stage_info else 0
    phases.append((name, time.perf_counter() - started, len(new), tasks))


session.build_session, evaluation.phase = counted_build_session, counted_phase
script = sys.argv[1]
with mock.patch.object(sys, "argv", sys.argv[1:]):
    try:
        runpy.run_path(script, run_name="__main__")
    except SystemExit as exc:
        code = exc.code
total = len(jobs())
for name, seconds, n_jobs, tasks in phases:
    print(f"PHASE\\t{name}\\t{seconds:.1f}\\t{n_jobs}\\t{tasks}")
print(f"TOTAL\\t{total}")
'''

ROWS = re.compile(r"inputs: (\d+) original rows, (\d+) synthetic rows")


def derived_config(folder: Path) -> tuple[Path, dict]:
    """wbcd.yaml with the four METRICS only, absolute paths, a warehouse in `folder`."""
    path = folder / "wbcd_seed.yaml"
    return path, example_config("wbcd.yaml", path, METRICS, folder / "warehouse")


def figures(stdout: str) -> list[str]:
    """The summary's figure lines (the run id left out)."""
    return [line for line in stdout.splitlines() if line.startswith("  ")]


def count_jobs(config_path: Path, master: str) -> tuple[list[tuple[str, float, int, int]], int]:
    env = {**os.environ, "PYSPARK_SUBMIT_ARGS": f"--master {master} --properties-file {PROPERTIES} pyspark-shell"}
    done = subprocess.run(
        [sys.executable, "-c", COUNTING, str(JOB), "--config", str(config_path), "--run-id", "bench-small-jobs"],
        capture_output=True, text=True, cwd=ROOT, env=env, timeout=900,
    )
    if done.returncode != 0:
        raise SystemExit(f"--jobs run failed:\n{done.stderr[-3000:]}")
    phases, total = [], 0
    for line in done.stdout.splitlines():
        parts = line.split("\t")
        if parts[0] == "PHASE":
            phases.append((parts[1], float(parts[2]), int(parts[3]), int(parts[4])))
        elif parts[0] == "TOTAL":
            total = int(parts[1])
    return phases, total


def main(args: argparse.Namespace) -> int:
    folder = Path(args.out) if args.out else Path(tempfile.mkdtemp(prefix="privacy-eval-bench-small-"))
    folder.mkdir(parents=True, exist_ok=True)
    config_path, config = derived_config(folder)
    bare_path, floor_path = folder / "bare_count.py", folder / "floor.py"
    bare_path.write_text(BARE)
    floor_path.write_text(FLOOR)
    from privacy_eval.reading import read_options

    bare_args = []
    for side in ("original", "synthetic"):
        options = read_options("csv", config[side].get("options", {}))
        bare_args += [config[side]["path"], json.dumps(options)]
    job_command = [*submit(args.master), str(JOB), "--config", str(config_path)]
    bare_command = [*submit(args.master), str(bare_path), *bare_args]
    floor_spec = {
        "paths": bare_args[0::2], "options": [json.loads(o) for o in bare_args[1::2]],
        "exclude": config.get("exclude", []),
        "known": config["metrics"]["knowledge_protection"]["known_variables"],
        "blocking": config["metrics"]["linkage"]["blocking"],
    }
    floor_command = [*submit(args.master), str(floor_path), json.dumps(floor_spec)]

    def job_rows(done: subprocess.CompletedProcess, run_id: str) -> tuple[int, ...] | None:
        rows = ROWS.search(done.stdout + done.stderr)
        return tuple(map(int, rows.groups())) if rows else None

    def printed_counts(done: subprocess.CompletedProcess) -> tuple[int, ...]:
        return tuple(int(x) for x in done.stdout.split("counts", 1)[1].split())

    print(f"output folder (config, bare and floor scripts, results warehouse): {folder}", file=sys.stderr)
    job_runs, (floor_runs, bare_runs) = alternate(
        folder, job_command, job_rows, [("floor", floor_command, printed_counts), ("bare", bare_command, printed_counts)],
        args.runs,
    )
    errors = disagreements(job_runs, bare_runs, "row counts", "the job", "bare")
    errors += disagreements(floor_runs, bare_runs, "row counts", "the floor", "bare")
    if len({tuple(figures(r.done.stdout)) for r in job_runs}) != 1:
        errors.append("the job's figures differ between runs")
    lines, median_run = ratio_report(
        args.master, "| process (spark-submit, session start included) | runs (s) | median (s) | vs bare |",
        "job, WBCD, RDMP + CDMP + KPR + linkage", job_runs,
        [("floor: the four metrics' shuffles, joins and a Python pass, no checks (FLOOR)", floor_runs),
         ("bare: read both CSV files (header, inferSchema), count", bare_runs)],
        f"row counts: job {job_runs[0].result}, floor {floor_runs[0].result}, bare {bare_runs[0].result}",
    )
    lines += ["", "figures (every run):", "", *(f"    {line.strip()}" for line in figures(median_run.done.stdout))]
    print("\n".join(lines), flush=True)
    (folder / "small_bench.md").write_text("\n".join(lines) + "\n")
    if args.jobs:
        phases, total = count_jobs(config_path, args.master)
        lines = [
            "",
            f"Spark jobs per phase (one more run, in-process; {total} jobs in all, the rest before the first "
            "phase or writing the results):",
            "",
            "| phase | seconds | Spark jobs | tasks |",
            "|---|---:|---:|---:|",
            *(f"| {name} | {seconds:.1f} | {n} | {tasks} |" for name, seconds, n, tasks in phases),
        ]
        print("\n".join(lines))
        with open(folder / "small_bench.md", "a") as out:
            out.write("\n".join(lines) + "\n")
    print(f"\nwritten to {folder / 'small_bench.md'}", file=sys.stderr)
    if errors:
        print("\nERROR: " + "; ".join(errors), file=sys.stderr)
        return 1
    print("\njob, floor and bare agree on the row counts; every job run printed the same figures")
    return 0
