"""Command line of jobs/evaluate_privacy.py (docs/interface.md, "Command line").

Exit codes: 0 done; 2 invalid configuration or input; 3 a target missed under
--fail-on-target; 1 anything unexpected. On every non-zero exit the results tables
are left as they were: results are written last, and only on success.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import traceback
import uuid
from collections.abc import Callable, Sequence
from datetime import datetime, timezone
from pathlib import Path

from privacy_eval import __version__
from privacy_eval.config import Config, load_config
from privacy_eval.errors import CommitError, UserError, spark_error_logs_silenced

EXIT_OK, EXIT_UNEXPECTED, EXIT_INVALID, EXIT_TARGET_MISSED = 0, 1, 2, 3

log = logging.getLogger("privacy_eval")


class _Parser(argparse.ArgumentParser):
    """argparse, with its complaint on the contract's one `error:` line (exit 2)."""

    def error(self, message: str):  # type: ignore[override]
        self.print_usage(sys.stderr)
        self.exit(EXIT_INVALID, f"error: {message}\n")


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = _Parser(
        prog="evaluate_privacy",
        description="Evaluate how well a synthetic table protects the people in its original.",
    )
    parser.add_argument("--config", required=True, help="YAML configuration file")
    parser.add_argument("--run-id", help="identifies this run in the results tables (default: a new UUID)")
    parser.add_argument(
        "--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
        help="override one configuration key, value parsed as YAML (repeatable)",
    )
    parser.add_argument(
        "--fail-on-target", action="store_true",
        help="exit 3, writing no results, when a metric with a target misses it",
    )
    parser.add_argument(
        "--report", metavar="DIR",
        help="also write report.md and PNG figures into DIR (relative to the current folder); "
             "written before the results, also when --fail-on-target stops the run",
    )
    parser.add_argument("--verbose", action="store_true", help="log Spark and job details at INFO")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    try:
        args = parse_args(argv)
    except SystemExit as exc:  # argparse already printed its usage message
        return EXIT_INVALID if exc.code else EXIT_OK
    # Our own phases at INFO; third-party Python loggers (py4j) only when verbose.
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING,
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    log.setLevel(logging.INFO)
    run_id = str(uuid.uuid4()) if args.run_id is None else args.run_id
    try:
        from privacy_eval.results import check_run_id  # with Spark's Python side, as _run

        check_run_id(run_id, "--run-id")
        _check_launcher_decoding(run_id)
        config = load_config(args.config, args.overrides)
        if args.verbose:
            return _run(config, run_id, args)
        # PySpark logs an unexpected Spark error's raw message (which can quote record
        # values) with a traceback; the job reports it on its own line instead.
        with spark_error_logs_silenced():
            return _run(config, run_id, args)
    except UserError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_INVALID
    except CommitError as exc:
        # Past the commit point: the run is complete on disk or will be completed by the
        # next run's recovery; say so rather than "unexpected failure".
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_UNEXPECTED
    except Exception as exc:  # noqa: BLE001 - the last line of defence, exit 1
        # Messages of Spark errors can quote record values; only --verbose shows them.
        if args.verbose:
            traceback.print_exc()
        print(
            f"error: unexpected failure ({type(exc).__name__}); rerun with --verbose for details",
            file=sys.stderr,
        )
        return EXIT_UNEXPECTED


