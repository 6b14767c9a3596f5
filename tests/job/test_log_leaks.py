"""Spark's own log quotes no record value: a task that fails on a malformed record under
mode FAILFAST makes Spark log the exception, whose message quotes the record
(TaskSetManager "Lost task ...", Executor "Exception in task ...", BlockManager
"Putting block ... failed"). src/privacy_eval/log4j2.properties withholds those
reasons; privacy_eval.session hands it to the JVMs it launches, conf/spark/*.conf to
spark-submit's. Checked on every route the job runs by: in-process on the tests'
session, plain `python jobs/evaluate_privacy.py`, and spark-submit as scripts/example
and docs/operations.md submit it.

Each check also finds Spark's "Lost task" line (redacted) in what it read: the Spark
log really was part of the text searched, and the line that says which task failed
is still there."""

from __future__ import annotations

import subprocess
import sys

import pytest
import yaml

from tests.support.jobrun import ENV, JOB, error_lines, run_in_process, submit
from tests.support.leaks import CANARY_NUMBER, CANARY_TEXT, leaks
from tests.support.paths import ROOT
from tests.support.tables import base_frames, to_csv

pytestmark = pytest.mark.slow

O, S = base_frames()

# One field too many, and both canaries: Spark quotes the whole line (MALFORMED_CSV_RECORD)
# and the fields it parsed (MALFORMED_RECORD_IN_PARSING), number included.
MALFORMED = f"13,30,{CANARY_NUMBER},Lyon,1,1,{CANARY_TEXT}\n"


@pytest.fixture
def job_args(tmp_path) -> list[str]:
    (tmp_path / "o.csv").write_text(to_csv(O) + MALFORMED)
    (tmp_path / "s.csv").write_text(to_csv(S))
    config = {
        "dataset": "log_leaks",
        "original": {"path": "o.csv", "options": {"mode": "FAILFAST"}},
        "synthetic": {"path": "s.csv"},
        "row_key": "id",
        "metrics": {"row_direct_match": {}},
        "results": {"warehouse": str(tmp_path / "warehouse"), "database": "log_leaks"},
    }
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(config))
    return ["--config", str(path), "--run-id", "log-leaks"]


def check(code: int, output: str) -> None:
    errors = error_lines(output)
    assert code == 2, output[-5000:]
    assert len(errors) == 1 and "MALFORMED_CSV_RECORD" in errors[0], output[-5000:]
    assert "Lost task" in output, f"Spark's log is missing from the text searched:\n{output[-5000:]}"
    assert not leaks(output), output


def test_in_process(spark, job_args, request):
    """The job in this process, on the tests' session: its JVM was launched by
    build_session, and writes its log to this process's file descriptor 2, which
    pytest's fd capture holds (run_in_process sees only Python's sys.stderr)."""
    capture = request.config.pluginmanager.getplugin("capturemanager")
    if request.config.getoption("capture") != "fd" or capture is None:
        pytest.skip("the JVM's log is only readable under pytest's fd capture (the default)")
    capture.read_global_capture()  # what earlier tests left
    code, output = run_in_process(spark, job_args)
    jvm = capture.read_global_capture()
    check(code, output + jvm.out + jvm.err)


def test_plain_python(job_args):
    """`python jobs/evaluate_privacy.py`: build_session launches the JVM itself."""
    done = subprocess.run([sys.executable, str(JOB), *job_args], capture_output=True, text=True,
                          env=ENV, timeout=300)
    check(done.returncode, done.stdout + done.stderr)


def test_spark_submit(job_args, monkeypatch):
    """spark-submit with conf/spark/local.conf, from the project folder, as scripts/example
    and the local submission of docs/operations.md run it (the JVM runs before the job's Python)."""
    monkeypatch.chdir(ROOT)
    code, output = submit(job_args, spark_options=["--properties-file", "conf/spark/local.conf"])
    check(code, output)
