"""Skewed and extreme shapes, at reduced size: every one runs to completion with the
figures a hand computation or the pandas reference (tests/support/reference.py,
tests/support/reference_linkage.py) gives."""

from __future__ import annotations

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
from privacy_eval.errors import InputError
from privacy_eval.evaluation import Evaluation, evaluate_inputs
from privacy_eval.inputs import EvaluationInputs, prepare_inputs
from privacy_eval.linkage.attack import linkage_attack
from tests.support import reference
from tests.support.reference_linkage import linkage_reference


def prepared(spark, original: pd.DataFrame, synthetic: pd.DataFrame, **kwargs) -> EvaluationInputs:
    return prepare_inputs(spark.createDataFrame(original), spark.createDataFrame(synthetic), row_key="id", **kwargs)


def evaluated(spark, original: pd.DataFrame, synthetic: pd.DataFrame, metrics: MetricsConfig,
              **kwargs) -> tuple[dict, dict]:
    """(metric rows by name, column rows by name) of one evaluation."""
    inputs = prepared(spark, original, synthetic, **kwargs)
    try:
        result: Evaluation = evaluate_inputs(inputs, metrics)
    finally:
        inputs.unpersist()
    return {m.metric: m for m in result.metrics}, {c.column_name: c for c in result.columns}


def three_metrics(known: list[str], target: float | None = 50.0) -> MetricsConfig:
    return MetricsConfig(
        row_direct_match=RowDirectMatchConfig(),
        column_direct_match=ColumnDirectMatchConfig(target=target),
        knowledge_protection=KnowledgeProtectionConfig(known_variables=known),
    )


def assert_matches_reference(metrics: dict, columns: dict, original: pd.DataFrame, synthetic: pd.DataFrame,
                             known: list[str], numeric: list[str]) -> None:
    compared = [c for c in original.columns if c != "id"]
    rdm = reference.row_direct_match(original, synthetic, compared)
    cdm = reference.column_direct_match(original, synthetic, compared, "id")
    kpr = reference.knowledge_protection(original, synthetic, compared, known, numeric)
    assert metrics["row_direct_match_protection"].numerator == rdm["reproduced"]
    assert metrics["row_direct_match_protection"].details["n_singletons"] == rdm["n_singletons"]
    assert metrics["row_direct_match_protection"].value == pytest.approx(rdm["protection"], abs=1e-9)
    assert {c: (r.matches, r.distinct_synthetic) for c, r in columns.items()} == {
        c: (p["matches"], p["distinct"]) for c, p in cdm["per_column"].items()}
    assert metrics["column_direct_match_protection"].value == pytest.approx(cdm["protection"], abs=1e-9)
    assert metrics["knowledge_protection_rate"].numerator == kpr["exposed"]
    assert metrics["knowledge_protection_rate"].value == pytest.approx(kpr["protection"], abs=1e-9)


def test_identifier_copied_verbatim(spark):
    """A forgotten identifier: m_c = u_c = n, so P_c = 100 (1 - n^2 / n^2) = 0 exactly."""
    rng = np.random.default_rng(3)
    n = 50
    original = pd.DataFrame({
        "id": np.arange(n),
        "ssn": [f"{900_000 + 7 * i}" for i in range(n)],
        "x": rng.integers(1, 5, n),
        "y": rng.integers(1, 8, n),
    })
    synthetic = original.assign(x=rng.integers(1, 5, n), y=rng.integers(1, 8, n))
    metrics, columns = evaluated(spark, original, synthetic, three_metrics(["ssn"]))
    ssn = columns["ssn"]
    assert (ssn.matches, ssn.distinct_synthetic, ssn.protection) == (n, n, 0.0)
    assert ssn.risk_rank == 1 and ssn.below_target is True
    assert metrics["column_direct_match_protection"].value == 0.0
    assert metrics["column_direct_match_protection"].details["weakest_column"] == "ssn"
    # Known, the identifier singles out everyone: each synthetic profile is unique.
    assert metrics["knowledge_protection_rate"].numerator == n
    assert_matches_reference(metrics, columns, original, synthetic, ["ssn"], [])


def test_every_row_the_same(spark):
    """n identical rows: nobody occurs once (RDMP = KPR = 100, nothing computed for a
    grid); every column matches on every pair with u_c = 1, P_c = 100 (1 - n / n^2);
    the linkage attack has nothing to tell apart and refuses."""
    n = 25
    original = pd.DataFrame({"id": np.arange(n), "x": [4] * n, "y": [2.5] * n, "z": ["same"] * n})
    synthetic = original.copy()
    metrics, columns = evaluated(spark, original, synthetic, three_metrics(["x", "z"]))
    rdm = metrics["row_direct_match_protection"]
    assert (rdm.value, rdm.numerator, rdm.details["n_singletons"], rdm.details["n_duplicated_rows"]) == (100.0, 0, 0, n)
    kpr = metrics["knowledge_protection_rate"]
    assert (kpr.value, kpr.numerator, kpr.details["bins"]) == (100.0, 0, {})
    for column in columns.values():
        assert (column.matches, column.distinct_synthetic) == (n, 1)
        assert column.protection == pytest.approx(100.0 * (1 - 1 / n), abs=1e-12)
    assert [c.column_name for c in sorted(columns.values(), key=lambda c: c.risk_rank)] == ["x", "y", "z"]

    inputs = prepared(spark, original, synthetic)
    try:
        with pytest.raises(InputError, match="fewer than 2 distinct original records"):
            linkage_attack(inputs, LinkageConfig(targets=["x", "y"]))
    finally:
        inputs.unpersist()


