"""Whole processes in turns, as a user pays for them: the job through spark-submit (the
way scripts/example starts it) and the commands it is compared with, each after one
untimed warm-up, then alternated; their wall times, medians and ratios, and the job's
phase log of its median run. Shared by bench_small.py and bench_processes.py."""

from __future__ import annotations

import operator
import os
import re
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from measure import machine

ROOT = Path(__file__).resolve().parents[1]
PROPERTIES = ROOT / "conf" / "spark" / "local.conf"
JOB = ROOT / "jobs" / "evaluate_privacy.py"
SPARK_SUBMIT = Path(sys.executable).parent / "spark-submit"

PHASE_DONE = re.compile(r"^(\S+ \S+) INFO privacy_eval\.evaluation: (.+): done in ([0-9.]+) s", re.MULTILINE)
PHASE_START = re.compile(r"^(\S+ \S+) INFO privacy_eval\.evaluation: read inputs: started", re.MULTILINE)
WRITTEN = re.compile(r"^(\S+ \S+) INFO privacy_eval: results written", re.MULTILINE)


@dataclass(frozen=True)
class Run:
    """One timed run of a command: its wall time, the finished process, when it started
    (seconds since the epoch) and what was read from it."""

    seconds: float
    done: subprocess.CompletedProcess
    started_at: float
    result: Any


def submit(master: str) -> list[str]:
    """spark-submit as scripts/example starts the job: the master and the local properties."""
    return [str(SPARK_SUBMIT), "--master", master, "--properties-file", str(PROPERTIES)]


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


def alternate(
    folder: Path, job_command: list[str], job_result: Callable[[subprocess.CompletedProcess, str], Any],
    others: list[tuple[str, list[str], Callable[[subprocess.CompletedProcess], Any]]], runs: int,
) -> tuple[list[Run], list[list[Run]]]:
    """One untimed warm-up of each command, then `runs` turns of the job and each of the
    `others` (name, command, result; logs job-N.log and <name>-N.log in `folder`): the
    job's runs (their result: job_result(done, run id)) and each other's (result(done))."""
    print("warm-up: one run of each, not timed", file=sys.stderr)
    run(job_command + ["--run-id", "warmup"], folder / "job-warmup.log")
    for name, command, _ in others:
        run(command, folder / f"{name}-warmup.log")
    job_runs: list[Run] = []
    other_runs: list[list[Run]] = [[] for _ in others]
    for i in range(1, runs + 1):
        seconds, done, started_at = run(job_command + ["--run-id", f"run-{i}"], folder / f"job-{i}.log")
        job_runs.append(Run(seconds, done, started_at, job_result(done, f"run-{i}")))
        print(f"job run {i}: {seconds:.1f} s", file=sys.stderr)
        for (name, command, result), runs_of_other in zip(others, other_runs):
            seconds, done, started_at = run(command, folder / f"{name}-{i}.log")
            runs_of_other.append(Run(seconds, done, started_at, result(done)))
            print(f"{name} run {i}: {seconds:.1f} s", file=sys.stderr)
    return job_runs, other_runs


def disagreements(
    runs: list[Run], reference_runs: list[Run], what: str, name: str, reference: str,
    same: Callable[[Any, Any], bool] = operator.eq,
) -> list[str]:
    """Every pair of a run and a reference run whose results are not `same`, said once each."""
    return sorted({
        f"{name}'s {what} {mine.result} differ from {reference}'s {what} {theirs.result}"
        for mine in runs for theirs in reference_runs if not same(mine.result, theirs.result)
    })


def ratio_report(
    master: str, header: str, job_label: str, job_runs: list[Run], others: list[tuple[str, list[Run]]],
    agreed: str,
) -> tuple[list[str], Run]:
    """The report's head: the machine, every command's runs and median with its ratio to
    the last of `others` (label, runs), the line `agreed`, the job's phases in its median
    run; and that run."""
    labels = [job_label, *(label for label, _ in others)]
    all_runs = [[r.seconds for r in job_runs], *([r.seconds for r in runs] for _, runs in others)]
    medians = [statistics.median(seconds) for seconds in all_runs]
    reference = medians[-1]
    median_run = sorted(job_runs, key=lambda r: r.seconds)[len(job_runs) // 2]
    lines = [
        f"{machine()}, spark-submit --master {master} --properties-file conf/spark/local.conf; "
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
        f"job's phases, median run ({median_run.seconds:.1f} s):",
        "",
        "| phase | seconds |",
        "|---|---:|",
        *(f"| {name} | {seconds:.1f} |" for name, seconds in job_phases(median_run)),
    ]
    return lines, median_run


def job_phases(job_run: Run) -> list[tuple[str, float]]:
    """The job's phase log, with the time before the first phase and after the last."""
    log = job_run.done.stdout + job_run.done.stderr  # spark-submit passes the driver's stderr to its stdout
    phases = [(name, float(s)) for _, name, s in PHASE_DONE.findall(log)]
    first, last, written = PHASE_START.search(log), PHASE_DONE.findall(log), WRITTEN.search(log)
    out = []
    if first:
        out.append(("JVM + session start (process start to `read inputs`)", _stamp(first.group(1)) - job_run.started_at))
    out += phases
    if last and written:
        out.append(("summary + writing the results tables", _stamp(written.group(1)) - _stamp(last[-1][0])))
        out.append(("shutdown (results written to process exit)",
                    job_run.started_at + job_run.seconds - _stamp(written.group(1))))
    return out


def _stamp(text: str) -> float:
    return datetime.strptime(text, "%Y-%m-%d %H:%M:%S,%f").timestamp()
