"""The alignment sanity check (privacy_eval.alignment) on the bundled real
releases, read as the job reads them, and on a hand-computed fixture."""

from __future__ import annotations

import json
import random
from dataclasses import replace
from pathlib import Path

import pytest

from privacy_eval import alignment as A
from privacy_eval.alignment import alignment_check, with_random_partner
from privacy_eval.columns import KEY
from privacy_eval.config import Config, load_config
from privacy_eval.evaluation import load_inputs
from privacy_eval.inputs import EvaluationInputs, prepare_inputs
from privacy_eval.reading import POSITION, read_table
from tests.support.paths import DATA, ROOT

NAN, INF = float("nan"), float("inf")


def example_config(example: str) -> Config:
    return load_config(ROOT / "conf" / "examples" / f"{example}.yaml")


@pytest.fixture(scope="module")
def aids_original(spark):
    """The AIDS original as the job reads it (`;`, NA, positions), read once: schema
    inference and positions are the slow part of reading."""
    return read_table(spark, example_config("aids").original, "original", with_position=True)


def aids_inputs(spark, original, synthetic: Path) -> EvaluationInputs:
    """A release of the AIDS data prepared as the job does (exclude pidnum, categoricals)."""
    config = example_config("aids")
    return prepare_inputs(
        original,
        read_table(spark, replace(config.synthetic, path=str(synthetic)), "synthetic", with_position=True),
        row_key=POSITION,
        exclude=config.exclude,
        categorical=config.categorical,
        cast=config.cast,
    )


def check(inputs: EvaluationInputs, **kwargs) -> A.AlignmentResult:
    return alignment_check(
        inputs.original, inputs.synthetic, inputs.columns, inputs.numeric, KEY, inputs.n_synthetic, **kwargs
    )


def check_release(spark, original, synthetic: Path) -> A.AlignmentResult:
    """The check on one AIDS release, its inputs released afterwards."""
    inputs = aids_inputs(spark, original, synthetic)
    try:
        return check(inputs)
    finally:
        inputs.unpersist()


def shuffled_copy(source: Path, target: Path, seed: int = 5) -> Path:
    """The same file with its data lines in another order, byte for byte otherwise."""
    header, *lines = source.read_text().splitlines(keepends=True)
    random.Random(seed).shuffle(lines)
    target.write_text(header + "".join(lines))
    return target


@pytest.fixture(scope="module")
def aids_avatar(spark, aids_original):
    inputs = aids_inputs(spark, aids_original, DATA / "aids" / "avatar_k20.csv")
    yield inputs
    inputs.unpersist()


@pytest.fixture(scope="module")
def aids_avatar_result(aids_avatar) -> A.AlignmentResult:
    return check(aids_avatar)


def test_aids_avatar_release_is_aligned(aids_avatar_result):
    result = aids_avatar_result
    assert result.aligned and result.conclusive
    assert result.n_aligned == 2139 and result.n_pairs == 2138  # one bucket: its last row has no partner
    assert result.n_columns == 26 and result.n_scaled_columns == 10  # 16 declared categorical
    assert result.z < -50
    assert result.ratio < 0.5
    assert result.difference < 0
    details = result.details()
    json.dumps(details, allow_nan=False)
    assert details["aligned"] is True and "closer than random" in details["reason"]


def test_large_tables_are_checked_on_a_sample_of_keys(spark, sql_conf, aids_original, aids_avatar, monkeypatch):
    """Above MAX_PAIRS synthetic rows the check looks at a key-hash sample of about that
    many pairs, the same keys on both sides: the verdicts hold (aligned avatars, shuffled
    synthpop), the sample is partition-independent, and its share is reported."""
    monkeypatch.setattr(A, "MAX_PAIRS", 400)
    sampled = check(aids_avatar)
    assert sampled.sample_fraction == pytest.approx(400 / 2139, rel=0.01)
    assert 250 < sampled.n_aligned < 550 and sampled.n_pairs >= sampled.n_aligned - sampled.n_buckets
    assert sampled.aligned and sampled.z < -15
    assert sampled.details()["sample_fraction"] == sampled.sample_fraction
    sql_conf({"spark.sql.shuffle.partitions": "7"})
    again = alignment_check(
        aids_avatar.original.repartition(5), aids_avatar.synthetic.repartition(3), aids_avatar.columns,
        aids_avatar.numeric, KEY, aids_avatar.n_synthetic,
    )
    assert again == sampled
    result = check_release(spark, aids_original, DATA / "aids" / "synthpop.csv")
    assert result.conclusive and not result.aligned and result.sample_fraction < 0.2


