"""tests/airflow runs only in Airflow's own venv, through scripts/airflow-check.

The main suite's venv has no Airflow and must never get it (the Spark provider's
pyspark-client overwrites pyspark), so there this folder is not collected at all.
"""

from __future__ import annotations

import atexit
import importlib.util
import os
import shutil
import tempfile

if importlib.util.find_spec("airflow") is None:
    collect_ignore_glob = ["*.py"]
elif "AIRFLOW_HOME" not in os.environ:
    # Run directly rather than by the script: still keep Airflow's files out of ~/airflow.
    # Set before any test module imports airflow, which reads it on import.
    os.environ["AIRFLOW_HOME"] = tempfile.mkdtemp(prefix="airflow-home-")
    atexit.register(shutil.rmtree, os.environ["AIRFLOW_HOME"], ignore_errors=True)
