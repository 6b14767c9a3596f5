"""The report (report.md and PNG figures) from hand-built result rows; no Spark.

The rows come from the metric modules' own result classes and their details(), the
way evaluation.py builds them, so a renamed details key shows up here.
"""

from __future__ import annotations

import struct
import sys
from pathlib import Path

import pytest

from privacy_eval import cli, report
from privacy_eval.config import LinkageConfig
from privacy_eval.errors import UserError
from privacy_eval.linkage import LinkageMethodResult, LinkageResult, PrecisionRecallSummary
from privacy_eval.metrics import REGISTRY, Shared, column_direct_match, linkage_success
from privacy_eval.metrics.column_direct_match import ColumnDirectMatchResult, ColumnProtection
from privacy_eval.metrics.knowledge_protection import BinGrid, KnowledgeProtectionResult
from privacy_eval.metrics.row_direct_match import RowDirectMatchResult
from privacy_eval.results import ColumnRow, MetricRow

# Planted where a record value could leak into details; none may reach report.md.
CANARY_TEXT = "CANARY-RECORD-VALUE-7f3a"
CANARY_NUMBER = 4242.4242  # a KPR bin origin, which can be a record's own value
CDM_WARNING = "column_direct_match: 3 original and 3 synthetic rows have no partner under row_key 'id'"
LINKAGE_WARNING = "linkage: the Mahalanobis success rate (0.0695) is below the weighted one (0.0730)"

# Most re-identifying first: a copied identifier, then two safer columns.
RANKING = (
    ColumnProtection("patient_id", matches=700, distinct_synthetic=700, protection=0.0),
    ColumnProtection("Clump_Thickness", matches=120, distinct_synthetic=10, protection=99.755),
    ColumnProtection("Class", matches=650, distinct_synthetic=2, protection=99.735),
)


def _linkage_method(method: str, success: float, top_k: dict[int, float]) -> LinkageMethodResult:
    return LinkageMethodResult(
        method=method, status="ok", success_rate=success, baseline_random=0.0041,
        lift=success / 0.0041, top_k=top_k, max_risk=1.0, n_records=700, n_true_missing=0,
        truth_coverage=1.0, n_zero_candidate=0, n_certain=40, n_at_risk=51,
        targets=("Clump_Thickness", "Mitoses"),
        confidence=PrecisionRecallSummary(
            computed="all", reason=None, bound=1_000_000, n_in_scope=700, n_single_candidate=0,
            n_no_candidate=0, exact=True, rows=((CANARY_NUMBER, 1, 0.001, 1.0, 0.02),),
        ),
    )


def _linkage(target: float | None) -> list[MetricRow]:
    """The three linkage rows, built by the linkage metric's own `rows`."""
    result = LinkageResult(
        methods={
            "mahalanobis": _linkage_method("mahalanobis", 0.0695, {1: 0.0695, 5: 0.21, 10: 0.33}),
            "weighted": _linkage_method("weighted", 0.0730, {1: 0.0730, 5: 0.25, 10: 0.38}),
        },
        n_original=700, n_synthetic=700, dropped_incomplete_original=0, dropped_incomplete_synthetic=0,
        targets=("Clump_Thickness", "Mitoses"), targets_mahalanobis=("Clump_Thickness", "Mitoses"),
        targets_dropped_constant=(), cov_from="raw", ridge=1e-6, ridge_added=2e-6,
        condition_number=3.2, condition_number_correlation=1.9, squared=False, tolerance=1.49e-8,
        blocking=("Class",), n_blocks=2, n_blocks_with_candidates=2, largest_block_pairs=211_600,
        largest_block_original=460, largest_block_synthetic=460, n_split_blocks=0, split_rows=50_000,
        n_candidate_pairs=269_200, candidate_share=0.549, n_true_pairs=700, n_true_pairs_kept=700,
        blocking_recall=1.0, single_column_success={"Clump_Thickness": 0.01, "Mitoses": 0.004},
        single_column_check="computed", warnings=[LINKAGE_WARNING],
    )

    config = LinkageConfig(targets=list(result.targets), blocking=["Class"], target=target)
    return linkage_success.METRIC.rows(Shared(None, []), config, result)


