"""The Spark linkage attack's invariances (invertible linear maps, one target, the
covariance's side), a hand-computed fixture, and every user-facing error and warning.
The reference comparisons on blocked data are in test_linkage.py.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pandas as pd
import pytest

from privacy_eval.columns import KEY
from privacy_eval.config import LinkageConfig
from privacy_eval.errors import InputError
from privacy_eval.inputs import InputPassWork, prepare_inputs
from privacy_eval.linkage import prepare
from privacy_eval.linkage.attack import linkage_attack
from privacy_eval.linkage.prepare import SideStats, complete_targets, input_pass_work
from tests.support.asserts import assert_same
from tests.support.linkage_frames import assert_matches_reference, attack, frames
from tests.support.reference_linkage import linkage_reference

# --------------------------------------------------------------------------
# invariances and the hand-computed fixture
# --------------------------------------------------------------------------


def continuous_data(n: int = 120, seed: int = 3) -> tuple[pd.DataFrame, pd.DataFrame]:
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 2)) @ np.array([[3.0, 1.0], [0.0, 0.5]])
    y = x + rng.normal(scale=0.4, size=(n, 2))
    o = pd.DataFrame({"id": np.arange(n), "u": x[:, 0], "v": x[:, 1]})
    s = pd.DataFrame({"id": np.arange(n), "u": y[:, 0], "v": y[:, 1]})
    return o, s


def test_scoring_output_is_cached_only_when_some_block_is_scored_pair_by_pair(spark):
    """Blocks within max_pairs_per_block_for_confidence give a confidence histogram of
    unbounded size, read after the bounded ones: the scoring output is cached for it.
    With both methods the unsplit pass (the ranges) tells whether any block is that
    small: with every block above the bound nothing is cached. With Mahalanobis alone
    the scoring is the unsplit pass, which cannot know beforehand: it is always cached."""
    from pyspark.sql.classic.dataframe import DataFrame

    o, s = continuous_data(n=40, seed=5)
    so, ss = frames(spark, o, s, "id long, u double, v double")
    calls = []
    real = DataFrame.persist
    counts = {}
    results = {}
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(DataFrame, "persist", lambda self, *a, **k: calls.append(1) or real(self, *a, **k))
        for methods in (("mahalanobis", "weighted"), ("mahalanobis",)):
            config = LinkageConfig(targets=["u", "v"], methods=list(methods))
            for bound in (40 * 40 - 1, 40 * 40):
                calls.clear()
                results[methods, bound] = attack(so, ss, config, max_pairs_per_block_for_confidence=bound)
                counts[methods, bound] = len(calls)
    assert counts == {
        (("mahalanobis", "weighted"), 40 * 40 - 1): 0, (("mahalanobis", "weighted"), 40 * 40): 1,
        (("mahalanobis",), 40 * 40 - 1): 1, (("mahalanobis",), 40 * 40): 1,
    }
    for methods in (("mahalanobis", "weighted"), ("mahalanobis",)):
        above, within = results[methods, 40 * 40 - 1], results[methods, 40 * 40]
        assert above.methods["mahalanobis"].confidence.computed == "none"
        assert within.methods["mahalanobis"].confidence.computed != "none"
        assert above.methods["mahalanobis"].success_rate == within.methods["mahalanobis"].success_rate
    assert_same(results[("mahalanobis",), 40 * 40].methods["mahalanobis"].details(),
                results[("mahalanobis", "weighted"), 40 * 40].methods["mahalanobis"].details())


def test_mahalanobis_invariant_under_invertible_linear_map(spark):
    o, s = continuous_data()
    a = np.array([[2.0, 0.5], [1.0, -3.0]])

    def mapped(df):
        out = df.copy()
        out[["u", "v"]] = df[["u", "v"]].to_numpy() @ a
        return out

    schema = "id long, u double, v double"
    conf = LinkageConfig(targets=["u", "v"], methods=["mahalanobis"], ridge=0.0, top_k=[1, 3])
    r1 = attack(*frames(spark, o, s, schema), conf).methods["mahalanobis"]
    r2 = attack(*frames(spark, mapped(o), mapped(s), schema), conf).methods["mahalanobis"]
    assert 0.1 < r1.success_rate < 0.9
    assert r2.success_rate == r1.success_rate and r2.top_k == r1.top_k and r2.max_risk == r1.max_risk


def test_one_target_is_abs_difference_over_sd(spark):
    o, s = continuous_data(seed=5)
    conf = LinkageConfig(targets=["u"], methods=["mahalanobis"], ridge=0.0, top_k=[1, 3])
    result = attack(*frames(spark, o, s, "id long, u double, v double"), conf)
    ref = linkage_reference(o, s, "id", ["u"], method="mahalanobis", ridge=0.0, top_k=[1, 3], single_column_sd=True)
    assert_matches_reference(result.methods["mahalanobis"], ref)
    assert result.condition_number == 1.0
    assert result.single_column_success is None and result.single_column_check.startswith("skipped")


@pytest.mark.parametrize("cov_from", ["anon", "pooled"])
def test_cov_from_anon_and_pooled(spark, cov_from):
    o, s = continuous_data(n=80, seed=9)
    s["v"] = s["v"] * 3.0  # a synthetic side with another spread, so the choice matters
    conf = LinkageConfig(targets=["u", "v"], methods=["mahalanobis"], cov_from=cov_from, top_k=[1, 5])
    result = attack(*frames(spark, o, s, "id long, u double, v double"), conf)
    ref = linkage_reference(o, s, "id", ["u", "v"], method="mahalanobis", cov_from=cov_from, top_k=[1, 5])
    assert_matches_reference(result.methods["mahalanobis"], ref)
    assert result.cov_from == cov_from and result.details()["cov_from"] == cov_from


def test_three_unique_three_tied_by_hand(spark):
    """V = 10, 20, 30, 40, 40, 40, synthetic = original: three records found alone, three
    tied in a group of three (risk 1/3 each; docs/metrics.md, Per-record reduction and
    risk)."""
    v = [10.0, 20.0, 30.0, 40.0, 40.0, 40.0]
    rows = [(i + 1, x) for i, x in enumerate(v)]
    so = spark.createDataFrame(rows, "id long, V double")
    ss = spark.createDataFrame(rows, "id long, V double")
    result = attack(so, ss, LinkageConfig(targets=["V"], top_k=[1, 2, 3, 6, 7]))
    for m in ("mahalanobis", "weighted"):
        r = result.methods[m]
        assert r.success_rate == pytest.approx(4 / 6, abs=1e-15)
        assert r.baseline_random == pytest.approx(1 / 6, abs=1e-15)
        assert r.lift == pytest.approx(4.0, abs=1e-12)
        assert r.max_risk == 1.0 and r.n_certain == 3 and r.n_at_risk == 6
        assert r.top_k == pytest.approx({1: 4 / 6, 2: 5 / 6, 3: 1.0, 6: 1.0}, abs=1e-15)  # 7 > 6 candidates
        pr = r.confidence
        assert pr.exact and pr.computed == "all"
        assert [row[0] for row in pr.rows] == pytest.approx([1.5811388, 1.2247449, 0.7905694, 0.0], abs=5e-8)
        assert [row[1] for row in pr.rows] == [1, 2, 3, 6]
        assert [row[3] for row in pr.rows] == pytest.approx([1, 1, 1, 4 / 6], abs=1e-12)
        assert [row[4] for row in pr.rows] == pytest.approx([1 / 6, 2 / 6, 3 / 6, 4 / 6], abs=1e-12)
    assert result.n_candidate_pairs == 36 and result.candidate_share == 1.0
    assert result.warnings == []


def test_weighted_equals_direct_normalised_sum(spark):
    """Two columns on very different scales, one block: every pair scored by hand."""
    ids = ["k1", "k2", "k3", "k4", "k5"]  # string row keys
    o = pd.DataFrame({"id": ids, "x": [1.0, 2.0, 4.0, 8.0, 9.0], "y": [100.0, 300.0, 250.0, 900.0, 120.0]})
    s = pd.DataFrame({"id": ids, "x": [2.5, 2.0, 6.5, 8.0, 1.0], "y": [150.0, 320.0, 260.0, 100.0, 130.0]})
    xo, xs = o[["x", "y"]].to_numpy(), s[["x", "y"]].to_numpy()
    d = np.abs(xs[:, None, :] - xo[None, :, :])  # (synthetic, original, column)
    lo, hi = d.min(axis=(0, 1)), d.max(axis=(0, 1))
    score = ((d - lo) / (hi - lo)).sum(axis=2)
    risk, hit2 = [], []
    for i in range(5):
        best = score[i].min()
        group = np.flatnonzero(np.isclose(score[i], best, rtol=0, atol=1e-12))
        risk.append(1.0 / group.size if i in group else 0.0)
        hit2.append(1.0 if (score[i] < score[i, i]).sum() < 2 else 0.0)  # no ties in this data
    result = attack(
        *frames(spark, o, s, "id string, x double, y double"),
        LinkageConfig(targets=["x", "y"], methods=["weighted"], top_k=[1, 2]),
    )
    r = result.methods["weighted"]
    assert r.success_rate == pytest.approx(np.mean(risk), abs=1e-12)
    assert r.top_k[2] == pytest.approx(np.mean(hit2), abs=1e-12)
    assert 0 < r.success_rate < 1


# --------------------------------------------------------------------------
# errors
# --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def small_frames(spark):
    rows = [(1, 1.0, 5.0, 2.0, "val_a"), (2, 2.0, 3.0, 2.0, "val_b"), (3, 4.0, 1.0, 2.0, "val_a")]
    schema = "id long, a double, b double, k double, g string"
    return spark.createDataFrame(rows, schema), spark.createDataFrame(rows, schema)


@pytest.mark.parametrize(
    "kw, words",
    [
        (dict(targets=["a", "zz"]), ["'zz'", "missing"]),
        (dict(targets=["a", "g"]), ["'g'", "not numeric"]),
        (dict(targets=["a"], blocking=["nope"]), ["'nope'", "blocking"]),
        (dict(targets=["k"]), ["constant", "'k'"]),
        (dict(targets=["a", "k"], blocking=["g", "g"]), ["'g'", "twice"]),
    ],
)
def test_configuration_errors_name_the_column(small_frames, kw, words):
    """What the configuration's values say against the data; the rules on the values
    alone (targets empty or twice, a negative ridge, ...) are LinkageConfig's own and
    are tested with the configuration (tests/unit/test_config.py)."""
    so, ss = small_frames
    with pytest.raises(InputError) as err:
        attack(so, ss, LinkageConfig(**kw))
    for w in words:
        assert w in str(err.value)
    assert "val_" not in str(err.value)


def test_null_and_nan_targets_are_refused(spark):
    schema = "id long, a double, b double"
    good = [(1, 1.0, 2.0), (2, 3.0, 1.0), (3, 5.0, 7.0)]
    with_null = [(1, 1.0, 2.0), (2, None, 1.0), (3, 5.0, 7.0)]
    with_nan = [(1, 1.0, float("nan")), (2, 3.0, 1.0), (3, 5.0, float("nan"))]
    conf = LinkageConfig(targets=["a", "b"])
    with pytest.raises(InputError) as err:
        attack(spark.createDataFrame(with_null, schema), spark.createDataFrame(good, schema), conf)
    assert "'a'" in str(err.value) and "1 null/NaN" in str(err.value) and "drop_incomplete" in str(err.value)
    with pytest.raises(InputError) as err:
        attack(spark.createDataFrame(good, schema), spark.createDataFrame(with_nan, schema), conf)
    assert "'b'" in str(err.value) and "0 null/NaN" in str(err.value) and "2 in the synthetic" in str(err.value)


def test_fewer_than_two_distinct_originals(spark):
    schema = "id long, a double, b double"
    one = spark.createDataFrame([(1, 1.0, 2.0)], schema)
    same = spark.createDataFrame([(1, 1.0, 2.0), (2, 1.0, 2.0), (3, 1.0, 2.0)], schema)
    syn = spark.createDataFrame([(1, 1.0, 2.5), (2, 1.5, 2.0)], schema)
    with pytest.raises(InputError, match="at least 2 original records"):
        attack(one, syn, LinkageConfig(targets=["a", "b"]))
    with pytest.raises(InputError, match="fewer than 2 distinct original records") as err:
        attack(same, syn, LinkageConfig(targets=["a", "b"]))
    assert "'a'" in str(err.value) and "'b'" in str(err.value)


def test_drop_incomplete_drops_on_both_sides_and_reports(spark):
    o, s = continuous_data(n=40, seed=11)
    o.loc[[0, 1, 2], "u"] = np.nan  # keys 0, 1, 2
    s.loc[[2, 3], "v"] = np.nan  # keys 2, 3
    schema = "id long, u double, v double"
    so, ss = frames(spark, o, s, schema)
    result = attack(so, ss, LinkageConfig(targets=["u", "v"], drop_incomplete=True))
    assert (result.dropped_incomplete_original, result.dropped_incomplete_synthetic) == (3, 2)
    assert (result.n_original, result.n_synthetic) == (37, 38)
    ref = linkage_reference(o.dropna(), s.dropna(), "id", ["u", "v"], method="mahalanobis", top_k=[1, 5, 10])
    assert_matches_reference(result.methods["mahalanobis"], ref)
    assert result.methods["mahalanobis"].n_true_missing == 2  # keys 0 and 1: their originals were dropped
    assert any("dropped 3 original and 2 synthetic" in w for w in result.warnings)
    lost = [w for w in result.warnings if "LOWER bound" in w]
    assert lost and "2 have no original with the same row key" in lost[0]
    # 40 keys on both sides; with a complete record on both, keys 4..39. The key check
    # counts them as the attack's join does.
    assert result.n_true_pairs == 36
    config = LinkageConfig(targets=["u", "v"], drop_incomplete=True)
    inputs = prepare_inputs(so, ss, row_key="id", work=input_pass_work(config))
    assert (inputs.n_paired_keys, inputs.pass_figures.n_paired_where) == (40, 36)
    # the profile pass counted the incomplete records the attack drops, and its ranges
    # are those of the complete ones
    stats = SideStats.from_values(inputs.pass_figures.side_aggregates["original"], 2)
    assert (stats.n_rows, stats.n_incomplete, stats.n) == (40, 3, 37)
    np.testing.assert_array_equal(stats.col_min, o.dropna()[["u", "v"]].min().to_numpy())
    hinted = linkage_attack(inputs, config)
    inputs.unpersist()
    assert_same(hinted.details(), result.details())
    # a target the attack will refuse: the key check counts nothing, and says so
    bad_config = LinkageConfig(targets=["u", "w"])
    bad = prepare_inputs(so, ss, row_key="id", work=InputPassWork(bad_config, paired_where=complete_targets(bad_config)))
    assert bad.pass_figures.n_paired_where is None and bad.n_paired_keys == 40
    bad.unpersist()


def test_no_truth_among_candidates_is_not_measurable(spark):
    o, s = continuous_data(n=30, seed=2)
    o["g"], s["g"] = "val_left", "val_right"
    schema = "id long, u double, v double, g string"
    result = attack(*frames(spark, o, s, schema), LinkageConfig(targets=["u", "v"], blocking=["g"]))
    for r in result.methods.values():
        assert r.status == "not_measurable" and r.value is None
        assert r.truth_coverage == 0.0 and r.n_zero_candidate == 30 and r.success_rate == 0.0
        assert r.lift is None and r.top_k == {}
    assert result.n_candidate_pairs == 0 and result.n_blocks_with_candidates == 0
    assert result.blocking_recall == 0.0
    assert any("NOT MEASURABLE" in w for w in result.warnings)


def test_warnings_constant_column_ill_conditioning_and_weak_combinations(spark):
    """Two nearly collinear columns with isotropic release noise: whitening amplifies the
    noise (κ > 100) and Mahalanobis loses to the weighted sum and to one column alone."""
    rng = np.random.default_rng(4)
    n = 150
    a = rng.normal(size=n)
    b = a + rng.normal(scale=0.03, size=n)
    o = pd.DataFrame({"id": np.arange(n), "A": a, "B": b, "C": np.full(n, 3.0)})
    s = o.copy()
    s["A"] = a + rng.normal(scale=0.05, size=n)
    s["B"] = b + rng.normal(scale=0.05, size=n)
    s["C"] = 3.0 + rng.normal(scale=0.1, size=n)
    result = attack(
        *frames(spark, o, s, "id long, A double, B double, C double"),
        LinkageConfig(targets=["A", "B", "C"], top_k=[1]),
    )
    mr, wr = result.methods["mahalanobis"], result.methods["weighted"]
    assert result.targets_dropped_constant == ("C",) and mr.targets == ("A", "B")
    assert result.condition_number > 100
    assert mr.success_rate < wr.success_rate and result.headline_method == "weighted"
    best = max(result.single_column_success.values())
    assert mr.success_rate < best
    text = "\n".join(result.warnings)
    assert "'C'" in text and "constant" in text
    assert "ill-conditioned" in text and "condition number" in text and "WEAKER" in text and "STRONGER" in text
    assert "below the weighted" in text
    assert "mahalanobis combination" in text and "LESS risk" in text


def test_weighted_refuses_a_range_too_narrow_to_normalise_and_is_scale_free_above_it(spark):
    schema = "id long, a double, tiny double"
    values = [(1, 1.0, 0.0), (2, 2.0, 1.0), (3, 4.0, 3.0), (4, 7.0, 6.0)]
    shifted = [(1, 1.0, 1.0), (2, 2.0, 0.0), (3, 4.0, 3.0), (4, 7.0, 6.0)]  # the first two swapped

    def frames_at(scale):
        return (spark.createDataFrame([(i, a, t * scale) for i, a, t in values], schema),
                spark.createDataFrame([(i, a, t * scale) for i, a, t in shifted], schema))

    # |x - y| spans 6e-310: 1 / range overflows; refused, naming that column only.
    with pytest.raises(InputError) as err:
        attack(*frames_at(1e-310), LinkageConfig(targets=["a", "tiny"], methods=["weighted"]))
    assert "'tiny'" in str(err.value) and "'a'" not in str(err.value) and "metrics.linkage.targets" in str(err.value)
    # The range-normalised score does not depend on the column's unit: the same figures at 1e-300.
    plain = attack(*frames_at(1.0), LinkageConfig(targets=["a", "tiny"], methods=["weighted"])).methods["weighted"]
    small = attack(*frames_at(1e-300), LinkageConfig(targets=["a", "tiny"], methods=["weighted"])).methods["weighted"]
    assert (small.success_rate, small.n_certain, small.top_k) == (plain.success_rate, plain.n_certain, plain.top_k)
    assert 0 < plain.success_rate < 1  # the swapped pair makes it more than a copy


# Block T: the truth (0.297) and a competitor placed so that their Mahalanobis scores
# differ by the tie tolerance 2^-26 to within one unit in the last place: whether they
# tie follows the last bits of the covariance. Block R: 40 records and exact copies.
FLIP_OTHERS = [1.288185, 1.449446, 0.066336, -0.764544, -1.092173, 0.031335, -1.022103, -1.436829, 0.199312,
               0.133375, 0.546468, -0.913971, 0.005005, -0.064742, -1.505829, 0.537997, 0.320711, 2.389112,
               0.202969, -0.144702, 1.232757, 0.198791, 0.909031, -0.365544, 0.218172, 1.024289, 0.696247,
               0.128472, -1.082308, 0.445222, 0.076863, 0.720468, 0.216233, 1.088185, -0.05156, 0.201964,
               0.666776, -1.086885, -0.40166, -0.500029]


@pytest.mark.parametrize("cov_from", ["raw", "pooled"])
def test_a_tie_at_the_tolerance_does_not_follow_the_partitioning(spark, sql_conf, cov_from):
    # Spark's avg/covar_pop gave a success rate of 1.0 or 40.5/41 with the row placement.
    original = [(0, 0.297, "T"), (1, 0.29700001212474353, "T")] + [(i + 2, v, "R") for i, v in enumerate(FLIP_OTHERS)]
    synthetic = [(0, 0.0, "T")] + [(i + 2, v, "R") for i, v in enumerate(FLIP_OTHERS)]
    schema = "id long, x double, g string"
    config = LinkageConfig(targets=["x"], blocking=["g"], methods=["mahalanobis"], cov_from=cov_from)
    figures = set()
    for partitions, placed in ((2, None), (2, 2), (7, None), (7, 3), (1, 5)):
        sql_conf({"spark.sql.shuffle.partitions": str(partitions)})
        so, ss = spark.createDataFrame(original, schema), spark.createDataFrame(synthetic, schema)
        if placed:
            so, ss = so.repartition(placed), ss.repartition(placed + 1)
        result = attack(so, ss, config)
        m = result.methods["mahalanobis"]
        figures.add((m.success_rate, m.n_certain, result.ridge_added, result.condition_number))
    assert len(figures) == 1, figures


def test_covariance_moments_are_those_of_exact_arithmetic_on_a_large_mean(spark):
    # numpy's two-pass moments of this data are 1e-11 off in the second moments (its
    # x - mean rounds); exact sums of the centred records keep them to the last bits.
    rng = np.random.default_rng(3)
    o = 1e9 + rng.normal(size=(300, 3)) @ np.array([[1.0, 0.3, 0.0], [0.0, 1.0, 0.5], [0.0, 0.0, 2.0]])
    s = 1e9 + rng.normal(size=(200, 3))
    so, ss = (spark.createDataFrame([(i, *map(float, r)) for i, r in enumerate(x)], "id long, a double, b double, c double")
              for x in (o, s))
    config = LinkageConfig(targets=["a", "b", "c"])
    inputs = prepare_inputs(so, ss, row_key="id", cache=())
    plan = prepare.checked_plan(inputs, config)
    sides = prepare.prepare_sides(inputs.original, inputs.synthetic, KEY, plan, config, None)

    def exact(x):  # (mean, centred cross-products) in fractions, rounded once
        rows = [[Fraction(v) for v in r] for r in x]
        mean = [sum(r[j] for r in rows) / len(rows) for j in range(3)]
        m2 = [[float(sum((r[j] - mean[j]) * (r[k] - mean[k]) for r in rows)) for k in range(3)] for j in range(3)]
        return np.array([float(v) for v in mean]), np.array(m2)

    for cov_from, x in (("raw", o), ("anon", s), ("pooled", np.vstack([o, s]))):
        got = prepare.covariance_moments(sides, plan.target_columns, cov_from)
        mean, m2 = exact(x)
        assert got.n == len(x)
        assert np.array_equal(got.mean, mean)  # rounded once
        np.testing.assert_allclose(got.m2, m2, rtol=1e-14)  # the products are rounded
