"""`scripts/bench --small [--runs 3]`: the fixed cost of a small evaluation, as a user pays it.

Whole processes, each started with spark-submit the way scripts/example starts the job
(same master, same properties file conf/spark/local.conf, same environment), run in
turns (job, bare, job, bare, ...) after one untimed warm-up of each:
  - the job: jobs/evaluate_privacy.py on the bundled WBCD pair with the seed metrics
    only (RDMP, CDMP, KPR, linkage): conf/examples/wbcd.yaml without its `distance`
    entry, paths made absolute, results written to a warehouse in the output folder;
  - bare: a tiny PySpark script that reads the same two CSV files with the job's CSV
    read options (header, inferSchema, and the config's own options) and counts them.
Both wall times include the JVM and session start. Reports the medians, their ratio
(issue 17's goal: <= 2x), the job's phase log of its median run and, from the log's
timestamps, the time before the first phase (JVM + session start) and after the last
(writing the results, shutdown). The job's row counts must equal the bare counts and
every job run must print the same figures; the script fails otherwise.

`--jobs` adds one in-process run of the job (plain python, same master and properties
file) that counts the Spark jobs and tasks each phase starts (SparkContext.statusTracker;
no listener), for the phase breakdown.
"""

from __future__ import annotations

import json
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
    folder: Path, job_command: list[str], other_command: list[str], other: str, runs: int,
    job_result: Callable[[subprocess.CompletedProcess, str], Any],
    other_result: Callable[[subprocess.CompletedProcess], Any],
) -> tuple[list[tuple], list[tuple]]:
    """One untimed warm-up of each command, then `runs` turns of the job and the `other`
    (logs job-N.log and <other>-N.log in `folder`). The job's runs as (seconds, done,
    started_at, job_result(done, run id)), the other's as (seconds, other_result(done))."""
    print("warm-up: one run of each, not timed", file=sys.stderr)
    run(job_command + ["--run-id", "warmup"], folder / "job-warmup.log")
    run(other_command, folder / f"{other}-warmup.log")
    job_runs, other_runs = [], []
    for i in range(1, runs + 1):
        seconds, done, started_at = run(job_command + ["--run-id", f"run-{i}"], folder / f"job-{i}.log")
        job_runs.append((seconds, done, started_at, job_result(done, f"run-{i}")))
        print(f"job run {i}: {seconds:.1f} s", file=sys.stderr)
        seconds, done, _ = run(other_command, folder / f"{other}-{i}.log")
        other_runs.append((seconds, other_result(done)))
        print(f"{other} run {i}: {seconds:.1f} s", file=sys.stderr)
    return job_runs, other_runs


def disagreements(job_runs: list[tuple], other_runs: list[tuple], what: str, other: str) -> list[str]:
    """Every pair of a job run and an other run whose results differ, said once each."""
    return sorted({
        f"the job's {what} {job[3]} differ from the {other} {what} {theirs[1]}"
        for job in job_runs for theirs in other_runs if job[3] != theirs[1]
    })


def ratio_report(
    master: str, header: str, job_label: str, job_runs: list[tuple], other_label: str, other_runs: list[tuple],
    agreed: str,
) -> tuple[list[str], tuple]:
    """The report's head: the machine, both commands' runs and medians with the job's
    ratio, the line `agreed`, the job's phases in its median run; and that run."""
    job_median = statistics.median(s for s, *_ in job_runs)
    other_median = statistics.median(s for s, _ in other_runs)
    median_run = sorted(job_runs, key=lambda r: r[0])[len(job_runs) // 2]
    lines = [
        f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
        f"spark-submit --master {master} --properties-file conf/spark/local.conf; "
        f"load average at the end {os.getloadavg()[0]:.2f} (another process on the machine makes timings noisy)",
        "",
        header,
        "|---|---|---:|---:|",
        f"| {job_label} | {', '.join(f'{s:.1f}' for s, *_ in job_runs)} | {job_median:.1f} | "
        f"**{job_median / other_median:.2f}x** |",
        f"| {other_label} | {', '.join(f'{s:.1f}' for s, _ in other_runs)} | {other_median:.1f} | 1.00x |",
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
    bare_path = folder / "bare_count.py"
    bare_path.write_text(BARE)
    from privacy_eval.reading import read_options

    bare_args = []
    for side in ("original", "synthetic"):
        options = read_options("csv", config[side].get("options", {}))
        bare_args += [config[side]["path"], json.dumps(options)]
    submit = [str(SPARK_SUBMIT), "--master", args.master, "--properties-file", str(PROPERTIES)]
    job_command = [*submit, str(JOB), "--config", str(config_path)]
    bare_command = [*submit, str(bare_path), *bare_args]

    def job_rows(done: subprocess.CompletedProcess, run_id: str) -> tuple[int, ...] | None:
        rows = ROWS.search(done.stdout + done.stderr)
        return tuple(map(int, rows.groups())) if rows else None

    def bare_counts(done: subprocess.CompletedProcess) -> tuple[int, ...]:
        return tuple(int(x) for x in done.stdout.split("counts", 1)[1].split())

    print(f"output folder (config, bare script, results warehouse): {folder}", file=sys.stderr)
    job_runs, bare_runs = alternate(folder, job_command, bare_command, "bare", args.runs, job_rows, bare_counts)
    errors = disagreements(job_runs, bare_runs, "row counts", "bare")
    if len({tuple(figures(done.stdout)) for _, done, _, _ in job_runs}) != 1:
        errors.append("the job's figures differ between runs")
    lines, median_run = ratio_report(
        args.master, "| process (spark-submit, session start included) | runs (s) | median (s) | vs bare |",
        "job, WBCD, RDMP + CDMP + KPR + linkage", job_runs,
        "bare: read both CSV files (header, inferSchema), count", bare_runs,
        f"row counts: job {job_runs[0][3]}, bare {bare_runs[0][1]}",
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
    print("\njob and bare agree on the row counts; every job run printed the same figures")
    return 0
