"""`scripts/bench --small [--runs 3]`: the fixed cost of a small evaluation, as a user pays it.

Whole processes, each started with spark-submit the way scripts/example starts the job
(same master, same properties file conf/spark/local.conf, same environment), run in
turns (job, floor, bare, job, ...) after one untimed warm-up of each:
  - the job: jobs/evaluate_privacy.py on the bundled WBCD pair with the seed metrics
    only (RDMP, CDMP, KPR, linkage): conf/examples/wbcd.yaml without its `distance`
    entry, paths made absolute, results written to a warehouse in the output folder;
  - floor: a program of the same shape as the job's seed metrics (their shuffles and
    joins, one Python pass, one Parquet write) without any of the job's checks and
    statistics (FLOOR below): what the ratio costs before the job's own work;
  - bare: a tiny PySpark script that reads the same two CSV files with the job's CSV
    read options (header, inferSchema, and the config's own options) and counts them.
Every wall time includes the JVM and session start. Reports the medians, their ratios to
bare (issue 17's goal for the job: <= 2x), the job's phase log of its median run and,
from the log's timestamps, the time before the first phase (JVM + session start) and
after the last (writing the results, shutdown). The job's and the floor's row counts must
equal the bare counts and every job run must print the same figures; the script fails
otherwise.

`--jobs` adds one in-process run of the job (plain python, same master and properties
file) that counts the Spark jobs and tasks each phase starts (SparkContext.statusTracker;
no listener), for the phase breakdown.
"""

from __future__ import annotations

import json
import operator
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

from tests.support.examples import example_config

ROOT = Path(__file__).resolve().parents[1]
PROPERTIES = ROOT / "conf" / "spark" / "local.conf"
JOB = ROOT / "jobs" / "evaluate_privacy.py"
SPARK_SUBMIT = Path(sys.executable).parent / "spark-submit"
SEED_METRICS = ("row_direct_match", "column_direct_match", "knowledge_protection", "linkage")

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

# A yardstick of the seed metrics' shape with none of the job's checks or statistics: the
# bare job's reads, with positions; whole rows grouped (RDMP), a join on the position
# (CDMP), binned profiles grouped (KPR, on a fixed grid, not the spec's), one mapInArrow
# pass over the synthetic rows blocked like the linkage's scoring (an identity: Python
# workers started, nothing scored), one Parquet row written. Its figures are not the job's:
# it prints the row counts, as bare does. monotonically_increasing_id gives positions only
# for a file read as one partition (the bundled WBCD files are), as in the job's shortcut.
# Its RDMP and CDMP steps have the shape of bench.run_spark_floor's, on CSV and positions;
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

PHASE_DONE = re.compile(r"^(\S+ \S+) INFO privacy_eval\.evaluation: (.+): done in ([0-9.]+) s", re.MULTILINE)
PHASE_START = re.compile(r"^(\S+ \S+) INFO privacy_eval\.evaluation: read inputs: started", re.MULTILINE)
WRITTEN = re.compile(r"^(\S+ \S+) INFO privacy_eval: results written", re.MULTILINE)
ROWS = re.compile(r"inputs: (\d+) original rows, (\d+) synthetic rows")


def _stamp(text: str) -> float:
    return datetime.strptime(text, "%Y-%m-%d %H:%M:%S,%f").timestamp()


def derived_config(folder: Path) -> tuple[Path, dict]:
    """wbcd.yaml with the seed metrics only, absolute paths, a warehouse in `folder`."""
    path = folder / "wbcd_seed.yaml"
    return path, example_config("wbcd.yaml", path, SEED_METRICS, folder / "warehouse")


def run(command: list[str], log: Path) -> tuple[float, subprocess.CompletedProcess, float]:
    """Run `command` in the project folder (as scripts/example does); its output goes to `log` too;
    a failed run ends the benchmark."""
    started_at = time.time()
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, timeout=900)
    seconds = time.perf_counter() - started
    log.write_text(f"$ {' '.join(command)}\n# {seconds:.1f} s, exit {done.returncode}\n{done.stdout}{done.stderr}")
    if done.returncode != 0:  # a failed run times nothing: stop with its output's tail (exit 1)
        raise SystemExit(done.stdout[-3000:] + done.stderr[-3000:])
    return seconds, done, started_at


def job_phases(done: subprocess.CompletedProcess, started_at: float, seconds: float) -> list[tuple[str, float]]:
    """The job's phase log, with the time before the first phase and after the last."""
    log = done.stdout + done.stderr  # spark-submit passes the driver's stderr to its stdout
    phases = [(name, float(s)) for _, name, s in PHASE_DONE.findall(log)]
    first, last, written = PHASE_START.search(log), PHASE_DONE.findall(log), WRITTEN.search(log)
    out = []
    if first:
        out.append(("JVM + session start (process start to `read inputs`)", _stamp(first.group(1)) - started_at))
    out += phases
    if last and written:
        out.append(("summary + writing the results tables", _stamp(written.group(1)) - _stamp(last[-1][0])))
        out.append(("shutdown (results written to process exit)", started_at + seconds - _stamp(written.group(1))))
    return out


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


