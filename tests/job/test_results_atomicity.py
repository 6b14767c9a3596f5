"""A run's results land in both tables atomically (commit.py).

Unit level, on the tests' session: a write interrupted at every step of the commit
protocol leaves the tables exactly as they were or, after the next `ensure_tables`,
exactly as the uninterrupted write leaves them; errors, retries and the ownership of
unfinished writes. Process level: the job is SIGKILLed while it writes its results,
a fresh process reads back whole runs, and the next run succeeds.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

import pytest

from privacy_eval import commit, ownership
from privacy_eval.commit import TRANSACTIONS
from privacy_eval.errors import InputError
from privacy_eval.results import (
    AT_LEAST,
    AT_MOST,
    COLUMN_PROTECTION,
    COMMIT_STEPS,
    METRIC_RESULTS,
    TABLES,
    ColumnRow,
    CommitError,
    MetricRow,
    RunRecord,
    ensure_tables,
    write_run,
)
from tests.support.jobrun import ENV, job_command, read_back, tree_digest
from tests.support.paths import ROOT

AIRFLOW_RUN_ID = "manual__2026-11-29T12:34:15.676400+00:00"  # ':' and '+': escaped folder names
COMMIT_POINT = COMMIT_STEPS.index("committed")


class SimulatedCrash(BaseException):
    """Raised by the fault hook. Not an Exception, so write_run's clean-up after errors
    does not run: the process stops there, as if killed."""


def crash_at(step: str) -> Callable[[str], None]:
    def hook(reached: str) -> None:
        if reached == step:
            raise SimulatedCrash(step)
    return hook


def fail_at(*steps: str, times: int = 1) -> Callable[[str], None]:
    """A hook raising an ordinary error at the given steps, `times` times in all."""
    left = [times]

    def hook(reached: str) -> None:
        if reached in steps and left[0] > 0:
            left[0] -= 1
            raise RuntimeError(f"injected failure at {reached}")
    return hook


Run = tuple[RunRecord, list[MetricRow], list[ColumnRow]]


def run_data(run_id: str, version: int, with_columns: bool = True) -> Run:
    """The rows of one run; every value depends on `version`, so versions never look alike."""
    at = datetime(2026, 11, 29, 12, version, tzinfo=timezone.utc)
    record = RunRecord(
        run_id=run_id, dataset="toy", n_original=100 + version, n_synthetic=100,
        config_sha256=f"{version:064d}", input_fingerprint="f" * 64, tool_version="test",
        started_at=at, finished_at=at,
    )
    metrics = [
        MetricRow("row_direct_match_protection", 90.0 + version, "percent", 90.0,
                  numerator=version, denominator=100, details={"version": version}, comparison=AT_LEAST),
        MetricRow("linkage_success_rate", 0.01 * version, "fraction", None, numerator=version, denominator=100,
                  comparison=AT_MOST),
    ]
    columns = [ColumnRow(f"c{i}", i + version, 10, 50.0 + i + version, i + 1, None) for i in range(3)]
    return record, metrics, columns if with_columns else []


# Each scenario writes one run over the previous state (runs r1 and r2, version 1).
SCENARIOS = {
    "replace": run_data("r1", 2),                            # both tables hold r1 already
    "new": run_data(AIRFLOW_RUN_ID, 3),                      # nothing to retire
    "drop_columns": run_data("r1", 4, with_columns=False),   # column_protection loses r1
}


def steps_of(scenario: str) -> list[str]:
    """The commit steps a scenario goes through, in order."""
    absent = {"new": ("retire:",), "drop_columns": (f"publish:{COLUMN_PROTECTION}",)}.get(scenario, ())
    return [step for step in COMMIT_STEPS if not step.startswith(absent)]


@dataclass(frozen=True)
class Warehouse:
    path: Path
    database: str

    @property
    def folder(self) -> Path:
        return self.path / f"{self.database}.db"

    def register(self, spark) -> None:
        """What every job and every reader does first."""
        ensure_tables(spark, str(self.path), self.database)

    def rows(self, spark) -> dict[str, list[tuple]]:
        """Both tables as a reader of this Spark session sees them, in a fixed order."""
        return {
            table: sorted((tuple(r) for r in spark.table(f"{self.database}.{table}").collect()), key=repr)
            for table in TABLES
        }

    def table_files(self) -> dict[str, str]:
        return {table: tree_digest(self.folder / table) for table in TABLES}

    def transactions(self) -> list[str]:
        folder = self.folder / TRANSACTIONS
        return sorted(os.listdir(folder)) if folder.exists() else []


def new_warehouse(spark, path: Path, copy_of: Warehouse | None = None) -> Warehouse:
    """A registered warehouse under a database name of its own (the catalog is shared)."""
    warehouse = Warehouse(path, f"atomicity_{uuid.uuid4().hex[:12]}")
    if copy_of is not None:
        shutil.copytree(copy_of.folder, warehouse.folder)
    warehouse.register(spark)
    return warehouse


@pytest.fixture(autouse=True)
def no_hook(monkeypatch):
    monkeypatch.setattr(commit, "fault_hook", None)


@pytest.fixture(scope="module")
def previous(spark, tmp_path_factory) -> Warehouse:
    """Runs r1 and r2 (version 1): the state every interrupted write starts from."""
    warehouse = new_warehouse(spark, tmp_path_factory.mktemp("previous"))
    for run_id in ("r1", "r2"):
        write_run(spark, warehouse.database, *run_data(run_id, 1))
    return warehouse


@pytest.fixture(scope="module")
def written(spark, previous, tmp_path_factory) -> dict[str, Warehouse]:
    """Each scenario written over the previous state without a fault; checks on the way
    that the write goes through its steps in order and leaves no transaction."""
    warehouses = {}
    for scenario, data in SCENARIOS.items():
        warehouse = new_warehouse(spark, tmp_path_factory.mktemp(scenario), copy_of=previous)
        steps: list[str] = []
        commit.fault_hook = steps.append
        try:
            write_run(spark, warehouse.database, *data)
        finally:
            commit.fault_hook = None
        assert steps == steps_of(scenario)
        assert warehouse.transactions() == []
        warehouses[scenario] = warehouse
    return warehouses


@pytest.fixture(scope="module")
def outcomes(spark, previous, written) -> dict[str, dict[str, list[tuple]]]:
    """What readers must find: the previous state ("old"), or a scenario's new run."""
    return {"old": previous.rows(spark), **{scenario: w.rows(spark) for scenario, w in written.items()}}