def test_column_with_as_many_distinct_values_as_rows(spark):
    """`code` takes n distinct values on both sides, the synthetic ones shifted by one
    row: no aligned pair matches (P_c = 100) although every value is reproduced, so as a
    known variable it singles out every original (KPR = 0)."""
    n = 60
    original = pd.DataFrame({
        "id": np.arange(n),
        "code": [f"c{i:03d}" for i in range(n)],
        "v": [1 + i % 5 for i in range(n)],
    })
    synthetic = original.assign(code=np.roll(original["code"].to_numpy(), 1))
    metrics, columns = evaluated(spark, original, synthetic, three_metrics(["code"]))
    code = columns["code"]
    assert (code.matches, code.distinct_synthetic, code.protection) == (0, n, 100.0)
    kpr = metrics["knowledge_protection_rate"]
    assert (kpr.value, kpr.numerator, kpr.details["unique_synthetic_profiles"]) == (0.0, n, n)
    assert_matches_reference(metrics, columns, original, synthetic, ["code"], [])


def two_hundred_columns() -> tuple[pd.DataFrame, pd.DataFrame, list[str]]:
    """40 records of 200 columns, four copied whole into the synthetic table; 3 known."""
    rng = np.random.default_rng(5)
    n, p = 40, 200
    names = [f"col_{j:03d}" for j in range(p)]
    values = rng.integers(1, 4, (n, p))
    original = pd.DataFrame(values, columns=names).assign(id=np.arange(n))
    changed = rng.random((n, p)) < 0.3
    synthetic = pd.DataFrame(np.where(changed, rng.integers(1, 4, (n, p)), values), columns=names)
    synthetic.iloc[:4] = values[:4]  # four records copied whole: reproduced singletons
    return original, synthetic.assign(id=np.arange(n)), ["col_000", "col_001", "col_199"]


def test_two_hundred_columns(spark):
    """200 compared columns: one aggregation each for the matches and the distinct counts."""
    original, synthetic, known = two_hundred_columns()
    metrics, columns = evaluated(spark, original, synthetic, three_metrics(known))
    assert len(columns) == 200
    assert sorted(c.risk_rank for c in columns.values()) == list(range(1, 201))
    assert metrics["row_direct_match_protection"].numerator >= 4
    assert_matches_reference(metrics, columns, original, synthetic, known, known)


def test_two_hundred_columns_counted_by_row_digests(spark, forced_digests):
    """The occurrences of 200 columns counted by row digests (frames.digested_occurrences,
    forced here: the job takes that route from 24 columns and 2e6 rows on). Planned on the
    typed inputs, this route once filled the driver's memory (constraint propagation)."""
    original, synthetic, known = two_hundred_columns()
    config = MetricsConfig(row_direct_match=RowDirectMatchConfig(),
                           knowledge_protection=KnowledgeProtectionConfig(known_variables=known))
    metrics, _ = evaluated(spark, original, synthetic, config)
    assert forced_digests == [known]
    compared = [c for c in original.columns if c != "id"]
    rdm = reference.row_direct_match(original, synthetic, compared)
    kpr = reference.knowledge_protection(original, synthetic, compared, known, known)
    row = metrics["row_direct_match_protection"]
    assert (row.numerator, row.details["n_singletons"]) == (rdm["reproduced"], rdm["n_singletons"]) and rdm["reproduced"] >= 4
    assert metrics["knowledge_protection_rate"].numerator == kpr["exposed"]
    assert metrics["knowledge_protection_rate"].value == pytest.approx(kpr["protection"], abs=1e-9)


def test_one_block_holding_every_record(spark):
    """No blocking: every synthetic record has every original as a candidate, 300 x 300
    pairs in one block, which is split on the synthetic side into five parts (each still
    sees every original and is scored pair by pair)."""
    rng = np.random.default_rng(11)
    n = 300
    original = pd.DataFrame({
        "id": np.arange(n),
        "a": rng.integers(0, 40, n),            # integers: exact ties between candidates
        "b": np.round(rng.normal(100, 15, n), 1),
        "c": rng.integers(0, 6, n),
    })
    synthetic = original.assign(
        a=original["a"] + rng.integers(-2, 3, n),
        b=np.round(original["b"] + rng.normal(0, 4, n), 1),
    )
    targets = ["a", "b", "c"]
    inputs = prepared(spark, original, synthetic)
    try:
        result = linkage_attack(inputs, LinkageConfig(targets=targets, top_k=[1, 5]), split_rows=64)
    finally:
        inputs.unpersist()
    assert (result.n_blocks, result.n_split_blocks) == (1, 1)
    assert result.largest_block_pairs == result.n_candidate_pairs == n * n
    for method in ("mahalanobis", "weighted"):
        want = linkage_reference(original, synthetic, "id", targets, method=method, top_k=[1, 5])
        got = result.methods[method]
        assert got.success_rate == pytest.approx(want["success"], abs=1e-12), method
        assert got.top_k == pytest.approx(want["top_k"], abs=1e-12), method
        assert got.baseline_random == pytest.approx(1 / n, abs=1e-15)
        assert got.confidence.computed == "all" and got.confidence.n_in_scope == n
