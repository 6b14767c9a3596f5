"""Equal values are one value in every metric family: a release that writes its zeros as
-0.0, its integers as doubles (1 as 1.0), or its rows in another order gives the same
figures, details and per-column rows as the release as it was (docs/metrics.md:
-0.0 equals 0.0, int 5 equals double 5.0). A numeric column declared categorical carries
the zeros, so that each family meets them where it encodes values: as text (the
distance space), as hashes (the linkage's blocks), as groups (the rest).

And a column's name is only a name: the same tables with names holding dots, backticks,
spaces and leading underscores (`__id` among them) give the same figures."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import pandas as pd
import pytest

from privacy_eval.config import (
    ColumnDirectMatchConfig,
    DisclosureConfig,
    DistanceConfig,
    KnowledgeProtectionConfig,
    LinkageConfig,
    MetricsConfig,
    RowDirectMatchConfig,
)
from privacy_eval.evaluation import evaluate_inputs
from privacy_eval.inputs import prepare_inputs
from tests.support import datagen
from tests.support.asserts import assert_same
from tests.support.evaluations import snapshot

N_ROWS = 400
CATEGORICAL = ["visits"]  # 0..5, about a sixth of the rows 0

def metrics(name=str) -> MetricsConfig:
    """Every family, the distance suite with the holdout; `name` maps a column's plain
    name to the one the tables give it."""
    return MetricsConfig(
        row_direct_match=RowDirectMatchConfig(),
        column_direct_match=ColumnDirectMatchConfig(),
        knowledge_protection=KnowledgeProtectionConfig(known_variables=[name("age"), name("sex"), name("visits")]),
        linkage=LinkageConfig(targets=[name("age"), name("income"), name("score")], blocking=[name("visits")],
                              drop_incomplete=True),
        distance=DistanceConfig(components="all"),
        disclosure=DisclosureConfig(keys=[name("sex"), name("visits")], targets=[name("city")]),
    )


def _doubles(column: pd.Series) -> pd.Series:
    """An integer column written as doubles (nulls stay nulls)."""
    return pd.Series([None if pd.isna(v) else float(v) for v in column], dtype=object)


def _negative_zeros(column: pd.Series) -> pd.Series:
    return pd.Series([-0.0 if v is not None and v == 0 else v for v in column], dtype=object)


@pytest.fixture(scope="module")
def tables() -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """(original, release, holdout): datagen's pair with integer `age` and `visits` on
    both sides, and another draw's original as the holdout."""
    original, synthetic = datagen.generate(N_ROWS, seed=5)
    holdout, _ = datagen.generate(N_ROWS // 2, seed=6)
    synthetic["age"] = pd.Series(synthetic["age"]).astype("Int64")
    return original, synthetic, holdout


def evaluate(spark, original: pd.DataFrame, synthetic: pd.DataFrame, holdout: pd.DataFrame,
             categorical: Sequence[str] = CATEGORICAL, config: MetricsConfig | None = None) -> dict:
    inputs = prepare_inputs(
        spark.createDataFrame(original), spark.createDataFrame(synthetic), row_key="id",
        categorical=categorical, holdout=spark.createDataFrame(holdout),
    )
    try:
        figures = snapshot(evaluate_inputs(inputs, config or metrics()))
    finally:
        inputs.unpersist()
    del figures["fingerprint"]  # follows the content as written, by design
    return figures


@pytest.fixture(scope="module")
def baseline(spark, tables) -> dict:
    return evaluate(spark, *tables)


def test_baseline_has_every_family_and_zeros_to_rewrite(tables, baseline):
    _, synthetic, _ = tables
    assert (synthetic["visits"] == 0).sum() > N_ROWS // 10
    metrics = baseline["metrics"]
    assert {"row_direct_match_protection", "column_direct_match_protection", "knowledge_protection_rate",
            "linkage_success_rate", "hidden_rate", "local_cloaking", "distance_to_closest_record",
            "holdout_distance_share", "replicated_uniques", "attribute_disclosure"} <= set(metrics)
    assert all(m["status"] == "ok" for m in metrics.values()), {k: m["status"] for k, m in metrics.items()}
    assert 0 < metrics["hidden_rate"]["value"] < 100 and math.isfinite(metrics["holdout_distance_share"]["value"])


def test_integers_written_as_doubles_change_nothing(spark, tables, baseline):
    original, synthetic, holdout = tables
    rewritten = synthetic.assign(age=_doubles(synthetic["age"]), visits=_doubles(synthetic["visits"]))
    assert_same(evaluate(spark, original, rewritten, holdout), baseline)


def test_zeros_written_as_negative_zeros_change_nothing(spark, tables, baseline):
    original, synthetic, holdout = tables
    rewritten = synthetic.assign(age=_doubles(synthetic["age"]), visits=_negative_zeros(_doubles(synthetic["visits"])))
    assert any(v == 0 and math.copysign(1.0, v) < 0 for v in rewritten["visits"] if v is not None)
    assert_same(evaluate(spark, original, rewritten, holdout), baseline)


def test_reordered_rows_change_nothing(spark, tables, baseline):
    original, synthetic, holdout = tables
    reordered = synthetic.sample(frac=1.0, random_state=3).reset_index(drop=True)
    assert_same(evaluate(spark, original, reordered, holdout), baseline)


# Every compared column renamed; `id`, the row key, stays.
ODD_NAMES = {"age": "__id", "income": "in.come", "score": "sc`ore", "city": "ci ty", "sex": "_sex", "visits": "v.`is its"}


def _plain(found: Any, plain: dict[str, str]) -> Any:
    """`found` with every odd name back to its plain one: as a key, a value, or quoted in a text."""
    if isinstance(found, dict):
        return {_plain(k, plain): _plain(v, plain) for k, v in found.items()}
    if isinstance(found, (list, tuple)):
        return type(found)(_plain(v, plain) for v in found)
    if isinstance(found, str):
        if found in plain:
            return plain[found]
        for odd, name in plain.items():
            found = found.replace(f"'{odd}'", f"'{name}'").replace(f"`{odd}`", f"`{name}`")
    return found


def test_odd_column_names_change_nothing(spark, tables, baseline):
    renamed = [frame.rename(columns=ODD_NAMES) for frame in tables]
    got = evaluate(spark, *renamed, categorical=[ODD_NAMES[c] for c in CATEGORICAL],
                   config=metrics(ODD_NAMES.__getitem__))
    assert_same(_plain(got, {odd: name for name, odd in ODD_NAMES.items()}), baseline)
