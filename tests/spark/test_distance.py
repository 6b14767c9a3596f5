"""The distance metrics on Spark against the brute-force float64 oracle (every pair
scored, tests/support/distance_oracle.py): on data with ties built in, on the bundled
WBCD and AIDS pairs and a holdout split of WBCD; the same figures under any
partitioning, row order and cells of the searches."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from privacy_eval.columns import KEY
from privacy_eval.config import Source
from privacy_eval.distance import distance_metrics
from privacy_eval.distance import search as distance_search
from privacy_eval.inputs import prepare_inputs
from privacy_eval.reading import POSITION, read_table
from tests.support.distance_oracle import distance_reference, tie_fixture
from tests.support.paths import DATA, ROOT

ALL = ("hidden_rate", "local_cloaking", "distance_to_closest_record", "nearest_neighbour_distance_ratio",
       "holdout_distance_share")
CLOSE = 1e-12


def _figures(result) -> dict:
    """The job's figures under the oracle's names."""
    out = {"width": result.space.width, "components": result.space.components,
           "variance_kept": result.space.variance_kept,
           **{f"imputed_{side}": n for side, n in result.imputed.items()}}
    if result.cloaking is not None:
        c = result.cloaking
        out.update(n_paired=c.n_paired, hits=c.hits, unique_hits=c.unique_hits, hidden_rate=c.hidden_rate,
                   local_cloaking=c.local_cloaking, lc_zero_share=c.zero_share, lc_p10=c.p10, lc_p50=c.p50,
                   lc_p90=c.p90, capped=c.capped)
    if result.closest is not None:
        d = result.closest
        out.update(dcr=d.dcr, dcr_zero_share=d.zero_share, dcr_p05=d.p05, nndr=d.nndr,
                   nndr_below_half_share=d.below_half_share)
    if result.holdout is not None:
        out.update(holdout_share=result.holdout.share, holdout_expected=result.holdout.expected)
    return out


def _assert_agrees(got: dict, expected: dict, m: int) -> None:
    assert got, "no figures"
    for name, value in got.items():
        want = expected[name]
        if name == "dcr_zero_share":  # the oracle counts records within 1e-9 of the boundaries
            assert abs(value - want) <= expected["dcr_near_zero"] / m + CLOSE, name
        elif name == "nndr_below_half_share":
            assert abs(value - want) <= expected["nndr_near_half"] / m + CLOSE, name
        elif isinstance(want, float):
            assert math.isclose(value, want, rel_tol=CLOSE, abs_tol=CLOSE), (name, value, want)
        else:
            assert value == want, (name, value, want)


def _run(spark, original: pd.DataFrame, synthetic: pd.DataFrame, key: str, holdout=None, chosen=ALL, **kw):
    inputs = prepare_inputs(spark.createDataFrame(original), spark.createDataFrame(synthetic), row_key=key)
    h = spark.createDataFrame(holdout) if holdout is not None else None
    chosen = [c for c in chosen if h is not None or c != "holdout_distance_share"]
    return distance_metrics(inputs.original, inputs.synthetic, KEY, list(inputs.columns), inputs.numeric, chosen,
                            holdout=h, **kw)


@pytest.fixture(scope="module")
def ties():
    return tie_fixture()


@pytest.mark.parametrize("components", ["all", 5, 3])
def test_ties_fixture_matches_brute_force(spark, ties, components):
    original, synthetic, holdout = ties
    columns = [c for c in original.columns if c != "id"]
    expected = distance_reference(original, synthetic, columns=columns, components=components, holdout=holdout, key="id")
    got = _figures(_run(spark, original, synthetic, "id", holdout, components=components))
    assert got["dcr_zero_share"] > 0 and any(0 < h < 1 for h in expected["hit"])  # the ties are there
    _assert_agrees(got, expected, len(synthetic))


def test_infinite_cells_are_imputed_like_missing_ones(spark, ties):
    # ±inf in a numeric column: left out of its mean and σ and imputed at the mean, as a
    # null or NaN cell is (frames.finite_double); the oracle decides by np.isfinite.
    original, synthetic, holdout = (frame.copy() for frame in ties)
    original.loc[[6, 7], "visits"] = [np.inf, -np.inf]
    synthetic.loc[[6, 50], "visits"] = [-np.inf, np.inf]
    holdout.loc[[1], "visits"] = [np.inf]
    columns = [c for c in original.columns if c != "id"]
    expected = distance_reference(original, synthetic, columns=columns, components="all", holdout=holdout, key="id")
    got = _figures(_run(spark, original, synthetic, "id", holdout, components="all"))
    assert got["imputed_original"] == 5 and got["imputed_synthetic"] >= 4  # three NaN + two inf originals
    _assert_agrees(got, expected, len(synthetic))


def test_negative_zeros_of_a_categorical_column_are_its_zeros(spark, ties):
    # A release identical to the original but for a third of the zeros of a numeric
    # column declared categorical written -0.0: one modality, every record on its original.
    original = ties[0].dropna(subset=["visits"]).reset_index(drop=True)
    release = original.copy()
    zeros = release.index[release["visits"] == 0]
    release.loc[zeros[::3], "visits"] = -0.0
    assert len(zeros[::3]) >= 3
    columns = [c for c in original.columns if c != "id"]
    expected = distance_reference(original, release, columns=columns, categorical=["visits"], components="all", key="id")
    inputs = prepare_inputs(spark.createDataFrame(original), spark.createDataFrame(release), row_key="id",
                            categorical=["visits"])
    result = distance_metrics(inputs.original, inputs.synthetic, KEY, list(inputs.columns), inputs.numeric,
                              ALL[:-1], components="all")
    got = _figures(result)
    assert got["dcr"] == 0.0 and got["dcr_zero_share"] == 1.0
    _assert_agrees(got, expected, len(release))


def test_cap_counts_records_at_the_cap(spark, ties):
    original, synthetic, _ = ties
    columns = [c for c in original.columns if c != "id"]
    expected = distance_reference(original, synthetic, columns=columns, components="all", cap=3, key="id")
    result = _run(spark, original, synthetic, "id", components="all", cap=3, chosen=("hidden_rate", "local_cloaking"))
    assert result.cloaking.capped > 0
    _assert_agrees(_figures(result), expected, len(synthetic))


@pytest.mark.parametrize("cell_records", [1_000_000, 7])
def test_the_same_figures_under_any_partitioning_row_order_and_cells(spark, ties, monkeypatch, cell_records):
    original, synthetic, holdout = ties
    baseline = _figures(_run(spark, original, synthetic, "id", holdout, components=3))
    shuffled_o = original.sample(frac=1.0, random_state=3).reset_index(drop=True)
    shuffled_s = synthetic.sample(frac=1.0, random_state=4).reset_index(drop=True)
    shuffled_h = holdout.sample(frac=1.0, random_state=5).reset_index(drop=True)
    monkeypatch.setattr(distance_search, "QUERY_ROWS", 5)  # several parts per cell: their results are merged
    inputs = prepare_inputs(spark.createDataFrame(shuffled_o).repartition(5), spark.createDataFrame(shuffled_s).repartition(3),
                            row_key="id")
    result = distance_metrics(inputs.original, inputs.synthetic, KEY, list(inputs.columns), inputs.numeric, list(ALL),
                              components=3, holdout=spark.createDataFrame(shuffled_h).repartition(4), cell_records=cell_records)
    got = _figures(result)
    assert got.keys() == baseline.keys()
    for name, value in got.items():
        assert math.isclose(value, baseline[name], rel_tol=CLOSE, abs_tol=CLOSE), (name, value, baseline[name])


# Three distinct originals, (1, 1, a), (1, 1, c) and (1, 1, d), fall on one point of the
# one-component space (in exact arithmetic; in float64 their distances are 0 or about
# 1e-15 depending on the order of the fit's sums). Six synthetic records sit there: d1 =
# d2 = 0, ratio 1; the seventh, a copy of (2, 0, b), has d1 = 0 and d2 = 2.5, ratio 0.
COINCIDING = (
    [(0, 2, 0, "b"), (1, 1, 1, "d"), (2, 1, 1, "a"), (3, 1, 1, "c"), (4, 2, 1, "d"), (5, 1, 0, "d"), (6, 1, 1, "a")],
    [(0, 2, 0, "b"), (1, 2, 1, "d"), (2, 1, 1, "a"), (3, 1, 1, "c"), (4, 2, 1, "d"), (5, 1, 0, "d"), (6, 2, 1, "d")],
)


@pytest.mark.parametrize("partitions", [1, 2, 3, 7])
def test_originals_on_one_point_of_the_space_have_a_ratio_of_one_under_any_partitioning(spark, partitions):
    schema = "id long, x0 long, x1 long, c0 string"
    o, s = (spark.createDataFrame(rows, schema).repartition(partitions) for rows in COINCIDING)
    inputs = prepare_inputs(o, s, row_key="id")
    result = distance_metrics(inputs.original, inputs.synthetic, KEY, list(inputs.columns), inputs.numeric,
                              ["nearest_neighbour_distance_ratio"], components=1)
    assert (result.closest.nndr, result.closest.below_half_share, result.closest.zero_share) == (1.0, 1 / 7, 1.0)


def _bundled(spark, name: str, original_options: dict, synthetic_file: str, exclude: list[str], categorical=()):
    o = read_table(spark, Source(path=str(DATA / name / "original.csv"), options=original_options), "original",
                   with_position=True)
    s = read_table(spark, Source(path=str(DATA / name / synthetic_file)), "synthetic", with_position=True)
    return prepare_inputs(o, s, row_key=POSITION, exclude=exclude, categorical=list(categorical))


def _pandas_sides(inputs) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The typed sides as the job sees them (test-side collect of a small table)."""
    return inputs.original.toPandas(), inputs.synthetic.toPandas()


