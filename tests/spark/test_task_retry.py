"""Spark's task retries change no figure.

The WBCD example (all four metric families) runs twice in one session on
`local[2,4]` (4 attempts per task): undisturbed, then with a task failing once in every
stage that reads the inputs (shuffle-map stages among them) and in each Python pass of
the linkage over its blocks: weighted scaling and scoring, both `mapInArrow`
(tests/support/faults.py). Every metric, count, detail and column row
must be identical.

The test session runs on `local[2]`, which never retries a task, and one JVM holds one
SparkContext: so both runs happen in a child process with a session of its own.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from typing import Any

import pytest
from py4j.protocol import Py4JJavaError

from tests.support.jobrun import C1_ONLY
from tests.support.paths import ROOT

KERNEL_POINTS = {"mapInArrow-scaling", "mapInArrow-scoring"}

pytestmark = pytest.mark.slow


def test_task_retries_change_no_figure(tmp_path):
    markers = tmp_path / "markers"
    markers.mkdir()
    out = tmp_path / "runs.json"
    env = {
        **os.environ,
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
        "SPARK_LOCAL_IP": "127.0.0.1",
        # Workers and the fault daemon import tests.support.faults from the project folder.
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
    }
    code = f"from tests.spark.test_task_retry import child; child({str(out)!r}, {str(markers)!r})"
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    runs = json.loads(out.read_text())

    # The faults happened: once per stage and point, each retried to success.
    failures = {}
    for name in os.listdir(markers):
        if name.startswith("fail-"):
            point, stage = name[len("fail-"):].rsplit("-stage", 1)
            failures[(point, int(stage))] = (markers / name).read_text()
    assert {point for point, _ in failures} == {"input"} | KERNEL_POINTS
    for (point, stage), partition in failures.items():
        assert (markers / f"retry-{point}-stage{stage}-part{partition}").exists(), (point, stage)
        assert runs["failed_tasks"][str(stage)] >= 1, (point, stage)
    shuffle_map = set(runs["shuffle_map_stages"])
    assert any(stage in shuffle_map for point, stage in failures if point == "input")
    assert sum(runs["failed_tasks"].values()) >= len(failures)

    # ... and changed nothing.
    assert {m["metric"] for m in runs["clean"]["metrics"]} >= {
        "row_direct_match_protection", "column_direct_match_protection", "knowledge_protection_rate",
        "linkage_success_rate_mahalanobis", "linkage_success_rate_weighted"}
    assert len(runs["clean"]["columns"]) == 10
    assert runs["faulty"] == runs["clean"]


def child(out: str, markers: str) -> None:
    """The child process: both runs, then their figures and stage facts as JSON in `out`."""
    from privacy_eval import evaluation
    from privacy_eval.config import load_config
    from privacy_eval.session import build_session
    from tests.support.faults import FAULTS, flaky

    spark = build_session("task-retry", {
        "spark.master": "local[2,4]",
        "spark.python.daemon.module": "tests.support.faults",
        "spark.sql.shuffle.partitions": "4",
        "spark.ui.enabled": "false",
        "spark.driver.extraJavaOptions": C1_ONLY,
    })
    spark.sparkContext.setLogLevel("OFF")  # the injected failures would log as task errors

    # One plan for both runs: the job's own code, with the input tables passed through
    # flaky() stages (after reading, so the cache is filled by a failing stage, and after
    # preparing, so every later stage reads through one). They fail only when armed.
    read_table, prepare_inputs = evaluation.read_table, evaluation.prepare_inputs

    def prepared(*args: Any, **kwargs: Any):
        inputs = prepare_inputs(*args, **kwargs)
        return dataclasses.replace(
            inputs, original=flaky(inputs.original), synthetic=flaky(inputs.synthetic),
            cached=inputs.cached or (inputs.original, inputs.synthetic),
        )

    evaluation.read_table = lambda *args, **kwargs: flaky(read_table(*args, **kwargs))
    evaluation.prepare_inputs = prepared
    config = load_config(str(ROOT / "conf" / "examples" / "wbcd.yaml"), [])

    clean = evaluation.evaluate(spark, config)
    context = spark.sparkContext
    context.setJobGroup("faulty", "faults armed")
    context.setLocalProperty(FAULTS, markers)
    faulty = evaluation.evaluate(spark, config)
    context.setLocalProperty(FAULTS, None)

    with open(out, "w") as handle:
        json.dump({"clean": _figures(clean), "faulty": _figures(faulty), **_stage_facts(spark, "faulty")}, handle)
    spark.stop()


def _figures(result: Any) -> dict[str, Any]:
    """Everything an evaluation reports (floats survive JSON exactly)."""
    return {
        "metrics": [{**dataclasses.asdict(m), "passed": m.passed} for m in result.metrics],
        "columns": [dataclasses.asdict(c) for c in result.columns],
        "n_original": result.n_original,
        "n_synthetic": result.n_synthetic,
        "input_fingerprint": result.input_fingerprint,
        "warnings": result.warnings,
    }


def _stage_facts(spark: Any, group: str) -> dict[str, Any]:
    """Failed task attempts per stage of the job group, and which stages wrote shuffle output."""
    tracker = spark.sparkContext.statusTracker()
    store = spark.sparkContext._jsc.sc().statusStore()
    stages = {s for job in tracker.getJobIdsForGroup(group) for s in tracker.getJobInfo(job).stageIds}
    failed, shuffle_map = {}, []
    for stage in sorted(stages):
        try:
            data = store.lastStageAttempt(stage)
        except Py4JJavaError:  # skipped: its output came from an earlier job
            continue
        failed[str(stage)] = int(data.numFailedTasks())
        if data.shuffleWriteRecords() > 0:
            shuffle_map.append(stage)
    return {"failed_tasks": failed, "shuffle_map_stages": shuffle_map}
