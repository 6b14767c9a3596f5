"""What a benchmark measures of a run besides its result: wall time, peak resident
memory and CPU time of this process and its descendants (in local mode: the JVM, which
is driver and executor, and its Python workers), read from /proc, and the machine it
ran on. Shared by the bench scripts."""

from __future__ import annotations

import os
import platform
import threading
import time
from typing import TypeVar


def machine() -> str:
    """The machine line every benchmark prints first (callers add how Spark ran)."""
    return f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"


def timed(fn):
    started = time.perf_counter()
    value = fn()
    return value, time.perf_counter() - started


_Sampled = TypeVar("_Sampled", bound="_Sampling")  # typing.Self needs Python 3.11


class _Sampling:
    """Reads this process's descendants from /proc every 0.2 s in a thread while the
    block runs, handing each reading to `_sample`."""

    def __init__(self) -> None:
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self: _Sampled) -> _Sampled:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.wait(0.2):
            self._sample(descendants())

    def _sample(self, tree: dict[int, tuple[str, list[str]]]) -> None:
        raise NotImplementedError


class PeakMemory(_Sampling):
    """The peak resident memory of this process's descendants (the JVM and its Python
    workers): the local-mode stand-in for executor memory."""

    def __init__(self) -> None:
        super().__init__()
        self.jvm = self.worker = 0

    def _sample(self, tree: dict[int, tuple[str, list[str]]]) -> None:
        for name, fields in tree.values():
            rss = int(fields[21]) * os.sysconf("SC_PAGE_SIZE")
            if name == "java":
                self.jvm = max(self.jvm, rss)
            elif name.startswith("python"):
                self.worker = max(self.worker, rss)


def descendants(me: int | None = None) -> dict[int, tuple[str, list[str]]]:
    """pid -> (command name, /proc/pid/stat fields after the name) of every live
    descendant of this process (the JVM and its Python workers in local mode)."""
    me = me or os.getpid()
    found: dict[int, tuple[str, list[str]]] = {}
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            with open(f"/proc/{entry}/comm") as f:
                found[int(entry)] = (f.read().strip(), fields)
        except OSError:
            continue
        parents[int(entry)] = int(fields[1])
    mine = {}
    for pid, value in found.items():
        ancestor, depth = parents.get(pid), 0
        while ancestor not in (None, 0, 1, me) and depth < 10:
            ancestor, depth = parents.get(ancestor), depth + 1
        if ancestor == me and pid != me:
            mine[pid] = value
    return mine


class CpuTime(_Sampling):
    """CPU time of this process and its descendants while the block runs (`.seconds`),
    a cost that other load on the machine inflates far less than wall time. Each
    process's own time (not its children's, which its last reading already holds), the
    last reading kept: the pyspark daemon ignores SIGCHLD, so a Python worker that exits
    is reaped by the kernel and its CPU time reaches no parent's count (reading the tree
    once at each end loses it). What a process spends in its last 0.2 s, or a process
    living less than that, is missed."""

    def __init__(self) -> None:
        super().__init__()
        self.seconds = 0.0
        self._first: dict[int, float] = {}
        self._last: dict[int, float] = {}

    def __enter__(self) -> CpuTime:
        self._own = _own_cpu()
        self._first = _tree_cpu(descendants())
        self._last = dict(self._first)
        return super().__enter__()

    def __exit__(self, *exc) -> None:
        super().__exit__(*exc)
        self._sample(descendants())
        trees = sum(cpu - self._first.get(pid, 0.0) for pid, cpu in self._last.items())
        self.seconds = trees + _own_cpu() - self._own

    def _sample(self, tree: dict[int, tuple[str, list[str]]]) -> None:
        self._last.update(_tree_cpu(tree))


def _own_cpu() -> float:
    own = os.times()
    return own.user + own.system


def _tree_cpu(tree: dict[int, tuple[str, list[str]]]) -> dict[int, float]:
    """pid -> CPU seconds (user + system, its own) of every process of `tree`."""
    ticks = os.sysconf("SC_CLK_TCK")
    return {pid: sum(int(v) for v in fields[11:13]) / ticks for pid, (_, fields) in tree.items()}
