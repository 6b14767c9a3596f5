"""Each metric on small hand-computed tables (numbers worked out in the comments)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from privacy_eval.config import (
    ColumnDirectMatchConfig,
    KnowledgeProtectionConfig,
    MetricsConfig,
    RowDirectMatchConfig,
)
from privacy_eval.errors import InputError
from privacy_eval.evaluation import evaluate_inputs
from privacy_eval.inputs import prepare_inputs
from privacy_eval.metrics.binning import BinGrid, bin_column

NAN = float("nan")


def run(spark, original, synthetic, metrics, schema_o, schema_s, **kwargs):
    inputs = prepare_inputs(
        spark.createDataFrame(original, schema_o),
        spark.createDataFrame(synthetic, schema_s),
        row_key="id",
        **kwargs,
    )
    evaluation = evaluate_inputs(inputs, metrics)
    return {m.metric: m for m in evaluation.metrics}, evaluation


RDM = MetricsConfig(row_direct_match=RowDirectMatchConfig())


class TestRowDirectMatch:
    def test_nulls_duplicates_int_vs_double_and_case(self, spark):
        # U = {(2,null), (3,"y"), (4,"z")}; (1,"x") occurs twice so it protects itself
        # even though the synthetic table has it. Only (2,null) is reproduced (null-safe,
        # 2 == 2.0, twice in the synthetic table but counted once); "y" != "Y".
        original = [(0, 1, "x"), (1, 1, "x"), (2, 2, None), (3, 3, "y"), (4, 4, "z")]
        synthetic = [(0, 1.0, "x"), (1, 2.0, None), (2, 2.0, None), (3, 3.0, "Y"), (4, 5.0, "z")]
        metrics, _ = run(spark, original, synthetic, RDM, "id long, a long, b string", "id long, a double, b string")
        rdm = metrics["row_direct_match_protection"]
        assert rdm.numerator == 1 and rdm.denominator == 5
        assert rdm.details == {"n": 5, "n_singletons": 3, "n_duplicated_rows": 2, "reproduced_singletons": 1}
        assert rdm.value == pytest.approx(80.0, abs=1e-12)
        assert rdm.passed is False  # default target 90

    def test_nan_and_signed_zero(self, spark):
        # NaN matches NaN, -0.0 matches 0.0, NaN does not match null.
        original = [(0, NAN, 1), (1, -0.0, 2), (2, 0.5, 3), (3, NAN, 4)]
        synthetic = [(0, NAN, 1), (1, 0.0, 2), (2, 0.5, 9), (3, None, 4)]
        metrics, _ = run(spark, original, synthetic, RDM, "id long, a double, b long", "id long, a double, b long")
        rdm = metrics["row_direct_match_protection"]
        assert rdm.numerator == 2
        assert rdm.value == pytest.approx(50.0, abs=1e-12)

    def test_duplicates_on_both_sides_never_expose(self, spark):
        original = [(i, 7, "same") for i in range(4)]
        synthetic = [(i, 7, "same") for i in range(4)]
        metrics, _ = run(spark, original, synthetic, RDM, "id long, a long, b string", "id long, a long, b string")
        rdm = metrics["row_direct_match_protection"]
        assert rdm.details["n_singletons"] == 0 and rdm.numerator == 0
        assert rdm.value == 100.0


CDM = MetricsConfig(column_direct_match=ColumnDirectMatchConfig())


class TestColumnDirectMatch:
    @pytest.mark.parametrize("cells_per_task", [None, 2], ids=["setting", "12 tasks"])
    def test_copied_identifier_constant_column_and_nulls(self, spark, monkeypatch, cells_per_task):
        # The join's shuffle in the session's tasks, or in 8 rows x 3 columns / 2 = 12.
        if cells_per_task is not None:
            from privacy_eval import frames

            monkeypatch.setattr(frames, "CELLS_PER_TASK", cells_per_task)
        # n = 4.  ident copied:  m=4, u=4 -> P = 100(1 - 16/16) = 0
        #         const "k":     m=4, u=1 -> P = 100(1 - 4/16)  = 75
        #         val: 1=1, null=null, NaN=NaN, 2!=3 -> m=3; u={1,null,NaN,3}=4 -> 25
        original = [(0, 10, "k", 1.0), (1, 11, "k", None), (2, 12, "k", NAN), (3, 13, "k", 2.0)]
        synthetic = [(3, 13, "k", 3.0), (2, 12, "k", NAN), (1, 11, "k", None), (0, 10, "k", 1.0)]
        schema = "id long, ident long, const string, val double"
        metrics, evaluation = run(spark, original, synthetic, CDM, schema, schema)
        ranking = [(c.column_name, c.matches, c.distinct_synthetic, c.protection, c.risk_rank, c.below_target)
                   for c in evaluation.columns]
        assert ranking == [
            ("ident", 4, 4, 0.0, 1, True),
            ("val", 3, 4, 25.0, 2, True),
            ("const", 4, 1, 75.0, 3, False),
        ]
        cdm = metrics["column_direct_match_protection"]
        assert cdm.value == 0.0 and cdm.numerator == 4 and cdm.passed is False
        assert cdm.details["weakest_column"] == "ident"

    def test_distinct_values_fold_signed_zeros_and_nans(self, spark):
        # Synthetic z: -0.0, 0.0, NaN, NaN, null -> u = 3 ({0, NaN, null}).
        # Matches: 0.0 = -0.0, NaN = NaN, null = null, 1 != 0.0 -> m = 3; n = 5.
        original = [(0, 0.0), (1, 1.0), (2, NAN), (3, None), (4, 2.0)]
        synthetic = [(0, -0.0), (1, 0.0), (2, NAN), (3, None), (4, NAN)]
        _, evaluation = run(spark, original, synthetic, CDM, "id long, z double", "id long, z double")
        (column,) = evaluation.columns
        assert (column.matches, column.distinct_synthetic) == (3, 3)
        assert column.protection == pytest.approx(100 * (1 - 9 / 25), abs=1e-12)

    def test_unpaired_keys_count_no_match_and_warn(self, spark):
        # Keys 1 and 2 pair up; 0 (original) and 3 (synthetic) have no partner.
        # x: id1 6=6, id2 7!=0 -> m=1; u={6,0,7}=3; n=3 -> P = 100(1 - 3/9)
        original = [(0, 5), (1, 6), (2, 7)]
        synthetic = [(1, 6), (2, 0), (3, 7)]
        metrics, evaluation = run(spark, original, synthetic, CDM, "id long, x long", "id long, x long")
        cdm = metrics["column_direct_match_protection"]
        assert cdm.value == pytest.approx(100.0 * (1 - 3 / 9), abs=1e-12)
        assert cdm.details["original_unpaired"] == 1 and cdm.details["synthetic_unpaired"] == 1
        assert any("no partner" in w for w in evaluation.warnings)


KPR = MetricsConfig(
    knowledge_protection=KnowledgeProtectionConfig(known_variables=["temp", "grp"])
)
KPR_SCHEMA = "id long, temp double, grp string, other long"


class TestKnowledgeProtection:
    # U holds r1..r4 and r7; r5/r6 are identical, so they are not in U. Over U,
    # temp = -10, -12, -8, -10 (null ignored): mean -10 -> step 0.5;
    # sd = sqrt(8/3) -> origin = -12 - sd/10 = -12.16330. Bins: -10 -> 4, -12 -> 0, -8 -> 8.
    ORIGINAL = [
        (1, -10.0, "a", 1),   # (4, a)
        (2, -12.0, "a", 2),   # (0, a)
        (3, -8.0, "b", 3),    # (8, b)
        (4, -10.0, "b", 4),   # (4, b)
        (5, -9.0, "c", 5),
        (6, -9.0, "c", 5),    # duplicate of r5
        (7, None, "d", 7),    # (null, d)
    ]
    SYNTHETIC = [
        (1, -10.2, "a", 9),   # (3, a)
        (2, -9.9, "a", 9),    # (4, a)   unique -> exposes r1
        (3, -11.9, "a", 9),   # (0, a)
        (4, -11.95, "a", 9),  # (0, a)   twice -> r2 safe
        (5, -8.1, "b", 9),    # (8, b)   unique -> exposes r3
        (6, -10.0, "B", 9),   # (4, B)   case differs -> r4 safe
        (7, 100.0, "a", 9),   # (224, a) beyond the grid's end
        (8, -50.0, "b", 9),   # (-76, b) before the origin
        (9, None, "d", 9),    # (null, d) unique -> exposes r7
    ]

    def test_hand_computed_rate(self, spark, monkeypatch):
        # Three distinct values of temp in U: below the publication threshold, so lowered
        # here to see the computed grid.
        monkeypatch.setattr("privacy_eval.metrics.binning.MIN_GRID_SUPPORT", 3)
        metrics, _ = run(spark, self.ORIGINAL, self.SYNTHETIC, KPR, KPR_SCHEMA, KPR_SCHEMA)
        kpr = metrics["knowledge_protection_rate"]
        assert kpr.numerator == 3 and kpr.denominator == 7
        assert kpr.details["n_singletons"] == 5
        assert kpr.details["unique_synthetic_profiles"] == 7
        grid = kpr.details["bins"]["temp"]
        assert grid["step"] == pytest.approx(0.5, abs=1e-12)
        assert grid["origin"] == pytest.approx(-12 - math.sqrt(8 / 3) / 10, abs=1e-12)
        assert kpr.value == pytest.approx(100 * (1 - 3 / 7), abs=1e-12)

    def test_grid_from_few_values_is_withheld(self, spark):
        """With 4 values of temp in U, 3 distinct (< MIN_GRID_SUPPORT), a mean-based step and
        the origin would disclose them: both withheld, the rate unchanged."""
        metrics, _ = run(spark, self.ORIGINAL, self.SYNTHETIC, KPR, KPR_SCHEMA, KPR_SCHEMA)
        kpr = metrics["knowledge_protection_rate"]
        grid = kpr.details["bins"]["temp"]
        assert grid["step"] is None and grid["origin"] is None and grid["step_from"] == "mean"
        assert "3 distinct value(s)" in grid["withheld"]
        assert kpr.numerator == 3
        # One value: origin and step would each give it back exactly.
        one = [(1, -10.0, "a", 1), (2, None, "b", 2)]
        metrics, _ = run(spark, one, self.SYNTHETIC, KPR, KPR_SCHEMA, KPR_SCHEMA)
        text = json.dumps(metrics["knowledge_protection_rate"].details)
        assert "10.0" not in text and "0.5" not in text

    @pytest.mark.parametrize("distinct, published", [(1, False), (9, False), (10, True)])
    def test_the_grid_counts_distinct_values_not_records(self, spark, distinct, published):
        """50 records in U (each its own `other`) share `distinct` values of temp: the grid
        is published from 10 distinct values on, whatever the number of records."""
        values = [98765.4321 + 3 * (i % distinct) for i in range(50)]
        original = [(i, v, "a", i) for i, v in enumerate(values)]
        config = MetricsConfig(knowledge_protection=KnowledgeProtectionConfig(known_variables=["temp", "other"]))
        metrics, _ = run(spark, original, self.SYNTHETIC, config, KPR_SCHEMA, KPR_SCHEMA)
        grid = metrics["knowledge_protection_rate"].details["bins"]["temp"]
        assert (grid["origin"] is not None) is published and (grid["step"] is not None) is published
        if published:
            assert grid["step"] == pytest.approx(0.05 * sum(values) / 50, rel=1e-12)
        else:
            assert f"{distinct} distinct value(s)" in grid["withheld"]
            assert "98765" not in json.dumps(metrics["knowledge_protection_rate"].details)

    def test_configured_bin_width_replaces_the_mean_rule(self, spark):
        # A width of 100 puts every original temp in one bin per group: (0,a) x2 in U...
        metrics_cfg = MetricsConfig(knowledge_protection=KnowledgeProtectionConfig(
            known_variables=["temp", "grp"], bin_width={"temp": 100.0}))
        metrics, _ = run(spark, self.ORIGINAL, self.SYNTHETIC, metrics_cfg, KPR_SCHEMA, KPR_SCHEMA)
        kpr = metrics["knowledge_protection_rate"]
        # Synthetic profiles: (0,a) x4 (the -10.2..-11.95 ones), (0,b) x1 (-8.1), (0,B),
        # (1,a) (100), (-1,b) (-50), (null,d). Unique (0,b) exposes r3 and r4; (null,d) r7.
        assert kpr.details["bins"]["temp"]["step"] == 100.0  # the user's number: never withheld
        assert kpr.details["bins"]["temp"]["origin"] is None
        assert kpr.numerator == 3

    def test_zero_mean_is_an_error_naming_the_variable(self, spark):
        original = [(1, -1.0, "a", 1), (2, 1.0, "a", 2)]
        with pytest.raises(InputError, match="'temp'.*categorical"):
            run(spark, original, original, KPR, KPR_SCHEMA, KPR_SCHEMA)

    def test_declaring_categorical_compares_values_as_they_are(self, spark):
        original = [(1, -1.0, "a", 1), (2, 1.0, "a", 2)]
        synthetic = [(1, -1.0, "a", 5), (2, 3.0, "a", 5)]
        metrics, _ = run(spark, original, synthetic, KPR, KPR_SCHEMA, KPR_SCHEMA, categorical=["temp"])
        assert metrics["knowledge_protection_rate"].numerator == 1

    def test_known_variable_must_be_compared(self, spark):
        cfg = MetricsConfig(knowledge_protection=KnowledgeProtectionConfig(known_variables=["nope"]))
        with pytest.raises(InputError, match="'nope'"):
            run(spark, self.ORIGINAL, self.SYNTHETIC, cfg, KPR_SCHEMA, KPR_SCHEMA)


def test_bin_column_equals_numpy_floor_on_awkward_values(spark):
    values = [-1e-20, -0.5, -2.0000000000000004, 2.9999999999999996, 1e300, -1e300, -3.0, 7.0,
              -7.5, 0.0, -0.0, 1e-300, 123456789.123, float("inf"), float("-inf")]
    grid = BinGrid(variable="x", step=0.001, origin=-0.25, step_source="configured")
    frame = spark.createDataFrame([(v,) for v in values] + [(None,), (NAN,)], "x double")
    got = [r[0] for r in frame.select(bin_column(grid)).collect()]
    want = np.floor((np.array(values) - grid.origin) / grid.step)
    assert got[: len(values)] == want.tolist()
    assert got[-2] is None and math.isnan(got[-1])
