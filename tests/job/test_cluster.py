"""The job on a Spark standalone cluster, submitted the documented way.

A master and two one-core workers start on loopback from the installed pyspark; the
package travels as dist/privacy_eval.zip in --py-files; the submission is the
`standalone-submit` block of docs/operations.md, run as written.

The executors run a Python that has every third-party dependency but cannot import
privacy_eval from site-packages (see `executor_python`), so the job can only succeed if
the executors import the package from the zip; a probe application shows where they
import it from.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import sysconfig
import textwrap
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pyarrow.parquet as pq
import pyspark
import pytest

from tests.support.doc_commands import COMMANDS_DOC, ROOT, run_block, run_group
from tests.support.expected import check_run, expected_wbcd
from tests.support.jobrun import C1_ONLY

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("dist")]  # ROOT/dist: see test_documented_commands

SPARK_HOME = Path(pyspark.__file__).resolve().parent
SPARK_CLASS = SPARK_HOME / "bin" / "spark-class"
SPARK_SUBMIT = Path(sys.executable).parent / "spark-submit"
PACKAGE_ZIP = ROOT / "dist" / "privacy_eval.zip"
N_WORKERS = 2
DISTANCE_ROWS = ("hidden_rate", "local_cloaking", "distance_to_closest_record", "nearest_neighbour_distance_ratio")

# Runs on the executors: where does `import privacy_eval` come from, under which Python?
PROBE = textwrap.dedent("""
    import json
    from pyspark.sql import SparkSession

    def where(_):
        import os, sys
        import privacy_eval
        yield json.dumps({"file": privacy_eval.__file__, "python": sys.executable, "cwd": os.getcwd()})

    spark = SparkSession.builder.appName("privacy-eval-probe").getOrCreate()
    found = spark.sparkContext.parallelize(range(4), 4).mapPartitions(where).collect()
    print("PROBE " + json.dumps(sorted(set(found))))
    spark.stop()
""")


@dataclass
class Cluster:
    master_url: str
    ui_port: int
    work_dirs: list[Path]
    env: dict[str, str]  # the daemons' environment, without any Python settings

    def state(self) -> dict:
        """The master's JSON status page (workers, running and completed applications)."""
        return _master_state(self.ui_port)


