"""The commands of docs/operations.md, run exactly as written (see tests/support/doc_commands.py).

`package` and `local-submit` run here; `standalone-submit` needs a cluster and runs in
tests/job/test_cluster.py, which starts one.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import zipfile

import pytest

from tests.support.doc_commands import COMMANDS_DOC, ROOT, marked_blocks, run_block
from tests.support.jobrun import C1_ONLY

# Both this module and tests/job/test_cluster.py build ROOT/dist with scripts/package: under
# pytest-xdist they run in one worker (the "dist" group), never side by side.
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("dist")]

RUN_HERE = {"package", "local-submit"}
RUN_BY_CLUSTER_TEST = {"standalone-submit"}
VERSION = re.search(r'^version = "([^"]+)"', (ROOT / "pyproject.toml").read_text(), re.M).group(1)


def test_every_marked_block_is_run_by_some_test():
    # A newly marked block must be claimed here or in test_cluster.py, not silently skipped.
    assert set(marked_blocks(COMMANDS_DOC)) == RUN_HERE | RUN_BY_CLUSTER_TEST


def test_marker_without_a_bash_block_is_an_error(tmp_path):
    doc = tmp_path / "doc.md"
    doc.write_text("<!-- run-by-test: lonely -->\n\n    indented, not fenced\n")
    with pytest.raises(ValueError, match="lonely"):
        marked_blocks(doc)


@pytest.fixture(scope="module")
def packaged() -> subprocess.CompletedProcess:
    """The package block, run once per module: a submission must ship today's src/."""
    done = run_block(COMMANDS_DOC, "package", env=os.environ, timeout=180)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return done


def test_package_builds_a_zip_for_py_files(packaged):
    done = packaged
    assert "dist/privacy_eval.zip" in done.stdout

    archive = ROOT / "dist" / "privacy_eval.zip"
    first = archive.read_bytes()
    with zipfile.ZipFile(archive) as z:
        names = set(z.namelist())
    # The package's sources with privacy_eval/ at the root, no compiled caches, and the
    # distribution metadata that gives the package its version.
    sources = {
        str(p.relative_to(ROOT / "src"))
        for p in (ROOT / "src" / "privacy_eval").rglob("*")
        if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc"
    }
    assert "privacy_eval/__init__.py" in sources and "privacy_eval/metrics/linkage_success.py" in sources
    dist_info = f"privacy_eval-{VERSION}.dist-info/"
    assert {n for n in names if not n.startswith(dist_info)} == sources
    assert dist_info + "METADATA" in names
    wheels = sorted((ROOT / "dist").glob("privacy_eval-*.whl"))
    assert [w.name for w in wheels] == [f"privacy_eval-{VERSION}-py3-none-any.whl"]

    # Importable the way an executor imports it: the zip on sys.path and no site-packages
    # (-S), so neither src/ nor the installed package can stand in for it.
    probe = "import sys; sys.path.insert(0, sys.argv[1]); import privacy_eval as p; print(p.__file__, p.__version__)"
    imported = subprocess.run([sys.executable, "-S", "-c", probe, str(archive)],
                              capture_output=True, text=True, timeout=60)
    assert imported.stdout.split() == [str(archive / "privacy_eval" / "__init__.py"), VERSION], imported.stderr

    # Idempotent: a second run rebuilds the same zip, byte for byte.
    again = run_block(COMMANDS_DOC, "package", env=os.environ, timeout=180)
    assert again.returncode == 0, again.stderr[-2000:]
    assert archive.read_bytes() == first
    assert len(sorted((ROOT / "dist").glob("privacy_eval-*.whl"))) == 1


def test_local_submission_writes_the_run(packaged, tmp_path):
    warehouse = tmp_path / "wh"
    # C1-only JIT: the JVM starts faster on this tiny example (test setting only).
    env = {**os.environ, "WAREHOUSE": str(warehouse), "JAVA_TOOL_OPTIONS": C1_ONLY}
    done = run_block(COMMANDS_DOC, "local-submit", env=env, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "run_id local-demo" in done.stdout
    # Both tables got the run's partition, in the warehouse the command was given.
    for table in ("metric_results", "column_protection"):
        partition = warehouse / "privacy_eval.db" / table / "run_id=local-demo"
        assert list(partition.glob("*.parquet")), table