@pytest.mark.parametrize("components", [5, "all"])
def test_wbcd_matches_brute_force(spark, components):
    inputs = _bundled(spark, "wbcd", {}, "avatar_k20.csv", ["Sample_code_number"], ["Class"])
    original, synthetic = _pandas_sides(inputs)
    columns = list(inputs.columns)
    expected = distance_reference(original, synthetic, columns=columns, categorical=["Class"], components=components, key=KEY)
    result = distance_metrics(inputs.original, inputs.synthetic, KEY, columns, inputs.numeric, list(ALL[:4]),
                              components=components)
    _assert_agrees(_figures(result), expected, len(synthetic))


def test_aids_matches_brute_force(spark):
    inputs = _bundled(spark, "aids", {"sep": ";", "nullValue": "NA"}, "avatar_k20.csv", ["pidnum"])
    original, synthetic = _pandas_sides(inputs)
    columns = list(inputs.columns)
    expected = distance_reference(original, synthetic, columns=columns, components=5, key=KEY)
    result = distance_metrics(inputs.original, inputs.synthetic, KEY, columns, inputs.numeric, list(ALL[:4]), components=5)
    assert result.imputed["original"] == expected["imputed_original"] > 0
    _assert_agrees(_figures(result), expected, len(synthetic))


def test_wbcd_holdout_split_matches_brute_force(spark):
    """The last 183 originals held out: the space is fitted on the first 500 only."""
    inputs = _bundled(spark, "wbcd", {}, "avatar_k20.csv", ["Sample_code_number"], ["Class"])
    original, synthetic = _pandas_sides(inputs)
    train, held = original.iloc[:500], original.iloc[500:].drop(columns=[KEY])
    columns = list(inputs.columns)
    expected = distance_reference(train, synthetic, columns=columns, categorical=["Class"], components=5, holdout=held, key=KEY)
    train_df = inputs.original.filter(f"`{KEY}` < 500")
    held_df = inputs.original.filter(f"`{KEY}` >= 500").drop(KEY)
    result = distance_metrics(train_df, inputs.synthetic, KEY, columns, inputs.numeric, list(ALL), components=5,
                              holdout=held_df)
    assert result.holdout.expected == 500 / 683
    _assert_agrees(_figures(result), expected, len(synthetic))


