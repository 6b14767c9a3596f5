"""The DAG's tests (test_dag.py) run only in Airflow's own venv, through scripts/airflow-check.

The main suite's venv has no Airflow and must never get it (the Spark provider's
pyspark-client overwrites pyspark), so there only test_airflow_check.py is collected:
it runs scripts/airflow-check, which runs test_dag.py in that venv.
"""

from __future__ import annotations

import atexit
import importlib.util
import os
import shutil
import tempfile

if importlib.util.find_spec("airflow") is None:
    # The main suite: only the check that runs this folder in Airflow's own venv.
    collect_ignore = ["test_dag.py"]
else:
    # Airflow's venv (scripts/airflow-check): the DAG tests, not the check that started them.
    collect_ignore = ["test_airflow_check.py"]
if importlib.util.find_spec("airflow") is not None and "AIRFLOW_HOME" not in os.environ:
    # Run directly rather than by the script: still keep Airflow's files out of ~/airflow.
    # Set before any test module imports airflow, which reads it on import.
    os.environ["AIRFLOW_HOME"] = tempfile.mkdtemp(prefix="airflow-home-")
    atexit.register(shutil.rmtree, os.environ["AIRFLOW_HOME"], ignore_errors=True)
