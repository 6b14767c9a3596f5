"""The Spark metrics against the plain pandas implementation in tests/support/reference.py,
on seeded random data with nulls, duplicates, leaked rows and int-vs-double columns."""

from __future__ import annotations

import pytest
from pyspark.sql import functions as F

from privacy_eval import frames
from privacy_eval.config import (
    ColumnDirectMatchConfig,
    KnowledgeProtectionConfig,
    MetricsConfig,
    RowDirectMatchConfig,
)
from privacy_eval.evaluation import evaluate_inputs
from privacy_eval.inputs import prepare_inputs
from tests.support import datagen, reference

METRICS = MetricsConfig(
    row_direct_match=RowDirectMatchConfig(),
    column_direct_match=ColumnDirectMatchConfig(),
    knowledge_protection=KnowledgeProtectionConfig(known_variables=datagen.KNOWN),
)


def _spark_figures(spark, original, synthetic):
    inputs = prepare_inputs(
        spark.createDataFrame(original), spark.createDataFrame(synthetic), row_key="id"
    )
    evaluation = evaluate_inputs(inputs, METRICS)
    by_name = {m.metric: m for m in evaluation.metrics}
    return by_name, {c.column_name: c for c in evaluation.columns}


@pytest.fixture(scope="module")
def generated():
    return datagen.generate(60_000, seed=7)


@pytest.fixture(scope="module")
def expected(generated):
    original, synthetic = generated
    return {
        "rdm": reference.row_direct_match(original, synthetic, datagen.COLUMNS),
        "cdm": reference.column_direct_match(original, synthetic, datagen.COLUMNS, "id"),
        "kpr": reference.knowledge_protection(
            original, synthetic, datagen.COLUMNS, datagen.KNOWN, datagen.NUMERIC
        ),
    }


def test_generated_data_exercises_the_edge_cases(generated, expected):
    # Guards the property test itself: without these features it would prove little.
    original, synthetic = generated
    assert original.isna().any().sum() >= 3 and synthetic.isna().any().sum() >= 3
    assert expected["rdm"]["n_singletons"] < len(original)          # duplicated rows
    assert expected["rdm"]["reproduced"] > 100                       # leaked rows
    assert synthetic[datagen.COLUMNS].duplicated().sum() > 100       # synthetic duplicates
    assert 0 < expected["kpr"]["exposed"] < expected["kpr"]["n_singletons"]
    assert str(original["age"].dtype) == "Int64" and synthetic["age"].dtype == "float64"


@pytest.mark.parametrize("partitions", ["1", "16"])
def test_spark_equals_pandas_reference(spark, sql_conf, generated, expected, partitions):
    sql_conf({"spark.sql.shuffle.partitions": partitions})
    metrics, columns = _spark_figures(spark, *generated)

    rdm, want = metrics["row_direct_match_protection"], expected["rdm"]
    assert rdm.numerator == want["reproduced"]
    assert rdm.details["n_singletons"] == want["n_singletons"]
    assert rdm.denominator == want["n"]
    assert rdm.value == pytest.approx(want["protection"], abs=1e-9)

    want_columns = expected["cdm"]["per_column"]
    assert set(columns) == set(want_columns)
    for name, column in columns.items():
        assert column.matches == want_columns[name]["matches"], name
        assert column.distinct_synthetic == want_columns[name]["distinct"], name
        assert column.protection == pytest.approx(want_columns[name]["protection"], abs=1e-9)
    assert metrics["column_direct_match_protection"].value == pytest.approx(
        expected["cdm"]["protection"], abs=1e-9
    )
    ranks = sorted(columns.values(), key=lambda c: c.risk_rank)
    assert [c.protection for c in ranks] == sorted(c.protection for c in ranks)

    kpr, want = metrics["knowledge_protection_rate"], expected["kpr"]
    assert kpr.numerator == want["exposed"]
    assert kpr.details["unique_synthetic_profiles"] == want["unique_synthetic_profiles"]
    assert kpr.value == pytest.approx(want["protection"], abs=1e-9)


@pytest.mark.parametrize("digest", ["row hash", "16 values"])
def test_occurrences_counted_by_digests_give_the_reference_figures(
    spark, sql_conf, monkeypatch, forced_digests, generated, expected, digest
):
    # The digest route (frames.digested_occurrences) forced on these six columns. With 16
    # digest values for 120,000 rows nearly every group mixes different rows: decided
    # groups of one row stay exact, and the undecided rows, too many to broadcast, are
    # found again through a shuffle.
    if digest == "16 values":
        monkeypatch.setattr(frames, "row_digest", lambda columns: F.pmod(F.xxhash64(*columns), F.lit(16)))
        monkeypatch.setattr(frames, "BROADCAST_DIGESTS", 0)
        sql_conf({"spark.sql.autoBroadcastJoinThreshold": "-1"})  # or the planner broadcasts them anyway
    metrics, _ = _spark_figures(spark, *generated)
    assert forced_digests == [[c for c in datagen.COLUMNS if c in datagen.KNOWN]]

    rdm, want = metrics["row_direct_match_protection"], expected["rdm"]
    assert (rdm.numerator, rdm.details["n_singletons"], rdm.denominator) == (
        want["reproduced"], want["n_singletons"], want["n"]
    )
    kpr, want = metrics["knowledge_protection_rate"], expected["kpr"]
    assert (kpr.numerator, kpr.details["unique_synthetic_profiles"]) == (
        want["exposed"], want["unique_synthetic_profiles"]
    )
    assert kpr.value == pytest.approx(want["protection"], abs=1e-9)
