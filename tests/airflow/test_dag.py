"""The privacy-evaluation DAG, loaded as Airflow loads it (run by scripts/airflow-check).

What spark-submit gets is checked against commands written out here by hand: the
provider's own command builder after the templates are rendered, then the process
really started, through a stub spark-submit that records its arguments and exits
with a chosen code (no Spark needed). The last test runs the DAG with `airflow dags
test` and a stub that exits 3, as the job does when a target is missed: the run fails.
"""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from airflow.dag_processing.dagbag import DagBag
from airflow.exceptions import AirflowException
from airflow.sdk.execution_time.context import VariableAccessor

ROOT = Path(__file__).resolve().parents[2]
DAG_FOLDER = ROOT / "jobs" / "dags"
AIRFLOW = Path(sys.executable).parent / "airflow"
RUN_ID = "manual__2026-11-29T14:00:00.123456+00:00"  # ':' and '+' as Airflow makes them
LOCAL_SPARK = json.dumps({"conn_type": "spark", "host": "local[2]"})


def expected_command(
    *, binary: str, master: str = "local[2]", driver_memory: str = "4g", config: str,
    extra_options: tuple[str, ...] = (),
) -> list[str]:
    return [
        binary, "--master", master,
        "--conf", f"spark.driver.memory={driver_memory}", "--conf", "spark.sql.shuffle.partitions=8",
        "--conf", f"spark.driver.defaultJavaOptions=-Dlog4j2.configurationFile=file://{ROOT}/src/privacy_eval/log4j2.properties",
        *extra_options,
        "--py-files", f"{ROOT}/dist/privacy_eval.zip",
        "--name", f"privacy-eval-{RUN_ID}",
        f"{ROOT}/jobs/evaluate_privacy.py",
        "--config", config, "--run-id", RUN_ID, "--fail-on-target",
    ]


@pytest.fixture(scope="module")
def dag():
    bag = DagBag(dag_folder=str(DAG_FOLDER))
    assert bag.import_errors == {}
    assert list(bag.dag_ids) == ["privacy_evaluation"]
    return bag.dags["privacy_evaluation"]  # bag.get_dag would look in the metadata DB


@pytest.fixture
def spark_connection(monkeypatch):
    monkeypatch.setenv("AIRFLOW_CONN_PRIVACY_EVAL_SPARK", LOCAL_SPARK)


@pytest.fixture
def stub_spark_submit(tmp_path):
    """Make a spark-submit that records its arguments and Python variables, then exits with `code`."""

    def make(code: int) -> tuple[Path, Path]:
        record = tmp_path / f"argv-{code}"
        stub = tmp_path / f"spark-submit-{code}"
        stub.write_text(
            "#!/bin/sh\n"
            f"printf '%s\\0' \"$@\" \"$PYSPARK_PYTHON\" \"$PYSPARK_DRIVER_PYTHON\" > '{record}'\n"
            f"exit {code}\n"
        )
        stub.chmod(0o755)
        return stub, record

    return make


def recorded(record: Path) -> tuple[list[str], list[str]]:
    """(arguments, [PYSPARK_PYTHON, PYSPARK_DRIVER_PYTHON]) as the stub saw them."""
    values = record.read_bytes().decode().split("\0")[:-1]
    return values[:-2], values[-2:]


def rendered_task(dag, run_conf: dict[str, Any]):
    """A copy of the task with its templates rendered as for a run triggered with `run_conf`."""
    params = copy.deepcopy(dag.params)
    params.update(run_conf)
    task = copy.deepcopy(dag.get_task("evaluate_privacy"))
    context = {
        "params": params.validate(),
        "run_id": RUN_ID,
        # Airflow's own accessor: Variables come from AIRFLOW_VAR_* here, as in a deployment.
        "var": {"value": VariableAccessor(deserialize_json=False), "json": VariableAccessor(deserialize_json=True)},
    }
    task.render_template_fields(context)
    return task, context


