"""Identity and attribute disclosure (metrics.disclosure) against hand-computed tables and
against tests/support/disclosure_oracle.py, a numpy transcription of synthpop's
disclosure() code: hand-built cases, the bundled WBCD and AIDS pairs, 1e6 generated rows.

R with synthpop is not available here (CRAN is out of reach): the oracle stands in for
it, written from synthpop's R source (docs/metrics.md, "How the figures were checked")."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pandas as pd
import pytest

from privacy_eval.config import DisclosureConfig, MetricsConfig, load_config
from privacy_eval.evaluation import evaluate, evaluate_inputs
from privacy_eval.inputs import prepare_inputs
from privacy_eval.metrics.disclosure import TARGET_KEYS, disclosure_measures
from privacy_eval.metrics.quantile_groups import quantile_groups
from tests.support import datagen
from tests.support import disclosure_oracle as oracle
from tests.support.examples import EXAMPLES

NAN = float("nan")
IDENTITY = ("UiO", "UiS", "UiOiS", "repU")


def run(spark, original, synthetic, schema, config: DisclosureConfig, id_column: str = "id"):
    inputs = prepare_inputs(spark.createDataFrame(original, schema), spark.createDataFrame(synthetic, schema),
                            row_key=id_column)
    evaluation = evaluate_inputs(inputs, MetricsConfig(disclosure=config))
    return {m.metric: m for m in evaluation.metrics}


def frame(rows, schema: str) -> pd.DataFrame:
    """The rows as the oracle reads them: None stays None, NaN stays NaN."""
    names = [part.split()[0] for part in schema.split(",")]
    return pd.DataFrame({n: pd.Series([r[i] for r in rows], dtype=object) for i, n in enumerate(names)})


def assert_matches_oracle(rows, original: pd.DataFrame, synthetic: pd.DataFrame, config: DisclosureConfig) -> None:
    """Every figure of every target equals the oracle's: counts exactly, rates to 1e-9."""
    attrib, ident = rows["attribute_disclosure"], rows["replicated_uniques"]
    repu = []
    for target in config.targets:
        expected = oracle.disclosure(
            original, synthetic, config.keys, target, config.bins, config.denom_lim, config.exclude_ov_denom_lim,
            config.thresh_1way, config.thresh_2way,
        )
        got = attrib.details["per_target"][target]
        for key in TARGET_KEYS:
            assert _close(got[key], expected[key]), (target, key, got[key], expected[key])
        assert got["records"] == expected["records"], target
        assert got["check_1way"].keys() == expected["check_1way"].keys()
        assert all(_close(v, expected["check_1way"][k]) for k, v in got["check_1way"].items()), target
        assert got["check_2way"] == expected["check_2way"], target
        identity = ident.details["per_target"][target] if config.exclude_ov_denom_lim else ident.details
        for key in IDENTITY:
            assert _close(identity[key], expected[key]), (target, key)
        repu.append(expected["repU_records"])
        for column, groups in expected["groups"].items():
            assert attrib.details["bins"][column]["groups"] == groups
    assert ident.numerator == max(repu)
    headline = max(config.targets, key=lambda t: (attrib.details["per_target"][t]["DiSCO"], -config.targets.index(t)))
    assert attrib.details["target_column"] == headline
    assert attrib.value == attrib.details["per_target"][headline]["DiSCO"]


def _close(a, b) -> bool:
    if a is None or b is None or isinstance(a, bool):
        return a is b or a == b
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)


# ---------------------------------------------------------------------------
# hand-built tables

CASE_SCHEMA = "id long, k1 string, k2 long, t string"
# q = (k1, k2). (a,1) unique on both sides with the same target: replicated, disclosed.
# (a,2) two target values in the release. (b,1) unique in the original only, (d,1) in
# the release only. (null,1) a missing key, disclosive in the release with the wrong
# value. (c,null) missing key and missing target, twice in the release: disclosed.
CASE_ORIGINAL = [(1, "a", 1, "x"), (2, "a", 2, "x"), (3, "a", 2, "y"), (4, "b", 1, "x"),
                 (5, None, 1, "z"), (6, "c", None, None)]
CASE_SYNTHETIC = [(1, "a", 1, "x"), (2, "a", 2, "x"), (3, "a", 2, "y"), (4, "d", 1, "x"),
                  (5, None, 1, "w"), (6, "c", None, None), (7, "c", None, None)]


