"""No record value leaves the job: canaries planted in the inputs must not appear in its
output (the driver log, since spark-submit prints Spark's log beside the job's own
lines), in the results tables or in any file the run leaves in its warehouse and
temporary folders. Once with every metric on, once with an input that makes Spark's own
error messages quote a value (an impossible cast of a text column)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pandas as pd
import pytest
import yaml

from tests.support.jobrun import C1_ONLY, error_lines, submit
from tests.support.leaks import CANARY_MARKS, CANARY_NUMBER, CANARY_TEXT, leaks, leaks_in_files

pytestmark = pytest.mark.slow

def planted_frames() -> tuple[pd.DataFrame, pd.DataFrame]:
    """The text canary in `city` (compared, a known variable), the number in `weight`
    (compared, a known variable, a linkage target); the synthetic row copies both."""
    n = 40
    original = pd.DataFrame({
        "id": range(n),
        "age": [20 + (7 * i) % 45 for i in range(n)],
        "weight": [55.0 + (11 * i) % 37 + 0.25 * (i % 4) for i in range(n)],
        "city": [f"city{(3 * i) % 13}" for i in range(n)],
        "group": [i % 3 for i in range(n)],
    })
    original.loc[0, "city"] = CANARY_TEXT  # first in its file: the first value a failing cast meets
    original.loc[9, "weight"] = CANARY_NUMBER
    synthetic = original.copy()
    synthetic["age"] = original["age"] + [(i % 3) - 1 for i in range(n)]
    synthetic.loc[9, "age"] = original.loc[9, "age"]  # the planted record is copied whole
    return original, synthetic


@pytest.fixture
def planted(tmp_path) -> dict[str, Path]:
    data = tmp_path / "data"
    data.mkdir()
    original, synthetic = planted_frames()
    original.to_csv(data / "original.csv", index=False)
    synthetic.to_csv(data / "synthetic.csv", index=False)
    scratch = tmp_path / "scratch"  # every temporary folder the run may use
    for name in ("local", "tmp", "java"):
        (scratch / name).mkdir(parents=True)
    return {"data": data, "scratch": scratch, "warehouse": tmp_path / "warehouse", "root": tmp_path}


def run(planted: dict[str, Path], extra_args: Sequence[str] = (), **changes) -> tuple[int, str]:
    config = {
        "dataset": "canaries",
        "original": {"path": str(planted["data"] / "original.csv")},
        "synthetic": {"path": str(planted["data"] / "synthetic.csv")},
        "row_key": "id",
        "metrics": {
            "row_direct_match": {},
            "column_direct_match": {},
            "knowledge_protection": {"known_variables": ["city", "weight"]},
            "linkage": {"targets": ["weight", "age"], "blocking": ["group"]},
            # the canaries as targets: disclosure's rows and warnings name counts only
            "disclosure": {"keys": ["age", "group"], "targets": ["city", "weight"], "bins": {"age": 4},
                           "thresh_1way": [0, 0], "thresh_2way": [0, 0]},
        },
        "results": {"warehouse": str(planted["warehouse"]), "database": "canaries"},
        **changes,
    }
    path = planted["root"] / "job.yaml"
    path.write_text(yaml.safe_dump(config))
    scratch = planted["scratch"]
    return submit(
        ["--config", str(path), "--run-id", "canaries", *extra_args],
        env={"TMPDIR": str(scratch / "tmp")},
        spark_options=["--conf", f"spark.local.dir={scratch / 'local'}",
                       "--driver-java-options", f"{C1_ONLY} -Djava.io.tmpdir={scratch / 'java'}"],
    )


def test_the_scanner_finds_planted_canaries(planted):
    """Control: the check below can fail."""
    assert set(leaks_in_files(planted["data"])) == {"original.csv", "synthetic.csv"}
    assert all(set(marks) == set(CANARY_MARKS) for marks in leaks_in_files(planted["data"]).values())


def test_a_full_run_leaks_no_value(planted):
    code, output = run(planted)
    assert code == 0, output[-5000:]
    assert "linkage_success_rate" in output and "attribute_disclosure" in output
    assert not leaks(output), output
    tables = planted["warehouse"] / "canaries.db"
    assert list(tables.glob("metric_results/run_id=canaries/*.parquet"))
    assert list(tables.glob("column_protection/run_id=canaries/*.parquet"))
    assert not leaks_in_files(planted["warehouse"])
    assert not leaks_in_files(planted["scratch"])


# Held by every original record (constant, released as 0: a distance scaled by 1 would
# read as the constant) or all but one (near-constant, released as it is; a grid from
# two values would give them back).
CONSTANT, NEAR_CONSTANT = 61.803398874, 27.182818284
CONSTANT_MARKS = ("803398", "182818")  # as CANARY_MARKS: 6 significant digits in any rendering


def test_constant_columns_leak_no_value_in_any_family(planted):
    """Every metric family, the distance suite with a holdout, at --verbose with a
    report: the constants appear in no output, table, report or scratch file."""
    original, _ = planted_frames()
    original["steady"] = CONSTANT
    original["nearly"] = NEAR_CONSTANT
    original.loc[5, "nearly"] = NEAR_CONSTANT + 1e-5
    synthetic = original.assign(steady=0.0)  # each record's nearest original is its own, at the constant
    holdout = original.iloc[::4].copy()
    data = planted["data"]
    original.to_csv(data / "original.csv", index=False)
    synthetic.to_csv(data / "synthetic.csv", index=False)
    holdout.to_csv(data / "holdout.csv", index=False)
    assert all(mark in (data / "original.csv").read_text() for mark in CONSTANT_MARKS)  # control
    report = planted["root"] / "report"
    code, output = run(
        planted, holdout={"path": str(data / "holdout.csv")},
        extra_args=["--verbose", "--report", str(report)],
        metrics={
            "row_direct_match": {},
            "column_direct_match": {},
            "knowledge_protection": {"known_variables": ["steady", "nearly", "city"]},
            "linkage": {"targets": ["weight", "age", "steady", "nearly"], "blocking": ["group"]},
            "distance": {"components": "all"},
            "disclosure": {"keys": ["steady", "group"], "targets": ["nearly"], "thresh_1way": [0, 0],
                           "thresh_2way": [0, 0]},
        },
    )
    assert code == 0, output[-5000:]
    assert "distance_to_closest_record" in output and "knowledge_protection_rate" in output
    assert list(report.glob("*.md")) and list(planted["warehouse"].rglob("*.parquet"))
    assert not leaks(output, CONSTANT_MARKS), output
    for folder in (report, planted["warehouse"], planted["scratch"]):
        assert not leaks_in_files(folder, CONSTANT_MARKS), folder


def test_spark_errors_that_quote_values_do_not_reach_the_output(planted):
    """Casting the text column to a number fails on the canary: under ANSI, Spark's
    message would be "The value 'Zq7Canary-Vx31' of the type STRING cannot be cast..."."""
    code, output = run(planted, cast={"city": "double"})
    errors = error_lines(output)
    assert code == 2, output[-5000:]
    assert len(errors) == 1 and "'city'" in errors[0], output[-5000:]
    assert "Traceback" not in output
    assert not leaks(output), output
    assert not planted["warehouse"].exists()
    assert not leaks_in_files(planted["scratch"])