# (how the synthetic file writes Class, how the holdout does): as read by CSV, 2 is an
# int and 2.0 a double; categorical values are compared by their text form.
CLASS_WRITTEN = [("int", "int"), ("float", "int"), ("int", "float"), ("float", "float")]


def test_the_holdout_takes_the_tables_types_through_the_entry_point(spark, tmp_path):
    """The first 500 WBCD originals against the first 500 avatars, the last 183 originals
    held out, Class categorical: however the synthetic file and the holdout write Class
    (2 or 2.0), the holdout share is the brute-force oracle's on the data as the original
    writes it. The holdout gets the type the two tables have; read as it was, `2` against
    `2.0` made every holdout record differ in Class (0.8720 instead of 0.6850)."""
    from tests.support.jobrun import run_in_process

    original = pd.read_csv(DATA / "wbcd" / "original.csv")
    synthetic = pd.read_csv(DATA / "wbcd" / "avatar_k20.csv")
    train, held, synthetic = original.iloc[:500], original.iloc[500:], synthetic.iloc[:500]
    train.to_csv(tmp_path / "original.csv", index=False)
    for written in ("int", "float"):
        synthetic.assign(Class=synthetic["Class"].astype(written)).to_csv(tmp_path / f"s_{written}.csv", index=False)
        held.assign(Class=held["Class"].astype(written)).to_csv(tmp_path / f"h_{written}.csv", index=False)
    columns = list(synthetic.columns)
    expected = distance_reference(train[columns], synthetic, columns=columns, categorical=["Class"], components=5,
                                  holdout=held[columns])
    warehouse = tmp_path / "wh"
    shares = {}
    for s_written, h_written in CLASS_WRITTEN:
        run_id = f"s_{s_written}_h_{h_written}"
        code, output = run_in_process(spark, [
            "--config", str(ROOT / "conf" / "examples" / "wbcd.yaml"), "--run-id", run_id,
            "--set", f"original.path={tmp_path / 'original.csv'}",
            "--set", f"synthetic.path={tmp_path / f's_{s_written}.csv'}",
            "--set", f"holdout={{path: {tmp_path / f'h_{h_written}.csv'}}}",
            "--set", "metrics={distance: {holdout_distance_share: {target: 0.05}}}",
            "--set", f"results.warehouse={warehouse}", "--set", "results.database=holdout_types",
        ])
        assert code == 0, output[-5000:]
        (row,) = spark.read.parquet(str(warehouse / "holdout_types.db" / "metric_results")).filter(
            f"run_id = '{run_id}'").collect()
        shares[run_id] = row["value"]
    assert expected["holdout_expected"] == 500 / 683
    for run_id, share in shares.items():
        assert math.isclose(share, expected["holdout_share"], rel_tol=CLOSE), (run_id, share, expected["holdout_share"])
    assert len(set(shares.values())) == 1, shares