def alternate(
    folder: Path, job_command: list[str], job_result: Callable[[subprocess.CompletedProcess, str], Any],
    others: list[tuple[str, list[str], Callable[[subprocess.CompletedProcess], Any]]], runs: int,
) -> tuple[list[tuple], list[list[tuple]]]:
    """One untimed warm-up of each command, then `runs` turns of the job and each of the
    `others` (name, command, result; logs job-N.log and <name>-N.log in `folder`). The
    job's runs as (seconds, done, started_at, job_result(done, run id)), each other's as
    (seconds, result(done))."""
    print("warm-up: one run of each, not timed", file=sys.stderr)
    run(job_command + ["--run-id", "warmup"], folder / "job-warmup.log")
    for name, command, _ in others:
        run(command, folder / f"{name}-warmup.log")
    job_runs, other_runs = [], [[] for _ in others]
    for i in range(1, runs + 1):
        seconds, done, started_at = run(job_command + ["--run-id", f"run-{i}"], folder / f"job-{i}.log")
        job_runs.append((seconds, done, started_at, job_result(done, f"run-{i}")))
        print(f"job run {i}: {seconds:.1f} s", file=sys.stderr)
        for (name, command, result), runs_of_other in zip(others, other_runs):
            seconds, done, _ = run(command, folder / f"{name}-{i}.log")
            runs_of_other.append((seconds, result(done)))
            print(f"{name} run {i}: {seconds:.1f} s", file=sys.stderr)
    return job_runs, other_runs


def disagreements(
    runs: list[tuple], reference_runs: list[tuple], what: str, name: str, reference: str,
    same: Callable[[Any, Any], bool] = operator.eq,
) -> list[str]:
    """Every pair of a run and a reference run whose results (a run's last element) are not
    `same`, said once each."""
    return sorted({
        f"{name}'s {what} {run[-1]} differ from {reference}'s {what} {theirs[-1]}"
        for run in runs for theirs in reference_runs if not same(run[-1], theirs[-1])
    })


def ratio_report(
    master: str, header: str, job_label: str, job_runs: list[tuple], others: list[tuple[str, list[tuple]]],
    agreed: str,
) -> tuple[list[str], tuple]:
    """The report's head: the machine, every command's runs and median with its ratio to
    the last of `others` (label, runs), the line `agreed`, the job's phases in its median
    run; and that run."""
    medians = [statistics.median(s for s, *_ in job_runs), *(statistics.median(s for s, _ in r) for _, r in others)]
    labels = [job_label, *(label for label, _ in others)]
    all_runs = [[s for s, *_ in job_runs], *([s for s, _ in r] for _, r in others)]
    reference = medians[-1]
    median_run = sorted(job_runs, key=lambda r: r[0])[len(job_runs) // 2]
    lines = [
        f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
        f"spark-submit --master {master} --properties-file conf/spark/local.conf; "
        f"load average at the end {os.getloadavg()[0]:.2f} (another process on the machine makes timings noisy)",
        "",
        header,
        "|---|---|---:|---:|",
        *(
            f"| {label} | {', '.join(f'{s:.1f}' for s in runs)} | {median:.1f} | "
            + (f"**{median / reference:.2f}x** |" if i == 0 else f"{median / reference:.2f}x |")
            for i, (label, runs, median) in enumerate(zip(labels, all_runs, medians))
        ),
        "",
        agreed,
        "",
        f"job's phases, median run ({median_run[0]:.1f} s):",
        "",
        "| phase | seconds |",
        "|---|---:|",
        *(f"| {name} | {seconds:.1f} |" for name, seconds in job_phases(median_run[1], median_run[2], median_run[0])),
    ]
    return lines, median_run


def main_small(args) -> int:
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
    submit = [str(SPARK_SUBMIT), "--master", args.master, "--properties-file", str(PROPERTIES)]
    job_command = [*submit, str(JOB), "--config", str(config_path)]
    bare_command = [*submit, str(bare_path), *bare_args]
    floor_spec = {
        "paths": bare_args[0::2], "options": [json.loads(o) for o in bare_args[1::2]],
        "exclude": config.get("exclude", []),
        "known": config["metrics"]["knowledge_protection"]["known_variables"],
        "blocking": config["metrics"]["linkage"]["blocking"],
    }
    floor_command = [*submit, str(floor_path), json.dumps(floor_spec)]

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
    if len({tuple(figures(done.stdout)) for _, done, _, _ in job_runs}) != 1:
        errors.append("the job's figures differ between runs")
    lines, median_run = ratio_report(
        args.master, "| process (spark-submit, session start included) | runs (s) | median (s) | vs bare |",
        "job, WBCD, RDMP + CDMP + KPR + linkage", job_runs,
        [("floor: the seed metrics' shuffles, joins and a Python pass, no checks (FLOOR)", floor_runs),
         ("bare: read both CSV files (header, inferSchema), count", bare_runs)],
        f"row counts: job {job_runs[0][3]}, floor {floor_runs[0][1]}, bare {bare_runs[0][1]}",
    )
    lines += ["", "figures (every run):", "", *(f"    {line.strip()}" for line in figures(median_run[1].stdout))]
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
