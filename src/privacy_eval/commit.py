"""The commit protocol of the results tables: a run's partitions replaced in several
tables at once, or not at all (results.py writes the tables through it).

Spark's own partition overwrite is not atomic: its commit deletes the old partition
folder, then renames the new one in, one table after the other. A kill in between loses
the old partition, or leaves the two tables describing different runs. `replace_run`
therefore commits with a small journal, through the Hadoop FileSystem API (local disks,
HDFS, any Hadoop file system whose directory rename is atomic):

1. Stage. Create `<database>.db/_transactions/<txn>/`; Spark writes each table's new
   partition under `<txn>/staged/<table>/`. Nothing a reader sees has changed.
2. Commit. Write the journal, the ordered list of renames: per table, `retire` (the
   old partition, if any, to `<txn>/trash/<table>/`) then `publish` (the staged
   partition, if the table has rows, into the table). It is written as `journal.tmp`
   and renamed to `journal.json`: that atomic rename is the commit point.
3. Apply the renames in order (column_protection first: dashboards find a run through
   metric_results, so that table changes last). A rename whose target already exists
   was done before and is skipped, so applying is idempotent and is retried.
4. Finish. Tell the catalog (ADD/DROP PARTITION, refresh), delete the journal, then the
   transaction folder with the trash.

`ensure_tables` (every job and every reader calls it) recovers transactions whose owner
is gone, before RECOVER PARTITIONS: a journal is applied (rolled forward, so the reader
sees the complete new run); a folder without one is deleted (the old state stands).

What a crash (SIGKILL, OOM kill, lost node) leaves, and what the next `ensure_tables`
does:

    crash during / after     tables on disk                next ensure_tables
    stage, journal.tmp        unchanged                     deletes the transaction
    commit, some renames      partly old, partly new        applies the rest: new run
    all renames, cleanup      new run                       deletes the leftovers

An exception (not a crash) before the first rename deletes the transaction and
propagates: the tables are exactly as before. Once renaming has begun the run is
committed: a failed rename is tried again (APPLY_ATTEMPTS); if it keeps failing,
`CommitError` says so and the next `ensure_tables` completes the run.

A transaction is recovered only when its owner is gone (ownership.py: at once on the
same machine, after STALE_AFTER_SECONDS otherwise), so jobs writing other run ids at
the same time never disturb each other. A recoverer first claims a transaction by
renaming its folder to a name of its own (atomic: one winner), so two recoverers never
apply one journal. Two writers of one run id take turns through the run's lock
(ownership.py, "Concurrent writers"). The file system is reached through Hadoop's
FileSystem API (hadoop_files.py).

Limits:

* Object stores without atomic rename (S3 through s3a, GCS, Azure Blob without HNS):
  a directory rename is a copy and delete, file by file, so a crash can leave a
  half-published partition and a reader can see one mid-way. The guarantee does NOT hold
  there. Keep `results.warehouse` on HDFS, ADLS Gen2 with hierarchical namespace, or a
  local/NFS disk; for object stores use a table format whose commit is one atomic
  metadata update (Apache Iceberg or Delta Lake with a catalog).
* Crash atomicity, not snapshot isolation: a reader running during the few
  milliseconds of renames can see the intermediate state. After a crash in that window
  on another machine, readers see it until STALE_AFTER_SECONDS have passed and an
  `ensure_tables` completes the run.
* Process crashes are covered. Machine crashes are covered on file systems that persist
  files on close (HDFS); on a local disk Spark does not fsync its Parquet files.
* Needs a classic Spark session with a JVM (spark-submit, pyspark), not Spark Connect.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from pyspark.sql import DataFrame, SparkSession

from privacy_eval.errors import CommitError
from privacy_eval.frames import quote
from privacy_eval.hadoop_files import DatabaseFiles
from privacy_eval.ownership import ACTIVE, abandoned, new_transaction_name, release_lock, take_lock

log = logging.getLogger(__name__)

# In the database folder, beside the table folders: Spark never lists it.
TRANSACTIONS = "_transactions"
JOURNAL = "journal.json"
JOURNAL_TMP = "journal.tmp"
#: Applying a committed journal is idempotent, so a failed rename is simply tried again,
#: after a pause growing by this much per attempt.
APPLY_ATTEMPTS = 3
APPLY_BACKOFF_SECONDS = 0.5


def commit_steps(tables: Sequence[str]) -> tuple[str, ...]:
    """The steps of a commit of `tables` (in commit order), in order. Steps before
    "committed" change nothing a reader sees."""
    return (
        "begin",
        *(f"staged:{table}" for table in tables),
        "journal_tmp",
        "committed",
        *(f"{action}:{table}" for table in tables for action in ("retire", "publish")),
        "applied",
        "journal_deleted",
    )


#: Test seam: when set, called with each step of `commit_steps` as it completes (a test
#: raises from it to interrupt the commit there). None in production.
fault_hook: Callable[[str], None] | None = None
#: Test seam for kill tests: with PRIVACY_EVAL_TEST_PAUSE_AT=<step> in the environment
#: the process stops for good at that step, after creating the file named by
#: PRIVACY_EVAL_TEST_PAUSE_SIGNAL (if set). Without the variable it does nothing.
PAUSE_ENV = "PRIVACY_EVAL_TEST_PAUSE_AT"
PAUSE_SIGNAL_ENV = "PRIVACY_EVAL_TEST_PAUSE_SIGNAL"


def replace_run(spark: SparkSession, database: str, run_id: str, staged: Mapping[str, DataFrame | None]) -> None:
    """Replace run `run_id`'s partition in every table of `staged`, atomically (see the
    module docstring); the tables change in the order of `staged`.

    `staged` maps each table to the run's rows (a frame with the table's schema and
    run_id last), or to None: that table loses the run's earlier partition. The tables
    must be registered in this Spark session.
    """
    tables = tuple(staged)
    files = DatabaseFiles(spark, database)
    partition = _partition_folder(spark, run_id)
    txn = new_transaction_name()
    ACTIVE.add(txn)
    applying = False
    try:
        take_lock(files, partition, run_id, txn, on_wait=lambda: _checkpoint("lock_wait"))
    except BaseException:
        ACTIVE.discard(txn)
        raise
    try:
        files.mkdirs(_in_transaction(txn))
        _checkpoint("begin")
        for table, frame in staged.items():
            if frame is not None:
                # The staged folder is new, so mode "error".
                target = files.uri(_in_transaction(txn, "staged", table))
                frame.write.partitionBy("run_id").mode("error").parquet(target)
            _checkpoint(f"staged:{table}")
        journal = _plan(files, txn, run_id, partition, tables, [t for t, f in staged.items() if f is not None])
        _write_journal(files, txn, journal)
        _checkpoint("committed")
        applying = True
        _apply(files, txn, journal)
        _sync_catalog(spark, database, files, journal, tables)
        _checkpoint("applied")
        _remove_transaction(files, txn)
    except Exception:
        if not applying:
            _remove_transaction(files, txn)  # nothing was renamed: the tables are as before
        raise
    finally:
        release_lock(files, partition, txn)
        ACTIVE.discard(txn)


def recover(spark: SparkSession, database: str, tables: Sequence[str]) -> None:
    """Complete (journal) or remove (no journal) the transactions of `database` whose
    owner is gone; `tables` are all its tables, in commit order."""
    files = DatabaseFiles(spark, database)
    for name in files.list_dirs(TRANSACTIONS):
        if not abandoned(files, name, _in_transaction(name)):
            continue
        txn = new_transaction_name()
        ACTIVE.add(txn)
        try:
            # Claim it: of several processes recovering at once, one rename wins.
            if not files.move(_in_transaction(name), _in_transaction(txn)):
                continue
            journal = files.read_json(_in_transaction(txn, JOURNAL))
            if journal is None:
                log.warning("results: removed an unfinished write left by a stopped process (it was not committed)")
            else:
                _apply(files, txn, journal)
                _sync_catalog(spark, database, files, journal, tables)
                log.warning("results: completed the commit of run %s left by a stopped process", journal["run_id"])
            _remove_transaction(files, txn)
        finally:
            ACTIVE.discard(txn)


# --------------------------------------------------------------------------
# the steps
# --------------------------------------------------------------------------


def _in_transaction(txn: str, *names: str) -> str:
    return "/".join((TRANSACTIONS, txn, *names))


def _move_paths(txn: str, action: str, table: str, partition: str) -> tuple[str, str]:
    """Source and target of one journal step, relative to the database folder.

    The journal holds steps, not paths: a recoverer renames the transaction's folder
    when it claims it, and the warehouse may be reached under another URI later.
    """
    final = f"{table}/{partition}"
    if action == "retire":
        return final, _in_transaction(txn, "trash", table, partition)
    if action == "publish":
        return _in_transaction(txn, "staged", table, partition), final
    raise CommitError(f"unknown journal step '{action}'")


def _plan(
    files: DatabaseFiles, txn: str, run_id: str, partition: str, tables: Sequence[str], staged: Sequence[str]
) -> dict[str, Any]:
    """The journal: the renames that replace the run's partition in every table."""
    steps: list[list[str]] = []
    for table in tables:
        if files.exists(f"{table}/{partition}"):
            files.mkdirs(_in_transaction(txn, "trash", table))  # a rename needs its target's parent
            steps.append(["retire", table])
        if table in staged:
            source, _ = _move_paths(txn, "publish", table, partition)
            if not files.exists(source):
                raise CommitError(f"results: Spark staged no partition folder for {table}")
            steps.append(["publish", table])
    return {"format": 1, "run_id": run_id, "partition": partition, "steps": steps}