def test_every_measure_on_a_hand_built_table(spark):
    config = DisclosureConfig(keys=["k1", "k2"], targets=["t"], target=40.0)
    rows = run(spark, CASE_ORIGINAL, CASE_SYNTHETIC, CASE_SCHEMA, config)
    ident, attrib = rows["replicated_uniques"], rows["attribute_disclosure"]
    # d_.q = 1 for (a,1), (b,1), (null,1), (c,null): UiO 4/6; s_.q = 1 for (a,1), (null,1),
    # (d,1): UiS 3/7; of the four, in the release: (a,1), (null,1), (c,null); unique there
    # too: (a,1), (null,1).
    assert ident.details["UiO"] == pytest.approx(4 / 6 * 100)
    assert ident.details["UiS"] == pytest.approx(3 / 7 * 100)
    assert ident.details["UiOiS"] == pytest.approx(50.0)
    assert (ident.value, ident.numerator, ident.denominator) == (pytest.approx(2 / 6 * 100), 2, 6)
    assert ident.target is None and ident.passed is None
    t = attrib.details["per_target"]["t"]
    # Dorig: (a,1), (b,1), (null,1), (c,null) have one value each. iS: all but (b,1): 5.
    # DiS: one value in the release: (a,1), (null,1), (c,null): 3. DiSCO: (a,1) and
    # (c,null) (missing = missing); (null,1) shows w, the original has z.
    expected = {"Dorig": 4 / 6, "Dsyn": 5 / 7, "iS": 5 / 6, "DiS": 3 / 6, "DiSCO": 2 / 6, "DiSDiO": 2 / 6,
                # DCAP numerator: (a,1) 1 + (a,2) 1/2 + 1/2 + (null,1) 0 + (c,null) 2/2 = 3;
                # N_b = 1 + 2 + 1 + 2 = 6; TCAP: DiSCO's 2 over d_.q of the keys with one
                # released value, 1 + 1 + 1 (+ (d,1): 0) = 3.
                "DCAPd": 3 / 6, "DCAPs": 3 / 7, "DCAPb": 3 / 6, "TCAP": 2 / 3, "TCAPs": 2 / 7, "TCAPb": 2 / 6,
                # margins x 3, y 1, z 1, null 1; CAPd: 1 + (1+1)/2 + 1 + 1 + 1; CAPs: 1 + 1 + 1 + 4/2 + 1
                "baseCAPd": 12 / 36, "CAPd": 5 / 6, "CAPs": 6 / 7}
    for key, value in expected.items():
        assert t[key] == pytest.approx(value * 100, rel=1e-12), key
    assert (t["max_denom"], t["mean_denom"]) == (1, 1.0)
    # SDMetrics: the 5 original rows whose key is released score 1, 1/2, 1/2, 0, 1: CAP
    # protection 1 - 3/5; baseline 1 - 1/4 (x, y, z, null); score 0.4 / 0.75.
    assert t["sdmetrics_categorical_cap"] == pytest.approx(0.4)
    assert t["sdmetrics_disclosure_protection"] == pytest.approx(0.4 / 0.75)
    assert t["check_1way"]["flagged"] is False and t["check_2way"] == {"flagged": False, "pairs": 0}
    assert (attrib.value, attrib.numerator, attrib.passed) == (pytest.approx(100 / 3), 2, True)  # <= 40
    assert_matches_oracle(rows, frame(CASE_ORIGINAL, CASE_SCHEMA), frame(CASE_SYNTHETIC, CASE_SCHEMA), config)


DENOM_SCHEMA = "id long, k string, t string"
# A: x x x on both sides; B: y once on both; C: x, y in the original, x x in the release.
DENOM_ORIGINAL = [(1, "A", "x"), (2, "A", "x"), (3, "A", "x"), (4, "B", "y"), (5, "C", "x"), (6, "C", "y")]
DENOM_SYNTHETIC = [(1, "A", "x"), (2, "A", "x"), (3, "A", "x"), (4, "B", "y"), (5, "C", "x"), (6, "C", "x")]


