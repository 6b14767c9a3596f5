"""One evaluation: read both tables, run the configured metrics, collect result rows.

Usable from a notebook: `evaluate(spark, load_config("conf/examples/wbcd.yaml"))`, or
`evaluate_inputs(prepare_inputs(original_df, synthetic_df, row_key="id"), metrics)` on
DataFrames you already have.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Iterator

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from privacy_eval.config import POSITION_KEY, Config, LinkageConfig, MetricsConfig
from privacy_eval.errors import InputError
from privacy_eval.frames import N_ORIGINAL, occurrence_counts, occurring_once
from privacy_eval.inputs import KEY, POSITION, EvaluationInputs, prepare_inputs, read_table, rereads_cheaply
from privacy_eval.metrics.alignment import AlignmentResult, alignment_check
from privacy_eval.metrics.column_direct_match import column_direct_match_protection
from privacy_eval.metrics.knowledge_protection import knowledge_protection_rate
from privacy_eval.metrics.linkage import (
    LinkageMethodResult,
    complete_targets,
    linkage_attack,
    side_statistics,
    validate_linkage_config,
)
from privacy_eval.metrics.row_direct_match import row_direct_match_protection
from privacy_eval.results import ColumnRow, MetricRow

log = logging.getLogger(__name__)


@dataclass
class Evaluation:
    metrics: list[MetricRow]
    columns: list[ColumnRow]
    n_original: int
    n_synthetic: int
    input_fingerprint: str
    warnings: list[str] = field(default_factory=list)


@contextmanager
def phase(name: str, **counts: int) -> Iterator[None]:
    """Log one line per phase with its duration, so a long run shows it is alive."""
    started = time.perf_counter()
    log.info("%s: started", name)
    yield
    extra = "".join(f", {k}={v}" for k, v in counts.items())
    log.info("%s: done in %.1f s%s", name, time.perf_counter() - started, extra)


def load_inputs(spark: SparkSession, config: Config) -> EvaluationInputs:
    by_position = config.row_key == POSITION_KEY
    link = config.metrics.linkage
    with phase("read inputs"):
        original = read_table(spark, config.original, "original", with_position=by_position)
        synthetic = read_table(spark, config.synthetic, "synthetic", with_position=by_position)
        inputs = prepare_inputs(
            original,
            synthetic,
            row_key=POSITION if by_position else config.row_key,
            exclude=config.exclude,
            categorical=config.categorical,
            cast=config.cast,
            cache=[side for side, source in (("original", config.original), ("synthetic", config.synthetic))
                   if not rereads_cheaply(source)],
            # The linkage attack's true pairs, counted by the key check's pass, and its
            # per-side statistics, by the first pass.
            paired_where=complete_targets(link) if link is not None else None,
            side_aggregates=side_statistics(link) if link is not None else None,
        )
    log.info(
        "inputs: %d original rows, %d synthetic rows, %d compared columns",
        inputs.n_original, inputs.n_synthetic, len(inputs.columns),
    )
    return inputs


def evaluate(spark: SparkSession, config: Config) -> Evaluation:
    """Run every metric the configuration names on its two inputs."""
    inputs = load_inputs(spark, config)
    try:
        return evaluate_inputs(inputs, config.metrics)
    finally:
        inputs.unpersist()


def evaluate_inputs(inputs: EvaluationInputs, metrics: MetricsConfig) -> Evaluation:
    """Run the configured metrics on prepared inputs; returns rows for the results tables."""
    _check_metric_columns(inputs, metrics)
    evaluation = Evaluation([], [], inputs.n_original, inputs.n_synthetic, inputs.fingerprint)
    columns = list(inputs.columns)
    kp = metrics.knowledge_protection

    # Before anything is cached below, so that a failure here leaves no cache behind.
    alignment = None
    if metrics.column_direct_match is not None or metrics.linkage is not None:
        with phase("alignment check"):
            alignment = alignment_check(
                inputs.original, inputs.synthetic, inputs.columns, inputs.numeric, KEY, inputs.n_synthetic
            )
        if not alignment.conclusive:
            message = f"alignment: {alignment.reason()}"
            log.warning(message)
            evaluation.warnings.append(message)

    needs_singletons = metrics.row_direct_match is not None or kp is not None
    occurrences = singletons = None
    n_singletons = 0
    if needs_singletons:
        with phase("rows of both tables with their occurrences"):
            # One aggregation serves RDMP and gives U to KPR: computed and cached once.
            occurrences = occurrence_counts(inputs.original, inputs.synthetic, columns).cache()
            n_singletons = occurrences.filter(F.col(N_ORIGINAL) == 1).count()
            singletons = occurring_once(occurrences, columns)
    try:
        if metrics.row_direct_match is not None:
            with phase("row_direct_match_protection"):
                rdm = row_direct_match_protection(
                    inputs.original, inputs.synthetic, columns, occurrences=occurrences
                )
            evaluation.metrics.append(MetricRow(
                metric="row_direct_match_protection",
                value=rdm.protection,
                unit="percent",
                target=metrics.row_direct_match.target,
                numerator=rdm.reproduced,
                denominator=rdm.n_original,
                details=rdm.details(),
            ))

        if metrics.column_direct_match is not None:
            with phase("column_direct_match_protection"):
                cdm = column_direct_match_protection(
                    inputs.original, inputs.synthetic, columns, KEY,
                    inputs.n_original, inputs.n_synthetic,
                )
            target = metrics.column_direct_match.target
            details = cdm.details()
            status = "ok"
            if cdm.original_unpaired or cdm.synthetic_unpaired:
                _warn(
                    evaluation, details,
                    f"column_direct_match: {cdm.original_unpaired} original and "
                    f"{cdm.synthetic_unpaired} synthetic rows have no partner under row_key "
                    f"'{inputs.row_key}'; unpaired rows count as no match",
                )
            if cdm.n_paired == 0:
                status = "not_measurable"
                _warn(evaluation, details, "column_direct_match: no row key occurs on both sides")
            cdm_row = _with_alignment(evaluation, MetricRow(
                metric="column_direct_match_protection",
                value=cdm.protection if status == "ok" else None,
                unit="percent",
                target=target,
                status=status,
                numerator=cdm.weakest.matches,
                denominator=cdm.n_original,
                details=details,
            ), alignment)
            evaluation.metrics.append(cdm_row)
            if cdm_row.status == "misaligned":
                target = None  # per-column verdicts would be noise as well
            evaluation.columns.extend(
                ColumnRow(
                    column_name=p.column,
                    matches=p.matches,
                    distinct_synthetic=p.distinct_synthetic,
                    protection=p.protection,
                    risk_rank=rank,
                    below_target=None if target is None else p.protection < target,
                )
                for rank, p in enumerate(cdm.ranking, start=1)
            )

        if kp is not None:
            assert singletons is not None
            with phase("knowledge_protection_rate"):
                kpr = knowledge_protection_rate(
                    singletons, inputs.synthetic, kp.known_variables,
                    sorted(inputs.numeric), inputs.n_original, n_singletons, kp.bin_width,
                )
            evaluation.metrics.append(MetricRow(
                metric="knowledge_protection_rate",
                value=kpr.protection,
                unit="percent",
                target=kp.target,
                numerator=kpr.exposed,
                denominator=kpr.n_original,
                details=kpr.details(),
            ))
        if metrics.linkage is not None:
            _linkage_rows(evaluation, inputs, metrics.linkage, alignment)
    finally:
        if occurrences is not None:
            occurrences.unpersist()
    return evaluation


def _check_metric_columns(inputs: EvaluationInputs, metrics: MetricsConfig) -> None:
    """Check every column the metrics name against the prepared tables, before any
    metric runs: a typo in the last metric must not cost the first ones' work."""
    def require_compared(role: str, name: str) -> None:
        if name not in inputs.columns:
            raise InputError(
                f"{role} '{name}' is not a compared column "
                "(missing from the data, excluded, or the row key)"
            )

    kp = metrics.knowledge_protection
    if kp is not None:
        for name in kp.known_variables:
            require_compared("knowledge_protection: known variable", name)
        for name in kp.bin_width:
            if name not in inputs.numeric:
                raise InputError(
                    f"knowledge_protection: 'bin_width.{name}' is set, but '{name}' is not numeric "
                    "(text, or listed under 'categorical'), so its values are compared as they are"
                )
    link = metrics.linkage
    if link is not None:
        for role, names in (("target", link.targets), ("blocking column", link.blocking)):
            for name in names:
                require_compared(f"linkage: {role}", name)
        validate_linkage_config(inputs.original, inputs.synthetic, KEY, link)