def run_ids(rows: list[tuple]) -> list[str]:
    return sorted({row[-1] for row in rows})  # run_id is the last column


def of_run(rows: list[tuple], run_id: str) -> list[tuple]:
    return [row for row in rows if row[-1] == run_id]


# --------------------------------------------------------------------------
# unit level
# --------------------------------------------------------------------------


def test_runs_land_side_by_side_and_a_rerun_replaces_only_its_own(outcomes, written):
    old = outcomes["old"]
    assert run_ids(old[METRIC_RESULTS]) == run_ids(old[COLUMN_PROTECTION]) == ["r1", "r2"]
    assert len(of_run(old[METRIC_RESULTS], "r1")) == 2 and len(of_run(old[COLUMN_PROTECTION], "r1")) == 3

    for scenario, run_id, version in (("replace", "r1", 2), ("new", AIRFLOW_RUN_ID, 3), ("drop_columns", "r1", 4)):
        new = outcomes[scenario]
        for table in TABLES:
            # Every other run is untouched, row for row.
            for other in set(run_ids(old[table])) - {run_id}:
                assert of_run(new[table], other) == of_run(old[table], other), (scenario, table)
        rows = of_run(new[METRIC_RESULTS], run_id)
        assert len(rows) == 2 and {row[12] for row in rows} == {f"{version:064d}"}  # config_sha256
        expected_columns = 0 if scenario == "drop_columns" else 3
        assert len(of_run(new[COLUMN_PROTECTION], run_id)) == expected_columns, scenario

    # One folder per run and table, named as Spark names partitions.
    assert sorted(os.listdir(written["new"].folder / METRIC_RESULTS)) == [
        "run_id=manual__2026-11-29T12%3A34%3A15.676400+00%3A00", "run_id=r1", "run_id=r2"]
    assert sorted(os.listdir(written["drop_columns"].folder / COLUMN_PROTECTION)) == ["run_id=r2"]


