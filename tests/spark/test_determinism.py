"""Same inputs and configuration, same figures: across shuffle partitions, input row
order and repeated runs, for all four metric families; and the input fingerprint
follows the content, not the order."""

from __future__ import annotations

import math
import random
from fractions import Fraction

import numpy as np
import pandas as pd
import pytest

from privacy_eval.config import (
    ColumnDirectMatchConfig,
    KnowledgeProtectionConfig,
    LinkageConfig,
    MetricsConfig,
    RowDirectMatchConfig,
)
from privacy_eval.evaluation import Evaluation, evaluate_inputs
from privacy_eval.inputs import prepare_inputs
from tests.support import datagen
from tests.support.asserts import assert_same
from tests.support.evaluations import snapshot

N_ROWS = 2000

METRICS = MetricsConfig(
    row_direct_match=RowDirectMatchConfig(),
    column_direct_match=ColumnDirectMatchConfig(),
    knowledge_protection=KnowledgeProtectionConfig(known_variables=datagen.KNOWN),
    linkage=LinkageConfig(
        targets=["age", "income", "score"], blocking=["grp"], drop_incomplete=True, top_k=[1, 5]
    ),
)


@pytest.fixture(scope="module")
def tables() -> tuple[pd.DataFrame, pd.DataFrame]:
    """datagen's pair plus a blocking column `grp` that makes one block big enough for
    the linkage's kd-tree path (over 10^6 candidate pairs) and many small ones scored
    pair by pair (eccentricity and the precision-recall summary), null included."""
    original, synthetic = datagen.generate(N_ROWS, seed=11)
    for frame in (original, synthetic):
        ids = frame["id"].to_numpy()
        small = np.array([f"g{i % 23:02d}" if i % 23 else None for i in ids], dtype=object)
        frame["grp"] = np.where(ids % 4 == 0, small, "big")
    return original, synthetic


def evaluate(spark, original: pd.DataFrame, synthetic: pd.DataFrame) -> Evaluation:
    inputs = prepare_inputs(spark.createDataFrame(original), spark.createDataFrame(synthetic), row_key="id")
    try:
        return evaluate_inputs(inputs, METRICS)
    finally:
        inputs.unpersist()


@pytest.fixture(scope="module")
def baseline(spark, tables) -> dict:
    return snapshot(evaluate(spark, *tables))


def test_baseline_exercises_every_metric_and_path(baseline):
    metrics = baseline["metrics"]
    assert set(metrics) == {
        "row_direct_match_protection", "column_direct_match_protection", "knowledge_protection_rate",
        "linkage_success_rate", "linkage_success_rate_mahalanobis", "linkage_success_rate_weighted",
    }
    assert all(m["status"] == "ok" for m in metrics.values())
    assert metrics["row_direct_match_protection"]["numerator"] > 0
    assert 0 < metrics["knowledge_protection_rate"]["numerator"]
    assert 0 < metrics["linkage_success_rate"]["value"] < 1
    linkage = metrics["linkage_success_rate_mahalanobis"]["details"]
    assert linkage["shared"]["dropped_incomplete_original"] > 0
    # The big block goes through the kd-tree, the small ones pair by pair, with a
    # precision-recall summary long enough to be taken at approximate quantiles.
    assert linkage["confidence"]["computed"] == "partial"
    assert linkage["confidence"]["exact"] is False


@pytest.mark.parametrize("partitions", ["1", "4", "32"])
def test_shuffle_partitions_change_nothing(spark, sql_conf, tables, baseline, partitions):
    sql_conf({"spark.sql.shuffle.partitions": partitions})
    assert_same(snapshot(evaluate(spark, *tables)), baseline)


def test_input_row_order_changes_nothing(spark, tables, baseline):
    original, synthetic = tables
    reordered = (
        original.sample(frac=1.0, random_state=1).reset_index(drop=True),
        synthetic.sample(frac=1.0, random_state=2).reset_index(drop=True),
    )
    assert_same(snapshot(evaluate(spark, *reordered)), baseline)


def test_repeated_run_changes_nothing(spark, tables, baseline):
    assert_same(snapshot(evaluate(spark, *tables)), baseline)


def test_a_value_on_a_bin_edge_keeps_its_bin_under_any_partitioning(spark, sql_conf):
    """KPR's grid from exact sums: a synthetic value within a few ulps of a bin edge (of
    the grid a sum of doubles gives under one partitioning) lands in the same bin under
    any, the one the exact mean and sd give."""
    rng = random.Random(3)
    values = list(dict.fromkeys(rng.choice([0.1, 0.2, 0.3, 0.7, 1.1, 2.3, 0.01, 3.7]) * rng.randint(1, 97)
                                for _ in range(60)))  # distinct: every original record is in U
    edge = 2.499629691644632
    config = MetricsConfig(knowledge_protection=KnowledgeProtectionConfig(known_variables=["x"]))
    found = set()
    for partitions in ("1", "2", "3"):
        sql_conf({"spark.sql.shuffle.partitions": partitions})
        inputs = prepare_inputs(spark.createDataFrame(list(enumerate(values)), "id long, x double"),
                                spark.createDataFrame([(1000, edge)], "id long, x double"), row_key="id")
        try:
            (kpr,) = evaluate_inputs(inputs, config).metrics
        finally:
            inputs.unpersist()
        found.add((kpr.numerator, kpr.details["bins"]["x"]["step"], kpr.details["bins"]["x"]["origin"]))
    exact = [Fraction(v) for v in values]
    n, mean = len(exact), sum(exact) / len(exact)
    step = 0.05 * float(mean)
    origin = min(values) - math.sqrt(float(sum((x - mean) ** 2 for x in exact) / (n - 1))) / 10.0

    def bin_of(x: float) -> float:
        return math.floor((x - origin) / step)

    assert found == {(sum(bin_of(v) == bin_of(edge) for v in values), step, origin)}


def test_fingerprint_follows_content_not_order(spark, tables):
    original, synthetic = tables

    def fingerprint(o: pd.DataFrame, s: pd.DataFrame) -> str:
        inputs = prepare_inputs(spark.createDataFrame(o), spark.createDataFrame(s), row_key="id")
        inputs.unpersist()
        return inputs.fingerprint

    def edited(frame: pd.DataFrame, row: int, column: str, value) -> pd.DataFrame:
        out = frame.copy()
        out.loc[row, column] = value
        return out

    base = fingerprint(original, synthetic)
    reordered = fingerprint(original.iloc[::-1].reset_index(drop=True), synthetic.sample(frac=1.0, random_state=3))
    swapped = synthetic.copy()  # the same values of `income`, on other rows
    swapped.loc[[0, 1], "income"] = synthetic.loc[[1, 0], "income"].to_numpy()
    renumbered = synthetic.copy()  # the same rows, two keys exchanged
    renumbered.loc[[0, 1], "id"] = synthetic.loc[[1, 0], "id"].to_numpy()
    assert synthetic.loc[0, "income"] != synthetic.loc[1, "income"]
    variants = {
        "original value": fingerprint(edited(original, 5, "city", "city_99"), synthetic),
        "synthetic value": fingerprint(original, edited(synthetic, 5, "score", synthetic.loc[5, "score"] + 0.1)),
        "swapped values": fingerprint(original, swapped),
        "renumbered key": fingerprint(original, renumbered),
    }
    assert reordered == base
    assert base not in variants.values() and len(set(variants.values())) == len(variants), variants
