"""The job end to end, through spark-submit, as a scheduler would run it."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pandas as pd
import pytest

from . import reference
from .reference_linkage import linkage_reference

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data"
SPARK_SUBMIT = Path(sys.executable).parent / "spark-submit"
JOB = ROOT / "jobs" / "evaluate_privacy.py"
ENV = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable,
       "SPARK_LOCAL_IP": "127.0.0.1"}
FAST = ["--conf", "spark.sql.shuffle.partitions=4", "--conf", "spark.ui.enabled=false"]

pytestmark = pytest.mark.slow


def submit(config: str, *args: str) -> subprocess.CompletedProcess:
    command = [str(SPARK_SUBMIT), "--master", "local[2]", *FAST, str(JOB),
               "--config", str(ROOT / "conf" / "examples" / config), *args]
    return subprocess.run(command, capture_output=True, text=True, env=ENV, timeout=300)


def read_back(warehouse: Path) -> dict:
    """Read both tables in a new process with a new session, as a dashboard would."""
    script = textwrap.dedent(f"""
        import json
        from privacy_eval.results import ensure_tables
        from privacy_eval.session import build_session
        spark = build_session("read-back", {{"spark.master": "local[1]", "spark.ui.enabled": "false"}})
        ensure_tables(spark, {str(warehouse)!r}, "privacy_eval")
        out = {{}}
        for table in ("metric_results", "column_protection"):
            out[table] = [r.asDict() for r in spark.table("privacy_eval." + table).collect()]
        print("JSON" + json.dumps(out, default=str))
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=ENV, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    line = next(l for l in done.stdout.splitlines() if l.startswith("JSON"))
    return json.loads(line[4:])


