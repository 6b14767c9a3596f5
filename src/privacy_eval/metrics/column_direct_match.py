"""Column Direct Match Protection: per column, exact matches between aligned rows,
weighted by the column's number of distinct synthetic values (docs/metrics.md, "Column
Direct Match Protection")."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from privacy_eval.columns import INTERNAL_PREFIX, KEY
from privacy_eval.config import ColumnDirectMatchConfig
from privacy_eval.formatting import code, fmt
from privacy_eval.frames import distinct_per_column, qcol, whole_row_shuffles
from privacy_eval.metrics.contract import Metric, Row, Shared
from privacy_eval.results import AT_LEAST, ColumnRow, MetricRow

NAME = "column_direct_match_protection"
FIGURE = "column_protection.png"
_PAIRED = INTERNAL_PREFIX + "paired"


@dataclass(frozen=True)
class ColumnProtection:
    column: str
    matches: int             # m_c: aligned pairs equal in this column (null-safe)
    distinct_synthetic: int  # u_c: distinct synthetic values, null counted as one
    protection: float        # P_c = 100 * (1 - m_c * u_c / n^2)


@dataclass(frozen=True)
class ColumnDirectMatchResult:
    ranking: tuple[ColumnProtection, ...]   # most re-identifying (lowest P_c) first
    n_original: int
    n_paired: int
    original_unpaired: int    # original rows whose key has no synthetic partner
    synthetic_unpaired: int   # synthetic rows whose key has no original partner

    @property
    def protection(self) -> float:
        return self.ranking[0].protection

    @property
    def weakest(self) -> ColumnProtection:
        return self.ranking[0]

    def details(self) -> dict:
        return {
            "n": self.n_original,
            "n_paired": self.n_paired,
            "original_unpaired": self.original_unpaired,
            "synthetic_unpaired": self.synthetic_unpaired,
            "weakest_column": self.weakest.column,
            "weakest_matches": self.weakest.matches,
            "weakest_distinct_synthetic": self.weakest.distinct_synthetic,
            "n_columns": len(self.ranking),
        }


def column_direct_match_protection(
    original: DataFrame,
    synthetic: DataFrame,
    columns: Sequence[str],
    key: str,
    n_original: int,
    n_synthetic: int,
) -> ColumnDirectMatchResult:
    """Per-column P_c over rows aligned by `key`; CDMP is the smallest.

    One inner join on the key gives every m_c in a single aggregation; an original row
    without a synthetic partner contributes no match, and n stays the original count.
    """
    o, s = original.alias("o"), synthetic.alias("s")
    aligned = o.join(s, qcol(key, o) == qcol(key, s), "inner")
    with whole_row_shuffles(original.sparkSession, n_original + n_synthetic, len(columns)):
        match_counts = aligned.agg(
            F.count(F.lit(1)).alias(_PAIRED),
            *(
                F.count(F.when(qcol(c, o).eqNullSafe(qcol(c, s)), 1)).alias(f"m{i}")
                for i, c in enumerate(columns)
            ),
        ).collect()[0]
    distinct_counts = distinct_per_column(synthetic, columns)

    n2 = float(n_original) ** 2
    per_column = [
        ColumnProtection(
            column=c,
            matches=int(match_counts[f"m{i}"]),
            distinct_synthetic=distinct_counts[i],
            protection=100.0 * (1.0 - match_counts[f"m{i}"] * distinct_counts[i] / n2),
        )
        for i, c in enumerate(columns)
    ]
    ranking = tuple(sorted(per_column, key=lambda p: (p.protection, p.column)))
    paired = int(match_counts[_PAIRED])
    return ColumnDirectMatchResult(
        ranking=ranking,
        n_original=n_original,
        n_paired=paired,
        original_unpaired=n_original - paired,
        synthetic_unpaired=n_synthetic - paired,
    )


def _compute(shared: Shared, config: ColumnDirectMatchConfig) -> ColumnDirectMatchResult:
    i = shared.inputs
    return column_direct_match_protection(i.original, i.synthetic, i.columns, KEY, i.n_original, i.n_synthetic)


def _rows(shared: Shared, config: ColumnDirectMatchConfig, result: ColumnDirectMatchResult) -> list[Row]:
    details, status, target = result.details(), "ok", config.target
    if result.original_unpaired or result.synthetic_unpaired:
        shared.warn(
            details,
            f"column_direct_match: {result.original_unpaired} original and "
            f"{result.synthetic_unpaired} synthetic rows have no partner under row_key "
            f"'{shared.inputs.row_key}'; unpaired rows count as no match",
        )
    if result.n_paired == 0:
        status = "not_measurable"
        shared.warn(details, "column_direct_match: no row key occurs on both sides")
    row = shared.with_alignment(MetricRow(
        metric=NAME, value=result.protection if status == "ok" else None, unit="percent",
        target=target, status=status, numerator=result.weakest.matches,
        denominator=result.n_original, details=details, comparison=AT_LEAST,
    ))
    if row.status == "misaligned":
        target = None  # per-column verdicts would be noise as well
    return [row, *(
        ColumnRow(
            column_name=p.column, matches=p.matches, distinct_synthetic=p.distinct_synthetic,
            protection=p.protection, risk_rank=rank,
            below_target=None if target is None else p.protection < target,
        )
        for rank, p in enumerate(result.ranking, start=1)
    )]


def _report_section(out: Path, metrics: Sequence[MetricRow], columns: Sequence[ColumnRow]) -> list[str]:
    from privacy_eval import plots  # matplotlib: only when a report is asked for

    if not columns:
        return []
    cdm = next((m for m in metrics if m.metric == NAME), None)
    ranked = sorted(columns, key=lambda c: c.risk_rank)
    plots.column_figure(out / FIGURE, ranked, cdm.target if cdm else None)
    lines = ["## Column Direct Match Protection per column", "",
             "Most re-identifying first (rank 1). P_c in percent.", "",
             f"![Column Direct Match Protection per column]({FIGURE})", "",
             "| rank | column | P_c (%) | matches | distinct synthetic | below target |",
             "|---:|---|---:|---:|---:|---|"]
    for c in ranked:
        below = {True: "yes", False: "no", None: "no target"}[c.below_target]
        lines.append(f"| {c.risk_rank} | {code(c.column_name)} | {fmt(c.protection, 3)} | {c.matches} "
                     f"| {c.distinct_synthetic} | {below} |")
    return lines + [""]


METRIC = Metric(
    key="column_direct_match",
    phase=NAME,
    check=None,  # every compared column takes part; nothing to name wrongly
    compute=_compute,
    rows=_rows,
    report_keys={NAME: (
        "n", "n_paired", "original_unpaired", "synthetic_unpaired",
        "weakest_matches", "weakest_distinct_synthetic", "n_columns",
    )},
    report_section=_report_section,
    figures=(FIGURE,),
    trusts_row_key=True,
)
