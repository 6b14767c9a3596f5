"""Running the job's real entry point (jobs/evaluate_privacy.py) from tests.

In-process (`run_in_process`): the script runs as `__main__` in the test interpreter;
its session factory's getOrCreate returns the tests' shared SparkSession, so a run
costs its Spark jobs only, not a JVM start. What the job changes on that session is put
back afterwards (log level), and the caller gets the exit code and the combined output.
Through spark-submit (`submit`): a real driver process, as a scheduler runs it.
"""

from __future__ import annotations

import hashlib
import io
import json
import logging
import os
import runpy
import subprocess
import sys
import textwrap
from collections.abc import Mapping, Sequence
from contextlib import ExitStack, redirect_stderr, redirect_stdout
from pathlib import Path
from unittest import mock

from pyspark.logger import PySparkLogger

from privacy_eval.errors import SPARK_CONTEXT_LOGGERS
from tests.support.paths import ROOT

__all__ = ["C1_ONLY", "ENV", "FAST", "JOB", "SPARK_SUBMIT", "error_lines", "job_command", "persisted_rdds", "read_back",
           "run_in_process", "submit", "tree_digest"]

SPARK_SUBMIT = Path(sys.executable).parent / "spark-submit"
JOB = ROOT / "jobs" / "evaluate_privacy.py"
ENV = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable,
       "SPARK_LOCAL_IP": "127.0.0.1"}
# Short-lived JVMs: the C1 compiler alone starts faster (a WBCD run of every metric is
# markedly shorter; it would slow a large evaluation down, so only tests use it).
C1_ONLY = "-XX:TieredStopAtLevel=1"
# extraJavaOptions: conf/spark/local.conf's defaultJavaOptions (the log configuration)
# stay; a test's own --driver-java-options replaces it, so it adds C1_ONLY itself.
FAST = ["--conf", "spark.sql.shuffle.partitions=4", "--conf", "spark.ui.enabled=false",
        "--conf", f"spark.driver.extraJavaOptions={C1_ONLY}"]

# The level tests/conftest.py gives the shared session; the job sets its own.
TEST_LOG_LEVEL = "ERROR"


def run_in_process(spark, args: Sequence[str]) -> tuple[int, str]:
    """Run `jobs/evaluate_privacy.py ARGS` in this process; (exit code, stdout + stderr).

    The job writes its summary and its `error:` line through sys.stdout/sys.stderr,
    which are redirected here; its log records go to pytest's log capture.
    """
    out, err = io.StringIO(), io.StringIO()
    code: int | str | None = None
    with ExitStack() as stack:
        stack.enter_context(mock.patch.object(sys, "argv", [str(JOB), *args]))
        stack.enter_context(redirect_stdout(out))
        stack.enter_context(redirect_stderr(err))
        # PySpark's own error loggers write to the stream they found when created.
        for name in SPARK_CONTEXT_LOGGERS:
            for handler in PySparkLogger.getLogger(name).handlers:
                previous = handler.setStream(err) if isinstance(handler, logging.StreamHandler) else None
                if previous is not None:
                    stack.callback(handler.setStream, previous)
        try:
            runpy.run_path(str(JOB), run_name="__main__")
        except SystemExit as exc:
            code = exc.code
        finally:
            spark.sparkContext.setLogLevel(TEST_LOG_LEVEL)
    assert isinstance(code, int), f"the entry point must end with sys.exit(<int>), got {code!r}"
    return code, out.getvalue() + err.getvalue()


def job_command(args: Sequence[str], spark_options: Sequence[str] = ()) -> list[str]:
    """spark-submit of the job on local[2] with the tests' FAST settings."""
    return [str(SPARK_SUBMIT), "--master", "local[2]", *FAST, *spark_options, str(JOB), *args]


def submit(args: Sequence[str], env: Mapping[str, str] | None = None,
           spark_options: Sequence[str] = ()) -> tuple[int, str]:
    """Run the job through spark-submit on local[2]; (exit code, stdout + stderr).

    spark-submit hands the Python driver's stderr on through its stdout and prints the
    Spark log on stderr: together they are the driver log.
    """
    done = subprocess.run(job_command(args, spark_options), capture_output=True, text=True, env={**ENV, **(env or {})}, timeout=300)
    return done.returncode, done.stdout + done.stderr


def error_lines(output: str) -> list[str]:
    return [line for line in output.splitlines() if line.startswith("error:")]


def persisted_rdds(spark) -> int:
    """How many RDDs (materialised caches among them) the session holds."""
    return int(spark.sparkContext._jsc.getPersistentRDDs().size())


def read_back(warehouse: Path) -> dict:
    """Read both tables in a new process with a new Spark session, as a dashboard would."""
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
