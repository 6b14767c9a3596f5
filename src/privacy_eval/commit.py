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

Ownership. A transaction's folder name carries its owner: a machine token (host name,
boot id and PID namespace), the PID and the process start time (from /proc). A
transaction is recovered only when its owner is gone: on the same machine, when that
process no longer runs; otherwise (another host, or no /proc) when its folder has not
changed for STALE_AFTER_SECONDS. So jobs writing other run ids at the same time never
disturb each other. A recoverer first claims a transaction by renaming its folder to a
name of its own (atomic: one winner), so two recoverers never apply one journal.

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

Concurrent writers of one run id. Two jobs writing the same run id at once would
interleave their renames and could leave one table with each run. So a writer first
takes the run's lock, `<database>.db/_locks/<partition folder>`, a file created
exclusively (O_CREAT|O_EXCL on a local disk, create without overwrite on HDFS and
other Hadoop file systems) holding the writer's transaction name, and keeps it until
its transaction is applied and removed. A second writer of that run id waits, polling
every LOCK_POLL_SECONDS for up to LOCK_WAIT_SECONDS, then writes its run over the
first one's (the last writer wins, as a rerun does). If the lock is still held after
that, it fails with `CommitError` (exit 1, "... is being written by another process"),
having written nothing: the tables hold the other writer's complete run. A lock whose
owner is gone (the rules of Ownership above: at once on the same machine, after
STALE_AFTER_SECONDS otherwise) is broken by the next writer; the transaction that
owner left is completed or removed by `ensure_tables` as usual. Writers of different
run ids never wait for each other.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import os
import socket
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from py4j.protocol import Py4JJavaError
from pyspark.sql import DataFrame, SparkSession

from privacy_eval.frames import quote

log = logging.getLogger(__name__)

# In the database folder, beside the table folders: Spark never lists it.
TRANSACTIONS = "_transactions"
JOURNAL = "journal.json"
JOURNAL_TMP = "journal.tmp"
#: A transaction whose owner cannot be checked from this machine counts as abandoned
#: after this long without change. Writing a run takes seconds; this is generous.
STALE_AFTER_SECONDS = 3600.0
#: Applying a committed journal is idempotent, so a failed rename is simply tried again,
#: after a pause growing by this much per attempt.
APPLY_ATTEMPTS = 3
APPLY_BACKOFF_SECONDS = 0.5
# One lock file per run id being written (module docstring, "Concurrent writers").
LOCKS = "_locks"
#: How long a writer waits for another writer of the same run id, and how often it looks.
LOCK_WAIT_SECONDS = 120.0
LOCK_POLL_SECONDS = 0.5


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


class CommitError(RuntimeError):
    """A results commit could not be completed (see the message for the state left)."""


def replace_run(spark: SparkSession, database: str, run_id: str, staged: Mapping[str, DataFrame | None]) -> None:
    """Replace run `run_id`'s partition in every table of `staged`, atomically (see the
    module docstring); the tables change in the order of `staged`.

    `staged` maps each table to the run's rows (a frame with the table's schema and
    run_id last), or to None: that table loses the run's earlier partition. The tables
    must be registered in this session.
    """
    tables = tuple(staged)
    files = _Files(spark, database)
    partition = _partition_folder(spark, run_id)
    txn = _new_transaction_name()
    _ACTIVE.add(txn)
    applying = False
    try:
        _lock(files, partition, run_id, txn)
    except BaseException:
        _ACTIVE.discard(txn)
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
        _unlock(files, partition, txn)
        _ACTIVE.discard(txn)


def _lock(files: _Files, partition: str, run_id: str, txn: str) -> None:
    """Take the run's lock for transaction `txn`, waiting for another writer of the run."""
    lock = f"{LOCKS}/{partition}"
    files.mkdirs(LOCKS)
    deadline = time.monotonic() + LOCK_WAIT_SECONDS
    waiting = False
    while not files.create_exclusive(lock, txn):
        owner = files.read_text(lock)
        if owner is None:
            continue  # released meanwhile
        if _lock_abandoned(files, lock, owner):
            _break_lock(files, lock, owner)
            continue
        if time.monotonic() >= deadline:
            raise CommitError(
                f"results of run {run_id} are being written by another process (for more than "
                f"{LOCK_WAIT_SECONDS:g} s); nothing was written. If no other job runs with this run id, "
                f"delete {files.uri(lock)} and run again"
            )
        if not waiting:
            waiting = True
            log.warning("results: another process is writing run %s; waiting for it", run_id)
            _checkpoint("lock_wait")
        time.sleep(LOCK_POLL_SECONDS)


def _lock_abandoned(files: _Files, lock: str, owner: str) -> bool:
    alive = _owner_alive(owner)
    if alive is not None:
        return not alive
    modified = files.modified(lock)
    return modified is not None and time.time() - modified > STALE_AFTER_SECONDS


