"""Hand-computed checks of the brute-force distance oracle (tests/support/distance_oracle.py).

Most tests use one numeric column whose original values have mean 0 and population sd 1,
so scaled coordinates equal the raw values and every expected figure is derived by hand
in the comments.  No Spark here.
"""

from __future__ import annotations

import ast
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tests.support import distance_oracle as oracle
from tests.support.distance_oracle import distance_reference, tie_fixture

FIXTURE_COLUMNS = ["age", "visits", "const", "city", "smoker"]
SCALARS = (
    "width",
    "components",
    "variance_kept",
    "imputed_original",
    "imputed_synthetic",
    "imputed_holdout",
    "n_paired",
    "unpaired_original",
    "unpaired_synthetic",
    "hits",
    "unique_hits",
    "hidden_rate",
    "local_cloaking",
    "lc_zero_share",
    "lc_p10",
    "lc_p50",
    "lc_p90",
    "capped",
    "dcr",
    "dcr_zero_share",
    "dcr_p05",
    "nndr",
    "nndr_below_half_share",
    "holdout_share",
    "holdout_expected",
)


def one_column(values, **extra) -> pd.DataFrame:
    return pd.DataFrame({"x": np.asarray(values, dtype=np.float64), **extra})


# O = [-2, 0, 0, 1, 1, 0]: Σx = 0, Σx² = 6 = n, so μ = 0 and σ = 1 — coordinates are the raw values.
O6 = [-2.0, 0.0, 0.0, 1.0, 1.0, 0.0]
A6 = [-2.0, 0.5, 3.0, 1.0, 1.0, -0.5]


@pytest.fixture
def six():
    return distance_reference(one_column(O6), one_column(A6), columns=["x"], components="all", holdout=one_column([-1.0, 3.0, 1.5]))


# --------------------------------------------------------------------------
# hidden rate, local cloaking, cap
# --------------------------------------------------------------------------


def test_hidden_rate_and_cloaking_by_hand(six):
    # Paired by position; r_i = |O_i - A_i|, candidates are the other five synthetic records.
    # i=0 x=-2 own -2 r=0 : others 2.5,5,3,3,1.5        c=0 t=0 hit 1   LC 0
    # i=1 x=0  own .5 r=.5: others 2,3,1,1,.5 (A5)      c=0 t=1 hit 1/2 LC 1
    # i=2 x=0  own 3  r=3 : others 2,.5,1,1,.5          c=5 t=0 hit 0   LC 5
    # i=3 x=1  own 1  r=0 : A4 = 1 ties at 0            c=0 t=1 hit 1/2 LC 1
    # i=4 x=1  own 1  r=0 : A3 ties                     c=0 t=1 hit 1/2 LC 1
    # i=5 x=0  own -.5 r=.5: A1 = .5 ties               c=0 t=1 hit 1/2 LC 1
    r = six
    assert r["width"] == 1 and r["components"] == 1 and r["variance_kept"] == 1.0
    assert r["n_paired"] == 6 and r["unpaired_original"] == 0 and r["unpaired_synthetic"] == 0
    assert r["c"].tolist() == [0, 0, 5, 0, 0, 0]
    assert r["t"].tolist() == [0, 1, 0, 1, 1, 1]
    assert r["hit"].tolist() == [1.0, 0.5, 0.0, 0.5, 0.5, 0.5]
    assert r["hits"] == 3.0 and r["unique_hits"] == 1
    assert r["hidden_rate"] == pytest.approx(50.0, abs=1e-12)  # 100·(1 - 3/6)
    # LC sorted [0,1,1,1,1,5]: median (1+1)/2 = 1; lower quantiles at floor(q·5): p10 → [0], p50 → [2], p90 → [4].
    assert r["lc"].tolist() == [0, 1, 5, 1, 1, 1]
    assert r["local_cloaking"] == 1.0
    assert r["lc_zero_share"] == pytest.approx(1 / 6)
    assert (r["lc_p10"], r["lc_p50"], r["lc_p90"]) == (0, 1, 1)
    assert r["capped"] == 0 and r["lc_median_lower_bound"] is False


