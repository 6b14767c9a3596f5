"""Wide inputs run, with figures equal to brute force: a categorical column of 1,000
levels (the most a distance column may have) under `components: all`, and 600 numeric
columns through the alignment check, both direct-match metrics and the distance suite.
Expressions over every column or coordinate must not nest one level per column: Spark's
code generation overflowed its stack at about 600."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from privacy_eval.config import ColumnDirectMatchConfig, DistanceConfig, MetricsConfig, RowDirectMatchConfig
from privacy_eval.distance.space import MAX_MODALITIES
from privacy_eval.evaluation import evaluate_inputs
from privacy_eval.inputs import prepare_inputs
from tests.support import reference
from tests.support.distance_oracle import distance_reference

pytestmark = pytest.mark.slow

METRICS = MetricsConfig(
    row_direct_match=RowDirectMatchConfig(),
    column_direct_match=ColumnDirectMatchConfig(),
    distance=DistanceConfig(components="all"),
)
WIDE = 600  # numeric columns: the alignment check's sum overflowed the stack from about 600
DISTANCE_ROWS = ("hidden_rate", "local_cloaking", "distance_to_closest_record", "nearest_neighbour_distance_ratio")


def _check(spark, original: pd.DataFrame, synthetic: pd.DataFrame, categorical: list[str]) -> None:
    columns = [c for c in original.columns if c != "id"]
    inputs = prepare_inputs(spark.createDataFrame(original), spark.createDataFrame(synthetic), row_key="id",
                            categorical=categorical)
    try:
        evaluation = evaluate_inputs(inputs, METRICS)
    finally:
        inputs.unpersist()
    rows = {m.metric: m for m in evaluation.metrics}
    assert all(m.status == "ok" for m in rows.values()), {k: m.status for k, m in rows.items()}
    rdm = reference.row_direct_match(original, synthetic, columns)
    assert rows["row_direct_match_protection"].numerator == rdm["reproduced"]
    assert rows["row_direct_match_protection"].value == pytest.approx(rdm["protection"], abs=1e-9)
    cdm = reference.column_direct_match(original, synthetic, columns, "id")["per_column"]
    assert {c.column_name: (c.matches, c.distinct_synthetic) for c in evaluation.columns} == {
        name: (want["matches"], want["distinct"]) for name, want in cdm.items()}
    want = distance_reference(original, synthetic, columns=columns, categorical=categorical, components="all", key="id")
    got = {name: rows[name].value for name in DISTANCE_ROWS}
    assert rows["hidden_rate"].details["space"]["width"] == want["width"]
    for name, key in zip(DISTANCE_ROWS, ("hidden_rate", "local_cloaking", "dcr", "nndr")):
        assert got[name] == pytest.approx(want[key], rel=1e-12, abs=1e-12), name


def test_a_categorical_column_of_the_most_levels_under_every_component(spark):
    rng = np.random.default_rng(3)
    n = 1_200
    levels = np.array([f"L{i:04d}" for i in range(MAX_MODALITIES)], dtype=object)
    original = pd.DataFrame({
        "id": np.arange(n), "level": levels[np.r_[np.arange(MAX_MODALITIES), rng.integers(0, MAX_MODALITIES, n - MAX_MODALITIES)]],
        "x": rng.normal(size=n),
    })
    synthetic = original.assign(x=original["x"] + rng.normal(scale=0.05, size=n))
    moved = rng.random(n) < 0.2
    synthetic.loc[moved, "level"] = levels[rng.integers(0, MAX_MODALITIES, int(moved.sum()))]
    assert original["level"].nunique() == MAX_MODALITIES
    _check(spark, original, synthetic, ["level"])


def test_many_numeric_columns(spark):
    rng = np.random.default_rng(4)
    n, width = 60, WIDE
    values = rng.normal(size=(n, width))
    original = pd.DataFrame(values, columns=[f"v{j}" for j in range(width)]).assign(id=np.arange(n))
    synthetic = original + pd.DataFrame(rng.normal(scale=0.1, size=(n, width)), columns=original.columns[:-1]).assign(id=0)
    synthetic.iloc[:5, : width // 2] = original.iloc[:5, : width // 2]  # columns matched on some rows
    _check(spark, original, synthetic, [])