def tree_digest(folder: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted(folder.rglob("*")):
        digest.update(str(path.relative_to(folder)).encode())
        if path.is_file():
            digest.update(path.read_bytes())
    return digest.hexdigest()


def expected_wbcd() -> dict:
    original = pd.read_csv(DATA / "wbcd" / "original.csv").drop(columns="Sample_code_number")
    synthetic = pd.read_csv(DATA / "wbcd" / "avatar_k20.csv")
    targets = ["Clump_Thickness", "Uniformity_of_Cell_Size", "Uniformity_of_Cell_Shape", "Marginal_Adhesion",
               "Single_Epithelial_Cell_Size", "Bare_Nuclei", "Bland_Chromatin", "Normal_Nucleoli", "Mitoses"]
    return expected_for(original, synthetic, ["Clump_Thickness", "Bare_Nuclei", "Class"],
                        ["Clump_Thickness", "Bare_Nuclei"], targets, ["Class"])


def expected_aids() -> dict:
    original = pd.read_csv(DATA / "aids" / "original.csv", sep=";", na_values=["NA"]).drop(columns="pidnum")
    synthetic = pd.read_csv(DATA / "aids" / "avatar_k20.csv")
    targets = ["age", "wtkg", "karnof", "preanti", "cd40", "cd420", "cd80", "cd820", "days"]
    return expected_for(original, synthetic, ["age", "wtkg", "gender", "race"], ["age", "wtkg"],
                        targets, ["gender", "race"])


def expected_for(original, synthetic, known, numeric, targets, blocking) -> dict:
    columns = list(synthetic.columns)
    original = original.assign(_id=range(len(original)))
    synthetic = synthetic.assign(_id=range(len(synthetic)))
    linkage = {
        method: linkage_reference(original, synthetic, "_id", targets, blocking, method=method)["success"]
        for method in ("mahalanobis", "weighted")
    }
    return {
        "row_direct_match_protection": reference.row_direct_match(original, synthetic, columns),
        "column_direct_match_protection": reference.column_direct_match(original, synthetic, columns, "_id"),
        "knowledge_protection_rate": reference.knowledge_protection(original, synthetic, columns, known, numeric),
        "linkage": linkage,
    }


def check_run(rows: list[dict], columns: list[dict], expected: dict) -> None:
    by_metric = {r["metric"]: r for r in rows}
    linkage = expected.pop("linkage")
    assert set(by_metric) == set(expected) | {
        "linkage_success_rate", "linkage_success_rate_mahalanobis", "linkage_success_rate_weighted"}
    for method, success in linkage.items():
        row = by_metric[f"linkage_success_rate_{method}"]
        assert row["value"] == pytest.approx(success, abs=1e-12), method
        assert row["unit"] == "fraction" and row["denominator"] == row["n_synthetic"]
    assert by_metric["linkage_success_rate"]["value"] == max(
        by_metric[f"linkage_success_rate_{method}"]["value"] for method in linkage)
    for metric, want in expected.items():
        assert by_metric[metric]["value"] == pytest.approx(want["protection"], abs=1e-9), metric
        assert by_metric[metric]["unit"] == "percent" and by_metric[metric]["status"] == "ok"
    assert by_metric["row_direct_match_protection"]["numerator"] == expected["row_direct_match_protection"]["reproduced"]
    assert by_metric["knowledge_protection_rate"]["numerator"] == expected["knowledge_protection_rate"]["exposed"]
    per_column = expected["column_direct_match_protection"]["per_column"]
    assert {c["column_name"]: c["matches"] for c in columns} == {k: v["matches"] for k, v in per_column.items()}
    assert sorted(c["risk_rank"] for c in columns) == list(range(1, len(per_column) + 1))


def test_examples_land_in_the_results_tables(tmp_path):
    warehouse = tmp_path / "wh"
    wh = ["--set", f"results.warehouse={warehouse}"]

    first = submit("wbcd.yaml", "--run-id", "r1", *wh)
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
    assert "row_direct_match_protection" in first.stdout and "run_id r1" in first.stdout
    # An Airflow-style run id, with ':' and '+' in it.
    airflow_id = "manual__2026-11-29T12:34:15.676400+00:00"
    second = submit("aids.yaml", "--run-id", airflow_id, *wh)
    assert second.returncode == 0, second.stdout[-3000:] + second.stderr[-3000:]
    # Re-running r1 with another target replaces its rows instead of adding to them.
    again = submit("wbcd.yaml", "--run-id", "r1", *wh, "--set", "metrics.row_direct_match.target=99")
    assert again.returncode == 0, again.stderr[-3000:]

    tables = read_back(warehouse)
    runs = {}
    for row in tables["metric_results"]:
        runs.setdefault(row["run_id"], []).append(row)
    assert set(runs) == {"r1", airflow_id}
    assert len(runs["r1"]) == 6 and len(runs[airflow_id]) == 6
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

    # Failing runs leave both tables exactly as they were.
    before = tree_digest(warehouse)
    bad = submit("wbcd.yaml", "--run-id", "r3", *wh,
                 "--set", "metrics.knowledge_protection.known_variables=[Not_A_Column]")
    assert bad.returncode == 2
    error_lines = [l for l in (bad.stdout + bad.stderr).splitlines() if l.startswith("error:")]
    assert len(error_lines) == 1 and "Not_A_Column" in error_lines[0]
    assert "Traceback" not in bad.stdout + bad.stderr
    gated = submit("wbcd.yaml", "--run-id", "r4", *wh, "--fail-on-target",
                   "--set", "metrics.column_direct_match.target=100")
    assert gated.returncode == 3
    assert "FAIL" in gated.stdout
    assert tree_digest(warehouse) == before


def test_configuration_errors_exit_2_without_a_jvm(tmp_path):
    config = tmp_path / "bad.yaml"
    config.write_text("dataset: x\noriginal: {path: a.csv}\nsynthetic: {path: b.csv}\nmetrics: {row_direct_macth: {}}\n")
    done = subprocess.run([sys.executable, str(JOB), "--config", str(config)],
                          capture_output=True, text=True, env=ENV, timeout=60)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "error: unknown key 'metrics.row_direct_macth' (allowed here: column_direct_match, "
        "knowledge_protection, linkage, row_direct_match)"
    ]
