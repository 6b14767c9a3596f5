"""The results tables `metric_results` and `column_protection` (docs/interface.md, "Results tables").

Parquet under `<warehouse>/<database>.db/<table>/`, partitioned by run_id, registered
in the Spark session's catalog as external tables at a fixed location. A run's rows are one
partition folder, `run_id=<id, escaped as Spark does>`, in each table. Writing a run
replaces that folder in both tables; other runs are never touched.

A run's rows land in both tables at once or not at all: `write_run` hands them to the
commit protocol in commit.py (journal, renames, recovery of abandoned writes).
"""

from __future__ import annotations

import json
import os
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql import types as T

from privacy_eval.commit import commit_steps, recover, replace_run, sql_text
from privacy_eval.errors import CommitError, InputError, UserError
from privacy_eval.frames import local_frame, quote

__all__ = [
    "AT_LEAST", "AT_MOST", "AT_MOST_ABOVE_EXPECTED", "COLUMN_PROTECTION", "COMMIT_STEPS", "METRIC_RESULTS", "TABLES",
    "ColumnRow", "CommitError", "Comparison", "MetricRow", "RunRecord", "ensure_tables", "write_run",
]

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


# The one status with a measurable value; every other (undefined, not_measurable, misaligned)
# has none, so a target on it cannot be checked.
MEASURED = "ok"


@dataclass(frozen=True)
class Comparison:
    """How a value meets its target, as its metric states it: at least the target (a
    protection, higher is safer) or at most (a risk or a rate, lower is safer). With
    `baseline`, the target bounds the value's distance from `details[baseline]`: the
    value must be at least (at most) that baseline plus the target."""

    at_least: bool
    baseline: str | None = None

    def passes(self, value: float, target: float, details: dict[str, Any]) -> bool:
        # With a baseline: value <= baseline + target, i.e. value - baseline <= target
        # (in this form a value of exactly baseline + target, as written, passes).
        limit = target if self.baseline is None else details[self.baseline] + target
        return value >= limit if self.at_least else value <= limit

    def text(self, target: float, ascii: bool = False) -> str:
        """"≥ 90", "≤ 0.05", "≤ expected + 0.02" (">=" and "<=" when `ascii`)."""
        op = (">=" if self.at_least else "<=") if ascii else ("≥" if self.at_least else "≤")
        if self.baseline is None:
            return f"{op} {target:g}"
        sign = "-" if target < 0 else "+"
        if not ascii and sign == "-":
            sign = "−"
        return f"{op} {self.baseline} {sign} {abs(target):g}"


AT_LEAST = Comparison(at_least=True)
AT_MOST = Comparison(at_least=False)
# The holdout share: its excess over the share expected without memorisation is bounded.
AT_MOST_ABOVE_EXPECTED = Comparison(at_least=False, baseline="expected")


@dataclass(frozen=True)
class MetricRow:
    """One metric of one run, before the run-level columns are added. Its metric states
    how the value meets the target (`comparison`)."""

    metric: str
    value: float | None
    unit: str                       # percent | fraction | records | distance | ratio
    target: float | None
    status: str = "ok"              # ok | undefined | not_measurable | misaligned
    numerator: int | None = None
    denominator: int | None = None
    details: dict[str, Any] = field(default_factory=dict)
    comparison: Comparison = field(kw_only=True)

    def __post_init__(self) -> None:
        baseline = self.comparison.baseline
        if baseline is not None and self.value is not None and self.target is not None:
            value = self.details.get(baseline)
            if not isinstance(value, (int, float)) or isinstance(value, bool):
                # A bug of the metric: without the baseline the row could not be judged.
                raise ValueError(f"a {self.metric} row with a value and a target needs details['{baseline}']")

    @property
    def passed(self) -> bool | None:
        """Whether the value meets the target (`comparison`); None without a target or a
        measured value."""
        if self.target is None or self.value is None or self.status != MEASURED:
            return None
        return self.comparison.passes(self.value, self.target, self.details)

    def target_text(self, ascii: bool = False) -> str | None:
        """The comparison a value must meet, as shown to users (`Comparison.text`); None
        without a target."""
        return None if self.target is None else self.comparison.text(self.target, ascii)

    @property
    def fails_gate(self) -> bool:
        """Whether --fail-on-target stops the release: a missed target, or a target that
        could not be checked because there is no measurement (a release that is not
        row-aligned, a linkage whose true pairs were all blocked away, an NNDR without a
        second original). A gate that let those pass would fail open, towards "looks
        safe": every status but MEASURED fails it, also one added later."""
        return self.passed is False or (self.target is not None and self.status != MEASURED)


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


