"""The metrics, one module each, and the registry that `evaluate_inputs` runs.

Every metric module offers the same small surface, collected in one `Metric` entry
(contract.py):

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

from typing import TYPE_CHECKING, Any

from privacy_eval.metrics import (
    column_direct_match,
    disclosure,
    distance,
    knowledge_protection,
    linkage_success,
    row_direct_match,
)
from privacy_eval.metrics.contract import Metric, ReportSection, Row, Shared, require_compared, require_numeric

if TYPE_CHECKING:
    from privacy_eval.config import MetricsConfig
    from privacy_eval.inputs import InputPassWork

__all__ = [
    "REGISTRY",
    "Metric",
    "ReportSection",
    "Row",
    "Shared",
    "configured",
    "input_pass_work",
    "require_compared",
    "require_numeric",
]

REGISTRY: tuple[Metric, ...] = (
    row_direct_match.METRIC,
    column_direct_match.METRIC,
    knowledge_protection.METRIC,
    linkage_success.METRIC,
    distance.METRIC,
    disclosure.METRIC,
)


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