@pytest.mark.parametrize("release", ["synthpop.csv", "ctgan.csv"])
def test_aids_releases_without_alignment_are_misaligned(spark, aids_original, release):
    result = check_release(spark, aids_original, DATA / "aids" / release)
    assert result.conclusive and not result.aligned
    assert abs(result.z) < 3
    assert result.ratio == pytest.approx(1.0, abs=0.03)
    assert "no closer than random" in result.reason()


def test_shuffled_avatar_release_is_misaligned(spark, aids_original, tmp_path):
    shuffled = shuffled_copy(DATA / "aids" / "avatar_k20.csv", tmp_path / "avatar_shuffled.csv")
    result = check_release(spark, aids_original, shuffled)
    assert result.conclusive and not result.aligned
    assert abs(result.z) < 3


def test_wbcd_avatar_release_is_aligned(spark):
    inputs = load_inputs(spark, example_config("wbcd"))  # exactly the job's reading
    try:
        result = check(inputs)
    finally:
        inputs.unpersist()
    assert result.aligned
    assert result.n_aligned == 683 and result.z < -15 and result.ratio < 0.5


def test_same_figures_whatever_the_partitioning(spark, sql_conf, aids_avatar, aids_avatar_result):
    base = aids_avatar_result
    sql_conf({"spark.sql.shuffle.partitions": "7"})
    inputs = aids_avatar
    other = alignment_check(
        inputs.original.repartition(5), inputs.synthetic.repartition(3), inputs.columns,
        inputs.numeric, KEY, inputs.n_synthetic,
    )
    assert other == base  # exact sums: every figure equal to the last bit


def test_seed_changes_the_random_pairs_not_the_verdict(aids_avatar, aids_avatar_result):
    base, other = aids_avatar_result, check(aids_avatar, seed=7)
    assert other.aligned_disagreement == base.aligned_disagreement
    assert other.random_disagreement != base.random_disagreement
    assert other.aligned and other.seed == 7


def test_random_partners_form_a_chain_per_bucket(spark, monkeypatch):
    """Each row's partner is another row; each row is a partner at most once; exactly one
    row per bucket (its last) has none; the same whatever the partitioning."""
    monkeypatch.setattr(A, "BUCKET_ROWS", 100)
    frame = spark.range(1000).withColumnRenamed("id", KEY)

    def pairs(df):
        rows = with_random_partner(df, [KEY], KEY, 1000).collect()
        return {r[KEY]: r[A.partner_column(KEY)] for r in rows}

    partner = pairs(frame)
    assert pairs(frame.repartition(7)) == partner
    partners = [p for p in partner.values() if p is not None]
    assert len(partners) == 1000 - A.n_buckets(1000) and A.n_buckets(1000) == 10
    assert len(set(partners)) == len(partners)
    assert all(p != k for k, p in partner.items())


def test_hand_computed_disagreement(spark):
    """Gower per row over x (numeric, range 10 from the finite values 0..10 of both
    sides), c (string), k (numeric declared categorical: equality) and i (numeric,
    one value: equality):
        row 0: x |0-5|/10 = 0.5                               -> 0.5
        row 1: x 10 = 10, c null = null                       -> 0
        row 2: x NaN = NaN, c "b" != "B"                      -> 1
        row 3: x null vs 1, c "a" != "b"                      -> 2
        row 4: x inf vs 3 (not finite: 1), c null vs "x"      -> 2
        row 5: k 6 != 7, i -0.0 = 0.0                         -> 1
    aligned disagreement = (0.5 + 0 + 1 + 2 + 2 + 1) / 4 / 6 = 6.5 / 24. (The random side
    is pinned by the next test, whose synthetic rows are all equal.)"""
    schema = "id long, x double, c string, k long, i double"
    original = [(0, 0.0, "a", 1, 0.0), (1, 10.0, None, 2, 0.0), (2, NAN, "b", 3, 0.0),
                (3, None, "a", 4, 0.0), (4, INF, None, 5, 0.0), (5, 2.0, "c", 6, -0.0)]
    synthetic = [(0, 5.0, "a", 1, 0.0), (1, 10.0, None, 2, 0.0), (2, NAN, "B", 3, 0.0),
                 (3, 1.0, "b", 4, 0.0), (4, 3.0, "x", 5, 0.0), (5, 2.0, "c", 7, 0.0)]
    inputs = prepare_inputs(
        spark.createDataFrame(original, schema), spark.createDataFrame(synthetic, schema),
        row_key="id", categorical=["k"],
    )
    try:
        result = check(inputs)
    finally:
        inputs.unpersist()
    assert result.aligned_disagreement == pytest.approx(6.5 / 24, abs=1e-15)
    assert (result.n_aligned, result.n_pairs, result.n_columns, result.n_scaled_columns) == (6, 5, 4, 1)
    assert not result.conclusive and not result.aligned  # 5 pairs cannot tell
    assert "too few aligned pairs" in result.reason()


