"""`scripts/bench --rows N --processes [--runs 3]`: the exact metrics as a user runs them.

Whole processes on the same Parquet files, in turns (job, DuckDB, job, DuckDB, ...) after
one untimed warm-up of each:
  - the job: `spark-submit --master local[2] --properties-file conf/spark/local.conf
    jobs/evaluate_privacy.py` (as scripts/example starts it) with RDMP, CDMP and KPR
    configured like `scripts/bench` (row key `id`, KPR knowing tests/support/datagen.KNOWN),
    results written to a warehouse in the output folder;
  - DuckDB: a new Python process running bench.run_duckdb (the same SQL as the in-process
    table) on the same files.
Both wall times include process start (the JVM and session for the job). Reports the
medians, their ratio (issue 17's goal at 1e7: <= 4x) and the job's phase log of its median
run. Each job run's reproduced/exposed counts and per-column matches, read back from its
results tables, must equal DuckDB's; the script fails otherwise.
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import sys
import tempfile
from pathlib import Path

import pyarrow.parquet as pq
import yaml
from bench_small import JOB, PROPERTIES, ROOT, SPARK_SUBMIT, job_phases, run

from privacy_eval.results import COLUMN_PROTECTION, METRIC_RESULTS, partition_folder_name

DATABASE = "privacy_eval_bench"

DUCKDB = """\
import json, sys
from pathlib import Path
sys.path.insert(0, {scripts!r})
import bench
result, seconds = bench.run_duckdb(Path(sys.argv[1]), Path(sys.argv[2]))
print("DUCKDB", json.dumps(result))
"""


def job_config(folder: Path, original: Path, synthetic: Path, known: list[str]) -> Path:
    config = {
        "dataset": "bench",
        "original": {"path": str(original)},
        "synthetic": {"path": str(synthetic)},
        "row_key": "id",
        "metrics": {
            "row_direct_match": {},
            "column_direct_match": {},
            "knowledge_protection": {"known_variables": known},
        },
        "results": {"warehouse": str(folder / "warehouse"), "database": DATABASE},
    }
    path = folder / "bench_exact.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


def job_counts(folder: Path, run_id: str) -> dict:
    """What bench.run_duckdb returns, from the job's results tables for `run_id`."""
    tables = folder / "warehouse" / f"{DATABASE}.db"
    partition = partition_folder_name(run_id)
    metrics = pq.read_table(tables / METRIC_RESULTS / partition).to_pylist()
    columns = pq.read_table(tables / COLUMN_PROTECTION / partition).to_pylist()
    by_name = {row["metric"]: row for row in metrics}
    return {
        "reproduced": by_name["row_direct_match_protection"]["numerator"],
        "matches": {row["column_name"]: row["matches"] for row in columns},
        "exposed": by_name["knowledge_protection_rate"]["numerator"],
    }


def main_processes(args, original: Path, synthetic: Path, known: list[str]) -> int:
    folder = Path(args.out) if args.out else Path(tempfile.mkdtemp(prefix="privacy-eval-bench-processes-"))
    folder.mkdir(parents=True, exist_ok=True)
    config_path = job_config(folder, original, synthetic, known)
    duck_path = folder / "duckdb_run.py"
    duck_path.write_text(DUCKDB.format(scripts=str(ROOT / "scripts")))
    job_command = [str(SPARK_SUBMIT), "--master", args.master, "--properties-file", str(PROPERTIES),
                   str(JOB), "--config", str(config_path)]
    duck_command = [sys.executable, str(duck_path), str(original), str(synthetic)]

    print(f"output folder (config, results warehouse, logs): {folder}", file=sys.stderr)
    run(job_command + ["--run-id", "warmup"], folder / "job-warmup.log")
    run(duck_command, folder / "duckdb-warmup.log")
    job_runs, duck_runs, errors = [], [], []
    for i in range(args.runs):
        run_id = f"run-{i + 1}"
        seconds, done, started_at = run(job_command + ["--run-id", run_id], folder / f"job-{i + 1}.log")
        job_runs.append((seconds, done, started_at, job_counts(folder, run_id)))
        print(f"job run {i + 1}: {seconds:.1f} s", file=sys.stderr)
        seconds, done, _ = run(duck_command, folder / f"duckdb-{i + 1}.log")
        duck_runs.append((seconds, json.loads(done.stdout.split("DUCKDB", 1)[1])))
        print(f"DuckDB run {i + 1}: {seconds:.1f} s", file=sys.stderr)

    for _, _, _, counts in job_runs:
        for _, duck in duck_runs:
            if counts != duck:
                errors.append(f"the job's counts {counts} differ from DuckDB's {duck}")
    job_median = statistics.median(s for s, *_ in job_runs)
    duck_median = statistics.median(s for s, _ in duck_runs)
    median_run = sorted(job_runs, key=lambda r: r[0])[len(job_runs) // 2]
    counts = job_runs[0][3]
    lines = [
        f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
        f"spark-submit --master {args.master} --properties-file conf/spark/local.conf; "
        f"load average at the end {os.getloadavg()[0]:.2f}",
        "",
        f"| process ({args.rows:,} rows per side, process start included) | runs (s) | median (s) | vs DuckDB |",
        "|---|---|---:|---:|",
        f"| job: RDMP + CDMP + KPR | {', '.join(f'{s:.1f}' for s, *_ in job_runs)} | {job_median:.1f} | "
        f"**{job_median / duck_median:.2f}x** |",
        f"| DuckDB (bench.run_duckdb) | {', '.join(f'{s:.1f}' for s, _ in duck_runs)} | {duck_median:.1f} | 1.00x |",
        "",
        f"counts (every run, both engines): reproduced {counts['reproduced']}, exposed {counts['exposed']}, "
        f"matches {counts['matches']}",
        "",
        f"job's phases, median run ({median_run[0]:.1f} s):",
        "",
        "| phase | seconds |",
        "|---|---:|",
        *(f"| {name} | {seconds:.1f} |" for name, seconds in job_phases(median_run[1], median_run[2], median_run[0])),
    ]
    print("\n".join(lines), flush=True)
    (folder / "processes_bench.md").write_text("\n".join(lines) + "\n")
    if errors:
        print("\nERROR: " + "; ".join(sorted(set(errors))), file=sys.stderr)
        return 1
    print("\nthe job and DuckDB agree on every count in every run")
    return 0
