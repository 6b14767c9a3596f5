"""A human-readable report of one evaluation: `report.md` and PNG figures.

Built from exactly the rows the job writes to the results tables (MetricRow and
ColumnRow), so the report never shows a figure the tables do not hold.

The summary and the warnings are written here; each metric's own section (and figures)
comes from its module (`Metric.report_section`, privacy_eval.metrics), which draws with
plots.py and writes with formatting.py.

What it prints: metric names, column names, counts and rates. `details` dicts are read
through a whitelist of numeric keys (each metric's `report_keys`; the linkage section's
METHOD_KEYS and SHARED_KEYS): anything else
a details dict holds -- a KPR bin origin, which can be a record's own value, or any
text that reached it by mistake -- is never read. The one free text printed is the
`warnings` lists, which the metric modules write from column names and counts only
(the same text the tables hold).

The figures need matplotlib, an optional dependency (`pip install privacy-eval[report]`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from privacy_eval.formatting import code, fmt, line, numeric_items
from privacy_eval.metrics import REGISTRY
from privacy_eval.results import ColumnRow, MetricRow

__all__ = ["write_report", "REPORT_NAME", "FIGURES"]

REPORT_NAME = "report.md"
# Every figure a metric's section may draw (a report deletes those it did not draw).
FIGURES = tuple(name for metric in REGISTRY for name in metric.figures)
# Numeric detail keys printed per metric row, in registry order.
_DETAIL_KEYS = {name: keys for metric in REGISTRY for name, keys in metric.report_keys.items()}

# Run-level counts shown from evaluation_details.
_RUN_KEYS = ("n_original", "n_synthetic")


def write_report(
    directory: str | Path,
    *,
    dataset: str,
    run_id: str,
    metrics: Sequence[MetricRow],
    columns: Sequence[ColumnRow],
    evaluation_details: Mapping[str, Any] | None = None,
) -> Path:
    """Write `report.md` and its figures into `directory` (created); return report.md's path.

    `evaluation_details` holds run-level counts: n_original and n_synthetic are printed
    when they are numbers (as for details, other keys are ignored).
    """
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    # A figure an earlier report drew but this one does not (no linkage now) must go,
    # or the folder would mix two runs.
    for name in FIGURES:
        (out / name).unlink(missing_ok=True)

    by_name = {m.metric: m for m in metrics}
    lines = [f"# Privacy evaluation of {code(dataset)}", "", f"Run id: {code(run_id)}", ""]
    run_counts = numeric_items(evaluation_details, _RUN_KEYS)
    if run_counts:
        lines += [f"- {code(k)}: {v}" for k, v in run_counts] + [""]

    lines += ["## Summary", "", *_summary_table(metrics), ""]
    for metric, keys in _DETAIL_KEYS.items():
        if metric in by_name:
            items = numeric_items(by_name[metric].details, keys)
            if items:
                lines += [f"{code(metric)}: " + ", ".join(f"{k} = {v}" for k, v in items), ""]

    for metric in REGISTRY:
        if metric.report_section is not None:
            lines += metric.report_section(out, metrics, columns)

    warnings = _warnings(metrics)
    lines += ["## Warnings", ""]
    lines += [f"- {line(w)}" for w in warnings] if warnings else ["None."]

    report = out / REPORT_NAME
    report.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return report


# ---------------------------------------------------------------------------
# the sections of the whole run (each metric's own section is in its module)


def _summary_table(metrics: Sequence[MetricRow]) -> list[str]:
    rows = ["| metric | value | unit | target | verdict | status | numerator / denominator |",
            "|---|---:|---|---:|---|---|---:|"]
    for m in metrics:
        value = line(m.status) if m.value is None else fmt(m.value, 3 if m.unit == "percent" else 4)
        target = "none" if m.target is None else m.target_text()
        ratio = "" if m.numerator is None or m.denominator is None else f"{m.numerator} / {m.denominator}"
        rows.append(f"| {code(m.metric)} | {value} | {line(m.unit)} | {target} | {_verdict(m)} "
                    f"| {line(m.status)} | {ratio} |")
    return rows


def _verdict(m: MetricRow) -> str:
    if m.target is None:
        return "no target"
    return {True: "PASS", False: "FAIL"}.get(m.passed, line(m.status).upper())


def _warnings(metrics: Iterable[MetricRow]) -> list[str]:
    """Every warning once, in order of first appearance (linkage rows share theirs)."""
    seen: dict[str, None] = {}
    for m in metrics:
        listed = m.details.get("warnings")
        if isinstance(listed, list):
            seen.update((w, None) for w in listed if isinstance(w, str))
    return list(seen)