# Commit order: dashboards find a run through metric_results, so that table changes last.
TABLES = (COLUMN_PROTECTION, METRIC_RESULTS)
SCHEMAS = {COLUMN_PROTECTION: COLUMN_PROTECTION_SCHEMA, METRIC_RESULTS: METRIC_RESULTS_SCHEMA}
#: The steps of writing a run, in order (commit.py); before "committed" nothing a reader sees changes.
COMMIT_STEPS = commit_steps(TABLES)


def ensure_tables(spark: SparkSession, warehouse: str, database: str) -> None:
    """Register the database and both tables, idempotently, at their fixed locations.

    The in-memory catalog forgets tables between processes while their folders stay,
    so every run re-declares them and recovers the partitions already on disk. Before
    that, results writes that a stopped process left are completed (committed) or
    removed (not committed), so that the tables hold whole runs only.
    """
    db_location = _join(warehouse, f"{database}.db")
    if "://" not in warehouse and not warehouse.startswith("file:"):
        try:
            os.makedirs(db_location, exist_ok=True)
            for table in TABLES:
                os.makedirs(os.path.join(db_location, table), exist_ok=True)
        except OSError as exc:
            raise InputError(f"results.warehouse: cannot create {db_location} ({exc.strerror})") from None
        if not os.access(db_location, os.W_OK):
            raise InputError(f"results.warehouse: {db_location} is not writable")
    qdb = quote(database)
    spark.sql(f"CREATE DATABASE IF NOT EXISTS {qdb} LOCATION '{sql_text(db_location)}'")
    _check_database_location(spark, database, db_location)
    for table in TABLES:
        columns = ", ".join(f"{quote(f.name)} {f.dataType.simpleString()}" for f in SCHEMAS[table].fields)
        location = _join(db_location, table)
        spark.sql(
            f"CREATE TABLE IF NOT EXISTS {qdb}.{table} ({columns}) USING parquet "
            f"PARTITIONED BY (run_id) LOCATION '{sql_text(location)}'"
        )
    recover(spark, database, TABLES)
    for table in TABLES:
        spark.sql(f"ALTER TABLE {qdb}.{table} RECOVER PARTITIONS")


def _check_database_location(spark: SparkSession, database: str, db_location: str) -> None:
    """Refuse a database this Spark session already holds in another warehouse.

    CREATE DATABASE IF NOT EXISTS keeps the first location, so a notebook evaluating into
    a second warehouse under the same database name would silently write into the first.
    Re-pointing is not offered: dropping a database of the in-memory catalog deletes its
    folder, results included.
    """
    uri = spark._jsparkSession.sessionState().catalog().getDatabaseMetadata(database).locationUri()
    scheme = uri.getScheme()
    if scheme in (None, "file"):
        wanted = db_location[len("file:"):] if db_location.startswith("file:") else db_location
        same = os.path.normpath(str(uri.getPath())) == os.path.normpath(os.path.abspath(wanted))
    else:
        same = str(uri.toString()).rstrip("/") == db_location.rstrip("/")
    if not same:
        raise InputError(
            f"results.database '{database}' is already registered in this Spark session at "
            f"{uri.toString()}, not at {db_location}: a Spark session writes one database name to one "
            "warehouse; use another database name, or a new Spark session"
        )


