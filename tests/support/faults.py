"""Make Spark tasks fail once, to show that task retries change no figure.

Used by tests/spark/test_task_retry.py. Inert unless a job carries the local property FAULTS
(`sc.setLocalProperty(FAULTS, folder)`): then, in every stage, the first task attempt
that reaches an armed point fails there, and Spark must retry it
(`local[N,maxFailures]`; a task can fail once per armed point of its stage).

Armed points:

* `flaky(frame)`: the frame unchanged, through a pass-through `mapInArrow`. Every
  stage that reads it fails once: shuffle-map stages (the linkage's statistics
  aggregation and its block shuffle among them) and result stages.
* inside the linkage's own Python passes over blocks, when this module is PySpark's
  daemon (`spark.python.daemon.module=tests.support.faults`): every forked worker wraps kernel
  functions that only those passes call on executors: `min_abs_diff_sorted` (the
  weighted-scaling `mapInArrow`) and `evaluate_block_bruteforce` (the scoring
  `mapInArrow`).

The failure is raised after the wrapped work (the pass-through has passed on every
batch), so a task fails late, as a lost executor would make it. Markers in the folder:
`fail-<point>-stage<S>` (holding the partition) for each injected failure, and
`retry-<point>-stage<S>-part<P>` once a later attempt of that task got there.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from typing import Any

from pyspark import TaskContext
from pyspark.sql import DataFrame

#: The local property naming the marker folder; faults are armed while it is set.
FAULTS = "privacy_eval.test.faults"


class InjectedFault(RuntimeError):
    """The failure this module injects (never raised on the driver)."""


def maybe_fail(point: str) -> None:
    """When faults are armed, fail the first task attempt that reaches `point` in each stage."""
    context = TaskContext.get()
    if context is None:  # on the driver
        return
    folder = context.getLocalProperty(FAULTS)
    if not folder:
        return
    stage, partition = context.stageId(), context.partitionId()
    marker = os.path.join(folder, f"fail-{point}-stage{stage}")
    try:  # one failure per stage and point: the first task attempt to get here takes it
        handle = os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except FileExistsError:
        if context.attemptNumber() > 0 and _read(marker) == str(partition):
            open(os.path.join(folder, f"retry-{point}-stage{stage}-part{partition}"), "w").close()
        return
    with os.fdopen(handle, "w") as out:
        out.write(str(partition))
    raise InjectedFault(f"injected failure at {point}, stage {stage}, partition {partition}")


def _read(path: str) -> str:
    with open(path) as handle:
        return handle.read()


def flaky(frame: DataFrame) -> DataFrame:
    """`frame` unchanged, through a Python stage that fails once per stage when armed."""
    return frame.mapInArrow(_pass_through, frame.schema)


def _pass_through(batches: Iterator[Any]) -> Iterator[Any]:
    yield from batches
    maybe_fail("input")


def _arm_kernel() -> None:
    """Wrap the kernel functions that only the linkage's block passes call in workers."""
    from privacy_eval.linkage.kernel import blocks, weighted

    def armed(point: str, function: Callable[..., Any]) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            result = function(*args, **kwargs)
            maybe_fail(point)
            return result
        return call

    # The per-block functions reach the workers pickled by value; the kernel functions
    # they call are looked up by module and name there, so wrapping these attributes
    # is enough.
    weighted.min_abs_diff_sorted = armed("mapInArrow-scaling", weighted.min_abs_diff_sorted)
    blocks.evaluate_block_bruteforce = armed("mapInArrow-scoring", blocks.evaluate_block_bruteforce)


def _daemon() -> None:
    """pyspark.daemon, arming the kernel in every forked worker.

    Armed after the fork, as pyspark.daemon imports its worker module: numpy and scipy
    start threads when imported, and threads must not exist when the daemon forks.
    """
    import pyspark.daemon as daemon

    fork_worker = daemon.worker

    def worker(sock: Any, authenticated: bool) -> int:
        _arm_kernel()
        return fork_worker(sock, authenticated)

    daemon.worker = worker  # manager() looks the name up when it forks
    daemon.manager()


if __name__ == "__main__":
    _daemon()