# Every step of a write that replaces a run; for the other two shapes of journal (nothing
# to retire; a table left without the run), the steps where they differ from it.
CRASH_CASES = [("replace", step) for step in steps_of("replace")] + [
    ("new", "committed"),
    ("new", f"publish:{COLUMN_PROTECTION}"),
    ("drop_columns", f"retire:{COLUMN_PROTECTION}"),
    ("drop_columns", f"publish:{METRIC_RESULTS}"),
]


@pytest.mark.parametrize("scenario, step", CRASH_CASES)
def test_a_crash_at_any_step_leaves_the_old_state_or_the_new_run(
    spark, previous, outcomes, tmp_path, monkeypatch, scenario, step
):
    warehouse = new_warehouse(spark, tmp_path, copy_of=previous)
    before = warehouse.table_files()
    monkeypatch.setattr(commit, "fault_hook", crash_at(step))
    with pytest.raises(SimulatedCrash):
        write_run(spark, warehouse.database, *SCENARIOS[scenario])
    monkeypatch.setattr(commit, "fault_hook", None)

    committed = COMMIT_STEPS.index(step) >= COMMIT_POINT
    assert len(warehouse.transactions()) == 1  # the crash left its transaction behind
    if not committed:
        assert warehouse.table_files() == before  # not a byte of the tables changed

    warehouse.register(spark)  # the next job, or a reader
    assert warehouse.transactions() == []
    assert warehouse.rows(spark) == outcomes[scenario if committed else "old"]
    if not committed:
        assert warehouse.table_files() == before


@pytest.mark.parametrize("step", [f"staged:{METRIC_RESULTS}", "committed"])
def test_an_error_before_the_first_rename_changes_nothing_and_leaves_nothing(
    spark, previous, outcomes, tmp_path, monkeypatch, step
):
    warehouse = new_warehouse(spark, tmp_path, copy_of=previous)
    before = warehouse.table_files()
    monkeypatch.setattr(commit, "fault_hook", fail_at(step))
    with pytest.raises(RuntimeError, match="injected"):
        write_run(spark, warehouse.database, *SCENARIOS["replace"])
    assert warehouse.transactions() == []
    assert warehouse.table_files() == before
    assert warehouse.rows(spark) == outcomes["old"]


def test_failed_renames_are_retried_and_a_committed_run_is_completed_later(
    spark, previous, outcomes, tmp_path, monkeypatch
):
    monkeypatch.setattr(commit, "APPLY_BACKOFF_SECONDS", 0.0)
    # One failing rename after the commit point: tried again, the write succeeds.
    warehouse = new_warehouse(spark, tmp_path / "once", copy_of=previous)
    monkeypatch.setattr(commit, "fault_hook", fail_at(f"retire:{METRIC_RESULTS}"))
    write_run(spark, warehouse.database, *SCENARIOS["replace"])
    assert warehouse.transactions() == []
    assert warehouse.rows(spark) == outcomes["replace"]

    # Renames failing on every attempt: the run is committed, the next ensure_tables completes it.
    warehouse = new_warehouse(spark, tmp_path / "always", copy_of=previous)
    renames = [step for step in COMMIT_STEPS if step.startswith(("retire:", "publish:"))]
    monkeypatch.setattr(commit, "fault_hook", fail_at(*renames, times=len(renames)))
    with pytest.raises(CommitError, match="committed"):
        write_run(spark, warehouse.database, *SCENARIOS["replace"])
    monkeypatch.setattr(commit, "fault_hook", None)
    assert len(warehouse.transactions()) == 1
    warehouse.register(spark)
    assert warehouse.transactions() == []
    assert warehouse.rows(spark) == outcomes["replace"]


def test_recovery_leaves_a_write_in_progress_alone(spark, previous, outcomes, tmp_path, monkeypatch):
    warehouse = new_warehouse(spark, tmp_path, copy_of=previous)
    seen = []

    def another_job_starts(step: str) -> None:
        if step in (f"staged:{METRIC_RESULTS}", "committed"):
            warehouse.register(spark)
            seen.append(len(warehouse.transactions()))

    monkeypatch.setattr(commit, "fault_hook", another_job_starts)
    write_run(spark, warehouse.database, *SCENARIOS["replace"])
    assert seen == [1, 1]
    assert warehouse.transactions() == []
    assert warehouse.rows(spark) == outcomes["replace"]


