"""The Airflow DAG's own tests pass in Airflow's venv, or the check says plainly it skipped.

Airflow is never installed into the job's venv (its Spark provider overwrites pyspark),
so this runs scripts/airflow-check, which installs it apart (a few minutes the first
time, nothing after) and runs tests/airflow there.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.support.paths import ROOT

CHECK = Path("scripts") / "airflow-check"
CONSTRAINTS = Path("tests") / "airflow" / "constraints.txt"

pytestmark = pytest.mark.slow  # subprocesses that build venvs


def test_airflow_check_passes_or_skips():
    done = subprocess.run([str(ROOT / CHECK)], cwd=ROOT, capture_output=True, text=True, timeout=1800)
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    if re.search(r"^skipped: ", done.stdout, re.MULTILINE):
        pytest.skip(done.stdout.strip().splitlines()[-1])
    # pytest's closing line, e.g. "6 passed in 21.3s": tests ran and none failed, errored or skipped.
    summary = done.stdout.strip().splitlines()[-1]
    assert re.fullmatch(r"\d+ passed(, \d+ warnings?)? in [\d.]+s( \([\d:]+\))?", summary), output


def test_airflow_check_skips_cleanly_when_it_cannot_install(tmp_path):
    # A copy of the script and its constraints in an empty tree, with pip cut off from
    # every index: the install fails at once, as it would offline.
    for path in (CHECK, CONSTRAINTS):
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / path, tmp_path / path)
    env = {**os.environ, "PIP_NO_INDEX": "1", "PIP_FIND_LINKS": "", "PIP_CONFIG_FILE": os.devnull}

    done = subprocess.run([str(tmp_path / CHECK)], capture_output=True, text=True, env=env, timeout=300)

    assert done.returncode == 0, done.stdout + done.stderr
    assert re.match(r"skipped: could not install apache-airflow==\d", done.stdout.splitlines()[-1])
    assert not (tmp_path / ".venv-airflow").exists()  # nothing half-installed to be reused