def _rows(linkage: bool = True, linkage_target: float | None = 0.07) -> tuple[list[MetricRow], list[ColumnRow]]:
    rdm = RowDirectMatchResult(n_original=700, n_singletons=690, reproduced=46)
    cdm = ColumnDirectMatchResult(RANKING, n_original=700, n_paired=697, original_unpaired=3, synthetic_unpaired=3)
    kpr = KnowledgeProtectionResult(
        n_original=700, n_singletons=690, exposed=28, unique_synthetic_profiles=31,
        known_variables=("Clump_Thickness", "Class"),
        grids=(BinGrid("Clump_Thickness", step=0.22, origin=CANARY_NUMBER, step_source="mean"),),
    )
    cdm_details = {**cdm.details(), "warnings": [CDM_WARNING]}
    metrics = [
        MetricRow("row_direct_match_protection", rdm.protection, "percent", 90.0,
                  numerator=rdm.reproduced, denominator=700, details=rdm.details()),
        MetricRow("column_direct_match_protection", cdm.protection, "percent", 50.0,
                  numerator=cdm.weakest.matches, denominator=700, details=cdm_details),
        MetricRow("knowledge_protection_rate", kpr.protection, "percent", 95.0,
                  numerator=kpr.exposed, denominator=700, details=kpr.details()),
        *(_linkage(linkage_target) if linkage else []),
    ]
    columns = [
        ColumnRow(p.column, p.matches, p.distinct_synthetic, p.protection, rank, p.protection < 50.0)
        for rank, p in enumerate(RANKING, start=1)
    ]
    return metrics, columns


def _write(directory: Path, metrics: list[MetricRow], columns: list[ColumnRow]) -> str:
    path = report.write_report(directory, dataset="wbcd_test", run_id="run-1", metrics=metrics,
                               columns=columns, evaluation_details={"n_original": 700, "n_synthetic": 700})
    assert path == directory / "report.md"
    return path.read_text(encoding="utf-8")


def _summary_line(text: str, metric: str) -> str:
    [line] = [line for line in text.splitlines() if line.startswith(f"| `{metric}` |")]
    return line


def test_writes_report_and_valid_pngs_it_links(tmp_path):
    text = _write(tmp_path, *_rows())
    for name in report.FIGURES:
        data = (tmp_path / name).read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n", name
        assert len(data) > 10_000, name  # a drawn chart, not an empty canvas
        width, _height = struct.unpack(">II", data[16:24])  # the IHDR chunk
        assert width == 800, name  # 8 inches at 100 dpi
        assert f"]({name})" in text  # linked by relative path


def test_summary_has_every_metric_with_its_verdict(tmp_path):
    metrics, columns = _rows()
    text = _write(tmp_path, metrics, columns)
    expected = {  # value, unit, target, verdict
        "row_direct_match_protection": ["93.429", "percent", "≥ 90", "PASS"],
        "column_direct_match_protection": ["0.000", "percent", "≥ 50", "FAIL"],
        "knowledge_protection_rate": ["96.000", "percent", "≥ 95", "PASS"],
        "linkage_success_rate": ["0.0730", "fraction", "≤ 0.07", "FAIL"],
        "linkage_success_rate_mahalanobis": ["0.0695", "fraction", "≤ 0.07", "PASS"],
        "linkage_success_rate_weighted": ["0.0730", "fraction", "≤ 0.07", "FAIL"],
    }
    assert [m.metric for m in metrics] == list(expected)
    for metric, cells in expected.items():
        assert [c.strip() for c in _summary_line(text, metric).split("|")[2:6]] == cells, metric
    assert "| `row_direct_match_protection` | 93.429 | percent | ≥ 90 | PASS | ok | 46 / 700 |" in text


def test_undefined_metric_shows_its_status(tmp_path):
    row = MetricRow("column_direct_match_protection", None, "percent", 50.0, status="not_measurable")
    untargeted = MetricRow("row_direct_match_protection", 99.0, "percent", None)
    text = _write(tmp_path, [row, untargeted], [])
    assert "| undefined | percent | ≥ 50 | NOT_MEASURABLE | not_measurable |" in _summary_line(
        text, "column_direct_match_protection")
    assert "| no target |" in _summary_line(text, "row_direct_match_protection")
    assert "## Column Direct Match Protection per column" not in text
    assert not any((tmp_path / name).exists() for name in report.FIGURES)


def test_columns_ranked_most_re_identifying_first(tmp_path):
    metrics, columns = _rows()
    text = _write(tmp_path, metrics, list(reversed(columns)))  # order of the input does not matter
    section = text.split("## Column Direct Match Protection per column")[1].split("##")[0]
    positions = [section.index(f"| `{p.column}` |") for p in RANKING]
    assert positions == sorted(positions)
    assert "| 1 | `patient_id` | 0.000 | 700 | 700 | yes |" in section


