"""`scripts/bench processes --rows N [--runs 3]`: the exact metrics as a user runs them.

Whole processes on the same Parquet files, in turns (job, plain Spark SQL, Spark floor,
DuckDB, job, ...) after one untimed warm-up of each:
  - the job: `spark-submit --master local[2] --properties-file conf/spark/local.conf
    jobs/evaluate_privacy.py` (as scripts/example starts it) with RDMP, CDMP and KPR
    configured like `scripts/bench exact` (row key `id`, KPR knowing tests/support/datagen.KNOWN),
    results written to a warehouse in the output folder;
  - plain Spark SQL: DuckDB's queries run as they are by Spark SQL (engines.run_spark_sql),
    started by the same spark-submit command: the same counts written plainly, without
    the job's checks and results;
  - a Spark floor: RDMP's and CDMP's counts by one shuffle of whole rows and one join on
    the key (engines.run_spark_floor), same command: less work than the job's metrics need;
  - DuckDB: a new Python process running engines.run_duckdb (the same SQL as the in-process
    table) on the same files.
Every wall time includes process start (the JVM and session for Spark). Reports the
medians and their ratios to DuckDB and the job's phase log of its median run. Each job run's reproduced/exposed counts and per-column
matches, read back from its results tables, and each other Spark run's (the floor's
without KPR's) must equal DuckDB's; the script fails otherwise.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

import pyarrow.parquet as pq
import yaml
from bench_data import KNOWN, generated
from engines import same_counts
from processes import JOB, ROOT, alternate, disagreements, ratio_report, submit

from privacy_eval.results import COLUMN_PROTECTION, METRIC_RESULTS, partition_folder_name

DATABASE = "privacy_eval_bench"

# One engine in a process of its own, so that each pays its own start as a user would:
# `python|spark-submit engine_run.py ENGINE ROOT ORIGINAL SYNTHETIC` runs
# engines.run_<ENGINE> ("duckdb", "spark_sql" or "spark_floor") and prints its counts.
ENGINE = """\
import json, sys
from pathlib import Path

engine, root, original, synthetic = sys.argv[1:5]
sys.path[:0] = [root + "/scripts", root]
import engines

run = getattr(engines, "run_" + engine)
if engine == "duckdb":
    result, seconds = run(Path(original), Path(synthetic))
else:
    from pyspark.sql import SparkSession

    result, seconds = run(SparkSession.builder.appName(engine).getOrCreate(), Path(original), Path(synthetic))
print("COUNTS", json.dumps(result))
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
    """What engines.run_duckdb returns, from the job's results tables for `run_id`."""
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


def main(args: argparse.Namespace) -> int:
    original, synthetic = generated(args)
    folder = Path(args.out) if args.out else Path(tempfile.mkdtemp(prefix="privacy-eval-bench-processes-"))
    folder.mkdir(parents=True, exist_ok=True)
    config_path = job_config(folder, original, synthetic, KNOWN)
    script = folder / "engine_run.py"
    script.write_text(ENGINE)
    commands = {
        engine: [*([sys.executable] if engine == "duckdb" else submit(args.master)), str(script), engine,
                 str(ROOT), str(original), str(synthetic)]
        for engine in ("spark_sql", "spark_floor", "duckdb")
    }
    job_command = [*submit(args.master), str(JOB), "--config", str(config_path)]

    def engine_counts(done) -> dict:
        return json.loads(done.stdout.split("COUNTS", 1)[1])

    print(f"output folder (config, results warehouse, logs): {folder}", file=sys.stderr)
    job_runs, (plain_runs, floor_runs, duck_runs) = alternate(
        folder, job_command, lambda done, run_id: job_counts(folder, run_id),
        [(engine, command, engine_counts) for engine, command in commands.items()], args.runs,
    )
    errors = disagreements(job_runs, duck_runs, "counts", "the job", "DuckDB")
    errors += disagreements(plain_runs, duck_runs, "counts", "plain Spark SQL", "DuckDB")
    errors += disagreements(floor_runs, duck_runs, "counts", "the Spark floor", "DuckDB", same=same_counts)
    counts = job_runs[0].result
    lines, _ = ratio_report(
        args.master, f"| process ({args.rows:,} rows per side, process start included) | runs (s) | median (s) | vs DuckDB |",
        "job: RDMP + CDMP + KPR", job_runs,
        [("plain Spark SQL: DuckDB's queries (engines.run_spark_sql)", plain_runs),
         ("Spark floor: RDMP + CDMP only, one shuffle + one join (engines.run_spark_floor)", floor_runs),
         ("DuckDB (engines.run_duckdb)", duck_runs)],
        f"counts (every run, every engine; the floor has no exposed): reproduced {counts['reproduced']}, exposed {counts['exposed']}, "
        f"matches {counts['matches']}",
    )
    print("\n".join(lines), flush=True)
    (folder / "processes_bench.md").write_text("\n".join(lines) + "\n")
    if errors:
        print("\nERROR: " + "; ".join(errors), file=sys.stderr)
        return 1
    print("\nthe job, plain Spark SQL, the Spark floor and DuckDB agree on every count in every run")
    return 0
