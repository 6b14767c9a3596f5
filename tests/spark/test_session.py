"""The driver JVM options that build_session adds when it launches the JVM itself."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from privacy_eval.session import LOCAL_GC_OPTION, driver_java_options


def _java() -> str:
    home = os.environ.get("JAVA_HOME")
    java = os.path.join(home, "bin", "java") if home else shutil.which("java")
    if not java:
        pytest.skip("no java on this machine")
    return java


def _starts(options: str) -> bool:
    return subprocess.run([_java(), *options.split(), "-version"], capture_output=True).returncode == 0


def test_local_jvm_gets_the_throughput_collector_and_the_log_file():
    options = driver_java_options(None, None, local=True)
    assert LOCAL_GC_OPTION in options.split()
    assert "-Dlog4j2.configurationFile=file:" in options
    assert _starts(options)


@pytest.mark.parametrize("own, extra", [
    ("-Xss4m -XX:+UseZGC", None),          # the caller's default options name a collector
    (None, "-XX:TieredStopAtLevel=1 -XX:+UseG1GC"),  # ... or their extra options do
])
def test_a_callers_collector_is_not_doubled(own, extra):
    """The JVM refuses two collectors ("Multiple garbage collectors selected")."""
    options = driver_java_options(own, extra, local=True)
    assert LOCAL_GC_OPTION not in options.split()
    if own:
        assert options.endswith(own)  # last, so that the caller's options win
    assert _starts(f"{options} {extra or ''}")
    assert not _starts(f"{options} {LOCAL_GC_OPTION} {extra or ''}")  # why it matters


def test_cluster_driver_gets_no_collector():
    assert LOCAL_GC_OPTION not in driver_java_options(None, None, local=False).split()


def test_dataframe_debugging_is_off_unless_the_caller_turns_it_on(spark):
    """Its call-site capture costs py4j round trips on every Column function; a caller's
    own setting (spark-submit --conf, extra_conf) still wins, as for every default."""
    from privacy_eval.session import DEFAULT_CONF

    assert spark.conf.get("spark.python.sql.dataFrameDebugging.enabled") == "false"
    assert DEFAULT_CONF["spark.python.sql.dataFrameDebugging.enabled"] == "false"


def test_arrow_batches_for_python_are_cut_by_their_row_count_alone(spark):
    """Spark measures a batch's bytes after every row unless the byte cap is Int.MaxValue
    exactly; the row cap still bounds every batch the linkage scoring sends."""
    from privacy_eval.session import DEFAULT_CONF

    assert spark.conf.get("spark.sql.execution.arrow.maxBytesPerBatch") in ("2147483647", "2147483647b")
    assert int(DEFAULT_CONF["spark.sql.execution.arrow.maxBytesPerBatch"]) == 2**31 - 1
    assert int(spark.conf.get("spark.sql.execution.arrow.maxRecordsPerBatch")) > 0