def test_cap():
    # Same data.  cap=1: LC [0,1,5,1,1,1] → [0,1,1,1,1,1]; 5 records reach the cap (LC ≥ 1),
    # so the median 1 is only a lower bound.  Hits are not affected by the cap.
    r = distance_reference(one_column(O6), one_column(A6), columns=["x"], components="all", cap=1)
    assert r["lc_capped"].tolist() == [0, 1, 1, 1, 1, 1]
    assert r["capped"] == 5 and r["lc_median_lower_bound"] is True
    assert r["local_cloaking"] == 1.0 and r["lc_p90"] == 1
    assert r["hits"] == 3.0
    # cap=2: only i=2 (LC 5) is capped, to 2; p90 = sorted [0,1,1,1,1,2][4] = 1.
    r = distance_reference(one_column(O6), one_column(A6), columns=["x"], components="all", cap=2)
    assert r["lc_capped"].tolist() == [0, 1, 2, 1, 1, 1]
    assert r["capped"] == 1 and r["lc_median_lower_bound"] is False
    with pytest.raises(ValueError):
        distance_reference(one_column(O6), one_column(A6), columns=["x"], cap=0)


def test_median_of_even_count_cloaking():
    # O = [-1, 1] (μ 0, σ 1), A = [-1, 3, 2, -3]; pairs 0↔0, 1↔1, synthetic 2 and 3 unpaired.
    # i=0 x=-1 own -1 r=0: others 4, 3, 2       c=0 t=0 LC 0
    # i=1 x=1  own 3  r=2: others 2 (A0) tied, 1 (A2) closer, 4   c=1 t=1 LC 2
    # median of [0, 2] = 1 (mean of the two middle values); hits 1 + 0 → hidden rate 50.
    r = distance_reference(one_column([-1, 1]), one_column([-1, 3, 2, -3]), columns=["x"], components="all")
    assert r["n_paired"] == 2 and r["unpaired_synthetic"] == 2
    assert r["lc"].tolist() == [0, 2] and r["local_cloaking"] == 1.0
    assert r["hidden_rate"] == pytest.approx(50.0)


def test_tie_tolerance():
    # O = [-1, 1] (μ 0, σ 1). i=0: own A0 = -0.5 → r = 0.5, τ = 1e-9.
    # A1 = -1.5 + 1e-10 → d = 0.5 - 1e-10, within τ: tied → hit 1/2.
    # A1 = -1.5 + 1e-8  → d = 0.5 - 1e-8, beyond τ: closer → hit 0.
    tied = distance_reference(one_column([-1, 1]), one_column([-0.5, -1.5 + 1e-10]), columns=["x"], components="all")
    closer = distance_reference(one_column([-1, 1]), one_column([-0.5, -1.5 + 1e-8]), columns=["x"], components="all")
    assert (tied["c"][0], tied["t"][0], tied["hit"][0]) == (0, 1, 0.5)
    assert (closer["c"][0], closer["t"][0], closer["hit"][0]) == (1, 0, 0.0)
    # τ is absolute below r = 1 and relative above: τ(0.25) = 1e-9, τ(2000) = 2e-6.
    assert oracle.tau(0.25) == 1e-9 and oracle.tau(2000.0) == pytest.approx(2e-6)


