"""Who owns a write of the results tables, and the lock of a run being written
(the commit protocol itself is commit.py).

Ownership. A transaction's folder name carries its owner: a machine token (host name,
boot id and PID namespace), the PID and the process start time (from /proc). A
transaction, or a lock holding a transaction's name, is abandoned only when its owner
is gone: on the same machine, when that process no longer runs; otherwise (another
host, or no /proc) when it has not changed for STALE_AFTER_SECONDS. So jobs writing
other run ids at the same time never disturb each other.

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
owner is gone is broken by the next writer; the transaction that owner left is
completed or removed by `ensure_tables` as usual. Writers of different run ids never
wait for each other.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import os
import socket
import time
import uuid
from collections.abc import Callable

from privacy_eval.errors import CommitError
from privacy_eval.hadoop_files import DatabaseFiles

log = logging.getLogger("privacy_eval.commit")

#: A transaction or lock whose owner cannot be checked from this machine counts as
#: abandoned after this long without change. Writing a run takes seconds; this is generous.
STALE_AFTER_SECONDS = 3600.0
# One lock file per run id being written, in the database folder beside the tables.
LOCKS = "_locks"
#: How long a writer waits for another writer of the same run id, and how often it looks.
LOCK_WAIT_SECONDS = 120.0
LOCK_POLL_SECONDS = 0.5

# Transactions this process is working on (writing or recovering): never abandoned.
ACTIVE: set[str] = set()


def new_transaction_name() -> str:
    """<random>-<machine>-<pid>-<process start>: the owner can be checked from its name."""
    pid = os.getpid()
    return f"{uuid.uuid4().hex}-{machine()}-{pid}-{_process_start(pid) or 0}"


def abandoned(files: DatabaseFiles, owner: str, path: str) -> bool:
    """Whether what transaction `owner` left at `path` (its folder, or a lock holding
    its name) is abandoned: its process is gone, or, when this machine cannot tell, the
    path has not changed for STALE_AFTER_SECONDS."""
    alive = _owner_alive(owner)
    if alive is not None:
        return not alive
    modified = files.modified(path)
    return modified is not None and time.time() - modified > STALE_AFTER_SECONDS


def _owner_alive(name: str) -> bool | None:
    """Whether the process owning a transaction still runs; None when this process cannot tell."""
    try:
        _, owner_machine, pid_text, start_text = name.split("-")
        pid, start = int(pid_text), int(start_text)
    except ValueError:
        return None  # not a name this module makes: its age decides
    if owner_machine != machine():
        return None
    if pid == os.getpid() and start == (_process_start(pid) or 0):
        return name in ACTIVE
    if start == 0:
        return None  # no /proc: a PID alone may have been reused
    return _process_start(pid) == start


@functools.lru_cache(maxsize=1)
def machine() -> str:
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


# --------------------------------------------------------------------------
# the run lock
# --------------------------------------------------------------------------


def take_lock(files: DatabaseFiles, partition: str, run_id: str, txn: str, on_wait: Callable[[], None]) -> None:
    """Take the run's lock for transaction `txn`, waiting for another writer of the run
    (`on_wait` is called once, when the waiting starts)."""
    lock = f"{LOCKS}/{partition}"
    files.mkdirs(LOCKS)
    deadline = time.monotonic() + LOCK_WAIT_SECONDS
    waiting = False
    while not files.create_exclusive(lock, txn):
        owner = files.read_text(lock)
        if owner is None:
            continue  # released meanwhile
        if abandoned(files, owner, lock):
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
            on_wait()
        time.sleep(LOCK_POLL_SECONDS)


def _break_lock(files: DatabaseFiles, lock: str, owner: str) -> None:
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


def release_lock(files: DatabaseFiles, partition: str, txn: str) -> None:
    """Remove the run's lock if `txn` holds it; a failure is logged (the next writer
    breaks a lost lock)."""
    lock = f"{LOCKS}/{partition}"
    try:
        if files.read_text(lock) == txn:
            files.delete(lock)
    except Exception as exc:  # noqa: BLE001 - a lost lock file is broken by the next writer
        log.warning("results: could not release the run's lock (%s)", type(exc).__name__)
