"""The job end to end, through spark-submit, as a scheduler would run it."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.examples import EXAMPLES, example_config
from tests.support.expected import check_run, expected_aids, expected_wbcd
from tests.support.jobrun import ENV, JOB, job_command, read_back, tree_digest

pytestmark = pytest.mark.slow


def submit(config: str | Path, *args: str) -> subprocess.CompletedProcess:
    """The job through spark-submit on `config`: a file of conf/examples by name, or a path."""
    path = config if isinstance(config, Path) else EXAMPLES / config
    return subprocess.run(job_command(["--config", str(path), *args]), capture_output=True, text=True, env=ENV,
                          timeout=300)


# A line of Spark's own log at WARN (the pattern of Spark's default log4j2 configuration
# and of src/privacy_eval/log4j2.properties): logger, then message.
SPARK_WARNING = re.compile(r"^\d\d/\d\d/\d\d \d\d:\d\d:\d\d WARN (\S+): (.*)$", re.MULTILINE)
# The only ones a normal run may print: about the machine, not the job (docs/operations.md,
# "Spark's warnings"). pyspark's jars carry no native Hadoop library.
MACHINE_WARNINGS = {"NativeCodeLoader": "Unable to load native-hadoop library for your platform"}


def job_warnings(run: subprocess.CompletedProcess) -> list[str]:
    """Spark's WARN lines of `run` other than MACHINE_WARNINGS, e.g. about the job's own
    plans ("Broadcasting large task binary with size ...", "Truncated the string
    representation of a plan ..."): a user reads each as a problem of the run."""
    lines = []
    for match in SPARK_WARNING.finditer(run.stdout + run.stderr):
        logger, message = match.groups()
        if not (logger in MACHINE_WARNINGS and message.startswith(MACHINE_WARNINGS[logger])):
            lines.append(match.group(0))
    return lines


def test_examples_land_in_the_results_tables(tmp_path):
    warehouse = tmp_path / "wh"
    wh = ["--set", f"results.warehouse={warehouse}"]

    # r1 first with two metrics (one of them per column): the tables get created here.
    # Runs that test the results tables, not the metrics, are much shorter with fewer metrics.
    light = tmp_path / "light.yaml"
    example_config("wbcd.yaml", light, ["row_direct_match", "column_direct_match"], warehouse)
    first = submit(light, "--run-id", "r1")
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
    assert "row_direct_match_protection" in first.stdout and "run_id r1" in first.stdout
    assert job_warnings(first) == []
    # An Airflow-style run id, with ':' and '+' in it.
    airflow_id = "manual__2026-11-29T12:34:15.676400+00:00"
    second = submit("aids.yaml", "--run-id", airflow_id, *wh)
    assert second.returncode == 0, second.stdout[-3000:] + second.stderr[-3000:]
    assert job_warnings(second) == []
    # Re-running r1 (the whole example now, with another target) replaces its rows in
    # both tables instead of adding to them.
    again = submit("wbcd.yaml", "--run-id", "r1", *wh, "--set", "metrics.row_direct_match.target=99")
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    assert "row_direct_match_protection" in again.stdout and "run_id r1" in again.stdout
    assert job_warnings(again) == []

    tables = read_back(warehouse)
    runs = {}
    for row in tables["metric_results"]:
        runs.setdefault(row["run_id"], []).append(row)
    assert set(runs) == {"r1", airflow_id}
    assert len(runs["r1"]) == 10 and len(runs[airflow_id]) == 6  # wbcd: the 4 distance rows too
    columns = {}
    for row in tables["column_protection"]:
        columns.setdefault(row["run_id"], []).append(row)
    assert len(columns["r1"]) == 10 and len(columns[airflow_id]) == 26

    check_run(runs["r1"], columns["r1"], expected_wbcd())
    check_run(runs[airflow_id], columns[airflow_id], expected_aids())
    rdm = next(r for r in runs["r1"] if r["metric"] == "row_direct_match_protection")
    assert rdm["target"] == 99 and rdm["passed"] is False
    assert rdm["dataset"] == "wbcd_avatar_k20" and rdm["n_original"] == 683 and rdm["n_synthetic"] == 683
    assert len(rdm["config_sha256"]) == 64 and len(rdm["input_fingerprint"]) == 64
    details = json.loads(rdm["details"])
    assert details["n"] == 683

    # A run that misses its target under --fail-on-target exits 3 through spark-submit and
    # leaves both tables exactly as they were (a bad input, exit 2, likewise:
    # tests/job/test_bad_inputs.py, test_bad_input_through_spark_submit and the in-process cases).
    before = tree_digest(warehouse)
    gate = tmp_path / "gate.yaml"
    example_config("wbcd.yaml", gate, ["column_direct_match"], warehouse)
    gated = submit(gate, "--run-id", "r4", "--set", "metrics.column_direct_match.target=100", "--fail-on-target")
    assert gated.returncode == 3, gated.stdout[-3000:] + gated.stderr[-3000:]
    assert "FAIL" in gated.stdout
    assert tree_digest(warehouse) == before


def test_configuration_errors_exit_2_without_a_jvm(tmp_path):
    config = tmp_path / "bad.yaml"
    config.write_text("dataset: x\noriginal: {path: a.csv}\nsynthetic: {path: b.csv}\nmetrics: {row_direct_macth: {}}\n")
    done = subprocess.run([sys.executable, str(JOB), "--config", str(config)],
                          capture_output=True, text=True, env=ENV, timeout=60)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "error: unknown key 'metrics.row_direct_macth' (allowed here: column_direct_match, disclosure, "
        "distance, knowledge_protection, linkage, row_direct_match)"
    ]
