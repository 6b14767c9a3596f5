"""The metric contract: the registry decides the order of the results, every metric is
checked before any runs, the registry supplies the first-pass hooks of prepare_inputs,
and the alignment check belongs to the prepared inputs (computed once, on first use)."""

from __future__ import annotations

import dataclasses

import pytest
from pyspark.sql import functions as F

from privacy_eval import metrics as metrics_package
from privacy_eval.config import (
    ColumnDirectMatchConfig,
    DisclosureConfig,
    DistanceConfig,
    KnowledgeProtectionConfig,
    LinkageConfig,
    MetricsConfig,
    RowDirectMatchConfig,
)
from privacy_eval.errors import InputError
from privacy_eval.evaluation import evaluate_inputs
from privacy_eval.inputs import prepare_inputs
from privacy_eval.metrics import REGISTRY, configured

SCHEMA = "id long, a long, b string"
ORIGINAL = [(i, i % 7, f"v{i % 3}") for i in range(40)]
SYNTHETIC = [(i, (i * 3) % 7, f"v{i % 3}") for i in range(40)]

EXACT = MetricsConfig(
    row_direct_match=RowDirectMatchConfig(),
    column_direct_match=ColumnDirectMatchConfig(),
    knowledge_protection=KnowledgeProtectionConfig(known_variables=["a", "b"]),
)


def frames(spark):
    return spark.createDataFrame(ORIGINAL, SCHEMA), spark.createDataFrame(SYNTHETIC, SCHEMA)


def test_registry_keys_are_the_metrics_config_fields_in_order():
    assert [m.key for m in REGISTRY] == [f.name for f in dataclasses.fields(MetricsConfig)]
    full = MetricsConfig(**{f.name: c for f, c in zip(dataclasses.fields(EXACT), (
        EXACT.row_direct_match, EXACT.column_direct_match, EXACT.knowledge_protection,
        LinkageConfig(targets=["a"]), DistanceConfig(), DisclosureConfig(keys=["a"], targets=["b"]),
    ))})
    assert [m.key for m, _ in configured(full)] == [m.key for m in REGISTRY]
    assert [m.key for m, _ in configured(MetricsConfig(knowledge_protection=EXACT.knowledge_protection))] == [
        "knowledge_protection"
    ]


def test_results_come_in_registry_order(spark):
    inputs = prepare_inputs(*frames(spark), row_key="id", metrics=EXACT)
    result = evaluate_inputs(inputs, EXACT)
    assert [row.metric for row in result.metrics] == [
        "row_direct_match_protection", "column_direct_match_protection", "knowledge_protection_rate",
    ]
    assert [c.risk_rank for c in result.columns] == [1, 2]
    assert inputs.prepared_for is None  # no configured metric uses the first passes


def test_a_failing_check_stops_before_any_metric_runs(spark, monkeypatch):
    computed = []
    rdm, cdm, kpr = REGISTRY[:3]

    def recording(metric):
        def compute(shared, config):
            computed.append(metric.key)
            return metric.compute(shared, config)
        return dataclasses.replace(metric, compute=compute)

    monkeypatch.setattr(metrics_package, "REGISTRY", (recording(rdm), recording(cdm), kpr))
    inputs = prepare_inputs(*frames(spark), row_key="id")
    typo = dataclasses.replace(EXACT, knowledge_protection=KnowledgeProtectionConfig(known_variables=["a", "bb"]))
    with pytest.raises(InputError, match="knowledge_protection: known variable 'bb' is not a compared column"):
        evaluate_inputs(inputs, typo)
    assert computed == []
    assert not inputs._alignment  # not even the shared steps ran
    evaluate_inputs(inputs, EXACT)
    assert computed == ["row_direct_match", "column_direct_match"]


def test_prepare_inputs_takes_the_first_pass_hooks_from_the_registry(spark, monkeypatch):
    """A metric offering first-pass work gets it done by prepare_inputs(metrics=...),
    with `prepared_for` naming the configuration it was done for."""
    rdm = REGISTRY[0]
    asked = []

    def first_pass(config):
        asked.append(config)
        return (lambda frame: F.col("a") > 2), (lambda frame: (frame, {"n_big": F.count(F.when(F.col("a") > 2, 1))}))

    monkeypatch.setattr(metrics_package, "REGISTRY", (dataclasses.replace(rdm, first_pass=first_pass), *REGISTRY[1:]))
    config = MetricsConfig(row_direct_match=RowDirectMatchConfig(target=80.0))
    inputs = prepare_inputs(*frames(spark), row_key="id", metrics=config)
    assert asked == [config.row_direct_match]
    assert inputs.prepared_for == config.row_direct_match
    o_big = {i for i, a, _ in ORIGINAL if a > 2}
    s_big = {i for i, a, _ in SYNTHETIC if a > 2}
    assert inputs.n_paired_where == len(o_big & s_big)
    assert inputs.side_aggregates == {"original": {"n_big": len(o_big)}, "synthetic": {"n_big": len(s_big)}}
    # The low-level keywords do the same without a registry.
    low = prepare_inputs(*frames(spark), row_key="id", paired_where=first_pass(None)[0], prepared_for="mine")
    assert low.n_paired_where == inputs.n_paired_where and low.prepared_for == "mine"


def test_alignment_is_computed_once_on_first_use(spark):
    inputs = prepare_inputs(*frames(spark), row_key="id")
    assert not inputs._alignment
    first = inputs.alignment()
    assert inputs.alignment() is first
    assert first.n_aligned == 40


def test_the_linkage_is_prepared_for_through_the_registry(spark):
    """The job's way: prepare_inputs(metrics=...) has the key check count the attack's
    true pairs and the first pass compute its per-side statistics."""
    metrics = MetricsConfig(linkage=LinkageConfig(targets=["a"], methods=["weighted"]))
    inputs = prepare_inputs(*frames(spark), row_key="id", metrics=metrics)
    assert inputs.prepared_for == metrics.linkage
    assert inputs.n_paired_where == 40 and inputs.side_aggregates is not None
    names = [row.metric for row in evaluate_inputs(inputs, metrics).metrics]
    assert names == ["linkage_success_rate", "linkage_success_rate_weighted"]


def test_disclosure_trusts_no_row_key(spark):
    """Both disclosure rows come without the alignment check: the figures are counts of
    keys and values, whatever the row order."""
    metrics = MetricsConfig(disclosure=DisclosureConfig(keys=["a"], targets=["b"]))
    inputs = prepare_inputs(*frames(spark), row_key="id", metrics=metrics)
    rows = evaluate_inputs(inputs, metrics).metrics
    assert [row.metric for row in rows] == ["replicated_uniques", "attribute_disclosure"]
    assert not inputs._alignment and all("alignment" not in row.details for row in rows)