def test_denom_lim_cuts_every_table_cell_by_cell(spark):
    plain = run(spark, DENOM_ORIGINAL, DENOM_SYNTHETIC, DENOM_SCHEMA, DisclosureConfig(keys=["k"], targets=["t"]))
    assert plain["attribute_disclosure"].numerator == 5  # A 3, B 1, C's x 1
    config = DisclosureConfig(keys=["k"], targets=["t"], denom_lim=2, exclude_ov_denom_lim=True)
    rows = run(spark, DENOM_ORIGINAL, DENOM_SYNTHETIC, DENOM_SCHEMA, config)
    t = rows["attribute_disclosure"].details["per_target"]["t"]
    # A's cells (3 > 2) count 0 everywhere: DiSCO = B 1 + C 1; d'_.q = A 0, B 1, C 2.
    assert rows["attribute_disclosure"].numerator == 2
    assert rows["replicated_uniques"].details["per_target"]["t"]["UiO"] == pytest.approx(100 / 6)
    expected = {"Dorig": 1 / 6, "Dsyn": 3 / 6, "iS": 3 / 6, "DiS": 3 / 6, "DiSDiO": 1 / 6,
                "CAPd": 2 / 6, "CAPs": 3 / 6, "DCAPd": 2 / 6, "DCAPb": 2 / 3, "TCAP": 2 / 3,
                "baseCAPd": 20 / 36}  # margins before the cut: x 4, y 2
    for key, value in expected.items():
        assert t[key] == pytest.approx(value * 100, rel=1e-12), key
    assert_matches_oracle(rows, frame(DENOM_ORIGINAL, DENOM_SCHEMA), frame(DENOM_SYNTHETIC, DENOM_SCHEMA), config)


BIN_SCHEMA = "id long, age double, t string"
BIN_ORIGINAL = [(i, float(a), t) for i, (a, t) in enumerate(zip(range(10, 70, 10), "xyxxyy"))]
BIN_SYNTHETIC = [(i, float(a), t) for i, (a, t) in enumerate(zip(range(15, 75, 10), "xxxyyy"))]


def test_a_numeric_key_grouped_by_pooled_quantiles(spark):
    # Pooled: 10, 15, ..., 65 (12 values). R's type-7 quantiles at 1/3 and 2/3: index
    # 4.67 -> 25 + 2/3 * 5 = 28.33, index 8.33 -> 45 + 1/3 * 5 = 46.67: groups
    # {10..25}, {30..45}, {50..65}. Group 0: original x y, release x x -> 1 disclosed;
    # group 1: x x / x y -> none; group 2: y y / y y -> 2. Ungrouped, no key is shared.
    plain = run(spark, BIN_ORIGINAL, BIN_SYNTHETIC, BIN_SCHEMA, DisclosureConfig(keys=["age"], targets=["t"]))
    assert plain["attribute_disclosure"].numerator == 0
    config = DisclosureConfig(keys=["age"], targets=["t"], bins={"age": 3})
    rows = run(spark, BIN_ORIGINAL, BIN_SYNTHETIC, BIN_SCHEMA, config)
    attrib = rows["attribute_disclosure"]
    assert attrib.numerator == 3 and attrib.details["per_target"]["t"]["records"]["Dorig"] == 4
    assert attrib.details["bins"] == {"age": {"groups_asked": 3, "groups": 3, "style": "quantile", "infinite_values": 0}}
    assert_matches_oracle(rows, frame(BIN_ORIGINAL, BIN_SCHEMA), frame(BIN_SYNTHETIC, BIN_SCHEMA), config)


def test_nan_is_a_level_of_its_own_and_null_another(spark):
    schema = "id long, k double, t string"
    original = [(1, NAN, "x"), (2, None, "y"), (3, 1.0, "x"), (4, -0.0, "z")]
    synthetic = [(1, NAN, "x"), (2, None, "x"), (3, 1.0, "y"), (4, 0.0, "z")]
    config = DisclosureConfig(keys=["k"], targets=["t"])
    rows = run(spark, original, synthetic, schema, config)
    # NaN -> x on both sides, -0.0 = 0.0 -> z: disclosed; null -> y vs x, 1.0 -> x vs y: not.
    assert rows["attribute_disclosure"].numerator == 2
    assert rows["replicated_uniques"].numerator == 4
    assert_matches_oracle(rows, frame(original, schema), frame(synthetic, schema), config)


