"""The benchmarks' CPU clock counts the CPU time of a descendant that exits unwaited
(as pyspark's daemon lets its Python workers go: SIGCHLD ignored)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))

from measure import CpuTime  # noqa: E402

# A parent that ignores SIGCHLD, then forks a child that burns 2 s of CPU and exits
# (reaped by the kernel: no cutime anywhere), and outlives it: it waits for the child
# to be gone however long a loaded machine makes the 2 s take, without reaping it.
PARENT = """
import os, signal, time
signal.signal(signal.SIGCHLD, signal.SIG_IGN)
child = os.fork()
if child == 0:
    end = time.process_time() + 2.0
    while time.process_time() < end:
        pass
    os._exit(0)
while True:
    try:
        os.kill(child, 0)
    except ProcessLookupError:
        break
    time.sleep(0.05)
time.sleep(0.5)
"""


def test_cpu_time_keeps_a_worker_that_exited_unwaited():
    with CpuTime() as cpu:
        subprocess.run([sys.executable, "-c", PARENT], check=True)
    assert 1.6 <= cpu.seconds <= 2.6  # the child's 2 s, once, and the parent's start
