"""The distance-based metrics' entry (docs/metrics.md, "Distance-based metrics"): hidden
rate, local cloaking, distance to closest record, nearest-neighbour distance ratio and
the holdout DCR share, computed together by `privacy_eval.distance.distance_metrics`.

Rows: one per chosen sub-metric, in that order. Hidden rate and local cloaking trust
the row alignment (marked `misaligned` when the alignment check fails); the others
do not use it. The package is imported when the metrics are configured: it brings
numpy and scipy along.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from privacy_eval.columns import KEY
from privacy_eval.config import DistanceConfig
from privacy_eval.errors import InputError
from privacy_eval.metrics import Metric, Row, Shared, require_compared
from privacy_eval.results import ColumnRow, MetricRow

if TYPE_CHECKING:
    from privacy_eval.distance import DistanceResult
    from privacy_eval.inputs import EvaluationInputs

HIDDEN_RATE, LOCAL_CLOAKING = "hidden_rate", "local_cloaking"
DCR, NNDR, HOLDOUT = "distance_to_closest_record", "nearest_neighbour_distance_ratio", "holdout_distance_share"
UNITS = {HIDDEN_RATE: "percent", LOCAL_CLOAKING: "records", DCR: "distance", NNDR: "ratio", HOLDOUT: "fraction"}
D1_FIGURE, LC_FIGURE = "distance_closest.png", "local_cloaking.png"


def distance_columns(inputs: EvaluationInputs, config: DistanceConfig) -> list[str]:
    return list(config.columns) if config.columns is not None else list(inputs.columns)


def _check(inputs: EvaluationInputs, config: DistanceConfig) -> None:
    for name in distance_columns(inputs, config):
        require_compared(inputs, "key 'metrics.distance.columns': column", name)
    if HOLDOUT not in config.selected(inputs.holdout is not None):
        return
    if inputs.holdout is None:
        raise InputError("metrics.distance.holdout_distance_share needs a 'holdout' table")
    from privacy_eval.distance.pipeline import EMPTY_HOLDOUT

    _, n_holdout = inputs.typed_holdout(distance_columns(inputs, config))  # refuses what does not convert
    if n_holdout == 0:
        raise InputError(EMPTY_HOLDOUT)


def _compute(shared: Shared, config: DistanceConfig) -> DistanceResult:
    from privacy_eval.distance import distance_metrics

    inputs = shared.inputs
    chosen = config.selected(inputs.holdout is not None)
    cloaking = chosen.get(LOCAL_CLOAKING)
    columns = distance_columns(inputs, config)
    holdout = inputs.typed_holdout(columns)[0] if HOLDOUT in chosen else None
    return distance_metrics(
        inputs.original, inputs.synthetic, KEY, columns, inputs.numeric, list(chosen),
        components=config.components, cap=cloaking.cap if cloaking is not None else 1000, holdout=holdout,
        cell_records=config.cell_records, max_core_hours=config.max_core_hours,
    )


def _rows(shared: Shared, config: DistanceConfig, result: DistanceResult) -> list[Row]:
    chosen = config.selected(shared.inputs.holdout is not None)
    space = result.space_details()
    rows: list[Row] = []
    for message in result.warnings:
        shared.note(message)
    for name, sub in chosen.items():
        details: dict[str, Any] = {"space": space, **_search_cost(name, result)}
        if result.warnings:
            details["warnings"] = list(result.warnings)
        row = _row(name, sub.target, result, details, shared)
        rows.append(shared.with_alignment(row) if name in (HIDDEN_RATE, LOCAL_CLOAKING) else row)
    return rows


# The search behind each row: the holdout share's own is the one against the holdout.
_SEARCH = {HIDDEN_RATE: "cloaking", LOCAL_CLOAKING: "cloaking", DCR: "closest", NNDR: "closest", HOLDOUT: "holdout"}


def _search_cost(name: str, result: DistanceResult) -> dict[str, Any]:
    cost = result.costs.get(_SEARCH[name])
    return {"cells": cost.cells, "cells_per_query": cost.cells_per_query} if cost is not None else {}


def _row(name: str, target: float | None, result: DistanceResult, details: dict, shared: Shared) -> MetricRow:
    unit = UNITS[name]
    n_paired = result.cloaking.n_paired if result.cloaking else 0
    unpaired = {"unpaired_original": result.n_original - n_paired, "unpaired_synthetic": result.n_synthetic - n_paired}
    if name in (HIDDEN_RATE, LOCAL_CLOAKING):
        c = result.cloaking
        if c is None:
            shared.warn(details, f"{name}: no row key occurs on both sides")
            return MetricRow(name, None, unit, target, "not_measurable", None, 0, {**details, **unpaired})
        if name == HIDDEN_RATE:
            figures = {"n_paired": c.n_paired, "hits": c.hits, "unique_hits": c.unique_hits, **unpaired}
            return MetricRow(name, c.hidden_rate, unit, target, "ok", c.unique_hits, c.n_paired, {**details, **figures})
        figures = {k: v for k, v in c.details().items() if k not in ("hits", "unique_hits", "hidden_rate")}
        if c.median_is_lower_bound:
            shared.warn(details, f"local_cloaking: at least half the records reach the cap ({c.cap}); the median is a lower bound")
        zeros = round(c.zero_share * c.n_paired)
        return MetricRow(name, c.local_cloaking, unit, target, "ok", zeros, c.n_paired, {**details, **figures, **unpaired})
    if name in (DCR, NNDR):
        d = result.closest
        assert d is not None
        figures = d.details()
        zeros = round(d.zero_share * d.n_synthetic)
        if name == DCR:
            return MetricRow(name, d.dcr, unit, target, "ok", zeros, d.n_synthetic, {**details, **figures})
        if d.nndr is None:
            shared.warn(details, "nearest_neighbour_distance_ratio: needs at least two original records")
            return MetricRow(name, None, unit, target, "undefined", None, d.n_synthetic, {**details, **figures})
        below = round((d.below_half_share or 0.0) * d.n_synthetic)
        return MetricRow(name, d.nndr, unit, target, "ok", below, d.n_synthetic, {**details, **figures})
    h = result.holdout
    assert h is not None
    return MetricRow(name, h.share, unit, target, "ok", h.closer, result.n_synthetic, {**details, **h.details()})


def _report_section(out: Path, metrics: Sequence[MetricRow], columns: Sequence[ColumnRow]) -> list[str]:
    from privacy_eval.metrics.distance_report import report_section  # matplotlib only when a report is asked for

    return report_section(out, metrics, columns)


METRIC = Metric(
    key="distance",
    phase="distance_metrics",
    check=_check,
    compute=_compute,
    rows=_rows,
    report_keys={
        HIDDEN_RATE: ("n_paired", "hits", "unique_hits", "unpaired_original", "unpaired_synthetic"),
        LOCAL_CLOAKING: ("n_paired", "zero_share", "p10", "p50", "p90", "capped", "cap"),
        DCR: ("n_synthetic", "zero_share", "p05"),
        NNDR: ("n_synthetic", "below_half_share"),
        HOLDOUT: ("expected", "n_holdout", "closer", "tied"),
    },
    report_section=_report_section,
    figures=(D1_FIGURE, LC_FIGURE),
    trusts_row_key=True,
)
