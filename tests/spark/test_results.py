"""Small frames built on the driver (the results rows): frames.local_frame against
PySpark's own conversion."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from pyspark.testing import assertDataFrameEqual

from privacy_eval.frames import local_frame
from privacy_eval.results import COLUMN_PROTECTION_SCHEMA, METRIC_RESULTS_SCHEMA


def _metric_row(i: int, started: datetime, value: object) -> tuple:
    return ("wbcd", f"metric {i}", value, "percent", 90.0, i % 2 == 0, "ok", 3 * i, 683,
            '{"n": 683, "text": "é, \\"quoted\\""}', 683, 682, "a" * 64, "b" * 64, "0.1.0",
            started, started + timedelta(seconds=1.5), "manual__2026-11-29T12:34:15+00:00")


def test_local_frame_equals_create_data_frame_value_for_value(spark):
    aware = datetime(2026, 12, 3, 5, 6, 7, 891011, tzinfo=timezone(timedelta(hours=2)))
    rows = [
        _metric_row(0, datetime(2026, 12, 3, 5, 6, 7, 1, tzinfo=timezone.utc), 93.41142020497804),
        _metric_row(1, aware, 1 / 3),
        _metric_row(2, datetime(2026, 12, 3, 5, 6, 7, 891011), float("nan")),  # naive: local time
        (None,) * (len(METRIC_RESULTS_SCHEMA.fields) - 1) + ("run",),
    ]
    got = local_frame(spark, rows, METRIC_RESULTS_SCHEMA)
    assert got.schema == METRIC_RESULTS_SCHEMA
    assertDataFrameEqual(got, spark.createDataFrame(rows, METRIC_RESULTS_SCHEMA), checkRowOrder=True)
    # The same instant whatever the offset it was given in.
    started = {r["metric"]: r["started_at"] for r in got.collect()}
    assert started["metric 1"] == aware.astimezone(timezone.utc).replace(tzinfo=None)


def test_local_frame_keeps_longs_and_doubles_exact(spark):
    rows = [("d", "c", 2**62 + 1, 2**53 + 1, 5e-324, 1, True, "run"), ("d", "e", 0, 0, -0.0, 2, None, "run")]
    got = local_frame(spark, rows, COLUMN_PROTECTION_SCHEMA).collect()
    assert [tuple(r) for r in got] == [tuple(r) for r in spark.createDataFrame(rows, COLUMN_PROTECTION_SCHEMA).collect()]
    assert got[0]["matches"] == 2**62 + 1 and got[0]["protection"] == 5e-324


def test_local_frame_of_no_rows_has_the_schema(spark):
    got = local_frame(spark, [], COLUMN_PROTECTION_SCHEMA)
    assert got.schema == COLUMN_PROTECTION_SCHEMA and got.count() == 0
