"""The benchmark's single-process reference (tests/support/distance_fast.py) against the
brute-force oracle (tests/support/distance_oracle.py): every figure equal to 1e-12."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from tests.support.distance_fast import distance_fast
from tests.support.distance_oracle import distance_reference, tie_fixture

FIGURES = (
    "width", "components", "variance_kept", "imputed_original", "imputed_synthetic", "n_paired",
    "unpaired_original", "unpaired_synthetic", "hits", "unique_hits", "hidden_rate", "local_cloaking",
    "lc_zero_share", "lc_p10", "lc_p50", "lc_p90", "capped", "lc_median_lower_bound", "dcr", "dcr_zero_share",
    "dcr_p05", "nndr", "nndr_below_half_share",
)


# Shares at a boundary without tolerance (d1 = 0, d1/d2 < 0.5): a record within rounding of
# it may fall on either side in two correct computations; the oracle counts such records.
BOUNDARY = {"dcr_zero_share": "dcr_near_zero", "nndr_below_half_share": "nndr_near_half"}


def assert_same_figures(fast: dict, oracle: dict) -> None:
    for name in FIGURES:
        a, b = fast[name], oracle[name]
        if name in BOUNDARY and a != b:
            assert abs(a - b) * oracle["n_synthetic"] <= oracle[BOUNDARY[name]] + 1e-9, name
        elif isinstance(b, float):
            assert a == pytest.approx(b, rel=1e-12, abs=1e-12), name
        else:
            assert a == b, name
    np.testing.assert_allclose(fast["d1"], oracle["d1"], rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(np.sort(fast["lc"]), np.sort(oracle["lc"]))


FIXTURE_COLUMNS = ["age", "visits", "const", "city", "smoker"]


@pytest.mark.parametrize("components", [2, 5, "all"])
@pytest.mark.parametrize("cap", [3, 1000])
def test_tie_fixture(components, cap):
    original, synthetic, _ = tie_fixture()
    kw = dict(columns=FIXTURE_COLUMNS, categorical=["city", "smoker"], components=components, cap=cap, key="id")
    fast = distance_fast(original, synthetic, **kw)
    oracle = distance_reference(original, synthetic, **kw)
    assert_same_figures(fast, oracle)
    assert oracle["dcr_zero_share"] > 0 and oracle["unique_hits"] < oracle["n_paired"]  # the ties are there


def generated(n: int, seed: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Continuous and integer columns, a categorical with nulls, duplicated and leaked rows,
    a shuffled synthetic side with unpaired keys."""
    rng = np.random.default_rng(seed)
    o = pd.DataFrame({
        "id": np.arange(n),
        "a": rng.normal(0, 1, n),
        "b": rng.integers(0, 4, n).astype(float),
        "c": np.round(rng.lognormal(3, 0.5, n), 1),
        "g": rng.choice(np.array(["x", "y", "z", None], dtype=object), n, p=[0.5, 0.3, 0.15, 0.05]),
    })
    o.loc[rng.random(n) < 0.03, "a"] = np.nan
    dup = np.flatnonzero(rng.random(n) < 0.1)
    o.loc[dup, ["a", "b", "c", "g"]] = o.loc[rng.integers(0, n, len(dup)), ["a", "b", "c", "g"]].to_numpy()
    s = o.copy()
    s["a"] = s["a"] + rng.normal(0, 0.2, n)
    s["c"] = np.round(s["c"] + rng.normal(0, 1, n), 1)
    s.loc[rng.random(n) < 0.2, "g"] = "w"  # unseen modality
    leak = np.flatnonzero(rng.random(n) < 0.05)
    s.loc[leak, ["a", "b", "c", "g"]] = o.loc[leak, ["a", "b", "c", "g"]].to_numpy()
    s = s.astype({"a": float, "b": float, "c": float})
    o = o.astype({"a": float, "b": float, "c": float})
    s = s.iloc[rng.permutation(n)].iloc[: n - 5].reset_index(drop=True)
    return o, s


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("components", [3, "all"])
def test_generated(seed, components):
    original, synthetic = generated(300, seed)
    kw = dict(columns=["a", "b", "c", "g"], categorical=["g"], components=components, cap=20, key="id")
    fast = distance_fast(original, synthetic, **kw)
    oracle = distance_reference(original, synthetic, **kw)
    assert_same_figures(fast, oracle)
    assert oracle["n_paired"] == 295 and not math.isnan(oracle["nndr"])
