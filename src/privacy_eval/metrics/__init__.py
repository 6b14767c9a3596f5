"""The metrics, one module each, and the registry that `evaluate_inputs` runs.

Every metric module offers the same small surface, collected in one `Metric` entry:

- `check(inputs, config)`: its checks against the prepared inputs (columns it names,
  their types). All configured metrics are checked before any of them runs: a typo in
  the last metric must not cost the first ones' work.
- `compute(shared, config)`: its result object, through the module's pure function of
  DataFrames (named after what it computes, the formula in its docstring), fed with
  the steps several metrics share (`Shared`).
- `rows(shared, config, result)`: its rows for the results tables (MetricRow, and
  ColumnRow for per-column figures), in the order they are written.
- `report_keys` and `report_section`: the numeric details the report prints for its
  rows, and the report's section of its own (figures included), if any.
- `input_pass_work(config)`, if any: what it asks of the passes over the data that
  `prepare_inputs` makes anyway (`inputs.InputPassWork`); `input_pass_work(metrics)`
  gathers it for the evaluation.

Adding a metric = one module, one entry in REGISTRY, and its configuration dataclass
(a field of `config.MetricsConfig` named like the entry's `key`). REGISTRY's order is
the order of the results rows and of the report.
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
    from privacy_eval.config import MetricsConfig
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
    """One metric's contract (see the module docstring)."""

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


def configured(metrics: MetricsConfig) -> list[tuple[Metric, Any]]:
    """(entry, its configuration) of every metric `metrics` names, in REGISTRY order."""
    chosen = [(metric, getattr(metrics, metric.key)) for metric in REGISTRY]
    return [(metric, config) for metric, config in chosen if config is not None]


def input_pass_work(metrics: MetricsConfig) -> InputPassWork | None:
    """What the metrics `metrics` configures ask of the input passes
    (`prepare_inputs(work=...)`); None when none asks anything."""
    asking = [(metric, config) for metric, config in configured(metrics) if metric.input_pass_work is not None]
    if not asking:
        return None
    if len(asking) > 1:  # one condition and one set of aggregates per pass, so far
        raise ValueError(f"only one metric can ask work of the input passes, not {[m.key for m, _ in asking]}")
    metric, config = asking[0]
    return metric.input_pass_work(config)


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


from privacy_eval.metrics import (  # noqa: E402 - last: the modules import the contract above
    column_direct_match,
    disclosure,
    distance,
    knowledge_protection,
    linkage_success,
    row_direct_match,
)

REGISTRY: tuple[Metric, ...] = (
    row_direct_match.METRIC,
    column_direct_match.METRIC,
    knowledge_protection.METRIC,
    linkage_success.METRIC,
    distance.METRIC,
    disclosure.METRIC,
)