def _break_lock(files: _Files, lock: str, owner: str) -> None:
    """Remove a lock left by `owner`, who is gone. It is moved aside first (of several
    breakers, one rename wins); a lock taken meanwhile by a live writer is put back."""
    aside = f"{lock}.{uuid.uuid4().hex}.broken"
    try:
        moved = files.move(lock, aside)
    except CommitError:
        return
    if not moved:
        return
    taken = files.read_text(aside)
    if taken is not None and taken != owner:
        files.create_exclusive(lock, taken)  # not the dead owner's: give it back
    files.delete(aside)
    log.warning("results: removed the lock of a stopped writer")


def _unlock(files: _Files, partition: str, txn: str) -> None:
    lock = f"{LOCKS}/{partition}"
    try:
        if files.read_text(lock) == txn:
            files.delete(lock)
    except Exception as exc:  # noqa: BLE001 - a lost lock file is broken by the next writer
        log.warning("results: could not release the run's lock (%s)", type(exc).__name__)


def recover(spark: SparkSession, database: str, tables: Sequence[str]) -> None:
    """Complete (journal) or remove (no journal) the transactions of `database` whose
    owner is gone; `tables` are all its tables, in commit order."""
    files = _Files(spark, database)
    for name in files.list_dirs(TRANSACTIONS):
        if not _abandoned(files, name):
            continue
        txn = _new_transaction_name()
        _ACTIVE.add(txn)
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
            _ACTIVE.discard(txn)


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
    files: _Files, txn: str, run_id: str, partition: str, tables: Sequence[str], staged: Sequence[str]
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


def _write_journal(files: _Files, txn: str, journal: dict[str, Any]) -> None:
    """Write the journal under a temporary name, then rename it: the commit point."""
    temporary, final = _in_transaction(txn, JOURNAL_TMP), _in_transaction(txn, JOURNAL)
    files.write_json(temporary, journal)
    _checkpoint("journal_tmp")
    if not files.move(temporary, final):
        raise CommitError("results: the journal vanished before it could be committed")


def _apply(files: _Files, txn: str, journal: dict[str, Any]) -> None:
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
    spark: SparkSession, database: str, files: _Files, journal: dict[str, Any], tables: Sequence[str]
) -> None:
    """Make the session catalog list the run's partitions as they now are on disk."""
    qdb = quote(database)
    spec = f"PARTITION (run_id = '{sql_text(journal['run_id'])}')"
    for table in tables:
        present = files.exists(f"{table}/{journal['partition']}")
        spark.sql(f"ALTER TABLE {qdb}.{table} {'ADD IF NOT EXISTS' if present else 'DROP IF EXISTS'} {spec}")
        spark.catalog.refreshTable(f"{qdb}.{table}")  # drops cached file listings


def _remove_transaction(files: _Files, txn: str) -> None:
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


# --------------------------------------------------------------------------
# transaction ownership
# --------------------------------------------------------------------------

# Transactions this process is working on (writing or recovering): never abandoned.
_ACTIVE: set[str] = set()


def _new_transaction_name() -> str:
    """<random>-<machine>-<pid>-<process start>: the owner can be checked from its name."""
    pid = os.getpid()
    return f"{uuid.uuid4().hex}-{_machine()}-{pid}-{_process_start(pid) or 0}"


def _abandoned(files: _Files, name: str) -> bool:
    alive = _owner_alive(name)
    if alive is not None:
        return not alive
    modified = files.modified(_in_transaction(name))
    return modified is not None and time.time() - modified > STALE_AFTER_SECONDS


def _owner_alive(name: str) -> bool | None:
    """Whether the process owning a transaction still runs; None when this process cannot tell."""
    try:
        _, machine, pid_text, start_text = name.split("-")
        pid, start = int(pid_text), int(start_text)
    except ValueError:
        return None  # not a name this module makes: its age decides
    if machine != _machine():
        return None
    if pid == os.getpid() and start == (_process_start(pid) or 0):
        return name in _ACTIVE
    if start == 0:
        return None  # no /proc: a PID alone may have been reused
    return _process_start(pid) == start


@functools.lru_cache(maxsize=1)
def _machine() -> str:
    """A token shared by the processes that see one PID space: host, boot and PID namespace."""
    try:
        with open("/proc/sys/kernel/random/boot_id") as handle:
            boot = handle.read().strip()
        namespace = os.readlink("/proc/self/ns/pid")
    except OSError:  # not Linux: the host name alone (and _process_start says nothing)
        boot = namespace = ""
    return hashlib.sha256(f"{socket.gethostname()}|{boot}|{namespace}".encode()).hexdigest()[:12]