def own_crashed_transaction(spark, previous: Warehouse, path: Path, monkeypatch, step: str) -> tuple[Warehouse, str]:
    warehouse = new_warehouse(spark, path, copy_of=previous)
    monkeypatch.setattr(commit, "fault_hook", crash_at(step))
    with pytest.raises(SimulatedCrash):
        write_run(spark, warehouse.database, *SCENARIOS["replace"])
    monkeypatch.setattr(commit, "fault_hook", None)
    [name] = warehouse.transactions()
    return warehouse, name


def rename_transaction(warehouse: Warehouse, name: str, owner: str) -> str:
    """Make a transaction look owned by another process: `owner` is machine-pid-start."""
    new_name = f"{uuid.uuid4().hex}-{owner}"
    (warehouse.folder / TRANSACTIONS / name).rename(warehouse.folder / TRANSACTIONS / new_name)
    return new_name


def test_a_write_whose_owner_runs_elsewhere_is_recovered_only_once_stale(
    spark, previous, outcomes, tmp_path, monkeypatch
):
    warehouse, name = own_crashed_transaction(spark, previous, tmp_path, monkeypatch, f"retire:{METRIC_RESULTS}")
    # Written by a process on another machine: this one cannot tell whether it still runs.
    foreign = rename_transaction(warehouse, name, f"{'f' * 12}-1-1")
    warehouse.register(spark)
    assert warehouse.transactions() == [foreign]  # left alone while it may be in progress
    monkeypatch.setattr(ownership, "STALE_AFTER_SECONDS", 0.0)
    warehouse.register(spark)
    assert warehouse.transactions() == []
    assert warehouse.rows(spark) == outcomes["replace"]


def test_a_write_whose_owner_died_on_this_machine_is_recovered_at_once(
    spark, previous, outcomes, tmp_path, monkeypatch
):
    warehouse, name = own_crashed_transaction(spark, previous, tmp_path, monkeypatch, f"publish:{COLUMN_PROTECTION}")
    finished = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                              capture_output=True, text=True, check=True)
    machine = name.split("-")[1]
    rename_transaction(warehouse, name, f"{machine}-{int(finished.stdout)}-1")
    warehouse.register(spark)
    assert warehouse.transactions() == []
    assert warehouse.rows(spark) == outcomes["replace"]


# --------------------------------------------------------------------------
# process level: SIGKILL while the job writes
# --------------------------------------------------------------------------

EXACT_CONFIG = """\
dataset: wbcd_exact
original:
  path: DATA/original.csv
synthetic:
  path: DATA/avatar_k20.csv
row_key: "@position"
exclude: [Sample_code_number]
categorical: [Class]
metrics:
  row_direct_match: {target: 90}
  column_direct_match: {target: 50}
  knowledge_protection:
    known_variables: [Clump_Thickness, Bare_Nuclei, Class]
    target: 95
results:
  warehouse: WAREHOUSE
  database: privacy_eval
"""
STRICTER = ["--set", "metrics.row_direct_match.target=99", "--set", "metrics.column_direct_match.target=99"]


def start_job(config: Path, run_id: str, args: list[str], log: Path,
              env: dict[str, str] | None = None) -> subprocess.Popen:
    """spark-submit in a process group of its own, so that one signal stops all of it."""
    command = job_command(["--config", str(config), "--run-id", run_id, *args])
    with open(log, "w") as out:
        return subprocess.Popen(command, env={**ENV, **(env or {})}, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)


def kill_while_writing(config: Path, run_id: str, args: list[str], step: str, folder: Path) -> None:
    """Run the job until its commit reaches `step`, then SIGKILL it (driver and JVM)."""
    name = step.replace(":", "-")
    paused, log = folder / f"paused-at-{name}", folder / f"killed-at-{name}.log"
    job = start_job(config, run_id, args, log, env={commit.PAUSE_ENV: step, commit.PAUSE_SIGNAL_ENV: str(paused)})
    try:
        deadline = time.monotonic() + 300
        while not paused.exists():
            assert job.poll() is None, f"the job ended before {step}:\n" + log.read_text()[-3000:]
            assert time.monotonic() < deadline, f"the job did not reach {step}"
            time.sleep(0.1)
    finally:
        os.killpg(job.pid, signal.SIGKILL)
        job.wait(timeout=60)