def _write_journal(files: DatabaseFiles, txn: str, journal: dict[str, Any]) -> None:
    """Write the journal under a temporary name, then rename it: the commit point."""
    temporary, final = _in_transaction(txn, JOURNAL_TMP), _in_transaction(txn, JOURNAL)
    files.write_json(temporary, journal)
    _checkpoint("journal_tmp")
    if not files.move(temporary, final):
        raise CommitError("results: the journal vanished before it could be committed")


def _apply(files: DatabaseFiles, txn: str, journal: dict[str, Any]) -> None:
    """Do the journal's renames in order, skipping those done before; retried."""
    for attempt in range(1, APPLY_ATTEMPTS + 1):
        try:
            for action, table in journal["steps"]:
                source, target = _move_paths(txn, action, table, journal["partition"])
                if files.exists(target):
                    continue  # done before an interruption
                if not files.move(source, target):
                    # Neither exists: someone else changed the run since; nothing to move.
                    log.warning("results: %s of %s for run %s found nothing to move", action, table, journal["run_id"])
                    continue
                _checkpoint(f"{action}:{table}")
            return
        except Exception as exc:
            if attempt == APPLY_ATTEMPTS:
                raise CommitError(
                    f"results of run {journal['run_id']} are committed but could not be put in place "
                    f"({type(exc).__name__}); the next ensure_tables on this warehouse completes them"
                ) from exc
            log.warning("results: a rename failed (%s); trying again", type(exc).__name__)
            time.sleep(APPLY_BACKOFF_SECONDS * attempt)