# Spark's escaping of partition values in folder names (ExternalCatalogUtils.escapePathName,
# outside Windows): these characters become %XX (two upper-case hex digits); every other
# character, non-ASCII letters included, is kept as it is.
_ESCAPED_IN_PARTITION_PATHS = frozenset(
    [chr(c) for c in range(0x01, 0x20)] + list("\"#%'*/:=?\\\x7f{[]^")
)
# The partition value Spark writes for null and reads back as null.
_SPARK_NULL_PARTITION = "__HIVE_DEFAULT_PARTITION__"
# Stands for undecodable bytes (see check_run_id).
REPLACEMENT_CHARACTER = "\ufffd"
# A file name (one path component) on Linux file systems and HDFS, in bytes.
MAX_FOLDER_NAME_BYTES = 255


def partition_folder_name(run_id: str) -> str:
    """`run_id=<id>` escaped as Spark names a run's partition folder (':' -> %3A)."""
    return "run_id=" + "".join(f"%{ord(c):02X}" if c in _ESCAPED_IN_PARTITION_PATHS else c for c in run_id)


def check_run_id(run_id: str, name: str = "run_id") -> None:
    """Refuse, before any work, a run id that Spark cannot store as a partition value
    and read back unchanged, or that would break the job's one-line output. `name` is
    what the message calls it (the job: `--run-id`)."""
    if not run_id.strip():
        raise UserError(f"{name} must not be empty or blank (leave the option out for a new UUID)")
    for position, char in enumerate(run_id, start=1):
        if unicodedata.category(char) in ("Cc", "Cf", "Cs", "Zl", "Zp"):
            raise UserError(
                f"{name} contains a control or invisible character (U+{ord(char):04X} at position {position})"
            )
        if char == REPLACEMENT_CHARACTER:
            # What spark-submit's launcher makes of bytes invalid in the locale's encoding:
            # two different ids would arrive as one, and replace each other's run.
            raise UserError(
                f"{name} contains U+FFFD, the replacement character (position {position}), which stands for "
                "bytes that could not be decoded: spark-submit writes it for bytes that are not valid in the "
                "locale's encoding, so the id given cannot be known"
            )
    if run_id == _SPARK_NULL_PARTITION:
        raise UserError(f"{name} {_SPARK_NULL_PARTITION} is reserved by Spark (it reads it back as null)")
    size = len(partition_folder_name(run_id).encode("utf-8"))
    if size > MAX_FOLDER_NAME_BYTES:
        raise UserError(
            f"{name} is too long: its partition folder name (run_id=<id>, UTF-8, with Spark's %XX escapes) "
            f"would be {size} bytes, at most {MAX_FOLDER_NAME_BYTES}"
        )


def write_run(
    spark: SparkSession,
    database: str,
    run: RunRecord,
    metrics: Sequence[MetricRow],
    columns: Sequence[ColumnRow],
) -> None:
    """Replace this run's partition in both tables, atomically (see the module docstring).

    `ensure_tables` must have registered the tables in this Spark session. A table without
    rows for the run (no column_direct_match metric) loses the run's earlier partition.
    """
    check_run_id(run.run_id)
    rows: dict[str, list[tuple]] = {
        COLUMN_PROTECTION: [
            (run.dataset, c.column_name, c.matches, c.distinct_synthetic, c.protection,
             c.risk_rank, c.below_target, run.run_id)
            for c in columns
        ],
        METRIC_RESULTS: [
            (run.dataset, m.metric, m.value, m.unit, m.target, m.passed, m.status, m.numerator,
             m.denominator, json.dumps(m.details, sort_keys=True, default=_json_default),
             run.n_original, run.n_synthetic, run.config_sha256, run.input_fingerprint,
             run.tool_version, run.started_at, run.finished_at, run.run_id)
            for m in metrics
        ],
    }
    # A few dozen rows: one file.
    replace_run(spark, database, run.run_id, {
        table: local_frame(spark, rows[table], SCHEMAS[table]).coalesce(1) if rows[table] else None
        for table in TABLES
    })


def _json_default(value: Any) -> Any:
    if hasattr(value, "item"):  # numpy scalars
        return value.item()
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")


def _join(base: str, name: str) -> str:
    return base.rstrip("/") + "/" + name