def test_checks_one_way_and_two_way(spark):
    # 60 records share key (k1=p, k2=i) for i in 0..59 ... every key unique, every record
    # "yes" except two: the one-way check flags "yes" (> 50 records, > 90 % of the
    # disclosive ones). k3 = "g" for the first 30: a two-way pair (k3=g, yes) from cells
    # over 4 records: five records share each key of block b.
    original, synthetic = [], []
    for i in range(60):
        t = "no" if i < 2 else "yes"
        original.append((i, f"u{i}", "g" if i < 30 else "h", t))
        synthetic.append((i, f"u{i}", "g" if i < 30 else "h", t))
    for i in range(60, 70):
        original.append((i, f"b{i % 2}", "g", "yes"))
        synthetic.append((i, f"b{i % 2}", "g", "yes"))
    schema = "id long, k1 string, k3 string, t string"
    config = DisclosureConfig(keys=["k1", "k3"], targets=["t"])
    rows = run(spark, original, synthetic, schema, config)
    t = rows["attribute_disclosure"].details["per_target"]["t"]
    assert t["check_1way"]["flagged"] is True and t["check_1way"]["top_level_disclosive"] == 68
    # cells over 4: b0 and b1 (5 records each). Pairs: (b0, yes), (b1, yes) for k1 (all of
    # b0's records say yes: 100 % > 80), (g, yes) for k3: 38 of 40 g's say yes (95 %).
    assert t["check_2way"]["flagged"] is True and t["check_2way"]["pairs"] == 3
    assert t["check_2way"]["largest_key"] == "k3" and t["check_2way"]["largest_disclosive_records"] == 10
    warnings = rows["attribute_disclosure"].details["warnings"]
    assert any("check_1way" in w for w in warnings) and any("check_2way" in w for w in warnings)
    assert not any("yes" in w or "'g'" in w or "b0" in w for w in warnings)  # no value, ever
    assert_matches_oracle(rows, frame(original, schema), frame(synthetic, schema), config)


# ---------------------------------------------------------------------------
# grouping: the breaks are R's, exactly


def _grouping(spark, original: list[float | None], synthetic: list[float | None], groups: int):
    o = spark.createDataFrame([(v,) for v in original], "x double")
    s = spark.createDataFrame([(v,) for v in synthetic], "x double")
    return quantile_groups(o, s, {"x": groups})[0]


@pytest.mark.parametrize("groups", [3, 7, 10, 49])
def test_quantile_breaks_are_rs_type7_on_the_pooled_values(spark, groups):
    rng = np.random.default_rng(groups)
    original = np.round(rng.lognormal(3, 1, 3000), 2).tolist()
    synthetic = np.round(rng.lognormal(3, 1, 2500), 2).tolist() + [None] * 5
    grouping = _grouping(spark, original, synthetic, groups)
    pooled = np.array([v for v in original + synthetic if v is not None])
    assert list(grouping.breaks) == sorted(oracle.r_breaks(pooled, groups))
    assert grouping.style == "quantile"


def test_49_groups_leave_the_maximum_out_as_r_does(spark):
    # seq(0, 1, 1/49) ends at 0.9999999999999999: the last break falls just below the
    # largest value, which cut() then leaves out (missing).
    values = [float(v) for v in range(1, 1001)]
    grouping = _grouping(spark, values[:500], values[500:], 49)
    assert grouping.breaks[-1] < 1000.0 and list(grouping.breaks) == oracle.r_breaks(np.array(values), 49)
    o = spark.createDataFrame([(1000.0,), (999.0,)], "x double")
    assert [r[0] for r in o.select(grouping.column_expr()).collect()] == [None, 48]


def test_grouping_falls_back_and_says_where_synthpop_stops(spark):
    ties = [0.0] * 90 + [float(v) for v in range(1, 11)]  # quantile breaks 0, 0, ..., 10: one group
    grouping = _grouping(spark, ties, ties, 5)
    assert grouping.style == "equal" and list(grouping.breaks) == oracle.r_breaks(np.array(ties * 2), 5, "equal")
    few = _grouping(spark, [1.0, 2.0, 2.0], [3.0, None], 5)
    assert few.style == "unique" and few.groups == 3
    assert _grouping(spark, [4.0, 4.0], [4.0], 5).style == "single"
    assert _grouping(spark, [None, NAN], [None], 5).style == "none"
    infinite = _grouping(spark, [1.0, 2.0, 3.0, 4.0, math.inf], [-math.inf, 5.0], 2)
    assert infinite.non_finite == 2 and "infinite" in infinite.warning()


# ---------------------------------------------------------------------------
# the bundled pairs, and many rows


