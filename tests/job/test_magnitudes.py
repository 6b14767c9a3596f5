"""Values of any finite size, through the entry point: a column at 1e200, at ±1e308 or
at 1e-200 gives the figures its ordinary-sized values give (docs/metrics.md, "Values of
any size").

The distance metrics and the Knowledge Protection Rate are ratios of one column's
values to its own spread or mean: multiplying a column by a power of two, which is exact
in floating point, changes none of them. So the job's figures on the scaled column must
equal the brute-force oracle's (tests/support/distance_oracle.py) and the pandas
reference's (tests/support/reference.py) on the column as it was. Natively, squared
deviations overflow from about 1.3e154 (the standard deviation is infinite and every
coordinate of the column 0: it silently drops out), sums from 1.8e308 / n, and
below about 1e-154 they vanish (the column drops out the same way).
"""

from __future__ import annotations

import json
import math

import pandas as pd
import pytest

from tests.support import reference
from tests.support.distance_oracle import distance_reference
from tests.support.jobrun import run_in_process
from tests.support.paths import DATA, ROOT

pytestmark = pytest.mark.slow

COLUMN = "Mitoses"
KNOWN = ["Clump_Thickness", COLUMN, "Class"]
# (name, shift, power of two): the column becomes (x - shift) * 2^power. Mitoses is 1..10:
# 2^664 x is 1.2e200..1.2e201; 2^1021 (x - 5) is -9.0e307..1.1e308; 2^-664 x is 8.4e-201..8.4e-200.
SCALINGS = [("1e200", 0, 664), ("1e308", 5, 1021), ("1e-200", 0, -664)]
CLOSE = 1e-12
DATABASE = "magnitudes"


@pytest.fixture(scope="module")
def warehouse(tmp_path_factory):
    """One warehouse for the module: a session registers a database in one warehouse."""
    return tmp_path_factory.mktemp("magnitudes") / "wh"


def scaled(frame: pd.DataFrame, shift: int, power: int) -> pd.DataFrame:
    return frame.assign(**{COLUMN: [math.ldexp(float(v - shift), power) for v in frame[COLUMN]]})


@pytest.mark.parametrize("name, shift, power", SCALINGS, ids=[s[0] for s in SCALINGS])
def test_a_column_of_any_size_gives_the_figures_of_its_ordinary_values(
    spark, tmp_path, warehouse, monkeypatch, name, shift, power
):
    """The first 500 WBCD originals against the first 500 avatars, the last 183 held out,
    every distance metric and the KPR (Mitoses a known variable), against the oracles on
    the column as it was (shifted, for ±1e308, but not scaled)."""
    # Mitoses holds 9 distinct values, one short of a published grid: lowered to see it.
    monkeypatch.setattr("privacy_eval.metrics.binning.MIN_GRID_SUPPORT", 9)
    original = pd.read_csv(DATA / "wbcd" / "original.csv").drop(columns="Sample_code_number")
    synthetic = pd.read_csv(DATA / "wbcd" / "avatar_k20.csv").iloc[:500]
    train, held = original.iloc[:500], original.iloc[500:]
    plain = {side: frame.assign(**{COLUMN: frame[COLUMN] - shift})
             for side, frame in (("original", train), ("synthetic", synthetic), ("holdout", held))}
    for side, frame in plain.items():
        scaled(frame, 0, power).to_csv(tmp_path / f"{side}.csv", index=False)
    written = pd.read_csv(tmp_path / "original.csv", float_precision="round_trip")[COLUMN]
    assert written.abs().max() == math.ldexp(plain["original"][COLUMN].abs().max(), power)  # written exactly

    code, output = run_in_process(spark, [
        "--config", str(ROOT / "conf" / "examples" / "wbcd.yaml"), "--run-id", name,
        "--set", f"original.path={tmp_path / 'original.csv'}", "--set", f"synthetic.path={tmp_path / 'synthetic.csv'}",
        "--set", f"holdout={{path: {tmp_path / 'holdout.csv'}}}", "--set", "exclude=[]",
        "--set", f"metrics={{knowledge_protection: {{known_variables: {KNOWN}}}, distance: {{}}}}",
        "--set", f"results.warehouse={warehouse}", "--set", f"results.database={DATABASE}",
    ])
    assert code == 0, output[-5000:]
    table = spark.read.parquet(str(warehouse / f"{DATABASE}.db" / "metric_results")).filter(f"run_id = '{name}'")
    rows = {r["metric"]: r for r in table.collect()}

    columns = list(synthetic.columns)
    distances = distance_reference(plain["original"], plain["synthetic"], columns=columns, categorical=["Class"],
                                   components=5, holdout=plain["holdout"])
    kpr = reference.knowledge_protection(plain["original"], plain["synthetic"], columns, KNOWN,
                                         [c for c in columns if c != "Class"])
    expected = {
        "hidden_rate": distances["hidden_rate"], "local_cloaking": distances["local_cloaking"],
        "distance_to_closest_record": distances["dcr"], "nearest_neighbour_distance_ratio": distances["nndr"],
        "holdout_distance_share": distances["holdout_share"], "knowledge_protection_rate": kpr["protection"],
    }
    for metric, want in expected.items():
        assert math.isclose(rows[metric]["value"], want, rel_tol=CLOSE, abs_tol=CLOSE), (metric, rows[metric]["value"], want)
    assert rows["knowledge_protection_rate"]["numerator"] == kpr["exposed"]
    assert rows["hidden_rate"]["numerator"] == distances["unique_hits"]
    # The KPR's published grid is in the column's own units: the plain grid times 2^power.
    once = reference.singletons(plain["original"], columns)[COLUMN].astype(float)
    grid = json.loads(rows["knowledge_protection_rate"]["details"])["bins"][COLUMN]
    assert math.isclose(grid["step"], math.ldexp(0.05 * abs(once.mean()), power), rel_tol=CLOSE)
    assert math.isclose(grid["origin"], math.ldexp(once.min() - once.std(ddof=1) / 10, power), rel_tol=CLOSE)