def test_linkage_section_only_with_linkage_rows(tmp_path):
    metrics, columns = _rows()
    text = _write(tmp_path, metrics, columns)
    assert "## Linkage attack" in text
    assert "Headline method (the larger success rate): `weighted`." in text
    assert "| baseline_random | 0.0041 | 0.0041 |" in text
    assert "| top_5 hit rate | 0.2100 | 0.2500 |" in text

    # The same folder again without linkage: no section, and last run's figures are gone.
    metrics, columns = _rows(linkage=False)
    text = _write(tmp_path, metrics, columns)
    assert "linkage" not in text.lower()
    assert (tmp_path / column_direct_match.FIGURE).exists()
    assert not (tmp_path / linkage_success.RATE_FIGURE).exists()
    assert not (tmp_path / linkage_success.TOP_K_FIGURE).exists()


def test_warnings_listed_once_each(tmp_path):
    text = _write(tmp_path, *_rows())
    warnings = text.split("## Warnings")[1]
    assert warnings.count(CDM_WARNING) == 1
    assert warnings.count(LINKAGE_WARNING) == 1  # carried by all three linkage rows


def test_no_warnings_says_none(tmp_path):
    text = _write(tmp_path, [MetricRow("row_direct_match_protection", 99.0, "percent", 90.0)], [])
    assert text.rstrip().endswith("## Warnings\n\nNone.")


def test_prints_only_whitelisted_numbers(tmp_path):
    metrics, columns = _rows()
    rdm, *rest = metrics
    planted = MetricRow(
        rdm.metric, rdm.value, rdm.unit, rdm.target, numerator=rdm.numerator, denominator=rdm.denominator,
        details={
            **rdm.details,
            "n_singletons": CANARY_TEXT,            # a whitelisted key holding text
            "example_row": {"Clump_Thickness": CANARY_TEXT},
            "unlisted_count": CANARY_NUMBER,        # a number under a key not on the list
        },
    )
    text = _write(tmp_path, [planted, *rest], columns)
    # The KPR bin origin and the precision-recall threshold hold CANARY_NUMBER too.
    for canary in (CANARY_TEXT, "4242", "unlisted_count", "example_row"):
        assert canary not in text
    assert "reproduced_singletons = 46" in text  # the whitelisted numbers are still there


def test_whitelisted_keys_are_real_details_keys():
    # A renamed key would silently drop a figure from the report: fail here instead.
    metrics, _ = _rows()
    details = {m.metric: m.details for m in metrics}
    for metric, keys in report._DETAIL_KEYS.items():
        assert set(keys) <= set(details[metric]), metric
    method = details["linkage_success_rate_weighted"]
    assert set(linkage_success.METHOD_KEYS) <= set(method)
    assert set(linkage_success.SHARED_KEYS) <= set(method["shared"])


def test_sections_and_figures_come_from_the_registry_in_its_order():
    assert [m.key for m in REGISTRY] == ["row_direct_match", "column_direct_match", "knowledge_protection", "linkage"]
    assert report.FIGURES == ("column_protection.png", "linkage_success.png", "linkage_top_k.png")
    assert list(report._DETAIL_KEYS) == [
        "row_direct_match_protection", "column_direct_match_protection", "knowledge_protection_rate",
    ]


def test_output_is_deterministic(tmp_path):
    metrics, columns = _rows()
    first, second = tmp_path / "a", tmp_path / "b"
    _write(first, metrics, columns)
    _write(second, metrics, columns)
    for name in (report.REPORT_NAME, *report.FIGURES):
        assert (first / name).read_bytes() == (second / name).read_bytes(), name


def test_names_cannot_break_the_markdown(tmp_path):
    odd = ColumnRow("a|b `c`\nd", 1, 1, 99.0, 1, False)
    text = _write(tmp_path, [MetricRow("column_direct_match_protection", 99.0, "percent", 50.0)], [odd])
    assert "| 1 | ``a\\|b `c` d`` | 99.000 | 1 | 1 | no |" in text


def test_cli_takes_report_dir_and_checks_matplotlib_first(monkeypatch):
    assert cli.parse_args(["--config", "c.yaml", "--report", "out"]).report == "out"
    assert cli._report_writer() is report.write_report
    # Without matplotlib: a one-line user error before any Spark work, not exit 1 later.
    monkeypatch.setitem(sys.modules, "privacy_eval.report", None)
    with pytest.raises(UserError, match="--report needs matplotlib"):
        cli._report_writer()
