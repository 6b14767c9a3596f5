"""The contract every metric module offers (`Metric`), what the evaluation shares with
the metrics (`Shared`), and the checks several metrics make against the prepared
inputs. The registry of the metrics is the package's `__init__`.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pyspark.sql import DataFrame

from privacy_eval.errors import InputError
from privacy_eval.results import ColumnRow, MetricRow

if TYPE_CHECKING:
    from privacy_eval.alignment import AlignmentResult
    from privacy_eval.inputs import EvaluationInputs, InputPassWork

# Warnings keep the logger name they were always logged under.
log = logging.getLogger("privacy_eval.evaluation")

Row = MetricRow | ColumnRow
ReportSection = Callable[[Path, Sequence[MetricRow], Sequence[ColumnRow]], list[str]]


class Shared:
    """What several metrics use, computed once per evaluation by `evaluate_inputs`,
    and the warnings the metrics raise.

    - `occurrences`: every distinct row of both tables with its counts per side
      (frames.cached_row_occurrences), holding at least the columns the metrics'
      `occurrence_columns` name; Row Direct Match Protection and the Knowledge
      Protection Rate read it, and `n_singletons` (|U|) is counted from it once.
    - `alignment`: the inputs' alignment check, for the metrics that trust the row key;
      their rows go through `with_alignment`.
    """

    def __init__(self, inputs: EvaluationInputs, warnings: list[str]) -> None:
        self.inputs = inputs
        self.warnings = warnings
        self.alignment: AlignmentResult | None = None
        self.occurrences: DataFrame | None = None
        self.n_singletons = 0

    def note(self, message: str) -> None:
        """A warning of the whole evaluation (logged, and in `Evaluation.warnings`)."""
        log.warning(message)
        self.warnings.append(message)

    def warn(self, details: dict, message: str) -> None:
        """A warning about one metric: noted, and listed in its `details`."""
        self.note(message)
        details.setdefault("warnings", []).append(message)

    def with_alignment(self, row: MetricRow) -> MetricRow:
        """Attach the alignment check to a metric that trusts the row key, and mark it
        `misaligned` (value withheld, kept in details) when aligned pairs are no closer
        than random ones: a shuffled or renumbered release must not read as protected."""
        alignment = self.alignment
        if alignment is None:
            return row
        details = {**row.details, "alignment": alignment.details()}
        if alignment.conclusive and not alignment.aligned:
            details["value_if_aligned"] = row.value
            self.warn(details, f"{row.metric}: MISALIGNED, the figure is noise: {alignment.reason()}")
            return dataclasses.replace(row, value=None, status="misaligned", details=details)
        return dataclasses.replace(row, details=details)


@dataclass(frozen=True)
class Metric:
    """One metric's contract (the package's docstring, privacy_eval.metrics, says what each part is)."""

    key: str        # its key under `metrics:` = its field of MetricsConfig
    phase: str      # the name of its computation in the progress log
    check: Callable[[EvaluationInputs, Any], None] | None
    compute: Callable[[Shared, Any], Any]
    rows: Callable[[Shared, Any, Any], list[Row]]
    report_keys: Mapping[str, tuple[str, ...]] = dataclasses.field(default_factory=dict)
    report_section: ReportSection | None = None
    figures: tuple[str, ...] = ()   # file names its report section may draw
    # The compared columns it reads from `Shared.occurrences` (config -> names), if it
    # reads them at all: the aggregate may hold only the columns some metric reads.
    occurrence_columns: Callable[[Any], Sequence[str]] | None = None
    trusts_row_key: bool = False    # marked `misaligned` when the alignment check fails
    input_pass_work: Callable[[Any], InputPassWork] | None = None


def require_compared(inputs: EvaluationInputs, role: str, name: str) -> None:
    """Refuse a column a metric names that is not compared (a typo, or excluded)."""
    if name not in inputs.columns:
        raise InputError(
            f"{role} '{name}' is not a compared column "
            "(missing from the data, excluded, or the row key)"
        )


def require_numeric(inputs: EvaluationInputs, setting: str, name: str, consequence: str) -> None:
    """Refuse a setting that only a numeric column takes, on column `name` that is not
    (text, or listed under 'categorical'); `consequence` says what the setting cannot do."""
    if name not in inputs.numeric:
        raise InputError(
            f"{setting} is set, but '{name}' is not numeric (text, or listed under 'categorical'), so {consequence}"
        )
