"""One evaluation: read both tables, run the configured metrics, collect result rows.

Usable from a notebook: `evaluate(spark, load_config("conf/examples/wbcd.yaml"))`, or,
on DataFrames you already have,

    inputs = prepare_inputs(original_df, synthetic_df, row_key="id", work=input_pass_work(metrics))
    evaluation = evaluate_inputs(inputs, metrics)

The metrics are the entries of `privacy_eval.metrics.REGISTRY`; `input_pass_work`
gathers what they ask of the passes `prepare_inputs` makes over the data anyway;
`evaluate_inputs` checks every configured one against the inputs, computes the steps
they share, then runs each in registry order.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from pyspark.sql import SparkSession

from privacy_eval.config import POSITION_KEY, Config, MetricsConfig
from privacy_eval.frames import cached_row_occurrences, occurring_once
from privacy_eval.inputs import EvaluationInputs, prepare_inputs
from privacy_eval.metrics import Metric, Shared, configured, input_pass_work
from privacy_eval.reading import POSITION, read_table, rereads_cheaply
from privacy_eval.results import ColumnRow, MetricRow

log = logging.getLogger(__name__)


@dataclass
class Evaluation:
    metrics: list[MetricRow]
    columns: list[ColumnRow]
    n_original: int
    n_synthetic: int
    input_fingerprint: str
    warnings: list[str] = field(default_factory=list)


@contextmanager
def phase(name: str, **counts: int) -> Iterator[None]:
    """Log one line per phase with its duration, so a long run shows it is alive."""
    started = time.perf_counter()
    log.info("%s: started", name)
    yield
    extra = "".join(f", {k}={v}" for k, v in counts.items())
    log.info("%s: done in %.1f s%s", name, time.perf_counter() - started, extra)


def load_inputs(spark: SparkSession, config: Config) -> EvaluationInputs:
    """Read both inputs of `config` and prepare them for its metrics."""
    by_position = config.row_key == POSITION_KEY
    with phase("read inputs"):
        original = read_table(spark, config.original, "original", with_position=by_position)
        synthetic = read_table(spark, config.synthetic, "synthetic", with_position=by_position)
        holdout = read_table(spark, config.holdout, "holdout") if config.holdout is not None else None
        inputs = prepare_inputs(
            original,
            synthetic,
            row_key=POSITION if by_position else config.row_key,
            exclude=config.exclude,
            categorical=config.categorical,
            cast=config.cast,
            cache=[side for side, source in (("original", config.original), ("synthetic", config.synthetic))
                   if not rereads_cheaply(source)],
            work=input_pass_work(config.metrics),
            holdout=holdout,
        )
    log.info(
        "inputs: %d original rows, %d synthetic rows, %d compared columns",
        inputs.n_original, inputs.n_synthetic, len(inputs.columns),
    )
    return inputs


def evaluate(spark: SparkSession, config: Config) -> Evaluation:
    """Run every metric the configuration names on its two inputs."""
    inputs = load_inputs(spark, config)
    try:
        return evaluate_inputs(inputs, config.metrics)
    finally:
        inputs.unpersist()


def evaluate_inputs(inputs: EvaluationInputs, metrics: MetricsConfig) -> Evaluation:
    """Run the configured metrics on prepared inputs; returns rows for the results tables."""
    chosen = configured(metrics)
    # Every check before any work: a typo in the last metric must not cost the first ones'.
    for metric, config in chosen:
        if metric.check is not None:
            metric.check(inputs, config)
    evaluation = Evaluation([], [], inputs.n_original, inputs.n_synthetic, inputs.fingerprint)
    shared = Shared(inputs, evaluation.warnings)
    try:
        _shared_steps(shared, chosen)
        for metric, config in chosen:
            with phase(metric.phase):
                result = metric.compute(shared, config)
            for row in metric.rows(shared, config, result):
                (evaluation.columns if isinstance(row, ColumnRow) else evaluation.metrics).append(row)
    finally:
        if shared.occurrences is not None:
            shared.occurrences.unpersist()
    return evaluation


def _shared_steps(shared: Shared, chosen: list[tuple[Metric, Any]]) -> None:
    """What several of the `chosen` metrics need, once: the alignment check, then the
    occurrences (holding the columns those metrics read)."""
    inputs = shared.inputs
    # Before anything is cached below, so that a failure here leaves no cache behind.
    if any(metric.trusts_row_key for metric, _ in chosen):
        with phase("alignment check"):
            shared.alignment = inputs.alignment()
        if not shared.alignment.conclusive:
            shared.note(f"alignment: {shared.alignment.reason()}")
    readers = [(metric, config) for metric, config in chosen if metric.occurrence_columns is not None]
    if readers:
        read = {name for metric, config in readers for name in metric.occurrence_columns(config)}
        with phase("rows of both tables with their occurrences"):
            # One aggregation serves RDMP and KPR: computed and cached once.
            shared.occurrences = cached_row_occurrences(
                inputs.original, inputs.synthetic, inputs.columns, inputs.n_original + inputs.n_synthetic,
                keep=[c for c in inputs.columns if c in read],
            )
            shared.n_singletons = occurring_once(shared.occurrences).count()