def _linkage_rows(
    evaluation: Evaluation, inputs: EvaluationInputs, config: LinkageConfig, alignment: AlignmentResult | None
) -> None:
    with phase("linkage_attack"):
        result = linkage_attack(
            inputs.original, inputs.synthetic, KEY, config,
            true_pairs=inputs.n_paired_where, side_stats=inputs.side_aggregates,
        )
    for message in result.warnings:
        log.warning(message)
        evaluation.warnings.append(message)

    def row(metric: str, method: LinkageMethodResult, details: dict) -> MetricRow:
        return _with_alignment(evaluation, MetricRow(
            metric=metric,
            value=method.value,
            unit="fraction",
            target=config.target,
            status=method.status,
            # The rate is a mean of fractional risks; the count beside it is the number
            # of synthetic records whose true original is among their best candidates.
            numerator=method.n_at_risk,
            denominator=method.n_records,
            details=details,
        ), alignment)

    headline = result.headline
    evaluation.metrics.append(row(
        "linkage_success_rate", headline,
        {"method": result.headline_method, **result.method_details(result.headline_method)},
    ))
    for name, method in result.methods.items():
        evaluation.metrics.append(row(f"linkage_success_rate_{name}", method, result.method_details(name)))


def _with_alignment(evaluation: Evaluation, row: MetricRow, alignment: AlignmentResult | None) -> MetricRow:
    """Attach the alignment check to a metric that trusts the row key, and mark it
    `misaligned` (value withheld, kept in details) when aligned pairs are no closer
    than random ones: a shuffled or renumbered release must not read as protected."""
    if alignment is None:
        return row
    details = {**row.details, "alignment": alignment.details()}
    if alignment.conclusive and not alignment.aligned:
        details["value_if_aligned"] = row.value
        _warn(evaluation, details, f"{row.metric}: MISALIGNED, the figure is noise: {alignment.reason()}")
        return dataclasses.replace(row, value=None, status="misaligned", details=details)
    return dataclasses.replace(row, details=details)


def _warn(evaluation: Evaluation, details: dict, message: str) -> None:
    log.warning(message)
    evaluation.warnings.append(message)
    details.setdefault("warnings", []).append(message)