def _pandas_side(path, **options) -> pd.DataFrame:
    data = pd.read_csv(path, **options)
    return data.astype(object).where(data.notna(), None)


@pytest.mark.parametrize("name, keys, targets, bins", [
    ("wbcd", ["Clump_Thickness", "Uniformity_of_Cell_Size", "Class"], ["Bare_Nuclei", "Mitoses", "Normal_Nucleoli"],
     {"Clump_Thickness": 4}),
    ("aids", ["age", "gender", "race", "wtkg"], ["karnof", "cd496", "treat", "days"], {"wtkg": 5, "age": 8, "days": 6}),
])
def test_bundled_pairs_against_the_oracle(spark, name, keys, targets, bins):
    config = DisclosureConfig(keys=keys, targets=targets, bins=bins)
    loaded = dataclasses.replace(load_config(EXAMPLES / f"{name}.yaml"), metrics=MetricsConfig(disclosure=config))
    rows = {m.metric: m for m in evaluate(spark, loaded).metrics}
    options = {"sep": ";", "na_values": ["NA"]} if name == "aids" else {}
    original = _pandas_side(loaded.original.path, **options)
    synthetic = _pandas_side(loaded.synthetic.path)
    assert_matches_oracle(rows, original, synthetic, config)
    assert rows["attribute_disclosure"].numerator > 0


@pytest.mark.slow
def test_a_million_generated_rows_against_the_oracle(spark, tmp_path):
    original, synthetic = datagen.generate(1_000_000, seed=11)
    # score (about 1000 values) makes unique keys in its tails; age is grouped as a key,
    # income as a target.
    config = DisclosureConfig(keys=["score", "age", "sex"], targets=["visits", "income", "city"],
                              bins={"age": 12, "income": 10})
    for side, data in (("original", original), ("synthetic", synthetic)):
        data.to_parquet(tmp_path / f"{side}.parquet", index=False)
    inputs = prepare_inputs(spark.read.parquet(str(tmp_path / "original.parquet")),
                            spark.read.parquet(str(tmp_path / "synthetic.parquet")), row_key="id")
    rows = {m.metric: m for m in evaluate_inputs(inputs, MetricsConfig(disclosure=config)).metrics}

    def as_read(data: pd.DataFrame) -> pd.DataFrame:  # Parquet holds NaN as null
        return data.astype(object).where(data.notna(), None)

    assert_matches_oracle(rows, as_read(original), as_read(synthetic), config)
    assert rows["replicated_uniques"].numerator > 100 and rows["attribute_disclosure"].numerator > 100


@pytest.mark.parametrize("empty_side", ["original", "synthetic"])
def test_measures_over_an_empty_side_are_none_not_a_division_by_zero(spark, empty_side):
    # The job refuses an empty table before any metric; called directly, the function
    # reports the counts it found and None for every measure taken over no records.
    full = spark.createDataFrame([("a", "x"), ("a", "y"), ("b", "x")], "k string, t string")
    empty = full.limit(0)
    original, synthetic = (empty, full) if empty_side == "original" else (full, empty)
    n_original, n_synthetic = original.count(), synthetic.count()
    result = disclosure_measures(original, synthetic, ["k"], ["t"], n_original, n_synthetic)
    (t,) = result.targets
    identity, measures = result.identity(t), t.measures(n_original, n_synthetic)
    over_original = ["UiO", "UiOiS", "repU", "Dorig", "iS", "DiS", "DiSCO", "DiSDiO", "DCAPd", "baseCAPd", "CAPd"]
    over_synthetic = ["UiS", "Dsyn", "DCAPs", "TCAPs", "CAPs"]
    figures = {**identity, **measures}
    empty_names, other_names = (over_original, over_synthetic) if empty_side == "original" else (over_synthetic, over_original)
    assert all(figures[name] is None for name in empty_names)
    assert all(figures[name] is not None for name in other_names)
    # Nothing is released or nothing can be disclosed: no record is in both, every TCAP is over none.
    assert all(figures[name] is None for name in ["DCAPb", "TCAPb", "TCAP"])
    assert figures["sdmetrics_categorical_cap"] == 0.0
    # On the side that is not empty, key b alone has one record: UiO or UiS 1/3.
    assert figures["UiS" if empty_side == "original" else "UiO"] == pytest.approx(100 * 1 / 3)