def test_unpaired_keys():
    # O ids 1..4 with x [-1,-1,1,1] (μ 0, σ 1); A ids [5,4,3,2] (rows shuffled) with x [1,0,1,-1].
    # Pairs by key: id2 (-1 ↔ -1), id3 (1 ↔ 1), id4 (1 ↔ 0); id1 and id5 unpaired.
    # id2 r=0: others (id5 1, id4 0, id3 1) at 2,1,2      c=0 t=0 hit 1   LC 0
    # id3 r=0: id5 = 1 ties (the unpaired synthetic still competes), id4 at 1, id2 at 2
    #                                                     c=0 t=1 hit 1/2 LC 1
    # id4 r=1: id5, id3 at 0 closer, id2 at 2             c=2 t=0 hit 0   LC 2
    # Σhit = 1.5, n_p = 3 → hidden rate 50; LC median 1.
    o = one_column([-1, -1, 1, 1], id=[1, 2, 3, 4])
    a = one_column([1, 0, 1, -1], id=[5, 4, 3, 2])
    r = distance_reference(o, a, columns=["x"], components="all", key="id")
    assert (r["n_paired"], r["unpaired_original"], r["unpaired_synthetic"]) == (3, 1, 1)
    assert r["hits"] == 1.5 and r["hidden_rate"] == pytest.approx(50.0)
    assert sorted(r["lc"].tolist()) == [0, 1, 2] and r["local_cloaking"] == 1.0
    # No key in common: nothing paired, the alignment figures are withheld, DCR is not.
    r = distance_reference(o, one_column([0, 0], id=[8, 9]), columns=["x"], components="all", key="id")
    assert r["n_paired"] == 0 and r["unpaired_original"] == 4 and r["unpaired_synthetic"] == 2
    for k in ("hits", "unique_hits", "hidden_rate", "local_cloaking", "lc_zero_share", "lc_p10", "lc_p50", "lc_p90", "capped"):
        assert r[k] is None, k
    assert r["dcr"] == 1.0
    with pytest.raises(ValueError):
        distance_reference(o, one_column([0, 0], id=[2, 2]), columns=["x"], key="id")
    # A null key pairs with nothing (as in a Spark equi-join); position pairing leaves extra rows unpaired.
    r = distance_reference(o, pd.DataFrame({"x": [0.0, 1.0], "id": [None, 2]}), columns=["x"], components="all", key="id")
    assert (r["n_paired"], r["unpaired_original"], r["unpaired_synthetic"]) == (1, 3, 1)
    r = distance_reference(o, one_column([0, 0]), columns=["x"], components="all")
    assert (r["n_paired"], r["unpaired_original"], r["unpaired_synthetic"]) == (2, 2, 0)


# --------------------------------------------------------------------------
# DCR, NNDR, holdout share
# --------------------------------------------------------------------------


def test_dcr_and_nndr_by_hand(six):
    # Per synthetic record, distances to O = [-2, 0, 0, 1, 1, 0]:
    # -2 : 0,2,2,3,3,2        d1 0   d2 2   ratio 0
    # .5 : 2.5,.5×5           d1 .5  d2 .5  ratio 1
    # 3  : 5,3,3,2,2,3        d1 2   d2 2   ratio 1
    # 1  : 3,1,1,0,0,1        d1 0   d2 0   ratio := 1 (d2 = 0, on a duplicated original)
    # 1  : same               d1 0   d2 0   ratio 1
    # -.5: 1.5,.5,.5,1.5,1.5,.5 d1 .5 d2 .5 ratio 1
    r = six
    assert r["d1"].tolist() == [0.0, 0.5, 2.0, 0.0, 0.0, 0.5]
    assert r["d2"].tolist() == [2.0, 0.5, 2.0, 0.0, 0.0, 0.5]
    assert r["ratio"].tolist() == [0.0, 1.0, 1.0, 1.0, 1.0, 1.0]
    assert r["dcr"] == 0.25  # sorted d1 [0,0,0,.5,.5,2]: (0 + .5)/2
    assert r["dcr_zero_share"] == 0.5
    assert r["dcr_p05"] == 0.0  # lower order statistic at floor(0.05·5) = 0
    assert r["nndr"] == 1.0 and r["nndr_below_half_share"] == pytest.approx(1 / 6)