def test_identical_synthetic_rows_are_no_closer_than_random(spark):
    """All synthetic rows equal: an aligned and a random partner are the same row, so
    every D is 0, z is 0 and the release is misaligned (conclusively: 39 pairs)."""
    schema = "id long, x double, c string"
    original = [(i, float(i % 7), "abc"[i % 3]) for i in range(40)]
    synthetic = [(i, 3.0, "a") for i in range(40)]
    inputs = prepare_inputs(
        spark.createDataFrame(original, schema), spark.createDataFrame(synthetic, schema), row_key="id"
    )
    try:
        result = check(inputs)
    finally:
        inputs.unpersist()
    assert result.difference == 0 and result.z == 0
    assert result.conclusive and not result.aligned


def test_evaluation_marks_a_shuffled_release_misaligned(spark):
    """Wired into the job: CDMP on a release that is not row-aligned reports status
    `misaligned`, no value and no per-column verdicts; the aligned avatars stay `ok`."""
    import dataclasses

    from privacy_eval.config import ColumnDirectMatchConfig, MetricsConfig, load_config
    from privacy_eval.evaluation import evaluate

    base = load_config(ROOT / "conf" / "examples" / "aids.yaml")
    only_cdm = MetricsConfig(column_direct_match=ColumnDirectMatchConfig())
    statuses = {}
    for release in ("avatar_k20", "synthpop"):
        source = dataclasses.replace(base.synthetic, path=str(DATA / "aids" / f"{release}.csv"))
        config = dataclasses.replace(base, synthetic=source, metrics=only_cdm)
        evaluation = evaluate(spark, config)
        (row,) = evaluation.metrics
        statuses[release] = (row.status, row.value is None, row.passed, "alignment" in row.details,
                             all(c.below_target is None for c in evaluation.columns))
    assert statuses["avatar_k20"] == ("ok", False, True, True, False)
    assert statuses["synthpop"] == ("misaligned", True, None, True, True)


def test_gate_fails_closed_on_figures_that_are_not_measurements():
    """--fail-on-target stops a release whose gated figure could not be measured, not
    only one that missed its target; a metric without a target never trips it."""
    from privacy_eval.results import AT_LEAST, AT_MOST, MetricRow

    def row(value, target, status="ok", unit="percent"):
        return MetricRow("m", value, unit, target, status, comparison=AT_MOST if unit == "fraction" else AT_LEAST)

    assert not row(60.0, 50.0).fails_gate
    assert row(40.0, 50.0).fails_gate
    assert row(None, 50.0, "misaligned").fails_gate
    assert row(0.0, 0.1, "not_measurable", unit="fraction").fails_gate
    assert row(None, 0.5, "undefined", unit="ratio").fails_gate
    assert row(0.9, 0.5, "a status added later", unit="ratio").fails_gate
    assert not row(None, None, "undefined", unit="ratio").fails_gate
    assert not row(None, None, "misaligned").fails_gate
    assert not row(0.0, None, "not_measurable", unit="fraction").fails_gate


def test_fail_on_target_stops_a_misaligned_release(spark, tmp_path):
    """Through the entry point: CDMP on the AIDS synthpop release (not row-aligned) with
    a target it would 'pass' if its noise were taken for a measurement: exit 3, one
    error line naming the metric and the status, no results written."""
    from tests.support.jobrun import error_lines, run_in_process, tree_digest

    warehouse = tmp_path / "wh"
    warehouse.mkdir()
    before = tree_digest(warehouse)
    code, output = run_in_process(spark, [
        "--config", str(ROOT / "conf" / "examples" / "aids.yaml"), "--fail-on-target",
        "--set", f"synthetic.path={DATA / 'aids' / 'synthpop.csv'}",
        "--set", f"results.warehouse={warehouse}",
        "--set", "metrics={column_direct_match: {target: 0}}",
    ])
    assert code == 3, output
    (line,) = error_lines(output)
    assert "column_direct_match_protection (misaligned)" in line
    assert tree_digest(warehouse) == before