def test_dag_has_one_gated_spark_submit_task(dag):
    assert dag.task_ids == ["evaluate_privacy"]
    task = dag.get_task("evaluate_privacy")
    assert [cls.__name__ for cls in type(task).__mro__[:2]] == ["PrivacyEvaluationOperator", "SparkSubmitOperator"]
    assert task.retries == 0
    assert dag.schedule is None  # AIRFLOW_VAR_PRIVACY_EVAL_SCHEDULE is not set here
    assert dag.max_active_runs == 1
    assert sorted(dag.params.dump()) == sorted([
        "config", "conn_id", "application", "py_files", "spark_binary", "python",
        "driver_memory", "shuffle_partitions", "properties_file",
    ])


def test_command_with_the_defaults(dag, spark_connection):
    task, _ = rendered_task(dag, {})
    assert task._get_hook()._build_spark_submit_command(task.application) == expected_command(
        binary=f"{ROOT}/.venv/bin/spark-submit", config=f"{ROOT}/conf/examples/wbcd.yaml",
    )
    assert task.env_vars == {"PYSPARK_PYTHON": f"{ROOT}/.venv/bin/python",
                             "PYSPARK_DRIVER_PYTHON": f"{ROOT}/.venv/bin/python"}


def test_variables_override_defaults_and_params_override_variables(dag, monkeypatch):
    monkeypatch.setenv("AIRFLOW_CONN_CLUSTER_SPARK", json.dumps({"conn_type": "spark", "host": "yarn"}))
    for name, value in {
        "conn_id": "cluster_spark",
        "spark_binary": "/opt/spark/bin/spark-submit",
        "driver_memory": "8g",
        "config": "/srv/variable.yaml",
        "python": "/opt/venv/bin/python",
    }.items():
        monkeypatch.setenv(f"AIRFLOW_VAR_PRIVACY_EVAL_{name.upper()}", value)

    task, _ = rendered_task(dag, {"config": "/srv/run's config.yaml", "properties_file": "/srv/spark.conf"})

    assert task._get_hook()._build_spark_submit_command(task.application) == expected_command(
        binary="/opt/spark/bin/spark-submit", master="yarn", driver_memory="8g",
        config="/srv/run's config.yaml",
        # On YARN the provider hands env_vars to the application master as Spark settings.
        extra_options=(
            "--conf", "spark.yarn.appMasterEnv.PYSPARK_PYTHON=/opt/venv/bin/python",
            "--conf", "spark.yarn.appMasterEnv.PYSPARK_DRIVER_PYTHON=/opt/venv/bin/python",
            "--properties-file", "/srv/spark.conf",
        ),
    )


@pytest.mark.parametrize("exit_code", [0, 3])
def test_the_task_runs_that_command_and_fails_on_a_missed_target(dag, spark_connection, stub_spark_submit, exit_code):
    stub, record = stub_spark_submit(exit_code)
    task, context = rendered_task(dag, {"spark_binary": str(stub)})

    if exit_code == 0:
        task.execute(context)
    else:
        with pytest.raises(AirflowException, match="Error code is: 3"):
            task.execute(context)

    arguments, pythons = recorded(record)
    assert [str(stub), *arguments] == expected_command(binary=str(stub), config=f"{ROOT}/conf/examples/wbcd.yaml")
    assert pythons == [f"{ROOT}/.venv/bin/python"] * 2


def test_a_missed_target_fails_the_dag_run(tmp_path, stub_spark_submit):
    stub, record = stub_spark_submit(3)
    env = {
        **os.environ,
        "AIRFLOW_HOME": str(tmp_path / "home"),
        "AIRFLOW__CORE__DAGS_FOLDER": str(DAG_FOLDER),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW_CONN_PRIVACY_EVAL_SPARK": LOCAL_SPARK,
    }
    subprocess.run([str(AIRFLOW), "db", "migrate"], env=env, check=True, capture_output=True, timeout=300)

    run = subprocess.run(
        [str(AIRFLOW), "dags", "test", "privacy_evaluation", "--conf", json.dumps({"spark_binary": str(stub)})],
        env=env, capture_output=True, text=True, timeout=300,
    )

    output = run.stdout + run.stderr
    assert run.returncode == 1 and "DagRun failed" in output, output
    assert "Error code is: 3." in output
    arguments, _ = recorded(record)
    run_id = arguments[arguments.index("--run-id") + 1]
    assert run_id.startswith("manual__") and arguments[-1] == "--fail-on-target"
