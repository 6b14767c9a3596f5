"""The one place a SparkSession is built, for the job, the tests and the benchmarks."""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Mapping
from pathlib import Path

from pyspark import SparkConf, SparkContext
from pyspark.sql import SparkSession

# Defaults that spark-submit --conf or conf/spark/*.conf may override. The console
# progress bar garbles the job's own log; phases are logged instead. PySpark's DataFrame
# debugging records the Python call site of every DataFrame and Column function, at the
# cost of extra py4j round trips each: Spark's own error messages lose that
# call site, the job's own messages say what to fix anyway. An Arrow batch for Python is
# cut at maxRecordsPerBatch rows or at maxBytesPerBatch bytes; checking the bytes
# re-measures the batch after every row (Spark skips the check only for Int.MaxValue;
# docs/benchmarks.md, "Linkage attack"). The row cap alone bounds the batches:
# 10,000 (the default) rows of a few numbers and a key. Spark cuts every list of a
# plan's string form (columns, aggregate functions) after maxToStringFields entries, 25
# by default, and warns the first time ("Truncated the string representation of a
# plan"), which a user reads as a problem: both bundled examples warned, their first
# pass over the inputs aggregating about 90 figures per side (the linkage's moments,
# 2 + 4p + p(p+1)/2 for p targets; AIDS also compares 26 columns). The strings only go
# to the Spark UI and to explain(); a table of more than 1,000 columns still warns.
DEFAULT_CONF = {
    "spark.ui.showConsoleProgress": "false",
    "spark.python.sql.dataFrameDebugging.enabled": "false",
    "spark.sql.execution.arrow.maxBytesPerBatch": "2147483647",
    "spark.sql.debug.maxToStringFields": "1000",
}

# Settings every run needs, whoever starts it. Dynamic partition overwrite is what makes
# a re-run replace only its own run_id partition: the STATIC default wipes every other
# run of the results table.
REQUIRED_CONF = {
    "spark.sql.sources.partitionOverwriteMode": "dynamic",
    "spark.sql.session.timeZone": "UTC",
}


# Spark's log4j2 configuration for the job, shipped inside the package: it withholds the
# reasons of failed tasks, which can quote input records, from Spark's own log (see the
# file). A JVM reads it only when it starts: here, for the JVM that build_session itself
# launches (plain `python`, local mode, where the tasks run in the driver JVM too); under
# spark-submit, conf/spark/*.conf pass it instead. defaultJavaOptions rather than
# extraJavaOptions, so that a caller's --driver-java-options or extraJavaOptions (the
# tests set one) add to it instead of replacing it.
LOG4J2_PROPERTIES = Path(__file__).with_name("log4j2.properties")
DRIVER_JAVA_OPTIONS = "spark.driver.defaultJavaOptions"
DRIVER_EXTRA_JAVA_OPTIONS = "spark.driver.extraJavaOptions"
# In local mode the driver JVM runs the tasks too. The throughput collector suits a batch
# job's short-lived buffers better than the default G1: the linkage benchmark ran
# faster with it (docs/benchmarks.md, "Linkage attack"). On a cluster the
# executors' JVM options are the cluster's business (conf/spark/cluster.conf).
LOCAL_GC_OPTION = "-XX:+UseParallelGC"
# Spark's planner recurses once per column in places: grouping rows of 2,000 columns
# overflowed the default thread stack (1 MB) with a StackOverflowError. Threads only
# reserve this much address space; they use what they touch.
DRIVER_STACK_OPTION = "-Xss64m"
# The JVM refuses to start when two collectors are named ("Multiple garbage collectors
# selected"), so a caller's own choice means none is added.
_GC_CHOICE = re.compile(r"-XX:\+Use\w*GC\b")


def build_session(app_name: str = "privacy-eval", extra_conf: Mapping[str, str] | None = None) -> SparkSession:
    """Return a SparkSession; the master comes from spark-submit, else `local[*]`.

    Python workers must run this interpreter: PySpark takes the worker interpreter only
    from PYSPARK_PYTHON, and the system `python3` lacks pandas and pyarrow. On a cluster
    the executors' interpreter is the cluster's business, so only local masters get it.
    """
    # Under spark-submit the JVM already runs and holds --master and every --conf as system
    # properties; a SparkConf made before connecting to it sees none of them (the job then
    # silently ran in local[*] on a cluster: tests/job/test_cluster.py).
    if "PYSPARK_GATEWAY_PORT" in os.environ:
        SparkContext._ensure_initialized()
    conf = SparkConf()
    master = conf.get("spark.master", None)
    if master is None or master.startswith("local"):
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    builder = SparkSession.builder.appName(app_name)
    if master is None:
        builder = builder.master("local[*]")
    defaults = {k: v for k, v in DEFAULT_CONF.items() if conf.get(k, None) is None}
    settings = {**defaults, **REQUIRED_CONF, **(extra_conf or {})}
    # No gateway yet: getOrCreate is about to launch the JVM (under spark-submit it runs
    # already, see above). No file: the package came from a zip (--py-files), which only
    # spark-submit uses. A file: URI needs no quoting in the option string; the caller's
    # options come last, so that a -Dlog4j2.configurationFile of their own wins.
    if SparkContext._gateway is None:
        local = str(settings.get("spark.master", master or "local")).startswith("local")
        extra = settings.get(DRIVER_EXTRA_JAVA_OPTIONS, conf.get(DRIVER_EXTRA_JAVA_OPTIONS, None))
        settings[DRIVER_JAVA_OPTIONS] = driver_java_options(settings.get(DRIVER_JAVA_OPTIONS), extra, local)
    for key, value in settings.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    for key, value in REQUIRED_CONF.items():  # getOrCreate may have returned a live session
        spark.conf.set(key, value)
    return spark


def driver_java_options(own: str | None, extra: str | None, local: bool) -> str:
    """The driver JVM's default options: the log4j2 file, the thread stack size, the
    local collector unless the caller's default (`own`) or extra options name one, then
    `own`, last so that the caller's options win."""
    options = [DRIVER_STACK_OPTION]
    if LOG4J2_PROPERTIES.is_file():
        options.append(f"-Dlog4j2.configurationFile={LOG4J2_PROPERTIES.resolve().as_uri()}")
    if local and not _GC_CHOICE.search(f"{own or ''} {extra or ''}"):
        options.append(LOCAL_GC_OPTION)
    return " ".join(filter(None, [*options, own]))