def _process_start(pid: int) -> int | None:
    """When a running process started (clock ticks since boot, Linux); None if it does not run."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            stat = handle.read()
    except OSError:
        return None
    # The command name (field 2) may hold spaces and ')': count fields after the last ')'.
    fields = stat[stat.rindex(b")") + 2:].split()
    if fields[0] in (b"Z", b"X"):  # a zombie has finished
        return None
    return int(fields[19])  # field 22, starttime


class _Files:
    """Hadoop FileSystem calls on paths relative to a database's folder.

    Through the JVM, so that HDFS and other Hadoop file systems work like the local disk.
    Relative paths are '/'-joined names that need no escaping: table names, transaction
    names and Spark's already escaped partition folder names.
    """

    def __init__(self, spark: SparkSession, database: str) -> None:
        context = spark.sparkContext
        self._path = context._jvm.org.apache.hadoop.fs.Path
        # The catalog's own URI for the folder: the place Spark reads the tables from.
        location = spark._jsparkSession.sessionState().catalog().getDatabaseMetadata(database).locationUri()
        self._root = self._path(location)
        self._fs = self._root.getFileSystem(context._jsc.hadoopConfiguration())

    def _resolve(self, relative: str) -> Any:
        path = self._root
        for name in relative.split("/"):
            path = self._path(path, name)
        return path

    def uri(self, relative: str) -> str:
        return str(self._resolve(relative).toString())

    def exists(self, relative: str) -> bool:
        return bool(self._fs.exists(self._resolve(relative)))

    def mkdirs(self, relative: str) -> None:
        if not self._fs.mkdirs(self._resolve(relative)):
            raise CommitError(f"results: cannot create {relative} in the database folder")

    def delete(self, relative: str) -> None:
        self._fs.delete(self._resolve(relative), True)

    def list_dirs(self, relative: str) -> list[str]:
        path = self._resolve(relative)
        if not self._fs.exists(path):
            return []
        return [str(s.getPath().getName()) for s in self._fs.listStatus(path) if s.isDirectory()]

    def modified(self, relative: str) -> float | None:
        """Last modification, in seconds since the epoch; None when it does not exist."""
        path = self._resolve(relative)
        try:
            return self._fs.getFileStatus(path).getModificationTime() / 1000.0
        except Py4JJavaError:
            if self._fs.exists(path):
                raise
            return None

    def move(self, source: str, target: str) -> bool:
        """Rename `source` to `target` atomically; False when `source` does not exist.

        `target` must not exist and its parent must: under those conditions no Hadoop
        file system moves into or copies instead (the local one falls back to a copy,
        which is not atomic, when a plain rename fails).
        """
        src, dst = self._resolve(source), self._resolve(target)
        if self._fs.exists(dst) or not self._fs.exists(dst.getParent()):
            raise CommitError(f"results: cannot rename to {target}: it exists or its folder does not")
        try:
            if self._fs.rename(src, dst):
                return True
        except Py4JJavaError:
            if self._fs.exists(src):
                raise
            return False  # gone meanwhile (another recoverer claimed it)
        if self._fs.exists(src):
            raise CommitError(f"results: the file system refused to rename {source} to {target}")
        return False

    def create_exclusive(self, relative: str, text: str) -> bool:
        """Create a file holding `text`, atomically, unless it exists; False when it does.

        On a local disk with O_CREAT|O_EXCL (Hadoop's local create checks, then creates);
        elsewhere with the file system's create without overwrite (atomic on HDFS).
        """
        path = self._resolve(relative)
        data = text.encode("utf-8")
        uri = path.toUri()
        if uri.getScheme() in (None, "file"):
            try:
                handle = os.open(str(uri.getPath()), os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            except FileExistsError:
                return False
            try:
                os.write(handle, data)
                os.fsync(handle)
            finally:
                os.close(handle)
            return True
        try:
            stream = self._fs.create(path, False)
        except Py4JJavaError:
            if self._fs.exists(path):
                return False
            raise
        try:
            stream.write(bytearray(data), 0, len(data))
            stream.hsync()
        finally:
            stream.close()
        return True

    def read_text(self, relative: str) -> str | None:
        """A small file's text; None when it does not exist."""
        path = self._resolve(relative)
        try:
            stream = self._fs.open(path)
        except Py4JJavaError:
            if self._fs.exists(path):
                raise
            return None
        try:
            return bytes(stream.readAllBytes()).decode("utf-8")
        finally:
            stream.close()

    def read_json(self, relative: str) -> dict[str, Any] | None:
        path = self._resolve(relative)
        if not self._fs.exists(path):
            return None
        stream = self._fs.open(path)
        try:
            return json.loads(bytes(stream.readAllBytes()).decode("utf-8"))
        finally:
            stream.close()

    def write_json(self, relative: str, value: dict[str, Any]) -> None:
        data = bytearray(json.dumps(value, indent=1, sort_keys=True).encode("utf-8"))
        stream = self._fs.create(self._resolve(relative), False)
        try:
            stream.write(data, 0, len(data))
            stream.hsync()  # on disk (HDFS: on the datanodes) before the rename commits it
        finally:
            stream.close()


def sql_text(text: str) -> str:
    """Text for a Spark SQL string literal."""
    return text.replace("\\", "\\\\").replace("'", "\\'")
