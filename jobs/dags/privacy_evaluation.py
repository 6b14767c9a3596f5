"""Airflow DAG: evaluate a synthetic release with spark-submit and fail when it misses a target.

One task, `evaluate_privacy`, runs `jobs/evaluate_privacy.py --config CONFIG
--run-id <run id> --fail-on-target`. The job exits 3 when a metric misses its target
(and then writes nothing), spark-submit passes that code on, and the operator fails
the task, hence the DAG run: a release gate. Exit 2 (invalid config or input) and 1
(unexpected) fail it too. The job's interface is in docs/interface.md; docs/airflow.md
has more.

Deploying (Airflow 3, apache-airflow-providers-apache-spark 6.3):

1. On each Airflow worker, a checkout of this project with `scripts/setup` run (the job
   venv `.venv`, Java 17+) and `scripts/package` (`dist/privacy_eval.zip`, shipped with
   `--py-files`). Never install Airflow or its Spark provider into `.venv`: the
   provider's pyspark-client overwrites pyspark there.
2. Make this file visible to the DAG processor: symlink it into the dags folder
   (`ln -s $PWD/jobs/dags/privacy_evaluation.py $AIRFLOW_HOME/dags/`) or point
   `[core] dags_folder` at `jobs/dags`. It imports only Airflow, never privacy_eval.
3. The Spark connection, e.g. by environment variable; its host is the master URL
   (`local[2]`, `yarn`, `spark://host:7077`, `k8s://https://host:443`):
   `AIRFLOW_CONN_PRIVACY_EVAL_SPARK='{"conn_type": "spark", "host": "local[2]"}'`
4. Settings, each looked up when the task runs, first found wins: the DAG run's param
   of that name (trigger form or `--conf`), the Airflow Variable `privacy_eval_<name>`,
   the default. Path defaults point into the checkout this file resolves to (through
   the symlink of step 2); a copied file needs the path Variables. Paths are absolute.
   - `config`: the job's YAML config (default: the bundled WBCD example)
   - `conn_id`: Airflow connection of the Spark master (`privacy_eval_spark`)
   - `application`: `jobs/evaluate_privacy.py`
   - `py_files`: `dist/privacy_eval.zip`
   - `spark_binary`: full path of spark-submit (`.venv/bin/spark-submit`)
   - `python`: PYSPARK_PYTHON and PYSPARK_DRIVER_PYTHON (`.venv/bin/python`)
   - `driver_memory`: `spark.driver.memory` (4g)
   - `shuffle_partitions`: `spark.sql.shuffle.partitions` (8)
   - `properties_file`: optional spark-defaults file for every other Spark setting

   The schedule is needed while the file is parsed, so it comes from the environment
   form of its Variable only, `AIRFLOW_VAR_PRIVACY_EVAL_SCHEDULE` (a cron expression
   or a preset such as `@daily`; unset: triggered runs only): a `Variable.get` here
   would query Airflow on every parse of the file.

The Python variables reach spark-submit's own process in local and client mode; YARN
gets them as `spark.yarn.appMasterEnv.*`, and the provider refuses them in standalone
cluster mode.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
from airflow.sdk import DAG, Param

DAG_ID = "privacy_evaluation"
TASK_ID = "evaluate_privacy"
VARIABLE_PREFIX = "privacy_eval_"

# The checkout this file belongs to (jobs/dags/ inside it), through a symlink if deployed
# by one: the default paths point into it.
PROJECT = Path(__file__).resolve().parents[2]
LOG4J2_PROPERTIES = PROJECT / "src" / "privacy_eval" / "log4j2.properties"


@dataclass(frozen=True)
class Setting:
    default: str
    description: str


SETTINGS: dict[str, Setting] = {
    "config": Setting(str(PROJECT / "conf" / "examples" / "wbcd.yaml"), "absolute path of the job's YAML config"),
    "conn_id": Setting("privacy_eval_spark", "Airflow connection whose host is the Spark master"),
    "application": Setting(str(PROJECT / "jobs" / "evaluate_privacy.py"), "the job script"),
    "py_files": Setting(str(PROJECT / "dist" / "privacy_eval.zip"), "the package zip for --py-files"),
    "spark_binary": Setting(str(PROJECT / ".venv" / "bin" / "spark-submit"), "full path of spark-submit"),
    "python": Setting(str(PROJECT / ".venv" / "bin" / "python"), "the job venv's python (PYSPARK_PYTHON)"),
    "driver_memory": Setting("4g", "spark.driver.memory"),
    "shuffle_partitions": Setting("8", "spark.sql.shuffle.partitions"),
    "properties_file": Setting("", "optional spark-defaults file for the other Spark settings"),
}


def setting(name: str) -> str:
    """The Jinja expression for one setting: the run's param, else the Variable, else the default.

    Templated rather than read here, so that parsing the file never queries Airflow and
    a changed Variable applies to the next run without a re-parse.
    """
    default = json.dumps(SETTINGS[name].default)  # a valid Jinja string literal, quotes escaped
    return f"{{{{ params.{name} or var.value.get('{VARIABLE_PREFIX}{name}', {default}) }}}}"


def job_arguments(config: str, run_id: str) -> list[str]:
    """The job's arguments: always the release gate, so a missed target fails the run."""
    return ["--config", config, "--run-id", run_id, "--fail-on-target"]


def run_params() -> dict[str, Param]:
    """One optional param per setting; empty means 'use the Variable or the default'."""
    return {
        name: Param(
            None,
            type=["null", "string"],
            description=f"{s.description}; empty: Variable {VARIABLE_PREFIX}{name}, else {s.default or 'none'}",
        )
        for name, s in SETTINGS.items()
    }


class PrivacyEvaluationOperator(SparkSubmitOperator):
    """SparkSubmitOperator with the connection id and the spark-submit path templated too.

    The provider reads both only when the task runs (its hook is built in ``execute``),
    so rendering them lets them come from params and Variables like every other setting.
    """

    template_fields: Sequence[str] = (*SparkSubmitOperator.template_fields, "_conn_id", "_spark_binary")


with DAG(
    dag_id=DAG_ID,
    schedule=os.environ.get("AIRFLOW_VAR_PRIVACY_EVAL_SCHEDULE") or None,
    start_date=datetime(2026, 1, 1, tzinfo=timezone.utc),
    catchup=False,
    # One evaluation at a time: each one sizes its driver for the whole machine.
    max_active_runs=1,
    params=run_params(),
    doc_md=__doc__,
    tags=["privacy", "spark"],
) as dag:
    PrivacyEvaluationOperator(
        task_id=TASK_ID,
        conn_id=setting("conn_id"),
        spark_binary=setting("spark_binary"),
        application=setting("application"),
        py_files=setting("py_files"),
        properties_file=setting("properties_file"),
        application_args=job_arguments(setting("config"), "{{ run_id }}"),
        conf={
            "spark.driver.memory": setting("driver_memory"),
            "spark.sql.shuffle.partitions": setting("shuffle_partitions"),
            # Spark's own log without failed tasks' reasons (they can quote input
            # records): src/privacy_eval/log4j2.properties. An absolute URI, because a
            # worker's current folder is not the project.
            "spark.driver.defaultJavaOptions": f"-Dlog4j2.configurationFile={LOG4J2_PROPERTIES.as_uri()}",
        },
        env_vars={"PYSPARK_PYTHON": setting("python"), "PYSPARK_DRIVER_PYTHON": setting("python")},
        name="privacy-eval-{{ run_id }}",
        # Exit 2 and 3 are deterministic (bad input, missed target): a retry would only
        # repeat a long job with the same outcome.
        retries=0,
    )