def by_run(rows: list[dict], *leave_out: str) -> dict[str, list[dict]]:
    """Rows (as dicts) grouped by run id, without the columns named, in a fixed order."""
    runs: dict[str, list[dict]] = {}
    for row in rows:
        runs.setdefault(row["run_id"], []).append({k: v for k, v in row.items() if k not in leave_out})
    return {run_id: sorted(group, key=repr) for run_id, group in runs.items()}


@pytest.mark.slow
def test_a_job_killed_while_writing_leaves_whole_runs_and_the_next_run_succeeds(spark, previous, tmp_path):
    # The job's tables start as the previous state of the unit tests: runs r1 and r2.
    # (Copied, not registered here: this Spark session's catalog never learns the job's database.)
    warehouse = tmp_path / "warehouse"
    database = warehouse / "privacy_eval.db"
    shutil.copytree(previous.folder, database)
    config = tmp_path / "exact.yaml"
    config.write_text(EXACT_CONFIG.replace("DATA", str(ROOT / "tests" / "data" / "wbcd"))
                      .replace("WAREHOUSE", str(warehouse)))
    before = {table: tree_digest(database / table) for table in TABLES}
    r2 = {table: [row for row in previous.rows(spark)[table] if row[-1] == "r2"] for table in TABLES}

    # Killed before the commit point: not a byte of the tables changes.
    kill_while_writing(config, "r1", STRICTER, f"staged:{METRIC_RESULTS}", tmp_path)
    assert {table: tree_digest(database / table) for table in TABLES} == before
    assert len(os.listdir(database / TRANSACTIONS)) == 1

    # Killed between the two tables: column_protection has the new run, metric_results the
    # old. A fresh process reading the tables completes the commit: it sees the whole new run.
    kill_while_writing(config, "r1", STRICTER, f"publish:{COLUMN_PROTECTION}", tmp_path)
    state = read_back(warehouse)
    assert os.listdir(database / TRANSACTIONS) == []  # both leftovers handled
    metrics = by_run(state[METRIC_RESULTS])
    columns = by_run(state[COLUMN_PROTECTION])
    assert sorted(metrics) == sorted(columns) == ["r1", "r2"]
    assert sorted(row["metric"] for row in metrics["r1"]) == [
        "column_direct_match_protection", "knowledge_protection_rate", "row_direct_match_protection"]
    assert all(row["target"] == 99 for row in metrics["r1"] if row["metric"] != "knowledge_protection_rate")
    assert len(columns["r1"]) == 10 and any(row["below_target"] for row in columns["r1"])  # judged against 99
    assert sorted(row["value"] for row in metrics["r2"]) == sorted(row[2] for row in r2[METRIC_RESULTS])
    assert len(columns["r2"]) == len(r2[COLUMN_PROTECTION])

    # The next run succeeds; read from the files, r1 equals it but for the id and the times.
    job = start_job(config, "r3", STRICTER, tmp_path / "next.log")
    assert job.wait(timeout=300) == 0, (tmp_path / "next.log").read_text()[-3000:]
    assert os.listdir(database / TRANSACTIONS) == []
    for table in TABLES:
        rows = [row.asDict() for row in spark.read.parquet(str(database / table)).collect()]
        runs = by_run(rows, "run_id", "started_at", "finished_at")
        assert sorted(runs) == ["r1", "r2", "r3"], table
        assert runs["r1"] == runs["r3"], table


def test_a_database_name_stays_with_its_first_warehouse_in_a_session(spark, tmp_path):
    """A long-lived session (a notebook) that registered a database in one warehouse
    and is then pointed at another under the same name is refused, instead of writing
    the second evaluation into the first warehouse."""
    first = new_warehouse(spark, tmp_path / "first")
    ensure_tables(spark, str(tmp_path / "first"), first.database)  # the same place again: fine
    with pytest.raises(InputError, match=f"'{first.database}' is already registered"):
        ensure_tables(spark, str(tmp_path / "second"), first.database)


