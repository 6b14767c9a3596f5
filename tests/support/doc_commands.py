"""Commands that the documentation shows and the tests run exactly as written.

A block is marked for a test by an HTML comment on the line before its fence:

    <!-- run-by-test: package -->
    ```bash
    scripts/package
    ```

The markdown renders the comment invisibly, so readers see a plain command while the
suite keeps it honest. The marked blocks are in docs/operations.md (COMMANDS_DOC);
every function takes the markdown path, so that they can live in any document.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
from collections.abc import Mapping
from pathlib import Path

from tests.support.paths import ROOT

COMMANDS_DOC = ROOT / "docs" / "operations.md"

_MARKER = re.compile(r"<!--\s*run-by-test:\s*(?P<name>[\w.-]+)\s*-->")
_BLOCK = re.compile(r"\s*```bash\n(?P<body>.*?)\n```", re.DOTALL)


def marked_blocks(markdown: Path) -> dict[str, str]:
    """Map each marker name to the text of the ```bash block right after it."""
    text = markdown.read_text(encoding="utf-8")
    blocks: dict[str, str] = {}
    for marker in _MARKER.finditer(text):
        name = marker.group("name")
        block = _BLOCK.match(text, marker.end())
        if block is None:
            raise ValueError(f"{markdown}: marker '{name}' is not followed by a ```bash block")
        if name in blocks:
            raise ValueError(f"{markdown}: marker '{name}' appears twice")
        blocks[name] = block.group("body")
    return blocks


def run_block(
    markdown: Path, name: str, env: Mapping[str, str], timeout: float
) -> subprocess.CompletedProcess:
    """Run one marked block with bash from the project root, as a reader would paste it.

    `-e -o pipefail` so that a failing line in the middle of a block fails the block.
    """
    script = marked_blocks(markdown)[name]
    return run_group(["bash", "-e", "-o", "pipefail", "-c", script], env=env, timeout=timeout, cwd=ROOT)


def run_group(
    command: list[str], env: Mapping[str, str], timeout: float, cwd: Path = ROOT
) -> subprocess.CompletedProcess:
    """subprocess.run in a process group of its own, all of it killed on timeout.

    spark-submit's JVM starts the Python driver as a child; killing only the direct
    child on a timeout would leave that driver running.
    """
    process = subprocess.Popen(
        command, cwd=cwd, env=dict(env), text=True,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
    )
    try:
        stdout, stderr = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        stdout, stderr = process.communicate()
        raise AssertionError(
            f"{command[0]} timed out after {timeout} s:\n{stdout[-2000:]}\n{stderr[-2000:]}"
        ) from None
    return subprocess.CompletedProcess(command, process.returncode, stdout, stderr)
