"""The distance-based metrics' entry (docs/metrics.md, "Distance-based metrics"): hidden
rate, local cloaking, distance to closest record, nearest-neighbour distance ratio and
the holdout DCR share, computed together by `privacy_eval.distance.distance_metrics`.

Rows: one per chosen sub-metric, in that order. Hidden rate and local cloaking trust
the row alignment (marked `misaligned` when the alignment check fails); the others
do not use it. The package is imported when the metrics are configured: it brings
numpy and scipy along.

The report section: the space, a histogram of each synthetic record's distance to its
nearest original (d1) with the records that coincide with an original apart, a
histogram of the local cloaking counts LC_i with the target, and the figures of each
row. Read from the rows' `details` like every section: whitelisted numeric keys only,
and the two histograms (`details["histogram"]`) only when they are lists of numbers of
the right lengths. Nothing else a details dict holds reaches the report.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from privacy_eval.columns import KEY
from privacy_eval.config import DistanceConfig
from privacy_eval.errors import InputError
from privacy_eval.formatting import code, fmt, is_number, numeric_items
from privacy_eval.metrics.contract import Metric, Row, Shared, require_compared
from privacy_eval.results import AT_LEAST, AT_MOST_ABOVE_EXPECTED, ColumnRow, Comparison, MetricRow

if TYPE_CHECKING:
    from privacy_eval.distance import DistanceResult
    from privacy_eval.inputs import EvaluationInputs

HIDDEN_RATE, LOCAL_CLOAKING = "hidden_rate", "local_cloaking"
DCR, NNDR, HOLDOUT = "distance_to_closest_record", "nearest_neighbour_distance_ratio", "holdout_distance_share"
UNITS = {HIDDEN_RATE: "percent", LOCAL_CLOAKING: "records", DCR: "distance", NNDR: "ratio", HOLDOUT: "fraction"}
COMPARISONS: dict[str, Comparison] = {
    HIDDEN_RATE: AT_LEAST, LOCAL_CLOAKING: AT_LEAST, DCR: AT_LEAST, NNDR: AT_LEAST, HOLDOUT: AT_MOST_ABOVE_EXPECTED,
}
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
    def row(value: float | None, status: str, numerator: int | None, denominator: int, figures: dict) -> MetricRow:
        return MetricRow(name, value, UNITS[name], target, status, numerator, denominator, {**details, **figures},
                         comparison=COMPARISONS[name])

    n_paired = result.cloaking.n_paired if result.cloaking else 0
    unpaired = {"unpaired_original": result.n_original - n_paired, "unpaired_synthetic": result.n_synthetic - n_paired}
    if name in (HIDDEN_RATE, LOCAL_CLOAKING):
        c = result.cloaking
        if c is None:
            shared.warn(details, f"{name}: no row key occurs on both sides")
            return row(None, "not_measurable", None, 0, unpaired)
        if name == HIDDEN_RATE:
            figures = {"n_paired": c.n_paired, "hits": c.hits, "unique_hits": c.unique_hits, **unpaired}
            return row(c.hidden_rate, "ok", c.unique_hits, c.n_paired, figures)
        figures = {k: v for k, v in c.details().items() if k not in ("hits", "unique_hits", "hidden_rate")}
        if c.median_is_lower_bound:
            shared.warn(details, f"local_cloaking: at least half the records reach the cap ({c.cap}); the median is a lower bound")
        zeros = round(c.zero_share * c.n_paired)
        return row(c.local_cloaking, "ok", zeros, c.n_paired, {**figures, **unpaired})
    if name in (DCR, NNDR):
        d = result.closest
        assert d is not None
        figures = d.details()
        zeros = round(d.zero_share * d.n_synthetic)
        if name == DCR:
            return row(d.dcr, "ok", zeros, d.n_synthetic, figures)
        if d.nndr is None:
            shared.warn(details, "nearest_neighbour_distance_ratio: needs at least two original records")
            return row(None, "undefined", None, d.n_synthetic, figures)
        below = round((d.below_half_share or 0.0) * d.n_synthetic)
        return row(d.nndr, "ok", below, d.n_synthetic, figures)
    h = result.holdout
    assert h is not None
    return row(h.share, "ok", h.closer, result.n_synthetic, h.details())


# --------------------------------------------------------------------------
# the report section
# --------------------------------------------------------------------------

NAMES = (HIDDEN_RATE, LOCAL_CLOAKING, DCR, NNDR, HOLDOUT)

# details["space"], shared by every distance row.
SPACE_KEYS = ("components", "width", "variance_kept", "imputed_original", "imputed_synthetic", "imputed_holdout")
# The figures of the rows, one table per group of rows computed together.
GROUPS = (
    ((HIDDEN_RATE, LOCAL_CLOAKING), ("n_paired", "hits", "unique_hits", "zero_share", "p10", "p50", "p90", "capped", "cap",
                                     "unpaired_original", "unpaired_synthetic")),
    ((DCR, NNDR), ("n_synthetic", "dcr", "zero_share", "p05", "nndr", "below_half_share")),
    ((HOLDOUT,), ("share", "expected", "n_holdout", "closer", "tied")),
)
_SPACE_MEANING = {
    "components": "coordinates of the space (principal axes kept)",
    "width": "numeric columns + modalities of the categorical columns",
    "variance_kept": "share of the original's variance the kept axes hold",
    "imputed_original": "numeric cells null, NaN or infinite in the original (imputed at its mean)",
    "imputed_synthetic": "the same in the synthetic table",
    "imputed_holdout": "the same in the holdout table",
}


def report_section(out: Path, metrics: Sequence[MetricRow], columns: Sequence[ColumnRow]) -> list[str]:
    from privacy_eval import plots  # matplotlib: only when a report is asked for

    rows = {m.metric: m for m in metrics if m.metric in NAMES}
    if not rows:
        return []
    first = next(iter(rows.values()))
    lines = ["## Distance-based metrics", "",
             "Euclidean distances in one space fitted on all rows of the original (a factor analysis of "
             "mixed data: numeric columns standardised, one coordinate per modality of a categorical column).", ""]
    space = numeric_items(first.details.get("space"), SPACE_KEYS)
    if space:
        lines += ["| space | value | meaning |", "|---|---:|---|",
                  *(f"| {k} | {v} | {_SPACE_MEANING[k]} |" for k, v in space), ""]

    # DCR and NNDR come from one search and carry the same figures; either row will do.
    drawn = [(m, _d1_histogram(m.details)) for m in (rows.get(DCR), rows.get(NNDR)) if m is not None]
    closest, d1 = next(((m, h) for m, h in drawn if h is not None), (None, None))
    if closest is not None and d1 is not None:
        dcr = rows.get(DCR)
        plots.distance_closest_figure(
            out / D1_FIGURE, *d1, dcr=_number(dcr.details, "dcr") if dcr is not None else None,
            p05=_number(closest.details, "p05"), target=dcr.target if dcr is not None else None,
        )
        zeros, n = d1[2], _whole(closest.details, "n_synthetic") or d1[2] + sum(d1[1])
        lines += [f"![Distance to closest record]({D1_FIGURE})", "",
                  f"{zeros} of {n} synthetic records ({fmt(100 * zeros / n if n else 0.0, 1)} %) coincide with an "
                  "original in the space (d1 = 0). The nearest-neighbour distance ratio scores such a record 1 "
                  "(\"safe\") when the original it sits on is duplicated; this share is the figure to read for them.", ""]

    cloaking = rows.get(LOCAL_CLOAKING)
    lc = _lc_histogram(cloaking.details) if cloaking is not None else None
    if cloaking is not None and lc is not None:
        misaligned = cloaking.status == "misaligned"
        plots.local_cloaking_figure(
            out / LC_FIGURE, *lc, cap=_whole(cloaking.details, "cap"), capped=_whole(cloaking.details, "capped") or 0,
            median=None if misaligned else cloaking.value, target=cloaking.target,
            note="misaligned: noise" if misaligned else None,
        )
        lines += [f"![Local cloaking]({LC_FIGURE})", ""]
        if cloaking.details.get("median_is_lower_bound") is True:
            lines += ["At least half the paired originals reach the cap: the local cloaking is a lower bound.", ""]

    for m in rows.values():
        if m.status == "misaligned":
            lines += [f"{code(m.metric)} is withheld: the row key pairs records no closer than random pairs "
                      "(see Warnings), so its figures below are noise.", ""]
        elif m.status != "ok":
            lines += [f"{code(m.metric)}: {code(m.status)}, no value (see Warnings).", ""]

    # One table per group of rows computed together; their shared figures appear once.
    for group, keys in GROUPS:
        present = [rows[name] for name in group if name in rows]
        merged: dict[str, str] = {}
        for m in present:
            for k, v in numeric_items(m.details, keys):
                merged.setdefault(k, v)
        if merged:
            lines += ["| " + ", ".join(code(m.metric) for m in present) + " | value |", "|---|---:|",
                      *(f"| {k} | {merged[k]} |" for k in keys if k in merged), ""]
    return lines


def _number(details: Mapping[str, Any], key: str) -> float | None:
    value = details.get(key)
    return float(value) if is_number(value) else None


def _whole(details: Mapping[str, Any], key: str) -> int | None:
    value = details.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _d1_histogram(details: Mapping[str, Any]) -> tuple[list[float], list[int], int] | None:
    """(edges, counts of d1 > 0, count of d1 = 0), or None when the details do not hold them."""
    histogram = details.get("histogram")
    if not isinstance(histogram, Mapping):
        return None
    edges, counts, zeros = histogram.get("edges"), histogram.get("counts"), histogram.get("zeros")
    if not (isinstance(edges, list) and isinstance(counts, list) and counts and len(edges) == len(counts) + 1):
        return None
    if not (all(is_number(e) for e in edges) and all(_is_count(c) for c in counts) and _is_count(zeros)):
        return None
    return [float(e) for e in edges], [int(c) for c in counts], int(zeros)


def _lc_histogram(details: Mapping[str, Any]) -> tuple[list[int], list[int]] | None:
    """(edges, counts) of min(LC_i, cap), or None when the details do not hold them."""
    histogram = details.get("histogram")
    if not isinstance(histogram, Mapping):
        return None
    edges, counts = histogram.get("edges"), histogram.get("counts")
    if not (isinstance(edges, list) and isinstance(counts, list) and counts and len(edges) == len(counts) + 1):
        return None
    if not (all(_is_count(e) for e in edges) and all(_is_count(c) for c in counts)):
        return None
    if any(b <= a for a, b in zip(edges[:-1], edges[1:])):
        return None
    return [int(e) for e in edges], [int(c) for c in counts]


def _is_count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


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
    report_section=report_section,
    figures=(D1_FIGURE, LC_FIGURE),
    trusts_row_key=True,
)