# --------------------------------------------------------------------------
# two writers of one run id at once (ownership.py, "Concurrent writers")
# --------------------------------------------------------------------------


def locks(warehouse: Warehouse) -> list[str]:
    folder = warehouse.folder / ownership.LOCKS
    return sorted(os.listdir(folder)) if folder.exists() else []


def test_a_second_writer_of_the_run_waits_for_the_first_then_replaces_its_run(
    spark, previous, tmp_path, monkeypatch
):
    """The overlap is forced: the first writer stops after staging, starts the second
    (in a thread) and goes on only once the second waits for the lock."""
    expected = new_warehouse(spark, tmp_path / "expected", copy_of=previous)
    write_run(spark, expected.database, *run_data("r1", 5))
    warehouse = new_warehouse(spark, tmp_path / "both", copy_of=previous)
    monkeypatch.setattr(ownership, "LOCK_POLL_SECONDS", 0.05)
    first = threading.current_thread()
    second_waits, errors, seen, threads = threading.Event(), [], [], []

    def second() -> None:
        try:
            write_run(spark, warehouse.database, *run_data("r1", 5))
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            errors.append(exc)
            second_waits.set()

    def hook(step: str) -> None:
        if threading.current_thread() is not first:
            seen.append(step)
            if step == "lock_wait":
                second_waits.set()
        elif step == f"staged:{METRIC_RESULTS}" and not seen:
            seen.append("started")
            threads.append(threading.Thread(target=second, name="second-writer", daemon=True))
            threads[0].start()
            assert second_waits.wait(120), "the second writer never waited"
            assert not errors, errors

    monkeypatch.setattr(commit, "fault_hook", hook)
    write_run(spark, warehouse.database, *SCENARIOS["replace"])  # r1, version 2
    threads[0].join(120)
    assert not threads[0].is_alive(), "the second writer did not finish"
    monkeypatch.setattr(commit, "fault_hook", None)
    assert not errors, errors
    # The second writer staged nothing before it had the lock, then went through every step.
    assert seen[:2] == ["started", "lock_wait"] and seen[2:] == steps_of("replace")
    assert warehouse.transactions() == [] and locks(warehouse) == []
    assert warehouse.rows(spark) == expected.rows(spark)  # the second run, whole, in both tables


def test_a_second_writer_that_waits_too_long_writes_nothing_and_says_why(
    spark, previous, outcomes, tmp_path, monkeypatch
):
    warehouse = new_warehouse(spark, tmp_path, copy_of=previous)
    monkeypatch.setattr(ownership, "LOCK_WAIT_SECONDS", 0.3)
    monkeypatch.setattr(ownership, "LOCK_POLL_SECONDS", 0.05)
    refused = []

    def hook(step: str) -> None:
        if step == f"staged:{METRIC_RESULTS}" and not refused:
            refused.append(None)
            before = warehouse.table_files()
            with pytest.raises(CommitError, match="being written by another process") as info:
                write_run(spark, warehouse.database, *run_data("r1", 6))
            refused[0] = str(info.value)
            assert warehouse.table_files() == before
            assert len(warehouse.transactions()) == 1  # the first writer's only

    monkeypatch.setattr(commit, "fault_hook", hook)
    write_run(spark, warehouse.database, *SCENARIOS["replace"])
    assert refused[0] and "nothing was written" in refused[0] and "run r1" in refused[0]
    assert warehouse.transactions() == [] and locks(warehouse) == []
    assert warehouse.rows(spark) == outcomes["replace"]  # the first writer's run, whole


def test_the_lock_of_a_writer_that_died_is_broken(spark, previous, outcomes, tmp_path):
    warehouse = new_warehouse(spark, tmp_path, copy_of=previous)
    finished = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                              capture_output=True, text=True, check=True)
    dead = f"{uuid.uuid4().hex}-{ownership.machine()}-{int(finished.stdout)}-1"
    (warehouse.folder / ownership.LOCKS).mkdir(exist_ok=True)
    (warehouse.folder / ownership.LOCKS / "run_id=r1").write_text(dead)
    started = time.monotonic()
    write_run(spark, warehouse.database, *SCENARIOS["replace"])
    assert time.monotonic() - started < 60
    assert locks(warehouse) == []
    assert warehouse.rows(spark) == outcomes["replace"]