def _sync_catalog(
    spark: SparkSession, database: str, files: DatabaseFiles, journal: dict[str, Any], tables: Sequence[str]
) -> None:
    """Make the Spark session's catalog list the run's partitions as they now are on disk."""
    qdb = quote(database)
    spec = f"PARTITION (run_id = '{sql_text(journal['run_id'])}')"
    for table in tables:
        present = files.exists(f"{table}/{journal['partition']}")
        spark.sql(f"ALTER TABLE {qdb}.{table} {'ADD IF NOT EXISTS' if present else 'DROP IF EXISTS'} {spec}")
        spark.catalog.refreshTable(f"{qdb}.{table}")  # drops cached file listings


def _remove_transaction(files: DatabaseFiles, txn: str) -> None:
    """Delete a transaction's folder, its journal first.

    Journal first: a journal whose staged folders were deleted would retire the old
    partitions and publish nothing. A failure only leaves garbage that the next
    ensure_tables removes, so it is logged, not raised.
    """
    try:
        files.delete(_in_transaction(txn, JOURNAL))
        _checkpoint("journal_deleted")
        files.delete(_in_transaction(txn))
    except Exception as exc:  # noqa: BLE001 - see the docstring
        log.warning("results: could not remove a finished transaction folder (%s)", type(exc).__name__)


def _checkpoint(step: str) -> None:
    """A commit step is done: tell the test seams (inert in production)."""
    if fault_hook is not None:
        fault_hook(step)
    if os.environ.get(PAUSE_ENV) == step:
        signal_file = os.environ.get(PAUSE_SIGNAL_ENV)
        if signal_file:
            with open(signal_file, "w"):
                pass
        while True:  # until the test kills this process
            time.sleep(1)


def _partition_folder(spark: SparkSession, run_id: str) -> str:
    """The run's partition folder name, escaped exactly as Spark escapes it (':' -> %3A)."""
    utils = spark.sparkContext._jvm.org.apache.spark.sql.catalyst.catalog.ExternalCatalogUtils
    return str(utils.getPartitionPathString("run_id", run_id))


def sql_text(text: str) -> str:
    """Text for a Spark SQL string literal."""
    return text.replace("\\", "\\\\").replace("'", "\\'")