def test_nndr_ratio():
    # O = [-1, 1] (μ 0, σ 1).  -0.8: d 0.2, 1.8 → 1/9;  0: 1, 1 → 1;  5: 4, 6 → 2/3;  3: 2, 4 → exactly 1/2,
    # which is not below half (strict) but sits on the boundary.  Sorted [1/9, 1/2, 2/3, 1]: median 7/12.
    r = distance_reference(one_column([-1, 1]), one_column([-0.8, 0.0, 5.0, 3.0]), columns=["x"], components="all")
    assert r["ratio"] == pytest.approx([0.2 / 1.8, 1.0, 4.0 / 6.0, 0.5], abs=1e-15)
    assert r["nndr"] == pytest.approx(7 / 12, rel=1e-14) and r["nndr_below_half_share"] == 0.25
    assert r["nndr_near_half"] == 1 and r["dcr_near_zero"] == 0
    assert r["dcr_p05"] == pytest.approx(0.2)  # lower order statistic at floor(0.05·3) = 0: the smallest d1


def test_holdout_share_by_hand(six):
    # H = [-1, 3, 1.5]; d_O from the DCR test, d_H = distance to the nearest holdout value:
    # -2: 0 vs 1 closer; .5: .5 vs 1 closer; 3: 2 vs 0 farther; 1: 0 vs .5 closer (×2);
    # -.5: .5 vs .5 tied → share = (4 + ½)/6 = 0.75; expected = 6/(6+3).
    r = six
    assert r["d_holdout"].tolist() == [1.0, 1.0, 0.0, 0.5, 0.5, 0.5]
    assert (r["holdout_closer"], r["holdout_tied"]) == (4, 1)
    assert r["holdout_share"] == 0.75 and r["holdout_expected"] == pytest.approx(2 / 3)
    assert r["imputed_holdout"] == 0
    plain = distance_reference(one_column(O6), one_column(A6), columns=["x"], components="all")
    assert plain["holdout_share"] is None and plain["holdout_expected"] is None and plain["imputed_holdout"] is None


# --------------------------------------------------------------------------
# the space: categorical coordinates, nulls, unseen values, constants, imputation
# --------------------------------------------------------------------------


def test_one_hot_distance():
    # p_a = 3/4, p_b = 1/4.  a vs b differ by 1/√p_a and -1/√p_b: d² = 1/p_a + 1/p_b = 4/3 + 4 = 16/3.
    # An unseen value sits at -√p_k everywhere: from a, only the a coordinate differs, by 1/√p_a → d² = 4/3;
    # from b, d² = 1/p_b = 4.
    o = pd.DataFrame({"c": ["a", "a", "a", "b"]})
    s = pd.DataFrame({"c": ["b", "zzz"]})
    r = distance_reference(o, s, columns=["c"], components="all")
    assert r["width"] == 2 and r["categorical_columns"] == ["c"]
    assert r["d1"][0] == 0.0 and r["d2"][0] == pytest.approx(math.sqrt(16 / 3), rel=1e-14)
    assert r["d1"][1] == pytest.approx(math.sqrt(4 / 3), rel=1e-14) and r["d2"][1] == pytest.approx(math.sqrt(4 / 3), rel=1e-14)
    d = oracle.pairwise_distances(*(oracle.embed(oracle.fit_space(o, columns=["c"], components="all"), f)[0] for f in (o, s)))
    assert d[:, 1] == pytest.approx([math.sqrt(4 / 3)] * 3 + [2.0], rel=1e-14)


def test_null_is_a_modality():
    # p_a = 1/2, p_null = 1/4, p_b = 1/4 (None and NaN are the same null).  A null synthetic record
    # coincides with the null original; to a: d² = 1/p_a + 1/p_null = 6; to b: 4 + 4 = 8.
    o = pd.DataFrame({"c": ["a", "a", None, "b"]})
    s = pd.DataFrame({"c": [np.nan, None]})
    r = distance_reference(o, s, columns=["c"], components="all")
    assert r["width"] == 3
    assert r["d1"].tolist() == [0.0, 0.0]
    assert r["d2"] == pytest.approx([math.sqrt(6)] * 2, rel=1e-14)
    assert r["imputed_original"] == 0 and r["imputed_synthetic"] == 0  # nulls in categoricals are not imputed


