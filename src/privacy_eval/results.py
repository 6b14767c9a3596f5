"""The results tables `metric_results` and `column_protection` (CONTRACT.md).

Parquet under `<warehouse>/<database>.db/<table>/`, partitioned by run_id, registered
in the session catalog as external tables at a fixed location. With dynamic partition
overwrite (set by session.build_session), writing a run replaces that run's partition
only: a re-run with the same id replaces its rows, other runs stay.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Sequence

from pyspark.sql import SparkSession
from pyspark.sql import types as T

from privacy_eval.errors import InputError

METRIC_RESULTS = "metric_results"
COLUMN_PROTECTION = "column_protection"

METRIC_RESULTS_SCHEMA = T.StructType([
    T.StructField("dataset", T.StringType()),
    T.StructField("metric", T.StringType()),
    T.StructField("value", T.DoubleType()),
    T.StructField("unit", T.StringType()),
    T.StructField("target", T.DoubleType()),
    T.StructField("passed", T.BooleanType()),
    T.StructField("status", T.StringType()),
    T.StructField("numerator", T.LongType()),
    T.StructField("denominator", T.LongType()),
    T.StructField("details", T.StringType()),
    T.StructField("n_original", T.LongType()),
    T.StructField("n_synthetic", T.LongType()),
    T.StructField("config_sha256", T.StringType()),
    T.StructField("input_fingerprint", T.StringType()),
    T.StructField("tool_version", T.StringType()),
    T.StructField("started_at", T.TimestampType()),
    T.StructField("finished_at", T.TimestampType()),
    T.StructField("run_id", T.StringType()),  # partition column: Spark keeps it last
])

COLUMN_PROTECTION_SCHEMA = T.StructType([
    T.StructField("dataset", T.StringType()),
    T.StructField("column_name", T.StringType()),
    T.StructField("matches", T.LongType()),
    T.StructField("distinct_synthetic", T.LongType()),
    T.StructField("protection", T.DoubleType()),
    T.StructField("risk_rank", T.IntegerType()),
    T.StructField("below_target", T.BooleanType()),
    T.StructField("run_id", T.StringType()),
])


@dataclass(frozen=True)
class MetricRow:
    """One metric of one run, before the run-level columns are added."""

    metric: str
    value: float | None
    unit: str                       # "percent" or "fraction"
    target: float | None
    status: str = "ok"              # ok | undefined | not_measurable | misaligned
    numerator: int | None = None
    denominator: int | None = None
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def passed(self) -> bool | None:
        """Protection (percent) passes at value >= target; success rates at value <= target."""
        if self.target is None or self.value is None or self.status != "ok":
            return None
        if self.unit == "percent":
            return self.value >= self.target
        return self.value <= self.target


@dataclass(frozen=True)
class ColumnRow:
    column_name: str
    matches: int
    distinct_synthetic: int
    protection: float
    risk_rank: int
    below_target: bool | None


@dataclass(frozen=True)
class RunRecord:
    run_id: str
    dataset: str
    n_original: int
    n_synthetic: int
    config_sha256: str
    input_fingerprint: str
    tool_version: str
    started_at: datetime
    finished_at: datetime


def ensure_tables(spark: SparkSession, warehouse: str, database: str) -> None:
    """Register the database and both tables, idempotently, at their fixed locations.

    The in-memory catalog forgets tables between processes while their folders stay,
    so every run re-declares them and recovers the partitions already on disk.
    """
    db_location = _join(warehouse, f"{database}.db")
    if "://" not in warehouse and not warehouse.startswith("file:"):
        try:
            os.makedirs(db_location, exist_ok=True)
            for table in (METRIC_RESULTS, COLUMN_PROTECTION):
                os.makedirs(os.path.join(db_location, table), exist_ok=True)
        except OSError as exc:
            raise InputError(f"results.warehouse: cannot create {db_location} ({exc.strerror})") from None
        if not os.access(db_location, os.W_OK):
            raise InputError(f"results.warehouse: {db_location} is not writable")
    qdb = _quote(database)
    spark.sql(f"CREATE DATABASE IF NOT EXISTS {qdb} LOCATION '{_sql_text(db_location)}'")
    for table, schema in ((METRIC_RESULTS, METRIC_RESULTS_SCHEMA), (COLUMN_PROTECTION, COLUMN_PROTECTION_SCHEMA)):
        columns = ", ".join(f"{_quote(f.name)} {f.dataType.simpleString()}" for f in schema.fields)
        location = _join(db_location, table)
        spark.sql(
            f"CREATE TABLE IF NOT EXISTS {qdb}.{table} ({columns}) USING parquet "
            f"PARTITIONED BY (run_id) LOCATION '{_sql_text(location)}'"
        )
        spark.sql(f"ALTER TABLE {qdb}.{table} RECOVER PARTITIONS")


def write_run(
    spark: SparkSession,
    database: str,
    run: RunRecord,
    metrics: Sequence[MetricRow],
    columns: Sequence[ColumnRow],
) -> None:
    """Replace this run's partition in both tables.

    column_protection is written first: a run is visible to dashboards through
    metric_results, so that table changes last.
    """
    column_rows = [
        (run.dataset, c.column_name, c.matches, c.distinct_synthetic, c.protection,
         c.risk_rank, c.below_target, run.run_id)
        for c in columns
    ]
    metric_rows = [
        (run.dataset, m.metric, m.value, m.unit, m.target, m.passed, m.status, m.numerator,
         m.denominator, json.dumps(m.details, sort_keys=True, default=_json_default),
         run.n_original, run.n_synthetic, run.config_sha256, run.input_fingerprint,
         run.tool_version, run.started_at, run.finished_at, run.run_id)
        for m in metrics
    ]
    qdb = _quote(database)
    for table, schema, rows in (
        (COLUMN_PROTECTION, COLUMN_PROTECTION_SCHEMA, column_rows),
        (METRIC_RESULTS, METRIC_RESULTS_SCHEMA, metric_rows),
    ):
        if not rows:
            # Still clear rows an earlier run with this id left: a static partition
            # overwrite with no rows empties exactly that partition.
            names = ", ".join(_quote(f.name) for f in schema.fields if f.name != "run_id")
            spark.sql(
                f"INSERT OVERWRITE TABLE {qdb}.{table} PARTITION (run_id = '{_sql_text(run.run_id)}') "
                f"SELECT {names} FROM {qdb}.{table} WHERE false"
            )
            continue
        target = f"{qdb}.{table}"
        frame = spark.createDataFrame(rows, schema).coalesce(1)
        # insertInto matches columns by position, so follow the table's own order.
        frame.select(*spark.table(target).columns).write.insertInto(target, overwrite=True)


def _json_default(value: Any) -> Any:
    if hasattr(value, "item"):  # numpy scalars
        return value.item()
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")


def _join(base: str, name: str) -> str:
    return base.rstrip("/") + "/" + name


def _quote(identifier: str) -> str:
    return "`" + identifier.replace("`", "``") + "`"


def _sql_text(text: str) -> str:
    return text.replace("\\", "\\\\").replace("'", "\\'")