def base_env(scratch: Path) -> dict[str, str]:
    """This process's environment minus every Python and Spark location setting, pinned
    to the installed pyspark, loopback, and folders under `scratch`."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "SPARK_HOME", "SPARK_CONF_DIR")}
    conf_dir = scratch / "spark-conf"  # empty: no spark-defaults or spark-env from elsewhere
    conf_dir.mkdir(exist_ok=True)
    env.update(
        SPARK_HOME=str(SPARK_HOME),
        SPARK_CONF_DIR=str(conf_dir),
        SPARK_LOCAL_IP="127.0.0.1",
        SPARK_LOCAL_DIRS=str(scratch),
        SPARK_DAEMON_MEMORY="512m",
        # Every JVM here (daemons, driver, executors) runs seconds on tiny data: the C1
        # compiler alone starts faster. Test setting only.
        JAVA_TOOL_OPTIONS=C1_ONLY,
    )
    return env


@pytest.fixture(scope="module")
def executor_python(tmp_path_factory) -> Path:
    """A Python with the job venv's libraries but without the package: a new venv whose
    only link to the job venv is one .pth line naming its site-packages. Lines of a .pth
    are added to sys.path as they are; the .pth files inside that folder, among them the
    editable install's that points at src/, are not processed."""
    venv = tmp_path_factory.mktemp("executor-venv")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    own_site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                              check=True, capture_output=True, text=True, timeout=60).stdout.strip()
    Path(own_site, "job_venv_libraries.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return python


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _tail(log: Path, chars: int = 3000) -> str:
    return log.read_text(errors="replace")[-chars:] if log.exists() else "(no log)"


def _start(args: list[str], log: Path, env: dict[str, str]) -> subprocess.Popen:
    # A session of its own: its id is the process group that its children share.
    with open(log, "wb") as out:
        return subprocess.Popen([str(SPARK_CLASS), *args], stdout=out, stderr=subprocess.STDOUT,
                                env=env, cwd=log.parent, start_new_session=True)


def _descendants(pid: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:  # exited meanwhile
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])  # fields after "(comm)": state, ppid
        children.setdefault(ppid, []).append(int(entry.name))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _stop(processes: list[subprocess.Popen]) -> None:
    """Stop what we started, by process id: each daemon, its executors and their Python
    workers (which start process groups of their own, hence the walk over /proc, done
    before anything dies and is re-parented)."""
    pids = [pid for p in processes for pid in (p.pid, *_descendants(p.pid))]
    for pid in pids:
        if _alive(pid):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + 20
    for p in processes:
        try:
            p.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            pass
    while any(_alive(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.2)
    for pid in pids:
        if _alive(pid):
            os.kill(pid, signal.SIGKILL)
    for p in processes:
        try:
            os.killpg(p.pid, signal.SIGKILL)  # anything left in the daemon's own group
        except ProcessLookupError:
            pass
        p.wait(timeout=10)


def _master_state(ui_port: int) -> dict:
    no_proxy = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # loopback, never a proxy
    with no_proxy.open(f"http://127.0.0.1:{ui_port}/json/", timeout=2) as response:
        return json.load(response)


def _wait_for_workers(ui_port: int, daemons: list[tuple[subprocess.Popen, Path]], timeout: float = 90) -> None:
    """Poll the master's JSON status page on loopback until every worker is ALIVE."""
    deadline = time.monotonic() + timeout
    alive: list = []
    while time.monotonic() < deadline:
        for process, log in daemons:
            if process.poll() is not None:
                raise AssertionError(f"{log.name} exited with {process.returncode}:\n{_tail(log)}")
        try:
            alive = [w for w in _master_state(ui_port).get("workers", []) if w.get("state") == "ALIVE"]
            if len(alive) >= N_WORKERS:
                return
        except (OSError, ValueError):  # not listening yet
            pass
        time.sleep(0.5)
    logs = "\n".join(f"--- {log.name}\n{_tail(log, 1500)}" for _, log in daemons)
    raise AssertionError(f"{len(alive)} of {N_WORKERS} workers registered within {timeout} s\n{logs}")


@pytest.fixture
def standalone_cluster(tmp_path) -> Iterator[Cluster]:
    env = base_env(tmp_path)
    port, ui_port = _free_port(), _free_port()
    master_url = f"spark://127.0.0.1:{port}"
    daemon_conf = tmp_path / "daemons.conf"
    daemon_conf.write_text("spark.master.rest.enabled false\n")
    started: list[subprocess.Popen] = []
    daemons: list[tuple[subprocess.Popen, Path]] = []
    try:
        log = tmp_path / "master.log"
        started.append(_start(["org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                               "--port", str(port), "--webui-port", str(ui_port),
                               "--properties-file", str(daemon_conf)], log, env))
        daemons.append((started[-1], log))
        work_dirs = []
        for i in range(N_WORKERS):
            work = tmp_path / f"worker{i}"
            work.mkdir()
            log = tmp_path / f"worker{i}.log"
            started.append(_start(["org.apache.spark.deploy.worker.Worker", master_url,
                                   "--host", "127.0.0.1", "--cores", "1", "--memory", "1g",
                                   "--work-dir", str(work), "--webui-port", "0",
                                   "--properties-file", str(daemon_conf)], log, env))
            daemons.append((started[-1], log))
            work_dirs.append(work)
        _wait_for_workers(ui_port, daemons)
        yield Cluster(master_url, ui_port, work_dirs, env)
    finally:
        _stop(started[::-1])


def test_job_on_a_standalone_cluster_imports_the_package_from_the_zip(
    standalone_cluster, executor_python, tmp_path
):
    cluster = standalone_cluster
    python_env = {**cluster.env, "PYSPARK_PYTHON": str(executor_python),
                  "PYSPARK_DRIVER_PYTHON": sys.executable}

    # The executors' Python has the libraries but not the package.
    def imports(module: str) -> bool:
        done = subprocess.run([str(executor_python), "-c", f"import {module}"], cwd=tmp_path,
                              env=cluster.env, capture_output=True, timeout=60)
        return done.returncode == 0

    assert imports("pandas, numpy, scipy, pyarrow, yaml, pyspark")
    assert not imports("privacy_eval")

    packaged = run_group([str(ROOT / "scripts" / "package")], env=cluster.env, timeout=180)
    assert packaged.returncode == 0, packaged.stderr[-2000:]

    # Probe: every task imports privacy_eval from the zip in its executor's folder.
    probe = tmp_path / "probe.py"
    probe.write_text(PROBE)
    probed = run_group(
        [str(SPARK_SUBMIT), "--master", cluster.master_url, "--py-files", str(PACKAGE_ZIP),
         "--conf", "spark.executor.cores=1", "--conf", "spark.executor.memory=512m",
         "--conf", "spark.ui.enabled=false",
         # Start the tasks only once both executors are up, so that both run one.
         "--conf", "spark.scheduler.minRegisteredResourcesRatio=1.0",
         "--conf", "spark.scheduler.maxRegisteredResourcesWaitingTime=60s",
         str(probe)],
        env=python_env, timeout=180, cwd=tmp_path,
    )
    assert probed.returncode == 0, probed.stdout[-3000:] + probed.stderr[-3000:]
    line = next(l for l in probed.stdout.splitlines() if l.startswith("PROBE "))
    found = [json.loads(item) for item in json.loads(line[len("PROBE "):])]
    used_workers = set()
    for task in found:
        assert task["python"] == str(executor_python)
        # The worker puts the zip on sys.path relative to the executor's folder.
        imported_from = os.path.normpath(os.path.join(task["cwd"], task["file"]))
        assert imported_from == os.path.join(task["cwd"], "privacy_eval.zip", "privacy_eval", "__init__.py")
        used_workers |= {w for w in cluster.work_dirs if Path(task["cwd"]).is_relative_to(w)}
    assert used_workers == set(cluster.work_dirs)

    # The job itself, with the documented command.
    warehouse = tmp_path / "wh"
    run_id = "cluster-run"
    done = run_block(COMMANDS_DOC, "standalone-submit", timeout=300, env={
        **python_env, "MASTER": cluster.master_url, "WAREHOUSE": str(warehouse), "RUN_ID": run_id})
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert f"run_id {run_id}" in done.stdout
    # It ran on the cluster, not in a local master of its own: the master saw the
    # application, and both workers ran an executor of it with the zip in its folder.
    apps = [app["name"] for app in cluster.state().get("completedapps", [])]
    assert "privacy-eval" in apps, f"the job never registered with the master (applications seen: {apps})"
    for work in cluster.work_dirs:
        assert len(list(work.glob("app-*/*/privacy_eval.zip"))) == 2, work.name

    # Read back with pyarrow, not Spark: an independent reader, and no third JVM.
    tables = {name: pq.read_table(warehouse / "privacy_eval.db" / name).to_pylist()
              for name in ("metric_results", "column_protection")}
    assert {r["run_id"] for r in tables["metric_results"]} == {run_id}
    rows, columns = tables["metric_results"], tables["column_protection"]
    assert len(rows) == 10 and len(columns) == 10  # with the example's four distance rows
    check_run(rows, columns, expected_wbcd())  # the figures of one cell, here with 8
    searches = {r["metric"]: json.loads(r["details"]) for r in rows if r["metric"] in DISTANCE_ROWS}
    assert {name: d["cells"] for name, d in searches.items()} == dict.fromkeys(DISTANCE_ROWS, 8)
    assert all(d["cells_per_query"] > 1 for d in searches.values())
