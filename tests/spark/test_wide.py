"""Wide inputs run, with figures equal to brute force: a categorical column of 1,000
levels (the most a distance column may have) under `components: all`; 600 numeric
columns through the alignment check, both direct-match metrics and the distance suite;
rows of 2,000 columns (the most coordinates of the distance space) grouped whole.
Expressions over every column or coordinate must not nest one level per column: Spark's
code generation overflowed its stack at about 600; and its planner needs a larger
thread stack than the default for 2,000 (session.DRIVER_STACK_OPTION)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from privacy_eval.config import ColumnDirectMatchConfig, DistanceConfig, MetricsConfig, RowDirectMatchConfig
from privacy_eval.distance.space import MAX_MODALITIES, MAX_WIDTH
from privacy_eval.evaluation import Evaluation, evaluate_inputs
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


def _evaluated(spark, original: pd.DataFrame, synthetic: pd.DataFrame, categorical: list[str],
               metrics: MetricsConfig = METRICS) -> Evaluation:
    inputs = prepare_inputs(spark.createDataFrame(original), spark.createDataFrame(synthetic), row_key="id",
                            categorical=categorical)
    try:
        evaluation = evaluate_inputs(inputs, metrics)
    finally:
        inputs.unpersist()
    assert all(m.status == "ok" for m in evaluation.metrics), {m.metric: m.status for m in evaluation.metrics}
    rdm = reference.row_direct_match(original, synthetic, [c for c in original.columns if c != "id"])
    (row,) = [m for m in evaluation.metrics if m.metric == "row_direct_match_protection"]
    assert row.numerator == rdm["reproduced"] and row.value == pytest.approx(rdm["protection"], abs=1e-9)
    return evaluation


def _check(spark, original: pd.DataFrame, synthetic: pd.DataFrame, categorical: list[str]) -> None:
    columns = [c for c in original.columns if c != "id"]
    evaluation = _evaluated(spark, original, synthetic, categorical)
    rows = {m.metric: m for m in evaluation.metrics}
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


def _numeric_pair(width: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    rng = np.random.default_rng(4)
    n = 60
    original = pd.DataFrame(rng.normal(size=(n, width)), columns=[f"v{j}" for j in range(width)]).assign(id=np.arange(n))
    noise = pd.DataFrame(rng.normal(scale=0.1, size=(n, width)), columns=original.columns[:-1]).assign(id=0)
    synthetic = (original + noise)[original.columns]
    half = list(original.columns[: width // 2])
    synthetic.loc[:4, half] = original.loc[:4, half].to_numpy()  # columns matched on some rows
    synthetic.loc[5:7] = original.loc[5:7].to_numpy()  # rows reproduced whole
    return original, synthetic


def test_many_numeric_columns(spark):
    _check(spark, *_numeric_pair(WIDE), [])


def test_rows_of_the_most_coordinates_grouped_whole(spark):
    _evaluated(spark, *_numeric_pair(MAX_WIDTH), [], MetricsConfig(row_direct_match=RowDirectMatchConfig()))
