"""Linkage success rate: the metric entry of the linkage attack (docs/metrics.md,
"Linkage attack").

The attack is the package `privacy_eval.linkage` (`attack.linkage_attack`, its result
types and its checks); this module turns its result into results rows and a report
section.
The package is imported when the linkage is configured, not before: it brings numpy,
pandas and scipy along, which the other metrics never need.

Rows: `linkage_success_rate` (the headline: the method with the larger success rate),
then `linkage_success_rate_<method>` per configured method. Each rate is a mean of
fractional risks; the count beside it is the number of synthetic records whose true
original is among their best candidates.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from privacy_eval.config import LinkageConfig
from privacy_eval.formatting import code, fmt, is_number, numeric_items
from privacy_eval.metrics.contract import Metric, Shared
from privacy_eval.results import AT_MOST, ColumnRow, MetricRow

if TYPE_CHECKING:
    from privacy_eval.inputs import EvaluationInputs, InputPassWork
    from privacy_eval.linkage.attack_result import LinkageMethodResult, LinkageResult

NAME = "linkage_success_rate"
METHOD_PREFIX = NAME + "_"  # + method name: one row per method
RATE_FIGURE = "linkage_success.png"
TOP_K_FIGURE = "linkage_top_k.png"

# LinkageMethodResult.details(): one column per method in the report.
METHOD_KEYS = (
    "success_rate", "baseline_random", "lift", "max_risk", "n_records", "expected_reidentified",
    "n_certain", "n_at_risk", "n_true_missing", "truth_coverage", "n_zero_candidate",
)
# The figures shared by the methods, under details["shared"].
SHARED_KEYS = (
    "n_original", "n_synthetic", "dropped_incomplete_original", "dropped_incomplete_synthetic",
    "condition_number", "condition_number_correlation", "n_blocks", "n_blocks_with_candidates",
    "n_candidate_pairs", "candidate_share", "n_true_pairs", "n_true_pairs_kept", "blocking_recall",
)


def _check(inputs: EvaluationInputs, config: LinkageConfig) -> None:
    from privacy_eval.linkage.prepare import check_linkage_inputs

    check_linkage_inputs(inputs, config)


def _input_pass_work(config: LinkageConfig) -> InputPassWork:
    from privacy_eval.linkage.prepare import input_pass_work

    return input_pass_work(config)


def _compute(shared: Shared, config: LinkageConfig) -> LinkageResult:
    from privacy_eval.linkage.attack import linkage_attack

    return linkage_attack(shared.inputs, config)


def _rows(shared: Shared, config: LinkageConfig, result: LinkageResult) -> list[MetricRow]:
    for message in result.warnings:  # already in every row's details
        shared.note(message)

    def row(metric: str, method: LinkageMethodResult, details: dict) -> MetricRow:
        return shared.with_alignment(MetricRow(
            metric=metric, value=method.value, unit="fraction", target=config.target,
            status=method.status, numerator=method.n_at_risk, denominator=method.n_records,
            details=details, comparison=AT_MOST,
        ))

    headline = result.headline_method
    return [
        row(NAME, result.headline, {"method": headline, **result.method_details(headline)}),
        *(row(METHOD_PREFIX + name, method, result.method_details(name)) for name, method in result.methods.items()),
    ]


def _report_section(out: Path, metrics: Sequence[MetricRow], columns: Sequence[ColumnRow]) -> list[str]:
    from privacy_eval import plots  # matplotlib: only when a report is asked for

    rows = [m for m in metrics if m.metric.startswith(METHOD_PREFIX)]
    if not rows:
        return []
    headline = next((m for m in metrics if m.metric == NAME), None)
    methods = [m.metric[len(METHOD_PREFIX):] for m in rows]
    top_k = [_top_k(m.details) for m in rows]
    lines = ["## Linkage attack", ""]
    if headline is not None and headline.details.get("method") in methods:
        lines += [f"Headline method (the larger success rate): {code(headline.details['method'])}.", ""]

    plots.linkage_rate_figure(out / RATE_FIGURE, methods, rows, rows[0].target)
    lines += [f"![Linkage success rate vs random baseline]({RATE_FIGURE})", ""]
    if any(top_k):
        plots.top_k_figure(out / TOP_K_FIGURE, methods, top_k)
        lines += [f"![Top-k hit rate]({TOP_K_FIGURE})", ""]

    lines += ["| per method | " + " | ".join(code(m) for m in methods) + " |", "|---|" + "---:|" * len(methods)]
    values = [dict(numeric_items(m.details, METHOD_KEYS)) for m in rows]
    for key in METHOD_KEYS:
        lines.append(f"| {key} | " + " | ".join(v.get(key, "—") for v in values) + " |")
    for k in sorted({k for hits in top_k for k in hits}):
        cells = [fmt(hits[k]) if k in hits else "—" for hits in top_k]
        lines.append(f"| top_{k} hit rate | " + " | ".join(cells) + " |")
    lines.append("")

    shared = numeric_items(rows[0].details.get("shared"), SHARED_KEYS)
    if shared:
        lines += ["| both methods | value |", "|---|---:|", *(f"| {k} | {v} |" for k, v in shared), ""]
    return lines


def _top_k(details: Mapping[str, Any]) -> dict[int, float]:
    """k -> hit rate; the keys are strings of whole numbers in JSON-safe details."""
    hits = details.get("top_k")
    if not isinstance(hits, Mapping):
        return {}
    return {int(k): float(v) for k, v in hits.items() if str(k).isdigit() and is_number(v)}


METRIC = Metric(
    key="linkage",
    phase="linkage_attack",
    check=_check,
    compute=_compute,
    rows=_rows,
    report_section=_report_section,
    figures=(RATE_FIGURE, TOP_K_FIGURE),
    trusts_row_key=True,
    input_pass_work=_input_pass_work,
)
