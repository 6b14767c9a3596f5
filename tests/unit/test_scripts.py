"""The set-up script refuses clearly when Spark's JVM cannot run."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.support.paths import ROOT


@pytest.mark.parametrize("version_line, expected", [
    ('openjdk version "11.0.22" 2024-01-16', "Java 11 found"),
    (None, "no Java found"),
])
def test_setup_requires_java_17(tmp_path, version_line, expected):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    if version_line is not None:
        java = bin_dir / "java"
        java.write_text(f"#!/bin/sh\necho '{version_line}' >&2\n")
        java.chmod(0o755)
    # Only the fake java and the basic tools: no real java on this PATH.
    for tool in ("sed", "head", "dirname", "env", "sh", "bash"):
        real = subprocess.run(["bash", "-c", f"command -v {tool}"], capture_output=True, text=True).stdout.strip()
        if real and not (bin_dir / tool).exists():
            (bin_dir / tool).symlink_to(real)
    env = {k: v for k, v in os.environ.items() if k != "JAVA_HOME"}
    env["PATH"] = str(bin_dir)
    env["PYTHON"] = os.path.realpath(sys.executable)
    done = subprocess.run([str(bin_dir / "bash"), str(ROOT / "scripts" / "setup")],
                          capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 1
    assert expected in done.stderr and "Java 17" in done.stderr