def test_booleans_and_listed_categoricals():
    # A boolean is categorical and compares as "true"/"false": a text "true" is the same modality.
    # A numeric column listed in `categorical` is one-hot: 1 vs 2 differ by d² = 1/p_1 + 1/p_2 = 2 + 2.
    o = pd.DataFrame({"b": [True, True, False, True], "k": [1, 1, 2, 2]})
    s = pd.DataFrame({"b": ["true", "True"], "k": [1, 2]})
    r = distance_reference(o, s, columns=["b", "k"], categorical=["k"], components="all")
    assert r["categorical_columns"] == ["b", "k"] and r["width"] == 4
    assert r["d1"][0] == 0.0  # "true", 1 == original row 0
    # "True" is unseen (Spark would give "true" only for a boolean): at 1/√p_true = √(4/3) from true rows, plus k.
    assert r["d1"][1] == pytest.approx(math.sqrt(4 / 3), rel=1e-14)
    assert oracle.as_text(np.bool_(False)) == "false" and oracle.as_text(float("nan")) is None and oracle.as_text(3) == "3"


def test_constant_column_and_imputation():
    # `const` is 0.1 everywhere (a rounded mean would leave σ ≈ 1e-17): no σ, μ = 0.1, originals at 0,
    # a record at 1 where its value differs from 0.1.
    # x: original [-1, 1, NaN, inf] → μ 0, σ 1 over the two finite values; 2 cells imputed to 0.
    # Synthetic (x, const): (NaN, 0.1) → (0, 0) coincides with the imputed originals; (-inf, 2.1) → (0, 1):
    # the distance says "differs", not 2.1 - 0.1; (None→NaN, 0.1) → (0, 0).  3 synthetic cells imputed.
    # Holdout: one -inf.
    o = pd.DataFrame({"x": [-1.0, 1.0, np.nan, np.inf], "const": [0.1] * 4})
    s = pd.DataFrame({"x": [np.nan, -np.inf, None], "const": [0.1, 2.1, 0.1]})
    h = pd.DataFrame({"x": [-np.inf, 0.5], "const": [0.1, 0.1]})
    space = oracle.fit_space(o, columns=["x", "const"], components="all")
    assert space.means == (0.0, 0.1) and space.sds == (1.0, None)
    xo, imp = oracle.embed(space, o)
    assert imp == 2 and xo.tolist() == [[-1.0, 0.0], [1.0, 0.0], [0.0, 0.0], [0.0, 0.0]]
    r = distance_reference(o, s, columns=["x", "const"], components="all", holdout=h)
    assert (r["imputed_original"], r["imputed_synthetic"], r["imputed_holdout"]) == (2, 3, 1)
    assert r["d1"][0] == 0.0 and r["d2"][0] == 0.0 and r["d1"][2] == 0.0
    assert r["d1"][1] == 1.0  # (0, 1) to (0, 0)
    assert oracle.fit_space(pd.DataFrame({"c": [7, 7, 7]}), columns=["c"]).sds == (None,)


# --------------------------------------------------------------------------
# projection
# --------------------------------------------------------------------------


def random_mixed(seed: int, n: int = 40) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame(
        {
            "id": rng.permutation(n),
            "u": rng.normal(size=n),
            "v": rng.integers(0, 4, n).astype(float),
            "w": rng.normal(size=n) * 3 + 1,
            "c": rng.choice(np.array(["p", "q", "r"], dtype=object), n),
        }
    )


