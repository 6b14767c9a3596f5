"""One SparkSession for the whole test session, configured for small data (tiny
tables start faster that way): two shuffle partitions, no UI, no adaptive execution.
After each test that used it, its cache and temporary views are cleared, so that no
test sees what another left behind.

scripts/test runs the suite in two pytest-xdist workers (each its own process, so its
own session): the tests mostly wait on JVMs and subprocesses, not on the CPU. Each
module's tests run in one worker, one after the other (module fixtures are built once,
and a session registers a results database to one warehouse only), and the modules with
slow tests (spark-submit runs, a cluster, Airflow's venv) come first, so that no worker
is left with one of them at the end while the other is done.

The tests are laid out by what they need: tests/unit (no JVM), tests/spark (this
session), tests/job (the entry script or spark-submit), tests/airflow (the DAG, in
Airflow's own venv); their helpers are in tests/support."""

from __future__ import annotations

import os
import sys

import pytest

# Workers must run this interpreter (with pandas and pyarrow), not the system python3.
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    slow_modules = {item.path for item in items if item.get_closest_marker("slow")}
    items.sort(key=lambda item: item.path not in slow_modules)  # stable: modules stay whole
    for item in items:  # --dist loadgroup: a group runs in one worker
        if item.get_closest_marker("xdist_group") is None:
            item.add_marker(pytest.mark.xdist_group(str(item.path.relative_to(item.config.rootpath))))


@pytest.fixture(scope="session")
def spark(tmp_path_factory):
    from privacy_eval.session import build_session
    from tests.support.jobrun import C1_ONLY

    scratch = tmp_path_factory.mktemp("spark")
    session = build_session(
        "privacy-eval-tests",
        extra_conf={
            "spark.master": "local[2]",
            "spark.sql.shuffle.partitions": "2",
            "spark.default.parallelism": "2",
            "spark.ui.enabled": "false",
            "spark.sql.adaptive.enabled": "false",
            "spark.driver.memory": "2g",
            "spark.sql.warehouse.dir": str(scratch / "warehouse"),
            "spark.driver.extraJavaOptions": C1_ONLY,
        },
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@pytest.fixture(autouse=True)
def _clean_spark_state(request):
    """Clear the shared session's cache and temporary views after each test that used it
    (only then: a unit test must not start a JVM)."""
    yield
    if "spark" not in request.fixturenames:
        return
    session = request.getfixturevalue("spark")
    session.catalog.clearCache()
    for table in session.catalog.listTables():
        if table.isTemporary:
            session.catalog.dropTempView(table.name)


@pytest.fixture
def sql_conf(spark):
    """Set session confs for one test and restore them afterwards."""
    saved: dict[str, str | None] = {}

    def setter(values: dict[str, str]) -> None:
        for key, value in values.items():
            saved.setdefault(key, spark.conf.get(key, None))
            spark.conf.set(key, value)

    yield setter
    for key, value in saved.items():
        if value is None:
            spark.conf.unset(key)
        else:
            spark.conf.set(key, value)


@pytest.fixture
def forced_digests(monkeypatch):
    """The occurrences counted by row digests (frames.digested_occurrences) whatever the
    inputs' width and size; the list it returns gets the `keep` of every such count, so
    that a test can show the route was taken."""
    from privacy_eval import frames

    routes: list[list[str]] = []
    digested = frames.digested_occurrences

    def spied(original, synthetic, columns, keep, n_rows):
        routes.append(list(keep))
        return digested(original, synthetic, columns, keep, n_rows)

    monkeypatch.setattr(frames, "digested_occurrences", spied)
    monkeypatch.setattr(frames, "DIGEST_MIN_COLUMNS", 0)
    monkeypatch.setattr(frames, "DIGEST_MIN_ROWS", 0)
    return routes
