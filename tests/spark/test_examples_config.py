"""The example job configs: each loads, and the object-storage example is runnable as
documented once its placeholder paths point at data of the shape it describes."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from privacy_eval.config import POSITION_KEY, load_config
from tests.support.examples import EXAMPLES

LARGE = EXAMPLES / "large_parquet_s3.yaml"


@pytest.mark.parametrize("path", sorted(EXAMPLES.glob("*.yaml")), ids=lambda p: p.name)
def test_every_example_loads(path):
    config = load_config(path)
    assert config.dataset
    assert any(getattr(config.metrics, m) is not None for m in
               ("row_direct_match", "column_direct_match", "knowledge_protection", "linkage"))


def test_object_storage_example_keeps_its_urls_and_runs_every_metric():
    config = load_config(LARGE)
    # Object-store URLs are taken as they are, not resolved against the config's folder.
    assert config.original.path == "s3a://example-bucket/releases/customers/2026-q3/original/"
    assert config.synthetic.path == "s3a://example-bucket/releases/customers/2026-q3/avatar_k20/"
    assert config.results.warehouse == "s3a://example-bucket/privacy-eval/warehouse"
    assert config.original.format == config.synthetic.format == "parquet"
    assert config.row_key == "customer_id" and config.row_key != POSITION_KEY
    metrics = config.metrics
    assert None not in (metrics.row_direct_match, metrics.column_direct_match,
                        metrics.knowledge_protection, metrics.linkage)
    assert metrics.linkage.blocking and metrics.linkage.drop_incomplete
    # The documented per-run override, as --set passes it.
    moved = load_config(LARGE, ["original.path=s3a://other/releases/x/", "dataset=customers_x"])
    assert moved.original.path == "s3a://other/releases/x/" and moved.dataset == "customers_x"


def _stand_in_tables(n: int, n_copied: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Tables with the example's columns: every original row unique (income is
    continuous); the synthetic rows are noisy copies of their originals, except the first
    `n_copied`, which are verbatim copies on every compared column."""
    rng = np.random.default_rng(7)
    original = pd.DataFrame({
        "customer_id": np.arange(1000, 1000 + n, dtype=np.int64),
        "email": [f"person{i}@example.org" for i in range(n)],
        "full_name": [f"Person {i}" for i in range(n)],
        "loaded_at": pd.Timestamp("2026-09-30T00:00:00Z"),
        "region_code": rng.integers(1, 4, n),
        "sex": rng.integers(1, 3, n),
        "segment": rng.integers(1, 4, n),
        "age": rng.integers(18, 90, n),
        "household_size": rng.integers(1, 7, n),
        "income": rng.normal(40_000, 12_000, n).round(2),
        "tenure_months": rng.integers(1, 240, n),
        "n_products": rng.integers(1, 8, n),
        "balance": rng.normal(5_000, 3_000, n).round(2),
    })
    synthetic = original.drop(columns=["email", "full_name"]).copy()
    noisy = synthetic.index >= n_copied
    synthetic.loc[noisy, "income"] += rng.normal(0, 500, noisy.sum()).round(2) + 0.01
    synthetic.loc[noisy, "balance"] += rng.normal(0, 200, noisy.sum()).round(2) + 0.01
    synthetic.loc[noisy, "age"] += rng.integers(-1, 2, noisy.sum())
    return original, synthetic


def _write_folder(frame: pd.DataFrame, folder: Path) -> None:
    """A folder of two Parquet files, as a Spark job would leave it."""
    folder.mkdir()
    half = len(frame) // 2
    frame.iloc[:half].to_parquet(folder / "part-00000.parquet", index=False)
    frame.iloc[half:].to_parquet(folder / "part-00001.parquet", index=False)


@pytest.mark.slow  # every metric, linkage included, on 400 rows: one of the longest tests
def test_object_storage_example_runs_on_local_parquet_of_its_shape(spark, tmp_path):
    from privacy_eval.evaluation import evaluate

    n, n_copied = 400, 10
    original, synthetic = _stand_in_tables(n, n_copied)
    _write_folder(original, tmp_path / "original")
    _write_folder(synthetic, tmp_path / "synthetic")
    config = load_config(LARGE, [f"original.path={tmp_path / 'original'}",
                                 f"synthetic.path={tmp_path / 'synthetic'}"])

    evaluation = evaluate(spark, config)

    by_metric = {m.metric: m for m in evaluation.metrics}
    assert set(by_metric) == {
        "row_direct_match_protection", "column_direct_match_protection", "knowledge_protection_rate",
        "linkage_success_rate", "linkage_success_rate_mahalanobis", "linkage_success_rate_weighted",
    }
    assert evaluation.n_original == evaluation.n_synthetic == n
    # Every original row occurs once, and exactly the verbatim copies reproduce one.
    rdm = by_metric["row_direct_match_protection"]
    assert rdm.numerator == n_copied and rdm.value == pytest.approx(100 * (1 - n_copied / n))
    # Income differs on every noisy pair and is distinct on all n synthetic rows.
    income = next(c for c in evaluation.columns if c.column_name == "income")
    assert (income.matches, income.distinct_synthetic) == (n_copied, n)
    # Identifiers and the load timestamp stay out of every comparison.
    assert {c.column_name for c in evaluation.columns} == {
        "region_code", "sex", "segment", "age", "household_size", "income", "tenure_months",
        "n_products", "balance"}
    for name in ("linkage_success_rate_mahalanobis", "linkage_success_rate_weighted"):
        row = by_metric[name]
        assert row.status == "ok" and row.denominator == n and 0 <= row.value <= 1