def test_projection_by_hand():
    # x = [1,1,1,-1,-1,-1], y = [1,1,-1,1,-1,-1]: both μ 0, σ 1, correlation ρ = Σxy/n = 2/6 = 1/3.
    # ZᵀZ = n·[[1, ρ], [ρ, 1]] → eigenvalues n(1 ± ρ); K = 1 keeps (1 + ρ)/2 = 2/3 along (1,1)/√2.
    o = pd.DataFrame({"x": [1.0, 1, 1, -1, -1, -1], "y": [1.0, 1, -1, 1, -1, -1]})
    s = pd.DataFrame({"x": [1.0], "y": [-1.0]})  # orthogonal to (1,1): projects to 0
    r = distance_reference(o, s, columns=["x", "y"], components=1)
    assert r["components"] == 1 and r["width"] == 2
    assert r["variance_kept"] == pytest.approx(2 / 3, rel=1e-14)
    assert r["subspace_ambiguous"] is False
    # Originals project to ±√2 (for (1,1), (-1,-1)) or 0 (for (1,-1), (-1,1)): the synthetic coincides with row 2.
    assert r["d1"][0] == pytest.approx(0.0, abs=1e-15)
    full = distance_reference(o, s, columns=["x", "y"], components="all")
    assert full["d1"][0] == 0.0 and full["components"] == 2
    # ρ = 0: equal eigenvalues, the 1-D subspace is not unique.
    tied = pd.DataFrame({"x": [1.0, 1, -1, -1], "y": [1.0, -1, 1, -1]})
    assert distance_reference(tied, s, columns=["x", "y"], components=1)["subspace_ambiguous"] is True


def test_k_at_least_width_is_all():
    o, s, h = random_mixed(1), random_mixed(2), random_mixed(3)
    cols = ["u", "v", "w", "c"]
    full = distance_reference(o, s, columns=cols, components="all", holdout=h, key="id")
    assert full["width"] == 6
    for k in (6, 7, 50):
        r = distance_reference(o, s, columns=cols, components=k, holdout=h, key="id")
        for name in SCALARS:
            assert r[name] == full[name], (k, name)
        assert np.array_equal(r["d1"], full["d1"]) and np.array_equal(r["lc"], full["lc"])


def test_projection_never_lengthens_distances():
    o, s = random_mixed(4), random_mixed(5)
    cols = ["u", "v", "w", "c"]
    full_space = oracle.fit_space(o, columns=cols, components="all")
    w = full_space.width
    cut_space = oracle.fit_space(o, columns=cols, components=w - 1)
    assert cut_space.components == w - 1 and 0 < cut_space.variance_kept < 1
    full = oracle.pairwise_distances(oracle.embed(full_space, o)[0], oracle.embed(full_space, s)[0])
    cut = oracle.pairwise_distances(oracle.embed(cut_space, o)[0], oracle.embed(cut_space, s)[0])
    assert np.all(cut <= full + 1e-12)
    a = distance_reference(o, s, columns=cols, components="all")
    b = distance_reference(o, s, columns=cols, components=w - 1)
    assert np.all(b["d1"] <= a["d1"] + 1e-12) and np.all(b["d2"] <= a["d2"] + 1e-12)
    # Variance kept is the top eigenvalues' share of the trace, which is Σ‖z_i‖².
    z = oracle.embed(full_space, o)[0]
    assert cut_space.variance_kept == pytest.approx(full_space.eigenvalues[: w - 1].sum() / (z * z).sum(), rel=1e-12)


# --------------------------------------------------------------------------
# invariances and the tie fixture
# --------------------------------------------------------------------------


@pytest.mark.parametrize("components", ["all", 5, 3])
def test_invariant_under_row_order(components):
    o, s, h = tie_fixture()
    base = distance_reference(o, s, columns=FIXTURE_COLUMNS, components=components, holdout=h, key="id")
    rng = np.random.default_rng(7)
    for _ in range(3):
        shuffled = [f.iloc[rng.permutation(len(f))].reset_index(drop=True) for f in (o, s, h)]
        r = distance_reference(shuffled[0], shuffled[1], columns=FIXTURE_COLUMNS, components=components, holdout=shuffled[2], key="id")
        for name in SCALARS:
            if name in ("dcr_zero_share", "nndr_below_half_share"):
                # Untoleranced boundaries: records within rounding of them may switch sides (see the oracle).
                slack = base["dcr_near_zero" if name == "dcr_zero_share" else "nndr_near_half"] / len(s)
                assert abs(r[name] - base[name]) <= slack + 1e-15, name
            elif isinstance(base[name], float):
                assert r[name] == pytest.approx(base[name], rel=1e-12, abs=1e-12), name
            else:
                assert r[name] == base[name], name
        assert sorted(r["d1"]) == pytest.approx(sorted(base["d1"]), abs=1e-12)


