"""The report section of the distance-based metrics (docs/metrics.md, "Distance-based
metrics"): the space, a histogram of each synthetic record's distance to its nearest
original (d1) with the records that coincide with an original apart, a histogram of the
local cloaking counts LC_i with the target, and the figures of each row.

Read from the rows' `details` like every section: whitelisted numeric keys only, and
the two histograms (`details["histogram"]`) only when they are lists of numbers of the
right lengths. Nothing else a details dict holds reaches the report.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from privacy_eval.metrics.distance import D1_FIGURE, DCR, HIDDEN_RATE, HOLDOUT, LC_FIGURE, LOCAL_CLOAKING, NNDR
from privacy_eval.results import ColumnRow, MetricRow

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
    from privacy_eval import report as R  # matplotlib only when a report is asked for

    rows = {m.metric: m for m in metrics if m.metric in NAMES}
    if not rows:
        return []
    first = next(iter(rows.values()))
    lines = ["## Distance-based metrics", "",
             "Euclidean distances in one space fitted on all rows of the original (a factor analysis of "
             "mixed data: numeric columns standardised, one coordinate per modality of a categorical column).", ""]
    space = R.numeric_items(first.details.get("space"), SPACE_KEYS)
    if space:
        lines += ["| space | value | meaning |", "|---|---:|---|",
                  *(f"| {k} | {v} | {_SPACE_MEANING[k]} |" for k, v in space), ""]

    # DCR and NNDR come from one search and carry the same figures; either row will do.
    drawn = [(m, _d1_histogram(m.details)) for m in (rows.get(DCR), rows.get(NNDR)) if m is not None]
    closest, d1 = next(((m, h) for m, h in drawn if h is not None), (None, None))
    if closest is not None and d1 is not None:
        dcr = rows.get(DCR)
        R.distance_closest_figure(
            out / D1_FIGURE, *d1, dcr=_number(dcr.details, "dcr") if dcr is not None else None,
            p05=_number(closest.details, "p05"), target=dcr.target if dcr is not None else None,
        )
        zeros, n = d1[2], _whole(closest.details, "n_synthetic") or d1[2] + sum(d1[1])
        lines += [f"![Distance to closest record]({D1_FIGURE})", "",
                  f"{zeros} of {n} synthetic records ({R.fmt(100 * zeros / n if n else 0.0, 1)} %) coincide with an "
                  "original in the space (d1 = 0). The nearest-neighbour distance ratio scores such a record 1 "
                  "(\"safe\") when the original it sits on is duplicated; this share is the figure to read for them.", ""]

    cloaking = rows.get(LOCAL_CLOAKING)
    lc = _lc_histogram(cloaking.details) if cloaking is not None else None
    if cloaking is not None and lc is not None:
        misaligned = cloaking.status == "misaligned"
        R.local_cloaking_figure(
            out / LC_FIGURE, *lc, cap=_whole(cloaking.details, "cap"), capped=_whole(cloaking.details, "capped") or 0,
            median=None if misaligned else cloaking.value, target=cloaking.target,
            note="misaligned: noise" if misaligned else None,
        )
        lines += [f"![Local cloaking]({LC_FIGURE})", ""]
        if cloaking.details.get("median_is_lower_bound") is True:
            lines += ["At least half the paired originals reach the cap: the local cloaking is a lower bound.", ""]

    for m in rows.values():
        if m.status == "misaligned":
            lines += [f"{R.code(m.metric)} is withheld: the row key pairs records no closer than random pairs "
                      "(see Warnings), so its figures below are noise.", ""]
        elif m.status != "ok":
            lines += [f"{R.code(m.metric)}: {R.code(m.status)}, no value (see Warnings).", ""]

    # One table per group of rows computed together; their shared figures appear once.
    for group, keys in GROUPS:
        present = [rows[name] for name in group if name in rows]
        merged: dict[str, str] = {}
        for m in present:
            for k, v in R.numeric_items(m.details, keys):
                merged.setdefault(k, v)
        if merged:
            lines += ["| " + ", ".join(R.code(m.metric) for m in present) + " | value |", "|---|---:|",
                      *(f"| {k} | {merged[k]} |" for k in keys if k in merged), ""]
    return lines


def _number(details: Mapping[str, Any], key: str) -> float | None:
    from privacy_eval.report import is_number

    value = details.get(key)
    return float(value) if is_number(value) else None


def _whole(details: Mapping[str, Any], key: str) -> int | None:
    value = details.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _d1_histogram(details: Mapping[str, Any]) -> tuple[list[float], list[int], int] | None:
    """(edges, counts of d1 > 0, count of d1 = 0), or None when the details do not hold them."""
    from privacy_eval.report import is_number

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
