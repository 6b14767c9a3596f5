"""The metric contract: the registry decides the order of the results, every metric is
checked before any runs, the registry gathers the work the metrics ask of the input
passes (which the evaluation hands to prepare_inputs), and the alignment check belongs
to the prepared inputs (computed once, on first use)."""

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
from privacy_eval.evaluation import evaluate_inputs, load_inputs
from privacy_eval.inputs import InputPassFigures, InputPassWork, prepare_inputs
from privacy_eval.metrics import REGISTRY, configured, input_pass_work

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
    assert input_pass_work(EXACT) is None  # no configured metric asks anything of the input passes
    inputs = prepare_inputs(*frames(spark), row_key="id", work=input_pass_work(EXACT))
    result = evaluate_inputs(inputs, EXACT)
    assert [row.metric for row in result.metrics] == [
        "row_direct_match_protection", "column_direct_match_protection", "knowledge_protection_rate",
    ]
    assert [c.risk_rank for c in result.columns] == [1, 2]
    assert inputs.pass_figures is None


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


def test_the_registry_gathers_the_work_of_the_input_passes(spark, monkeypatch):
    """A metric asking work of the input passes gets it done by
    prepare_inputs(work=input_pass_work(metrics)), the figures naming the configuration
    they were made for; prepare_inputs itself knows no metric, only the work."""
    rdm = REGISTRY[0]
    asked = []

    def work(config):
        asked.append(config)
        return InputPassWork(
            config, paired_where=lambda frame: F.col("a") > 2,
            side_aggregates=lambda frame: (frame, {"n_big": F.count(F.when(F.col("a") > 2, 1))}),
        )

    monkeypatch.setattr(metrics_package, "REGISTRY", (dataclasses.replace(rdm, input_pass_work=work), *REGISTRY[1:]))
    config = MetricsConfig(row_direct_match=RowDirectMatchConfig(target=80.0))
    inputs = prepare_inputs(*frames(spark), row_key="id", work=input_pass_work(config))
    assert asked == [config.row_direct_match]
    o_big = {i for i, a, _ in ORIGINAL if a > 2}
    s_big = {i for i, a, _ in SYNTHETIC if a > 2}
    assert inputs.pass_figures == InputPassFigures(
        made_for=config.row_direct_match, n_paired_where=len(o_big & s_big),
        side_aggregates={"original": {"n_big": len(o_big)}, "synthetic": {"n_big": len(s_big)}},
    )
    # The same work handed in directly, without a registry.
    low = prepare_inputs(*frames(spark), row_key="id", work=InputPassWork("mine", paired_where=work(None).paired_where))
    assert low.pass_figures == InputPassFigures("mine", len(o_big & s_big), None)


def test_alignment_is_computed_once_on_first_use(spark):
    inputs = prepare_inputs(*frames(spark), row_key="id")
    assert not inputs._alignment
    first = inputs.alignment()
    assert inputs.alignment() is first
    assert first.n_aligned == 40


def test_the_linkage_is_prepared_for_through_the_registry(spark):
    """prepare_inputs(work=input_pass_work(metrics)) has the key check count the attack's
    true pairs and the profile pass compute its per-side statistics."""
    metrics = MetricsConfig(linkage=LinkageConfig(targets=["a"], methods=["weighted"]))
    inputs = prepare_inputs(*frames(spark), row_key="id", work=input_pass_work(metrics))
    figures = inputs.pass_figures
    assert figures.made_for == metrics.linkage
    assert figures.n_paired_where == 40 and figures.side_aggregates is not None
    names = [row.metric for row in evaluate_inputs(inputs, metrics).metrics]
    assert names == ["linkage_success_rate", "linkage_success_rate_weighted"]


def test_the_evaluation_hands_the_work_to_the_input_passes(spark, tmp_path):
    """The job's way (evaluation.load_inputs): the work the configured metrics ask of the
    input passes reaches prepare_inputs; without such a metric there is none."""
    from privacy_eval.config import Config, Source

    paths = {}
    for side, rows in (("original", ORIGINAL), ("synthetic", SYNTHETIC)):
        paths[side] = str(tmp_path / f"{side}.parquet")
        spark.createDataFrame(rows, SCHEMA).write.parquet(paths[side])
    linkage = MetricsConfig(linkage=LinkageConfig(targets=["a"], methods=["weighted"]))
    for metrics, made_for in ((linkage, linkage.linkage), (EXACT, None)):
        config = Config(dataset="t", original=Source(path=paths["original"]), synthetic=Source(path=paths["synthetic"]),
                        row_key="id", metrics=metrics)
        inputs = load_inputs(spark, config)
        try:
            figures = inputs.pass_figures
            assert (figures and figures.made_for, figures and figures.n_paired_where) == (
                (made_for, 40) if made_for else (None, None)
            )
        finally:
            inputs.unpersist()


def test_disclosure_trusts_no_row_key(spark):
    """Both disclosure rows come without the alignment check: the figures are counts of
    keys and values, whatever the row order."""
    metrics = MetricsConfig(disclosure=DisclosureConfig(keys=["a"], targets=["b"]))
    inputs = prepare_inputs(*frames(spark), row_key="id")
    rows = evaluate_inputs(inputs, metrics).metrics
    assert [row.metric for row in rows] == ["replicated_uniques", "attribute_disclosure"]
    assert not inputs._alignment and all("alignment" not in row.details for row in rows)