def _run(config: Config, run_id: str, args: argparse.Namespace) -> int:
    # Imported here so that `--help` and configuration errors answer without a JVM.
    from privacy_eval.evaluation import evaluate
    from privacy_eval.results import RunRecord, ensure_tables, write_run
    from privacy_eval.session import build_session

    _check_warehouse_writable(config.results.warehouse)
    if args.report is not None:
        _check_writable(args.report, "--report")
    write_report = _report_writer() if args.report is not None else None
    started_at = datetime.now(timezone.utc)
    spark = build_session("privacy-eval")
    spark.sparkContext.setLogLevel("INFO" if args.verbose else "WARN")
    evaluation = evaluate(spark, config)
    finished_at = datetime.now(timezone.utc)

    missed = [m for m in evaluation.metrics if m.fails_gate]
    print(_summary(config.dataset, run_id, evaluation.metrics))
    if write_report is not None:
        # Before the gate: the report explains a failed gate, and it is not a results
        # table. Before the tables: a report that cannot be written stops the run
        # while the tables are still untouched.
        try:
            path = write_report(
                args.report, dataset=config.dataset, run_id=run_id,
                metrics=evaluation.metrics, columns=evaluation.columns,
                evaluation_details={"n_original": evaluation.n_original, "n_synthetic": evaluation.n_synthetic},
            )
        except OSError as exc:
            raise UserError(f"--report: cannot write to {args.report} ({exc.strerror or type(exc).__name__})") from None
        log.info("report written to %s", path)
    if args.fail_on_target and missed:
        names = ", ".join(m.metric if m.passed is False else f"{m.metric} ({m.status})" for m in missed)
        print(
            f"error: target missed or not verifiable: {names}; results not written (--fail-on-target)",
            file=sys.stderr,
        )
        return EXIT_TARGET_MISSED

    ensure_tables(spark, config.results.warehouse, config.results.database)
    write_run(
        spark,
        config.results.database,
        RunRecord(
            run_id=run_id,
            dataset=config.dataset,
            n_original=evaluation.n_original,
            n_synthetic=evaluation.n_synthetic,
            config_sha256=config.sha256(),
            input_fingerprint=evaluation.input_fingerprint,
            tool_version=__version__,
            started_at=started_at,
            finished_at=finished_at,
        ),
        evaluation.metrics,
        evaluation.columns,
    )
    log.info("results written to %s.metric_results, run_id=%s", config.results.database, run_id)
    return EXIT_OK


def _report_writer() -> Callable[..., Path]:
    """privacy_eval.report.write_report, with the module of its figures imported before
    the evaluation, so that a missing matplotlib (an optional dependency) fails in a
    second, not after the metrics."""
    try:
        import privacy_eval.plots  # noqa: F401 - imports matplotlib
    except ImportError as exc:
        raise UserError(f"--report needs matplotlib: pip install 'privacy-eval[report]' ({exc})") from None
    from privacy_eval.report import write_report

    return write_report


def _summary(dataset: str, run_id: str, metrics: Sequence) -> str:
    lines = [f"privacy evaluation of {dataset} (run_id {run_id})"]
    width = max((len(m.metric) for m in metrics), default=0)
    for m in metrics:
        value = f"{m.status:>10}" if m.value is None else (  # no measurable value: its status says why
            f"{m.value:8.3f} %" if m.unit == "percent" else f"{m.value:8.4f}  "
        )
        if m.target is None:
            verdict = "no target"
        else:
            verdict = f"target {m.target_text(ascii=True)}  " + {True: "PASS", False: "FAIL", None: m.status.upper()}[m.passed]
        lines.append(f"  {m.metric:<{width}}  {value}  {verdict}")
    return "\n".join(lines)


def _check_launcher_decoding(run_id: str) -> None:
    """Refuse a '?' in a run id that spark-submit's JVM may have written itself.

    spark-submit hands the job its arguments through a JVM, which decodes them with the
    locale's charset: under a locale that is not UTF-8 (LANG=C, POSIX), every character
    it cannot decode arrives as '?', so 'é1' and 'à1' would both arrive as '??1' and
    replace each other's run. (Its launcher script also deletes carriage returns, which
    nothing after it can see: docs/interface.md.) Only then is the JVM asked.
    """
    if "?" not in run_id or "PYSPARK_GATEWAY_PORT" not in os.environ:
        return
    from pyspark import SparkContext

    SparkContext._ensure_initialized()
    charset = str(SparkContext._jvm.java.lang.System.getProperty("sun.jnu.encoding"))
    if not charset.upper().replace("-", "").startswith("UTF"):
        raise UserError(
            f"--run-id contains '?', and spark-submit decoded the job's arguments as {charset}, writing '?' "
            "for every character it cannot decode, so the id given cannot be known; run spark-submit under a "
            "UTF-8 locale (LANG=C.UTF-8) or leave '?' out of the id"
        )


def _check_warehouse_writable(warehouse: str) -> None:
    """Fail before any work when results could not be written (local warehouses only)."""
    if "://" in warehouse or warehouse.startswith("file:"):
        return
    _check_writable(warehouse, "results.warehouse")


def _check_writable(folder: str, key: str) -> None:
    """Fail before any work when the local `folder` (which may not exist yet) could not be
    written: its nearest existing part must be a folder this process may write in."""
    probe = os.path.abspath(folder)
    while not os.path.exists(probe):
        parent = os.path.dirname(probe)
        if parent == probe:
            break
        probe = parent
    if not os.path.isdir(probe):
        raise UserError(f"{key}: {folder} is not writable ({probe} is not a folder)")
    if not os.access(probe, os.W_OK | os.X_OK):
        raise UserError(f"{key}: {folder} is not writable (no permission to write in {probe})")