def test_tie_fixture_has_its_ties():
    o, s, h = tie_fixture()
    o2, s2, h2 = tie_fixture()
    assert o.equals(o2) and s.equals(s2) and h.equals(h2)  # deterministic
    assert 40 <= min(len(o), len(s), len(h)) and max(len(o), len(s), len(h)) <= 80
    assert set(o["id"]) - set(s["id"]) == {3, 7} and set(s["id"]) - set(o["id"]) == {100, 101}
    assert "Atlantis" in set(s["city"]) and "Atlantis" not in set(o["city"])
    assert str(o["smoker"].dtype) == "bool" and o["const"].nunique() == 1
    for components in ("all", 5):
        r = distance_reference(o, s, columns=FIXTURE_COLUMNS, components=components, holdout=h, key="id")
        assert r["subspace_ambiguous"] is False
        assert r["width"] == 3 + 5 + 2  # age, visits, const + Lyon/Paris/Nantes/Lille/null + true/false
        assert (r["unpaired_original"], r["unpaired_synthetic"]) == (2, 2)
        assert min(r["imputed_original"], r["imputed_synthetic"], r["imputed_holdout"]) > 0
        assert (r["t"] > 0).any() and ((r["hit"] > 0) & (r["hit"] < 1)).any()  # tied own-avatars
        assert r["dcr_zero_share"] > 0 and (r["d2"] == 0).any()  # coincidences, one on a duplicated original
        assert r["holdout_tied"] > 0
        assert r["lc"].max() >= 10  # so a small cap bites
    capped = distance_reference(o, s, columns=FIXTURE_COLUMNS, components="all", cap=3, key="id")
    assert capped["capped"] > 0


def test_matches_a_pair_by_pair_restatement():
    # The hidden rate, local cloaking, DCR, NNDR and holdout share re-stated with Python
    # loops over math.dist on the fixture's coordinates.
    o, s, h = tie_fixture()
    r = distance_reference(o, s, columns=FIXTURE_COLUMNS, components="all", holdout=h, key="id")
    space = oracle.fit_space(o, columns=FIXTURE_COLUMNS, components="all")
    xo, xs, xh = (oracle.embed(space, f)[0].tolist() for f in (o, s, h))
    own = {k: j for j, k in enumerate(s["id"])}
    hits = 0.0
    for i, k in enumerate(o["id"]):
        if k not in own:
            continue
        rr = math.dist(xo[i], xs[own[k]])
        tol = 1e-9 * max(1.0, rr)
        ds = [math.dist(xo[i], y) for j, y in enumerate(xs) if j != own[k]]
        c = sum(d < rr - tol for d in ds)
        t = sum(abs(d - rr) <= tol for d in ds)
        hits += (1.0 / (1 + t)) if c == 0 else 0.0
    assert r["hits"] == pytest.approx(hits, abs=1e-12)
    closer = tied = 0
    for j, y in enumerate(xs):
        ds = sorted(math.dist(x, y) for x in xo)
        assert r["d1"][j] == pytest.approx(ds[0], abs=1e-14) and r["d2"][j] == pytest.approx(ds[1], abs=1e-14)
        dh = min(math.dist(x, y) for x in xh)
        tol = 1e-9 * max(1.0, dh)
        closer += ds[0] < dh - tol
        tied += abs(ds[0] - dh) <= tol
    assert (r["holdout_closer"], r["holdout_tied"]) == (closer, tied)


def test_oracle_is_independent_of_the_package():
    tree = ast.parse(Path(oracle.__file__).read_text())
    imported = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    imported |= {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    assert not any(m.split(".")[0] == "privacy_eval" for m in imported)
    assert {m.split(".")[0] for m in imported} <= {"__future__", "math", "collections", "dataclasses", "typing", "numpy", "pandas"}
