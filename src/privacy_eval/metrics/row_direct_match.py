"""Row Direct Match Protection: original rows that occur once and are not reproduced
verbatim in the synthetic table (docs/metrics.md, "Row Direct Match Protection")."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from privacy_eval.config import RowDirectMatchConfig
from privacy_eval.frames import N_ORIGINAL, N_SYNTHETIC, occurrence_counts
from privacy_eval.metrics.contract import Metric, Shared
from privacy_eval.results import AT_LEAST, MetricRow

NAME = "row_direct_match_protection"


@dataclass(frozen=True)
class RowDirectMatchResult:
    n_original: int          # n: every original row, duplicated ones included
    n_singletons: int        # |U|: rows that occur once in the original
    reproduced: int          # singletons found verbatim in the synthetic table

    @property
    def n_duplicated(self) -> int:
        """Rows that occur more than once: they protect each other, never exposed."""
        return self.n_original - self.n_singletons

    @property
    def protection(self) -> float:
        return 100.0 * (1.0 - self.reproduced / self.n_original)

    def details(self) -> dict:
        return {
            "n": self.n_original,
            "n_singletons": self.n_singletons,
            "n_duplicated_rows": self.n_duplicated,
            "reproduced_singletons": self.reproduced,
        }


def row_direct_match_protection(
    original: DataFrame,
    synthetic: DataFrame,
    columns: Sequence[str],
    occurrences: DataFrame | None = None,
) -> RowDirectMatchResult:
    """RDMP = 100 * (1 - |{u in U : u in A}| / n).

    `occurrences` is frames.occurrence_counts(original, synthetic, columns); pass it when
    it is already computed (the Knowledge Protection Rate needs U from it too).
    """
    if occurrences is None:
        occurrences = occurrence_counts(original, synthetic, columns)
    once = F.col(N_ORIGINAL) == 1
    counts = occurrences.agg(
        F.sum(N_ORIGINAL).alias("n"),
        F.count(F.when(once, 1)).alias("singletons"),
        F.count(F.when(once & (F.col(N_SYNTHETIC) > 0), 1)).alias("reproduced"),
    ).collect()[0]
    return RowDirectMatchResult(
        n_original=int(counts["n"]),
        n_singletons=int(counts["singletons"]),
        reproduced=int(counts["reproduced"]),
    )


def _compute(shared: Shared, config: RowDirectMatchConfig) -> RowDirectMatchResult:
    inputs = shared.inputs
    return row_direct_match_protection(inputs.original, inputs.synthetic, inputs.columns, shared.occurrences)


def _rows(shared: Shared, config: RowDirectMatchConfig, result: RowDirectMatchResult) -> list[MetricRow]:
    return [MetricRow(
        metric=NAME, value=result.protection, unit="percent", target=config.target,
        numerator=result.reproduced, denominator=result.n_original, details=result.details(), comparison=AT_LEAST,
    )]


METRIC = Metric(
    key="row_direct_match",
    phase=NAME,
    check=None,  # every compared column takes part; nothing to name wrongly
    compute=_compute,
    rows=_rows,
    report_keys={NAME: ("n", "n_singletons", "n_duplicated_rows", "reproduced_singletons")},
    occurrence_columns=lambda config: (),  # the counts alone
)
