"""The report (report.md and PNG figures) from hand-built result rows; no Spark.

The rows come from the metric modules' own result classes and their details(), the
way evaluation.py builds them, so a renamed details key shows up here.
"""

from __future__ import annotations

import dataclasses
import struct
import sys
import types
from pathlib import Path

import numpy as np
import pytest

from privacy_eval import cli, report
from privacy_eval.alignment import AlignmentResult
from privacy_eval.config import (
    ColumnDirectMatchConfig,
    DisclosureConfig,
    DistanceConfig,
    DistanceToClosestRecordConfig,
    KnowledgeProtectionConfig,
    LinkageConfig,
    LocalCloakingConfig,
    NearestNeighbourDistanceRatioConfig,
    RowDirectMatchConfig,
)
from privacy_eval.distance import CloakingFigures, ClosestFigures, DistanceResult, HoldoutFigures, Space
from privacy_eval.distance.kernel import Scaling
from privacy_eval.errors import UserError
from privacy_eval.linkage.attack_result import LinkageMethodResult, LinkageResult, PrecisionRecallSummary
from privacy_eval.metrics import (
    REGISTRY,
    Shared,
    column_direct_match,
    disclosure,
    distance,
    knowledge_protection,
    linkage_success,
    row_direct_match,
)
from privacy_eval.metrics.binning import BinGrid
from privacy_eval.metrics.column_direct_match import ColumnDirectMatchResult, ColumnProtection
from privacy_eval.metrics.disclosure import Check, DisclosureResult, TargetDisclosure
from privacy_eval.metrics.knowledge_protection import KnowledgeProtectionResult
from privacy_eval.metrics.quantile_groups import Grouping
from privacy_eval.metrics.row_direct_match import RowDirectMatchResult
from privacy_eval.results import AT_LEAST, AT_MOST, AT_MOST_ABOVE_EXPECTED, ColumnRow, MetricRow

# Planted where a record value could leak into details; none may reach report.md.
CANARY_TEXT = "CANARY-RECORD-VALUE-7f3a"
CANARY_NUMBER = 4242.4242  # a KPR bin origin, which can be a record's own value
CDM_WARNING = ("column_direct_match: 3 original and 3 synthetic rows have no partner under row_key 'id'; unpaired rows "
               "count as no match")
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


def _lc_histogram(values: dict[int, int], cap: int) -> dict[str, list]:
    """Bins [lo, hi) of min(LC_i, cap), as the distance figures build them."""
    from privacy_eval.distance.figures import _binned_counts

    return _binned_counts(sorted((min(v, cap), c) for v, c in values.items()))


def _distance_result(
    *, cap: int = 1000, capped: int = 0, n_original: int = 683, holdout: bool = True, eigen_tie: bool = False,
) -> DistanceResult:
    """What distance_metrics returns for a WBCD-sized release: 683 paired records."""
    scaling = Scaling(
        numeric=tuple(f"x{i}" for i in range(9)), means=(3.0,) * 9, sds=(2.0,) * 9,
        categorical=("Class",), modalities=(("2", "4"),), shares=((0.65, 0.35),),
    )
    space = Space(scaling, np.zeros((11, 5)), 0.8123, eigen_tie)
    lc = {0: 45, 1: 60, 2: 50, 3: 40, 5: 30, 8: 100, 12: 200, 30: 100, 60: 58}  # 683 paired originals
    if capped:
        lc = {0: 45, 1: 60, 2: 50, 3: 40, 5: 30, 8: 683 - 225 - capped, cap: capped}
    median = 12.0 if capped < 683 // 2 else float(cap)
    cloaking = CloakingFigures(
        n_paired=683, hits=47.5, unique_hits=44, hidden_rate=100 * (1 - 47.5 / 683), local_cloaking=median,
        zero_share=45 / 683, p10=1, p50=int(median), p90=60, capped=capped, cap=cap, histogram=_lc_histogram(lc, cap),
    )
    two = n_original >= 2
    closest = ClosestFigures(
        n_synthetic=683, dcr=0.4134, zero_share=62 / 683, p05=0.0, nndr=0.6123 if two else None,
        below_half_share=0.21 if two else None,
        histogram={"edges": [0.1 * i for i in range(21)], "zeros": 62,
                   "counts": [5, 30, 60, 80, 90, 85, 70, 50, 40, 30, 20, 15, 10, 8, 5, 3, 2, 1, 1, 1]},
    )
    imputed = {"original": 16, "synthetic": 0, **({"holdout": 2} if holdout else {})}
    return DistanceResult(
        space=space, imputed=imputed, n_original=n_original, n_synthetic=683, cloaking=cloaking, closest=closest,
        holdout=HoldoutFigures(share=0.53, expected=0.5, n_holdout=683, closer=360, tied=4) if holdout else None,
        warnings=("distance: eigenvalue tie",) if eigen_tie else (),
    )


def _misaligned() -> AlignmentResult:
    return AlignmentResult(n_aligned=683, n_pairs=683, aligned_disagreement=0.5, random_disagreement=0.5,
                           difference=0.0, z=0.4, n_columns=10, n_scaled_columns=9, seed=1, n_buckets=1)


def _distance(config: DistanceConfig | None = None, *, holdout: bool = True, alignment: AlignmentResult | None = None,
              **result: object) -> list[MetricRow]:
    """The distance rows, built by the distance metric's own `rows`."""
    shared = Shared(types.SimpleNamespace(holdout=object() if holdout else None), [])
    shared.alignment = alignment
    return distance.METRIC.rows(shared, config or DistanceConfig(), _distance_result(holdout=holdout, **result))


def _target_disclosure(name: str, disco: int, two_way: bool = False) -> TargetDisclosure:
    return TargetDisclosure(
        target=name,
        identity={"UiO": 20, "UiS": 18, "UiOiS": 9, "repU": 4},
        counts={"Dorig": 65, "Dsyn": 297, "iS": 669, "DiS": 298, "DiSCO": disco, "DiSDiO": 47, "n_both": 678,
                "TCAP_num": disco, "denom_TCAP": 298, "sdm_den": 669, "levels_original": 9},
        sums={"CAPd": 524.9, "CAPs": 550.2, "DCAP": 517.1, "sdm_num": 517.1, "base": 320_000.0},
        max_denom=122, mean_denom=15.2,
        one_way=Check(disco > 250, {"disclosive_records": disco, "top_level_disclosive": disco - 1,
                                    "top_level_share_of_disclosive": 99.6, "top_level_share_of_all": 82.4}),
        two_way=Check(two_way, {"pairs": 2, "largest_key": "Class", "largest_disclosive_records": 12,
                                "largest_key_level_records": 444, "largest_key_level_target_records": 431}
                      if two_way else {"pairs": 0}),
    )


def _disclosure(target: float | None = 30.0) -> list[MetricRow]:
    """The disclosure rows, built by the metric's own `rows`: one target over the target."""
    result = DisclosureResult(
        keys=("Clump_Thickness", "Class"), n_original=700, n_synthetic=700,
        targets=(_target_disclosure("Mitoses", 288), _target_disclosure("Bare_Nuclei", 13, two_way=True)),
        groupings=(Grouping("Clump_Thickness", 4, (1.0, CANARY_NUMBER, 9.0, 10.0), "quantile", 0),),
    )
    config = DisclosureConfig(keys=list(result.keys), targets=["Mitoses", "Bare_Nuclei"],
                              bins={"Clump_Thickness": 4}, target=target)
    return disclosure.METRIC.rows(Shared(None, []), config, result)


def _rows(
    linkage: bool = True, linkage_target: float | None = 0.07, with_distance: bool = False,
    with_disclosure: bool = False,
) -> tuple[list[MetricRow], list[ColumnRow]]:
    rdm = RowDirectMatchResult(n_original=700, n_singletons=690, reproduced=46)
    cdm = ColumnDirectMatchResult(RANKING, n_original=700, n_paired=697, original_unpaired=3, synthetic_unpaired=3)
    kpr = KnowledgeProtectionResult(
        n_original=700, n_singletons=690, exposed=28, unique_synthetic_profiles=31,
        known_variables=("Clump_Thickness", "Class"),
        grids=(BinGrid("Clump_Thickness", step=0.22, origin=CANARY_NUMBER, step_source="mean"),),
    )
    shared = Shared(types.SimpleNamespace(row_key="id"), [])  # each metric's own `rows`, as the evaluation calls them
    cdm_metric, *columns = column_direct_match.METRIC.rows(shared, ColumnDirectMatchConfig(), cdm)
    assert cdm_metric.details["warnings"] == [CDM_WARNING]
    metrics = [
        *row_direct_match.METRIC.rows(shared, RowDirectMatchConfig(), rdm),
        cdm_metric,
        *knowledge_protection.METRIC.rows(shared, KnowledgeProtectionConfig(known_variables=list(kpr.known_variables)), kpr),
        *(_linkage(linkage_target) if linkage else []),
        *(_distance() if with_distance else []),
        *(_disclosure() if with_disclosure else []),
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
    text = _write(tmp_path, *_rows(with_distance=True, with_disclosure=True))
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
    row = MetricRow("column_direct_match_protection", None, "percent", 50.0, status="not_measurable", comparison=AT_LEAST)
    untargeted = MetricRow("row_direct_match_protection", 99.0, "percent", None, comparison=AT_LEAST)
    text = _write(tmp_path, [row, untargeted], [])
    assert "| not_measurable | percent | ≥ 50 | NOT_MEASURABLE | not_measurable |" in _summary_line(
        text, "column_direct_match_protection")
    assert "| no target |" in _summary_line(text, "row_direct_match_protection")
    assert "## Column Direct Match Protection per column" not in text
    assert not any((tmp_path / name).exists() for name in report.FIGURES)


@pytest.mark.parametrize("status", ["misaligned", "not_measurable", "undefined"])
def test_a_row_without_a_value_shows_its_status_with_or_without_a_target(tmp_path, status):
    rows = [MetricRow("linkage_success_rate", None, "fraction", None, status=status, comparison=AT_MOST),
            MetricRow("hidden_rate", None, "percent", 90.0, status=status, comparison=AT_LEAST)]
    assert cli._summary("d", "r", rows).splitlines()[1:] == [
        f"  linkage_success_rate  {status:>10}  no target",
        f"  hidden_rate           {status:>10}  target >= 90  {status.upper()}",
    ]
    text = _write(tmp_path, rows, [])
    assert f"| {status} | fraction | none | no target | {status} |" in _summary_line(text, "linkage_success_rate")
    assert f"| {status} | percent | ≥ 90 | {status.upper()} | {status} |" in _summary_line(text, "hidden_rate")


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
    text = _write(tmp_path, [MetricRow("row_direct_match_protection", 99.0, "percent", 90.0, comparison=AT_LEAST)], [])
    assert text.rstrip().endswith("## Warnings\n\nNone.")


def test_prints_only_whitelisted_numbers(tmp_path):
    metrics, columns = _rows()
    rdm, *rest = metrics
    planted = dataclasses.replace(
        rdm,
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
    metrics, _ = _rows(with_distance=True, with_disclosure=True)
    details = {m.metric: m.details for m in metrics}
    for metric, keys in report._DETAIL_KEYS.items():
        assert set(keys) <= set(details[metric]), metric
    method = details["linkage_success_rate_weighted"]
    assert set(linkage_success.METHOD_KEYS) <= set(method)
    assert set(linkage_success.SHARED_KEYS) <= set(method["shared"])
    for group, keys in distance.GROUPS:
        assert set(keys) <= set().union(*(details[name] for name in group)), group
    assert set(distance.SPACE_KEYS) <= set(details["hidden_rate"]["space"])


def test_sections_and_figures_come_from_the_registry_in_its_order():
    assert [m.key for m in REGISTRY] == [
        "row_direct_match", "column_direct_match", "knowledge_protection", "linkage", "distance", "disclosure",
    ]
    assert report.FIGURES == (
        "column_protection.png", "linkage_success.png", "linkage_top_k.png", "distance_closest.png", "local_cloaking.png",
        "disclosure.png",
    )
    assert list(report._DETAIL_KEYS) == [
        "row_direct_match_protection", "column_direct_match_protection", "knowledge_protection_rate",
        "hidden_rate", "local_cloaking", "distance_to_closest_record", "nearest_neighbour_distance_ratio",
        "holdout_distance_share", "replicated_uniques", "attribute_disclosure",
    ]


def test_output_is_deterministic(tmp_path):
    metrics, columns = _rows(with_distance=True, with_disclosure=True)
    first, second = tmp_path / "a", tmp_path / "b"
    _write(first, metrics, columns)
    _write(second, metrics, columns)
    for name in (report.REPORT_NAME, *report.FIGURES):
        assert (first / name).read_bytes() == (second / name).read_bytes(), name


def test_names_cannot_break_the_markdown(tmp_path):
    odd = ColumnRow("a|b `c`\nd", 1, 1, 99.0, 1, False)
    text = _write(tmp_path, [MetricRow("column_direct_match_protection", 99.0, "percent", 50.0, comparison=AT_LEAST)], [odd])
    assert "| 1 | ``a\\|b `c` d`` | 99.000 | 1 | 1 | no |" in text


def test_cli_takes_report_dir_and_checks_matplotlib_first(monkeypatch):
    assert cli.parse_args(["--config", "c.yaml", "--report", "out"]).report == "out"
    assert cli._report_writer() is report.write_report
    # Without matplotlib: a one-line user error before any Spark work, not exit 1 later.
    monkeypatch.setitem(sys.modules, "privacy_eval.plots", None)
    with pytest.raises(UserError, match="--report needs matplotlib: pip install 'privacy-eval\\[report\\]'"):
        cli._report_writer()


# --------------------------------------------------------------------------
# pass rules and the comparison shown, for every metric (docs/interface.md, metric_results)
# --------------------------------------------------------------------------

HOLDOUT = {"expected": 0.5}
# How each metric's value meets its target (docs/interface.md, metric_results: `passed`).
STATED = {
    **dict.fromkeys(("row_direct_match_protection", "column_direct_match_protection", "knowledge_protection_rate",
                     "hidden_rate", "local_cloaking", "distance_to_closest_record", "nearest_neighbour_distance_ratio"),
                    AT_LEAST),
    **dict.fromkeys(("linkage_success_rate", "linkage_success_rate_mahalanobis", "linkage_success_rate_weighted",
                     "replicated_uniques", "attribute_disclosure"), AT_MOST),
    "holdout_distance_share": AT_MOST_ABOVE_EXPECTED,
}


def test_every_metric_states_its_comparison():
    metrics, _ = _rows(with_distance=True, with_disclosure=True)
    assert {m.metric: m.comparison for m in metrics} == STATED


@pytest.mark.parametrize(
    "metric, unit, target, below, at, above",
    [  # passed when the value is below, at and above the target
        ("row_direct_match_protection", "percent", 90.0, False, True, True),
        ("hidden_rate", "percent", 90.0, False, True, True),
        ("local_cloaking", "records", 5.0, False, True, True),
        ("distance_to_closest_record", "distance", 0.3, False, True, True),
        ("nearest_neighbour_distance_ratio", "ratio", 0.5, False, True, True),
        ("linkage_success_rate", "fraction", 0.05, True, True, False),
        ("attribute_disclosure", "percent", 30.0, True, True, False),  # a disclosed share: at most
        ("replicated_uniques", "percent", 2.0, True, True, False),
    ],
)
def test_pass_rule_of_each_metric(metric, unit, target, below, at, above):
    def row(value: float | None, target: float | None, status: str = "ok") -> MetricRow:
        return MetricRow(metric, value, unit, target, status, comparison=STATED[metric])

    assert (row(target * 0.9, target).passed, row(target, target).passed, row(target * 1.1, target).passed) == (
        below, at, above
    )
    assert row(target, None).passed is None
    assert row(None, target, status="not_measurable").passed is None
    assert row(target, target, status="misaligned").passed is None


def test_holdout_share_passes_on_its_excess_over_expected():
    def row(value: float, target: float | None, details: dict = HOLDOUT) -> MetricRow:
        return MetricRow("holdout_distance_share", value, "fraction", target, details=details,
                         comparison=AT_MOST_ABOVE_EXPECTED)

    assert row(0.51, 0.02).passed is True     # 0.01 above expected
    assert row(0.52, 0.02).passed is True     # exactly expected + target
    assert row(0.53, 0.02).passed is False
    assert row(0.45, 0.0).passed is True      # below expected: nothing memorised
    assert row(0.49, -0.02).passed is False   # a negative target asks for a share under expected
    assert row(0.47, -0.02).passed is True
    assert row(0.9, 0.02, {"expected": 0.9}).passed is True  # the baseline moves with n / (n + n_H)
    assert row(0.9, None).passed is None
    assert row(0.51, 0.02).fails_gate is False and row(0.53, 0.02).fails_gate is True
    # A row that cannot be judged (no baseline) is a bug of the metric, not a silent pass.
    with pytest.raises(ValueError, match="needs details\\['expected'\\]"):
        row(0.5, 0.02, {})
    # no value: nothing to judge
    MetricRow("holdout_distance_share", None, "fraction", 0.02, status="not_measurable", comparison=AT_MOST_ABOVE_EXPECTED)


@pytest.mark.parametrize(
    "metric, unit, target, details, text, ascii_text",
    [
        ("row_direct_match_protection", "percent", 90.0, {}, "≥ 90", ">= 90"),
        ("hidden_rate", "percent", 92.5, {}, "≥ 92.5", ">= 92.5"),
        ("local_cloaking", "records", 5.0, {}, "≥ 5", ">= 5"),
        ("distance_to_closest_record", "distance", 0.25, {}, "≥ 0.25", ">= 0.25"),
        ("nearest_neighbour_distance_ratio", "ratio", 0.5, {}, "≥ 0.5", ">= 0.5"),
        ("linkage_success_rate", "fraction", 0.05, {}, "≤ 0.05", "<= 0.05"),
        ("holdout_distance_share", "fraction", 0.02, HOLDOUT, "≤ expected + 0.02", "<= expected + 0.02"),
        ("holdout_distance_share", "fraction", -0.02, HOLDOUT, "≤ expected − 0.02", "<= expected - 0.02"),
        ("holdout_distance_share", "fraction", 0.0, HOLDOUT, "≤ expected + 0", "<= expected + 0"),
        ("hidden_rate", "percent", None, {}, None, None),
        ("attribute_disclosure", "percent", 30.0, {}, "≤ 30", "<= 30"),
    ],
)
def test_comparison_shown_to_users(metric, unit, target, details, text, ascii_text):
    row = MetricRow(metric, 0.5, unit, target, details=details, comparison=STATED[metric])
    assert row.target_text() == text
    assert row.target_text(ascii=True) == ascii_text


DISTANCE_ROWS = [
    MetricRow("hidden_rate", 93.4123, "percent", 90.0, comparison=AT_LEAST),
    MetricRow("local_cloaking", 12.5, "records", 5.0, comparison=AT_LEAST),
    MetricRow("distance_to_closest_record", 0.41234, "distance", None, comparison=AT_LEAST),
    MetricRow("nearest_neighbour_distance_ratio", 0.61, "ratio", 0.7, comparison=AT_LEAST),
    MetricRow("holdout_distance_share", 0.5312, "fraction", 0.02, details=HOLDOUT, comparison=AT_MOST_ABOVE_EXPECTED),
]


def test_summary_and_report_show_the_distance_rows(tmp_path):
    assert cli._summary("wbcd", "r1", DISTANCE_ROWS).splitlines() == [
        "privacy evaluation of wbcd (run_id r1)",
        "  hidden_rate                         93.412 %  target >= 90  PASS",
        "  local_cloaking                     12.5000    target >= 5  PASS",
        "  distance_to_closest_record          0.4123    no target",
        "  nearest_neighbour_distance_ratio    0.6100    target >= 0.7  FAIL",
        "  holdout_distance_share              0.5312    target <= expected + 0.02  FAIL",
    ]
    text = _write(tmp_path, DISTANCE_ROWS, [])
    assert "| `hidden_rate` | 93.412 | percent | ≥ 90 | PASS | ok |" in text
    assert "| `local_cloaking` | 12.5000 | records | ≥ 5 | PASS | ok |" in text
    assert "| `distance_to_closest_record` | 0.4123 | distance | none | no target | ok |" in text
    assert "| `nearest_neighbour_distance_ratio` | 0.6100 | ratio | ≥ 0.7 | FAIL | ok |" in text
    assert "| `holdout_distance_share` | 0.5312 | fraction | ≤ expected + 0.02 | FAIL | ok |" in text


def test_summary_of_the_existing_metrics_is_unchanged():
    metrics, _ = _rows()
    assert cli._summary("wbcd_test", "run-1", metrics).splitlines()[1:] == [
        "  row_direct_match_protection         93.429 %  target >= 90  PASS",
        "  column_direct_match_protection       0.000 %  target >= 50  FAIL",
        "  knowledge_protection_rate           96.000 %  target >= 95  PASS",
        "  linkage_success_rate                0.0730    target <= 0.07  FAIL",
        "  linkage_success_rate_mahalanobis    0.0695    target <= 0.07  PASS",
        "  linkage_success_rate_weighted       0.0730    target <= 0.07  FAIL",
    ]


# --------------------------------------------------------------------------
# the distance-based metrics' section (metrics/distance.py)
# --------------------------------------------------------------------------

D1, LC = distance.D1_FIGURE, distance.LC_FIGURE


def _section(directory: Path, metrics: list[MetricRow]) -> str:
    directory.mkdir(parents=True, exist_ok=True)
    return "\n".join(distance.report_section(directory, metrics, []))


def _is_png(path: Path) -> bool:
    data = path.read_bytes()
    return data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000 and struct.unpack(">II", data[16:24])[0] == 800


def test_distance_section_draws_both_figures_and_names_them(tmp_path):
    text = _section(tmp_path, _distance())
    assert text.startswith("## Distance-based metrics")
    assert _is_png(tmp_path / D1) and _is_png(tmp_path / LC)
    assert f"![Distance to closest record]({D1})" in text and f"![Local cloaking]({LC})" in text
    assert "| components | 5 |" in text and "| width | 11 |" in text and "| variance_kept | 0.8123 |" in text
    assert "| imputed_original | 16 |" in text and "| imputed_holdout | 2 |" in text
    assert "62 of 683 synthetic records (9.1 %) coincide with an original" in text
    assert "| `hidden_rate`, `local_cloaking` | value |" in text
    assert "| hits | 47.5000 |" in text and "| p90 | 60 |" in text and "| capped | 0 |" in text
    assert "| `distance_to_closest_record`, `nearest_neighbour_distance_ratio` | value |" in text
    assert "| dcr | 0.4134 |" in text and "| nndr | 0.6123 |" in text and "| p05 | 0.0000 |" in text
    assert "| `holdout_distance_share` | value |" in text and "| expected | 0.5000 |" in text
    assert "withheld" not in text and "lower bound" not in text


def test_distance_section_without_the_cloaking_rows(tmp_path):
    config = DistanceConfig(distance_to_closest_record=DistanceToClosestRecordConfig(target=0.3),
                            nearest_neighbour_distance_ratio=NearestNeighbourDistanceRatioConfig())
    rows = _distance(config, holdout=False)
    assert [m.metric for m in rows] == ["distance_to_closest_record", "nearest_neighbour_distance_ratio"]
    text = _section(tmp_path, rows)
    assert _is_png(tmp_path / D1) and f"]({D1})" in text
    assert not (tmp_path / LC).exists() and LC not in text
    assert "hidden_rate" not in text and "holdout" not in text and "imputed_holdout" not in text


def test_distance_section_only_cloaking_rows(tmp_path):
    rows = _distance(DistanceConfig(local_cloaking=LocalCloakingConfig()), holdout=False)
    text = _section(tmp_path, rows)
    assert _is_png(tmp_path / LC) and f"]({LC})" in text
    assert not (tmp_path / D1).exists() and D1 not in text


def test_distance_section_of_a_misaligned_release(tmp_path):
    rows = _distance(alignment=_misaligned())
    status = {m.metric: m.status for m in rows}
    assert status["hidden_rate"] == status["local_cloaking"] == "misaligned"
    assert status["distance_to_closest_record"] == "ok"  # no alignment needed
    text = _section(tmp_path, rows)
    assert _is_png(tmp_path / D1) and _is_png(tmp_path / LC)
    assert f"]({D1})" in text and f"]({LC})" in text
    assert "`hidden_rate` is withheld" in text and "`local_cloaking` is withheld" in text
    assert "`distance_to_closest_record` is withheld" not in text


def test_distance_section_with_capped_counts(tmp_path):
    rows = _distance(cap=50, capped=400)
    [lc] = [m for m in rows if m.metric == "local_cloaking"]
    assert lc.value == 50 and lc.details["median_is_lower_bound"] is True
    text = _section(tmp_path, rows)
    assert _is_png(tmp_path / LC) and f"]({LC})" in text
    assert "| capped | 400 |" in text and "| cap | 50 |" in text
    assert "the local cloaking is a lower bound" in text


def test_distance_section_nndr_undefined_and_not_measurable(tmp_path):
    rows = _distance(n_original=1)
    [nndr] = [m for m in rows if m.metric == "nearest_neighbour_distance_ratio"]
    assert nndr.status == "undefined" and nndr.value is None
    unmeasured = MetricRow("hidden_rate", None, "percent", 90.0, status="not_measurable", comparison=AT_LEAST,
                           details={"space": rows[0].details["space"], "unpaired_original": 5, "unpaired_synthetic": 5})
    text = _section(tmp_path, [unmeasured, *rows[2:]])
    assert "`nearest_neighbour_distance_ratio`: `undefined`, no value" in text
    assert "`hidden_rate`: `not_measurable`, no value" in text
    assert "| nndr |" not in text and _is_png(tmp_path / D1) and not (tmp_path / LC).exists()


def test_distance_section_none_without_distance_rows(tmp_path):
    metrics, columns = _rows()
    assert distance.report_section(tmp_path, metrics, columns) == []
    assert not (tmp_path / D1).exists() and not (tmp_path / LC).exists()


def test_distance_section_reads_only_numbers(tmp_path):
    rows = _distance()
    planted = []
    for m in rows:
        details = {**m.details, "example_record": CANARY_TEXT, "dcr_text": CANARY_TEXT,
                   "space": {**m.details["space"], "width": CANARY_TEXT}}
        if m.metric == "distance_to_closest_record":
            details["histogram"] = {"edges": [CANARY_TEXT, 1.0], "counts": [1], "zeros": 0}
        if m.metric == "local_cloaking":
            details["histogram"] = {"edges": [0, 1, 2], "counts": [1]}  # lengths do not match
        planted.append(dataclasses.replace(m, details=details))
    text = _section(tmp_path, planted)
    assert CANARY_TEXT not in text and "| width |" not in text
    # A malformed histogram is not drawn, but the nearest-neighbour ratio's own is.
    assert not (tmp_path / LC).exists() and (tmp_path / D1).exists()


def test_distance_section_in_the_whole_report(tmp_path):
    text = _write(tmp_path, *_rows(with_distance=True))
    assert text.index("## Linkage attack") < text.index("## Distance-based metrics") < text.index("## Warnings")
    assert f"]({D1})" in text and f"]({LC})" in text
    # The same folder again without distance rows: the figures of the last run are gone.
    text = _write(tmp_path, *_rows())
    assert "Distance-based" not in text
    assert not (tmp_path / D1).exists() and not (tmp_path / LC).exists()


# --------------------------------------------------------------------------
# identity and attribute disclosure's section (metrics/disclosure.py)
# --------------------------------------------------------------------------


def test_disclosure_rows_headline_verdict_and_warnings():
    ident, attrib = _disclosure()
    assert (ident.metric, ident.value, ident.numerator, ident.target) == ("replicated_uniques", 4 / 700 * 100, 4, None)
    assert ident.details["UiO"] == 20 / 700 * 100 and ident.details["UiS"] == 18 / 700 * 100
    assert (attrib.value, attrib.numerator, attrib.details["target_column"]) == (288 / 700 * 100, 288, "Mitoses")
    assert attrib.passed is False and attrib.target_text() == "≤ 30"  # 41.1 % disclosed, at most 30 allowed
    mitoses = attrib.details["per_target"]["Mitoses"]
    assert mitoses["DCAPd"] == 517.1 / 700 * 100 and mitoses["TCAP"] == 288 / 298 * 100
    assert mitoses["baseCAPd"] == 320_000 / 700**2 * 100
    assert mitoses["sdmetrics_categorical_cap"] == 1 - 517.1 / 669
    assert mitoses["sdmetrics_disclosure_protection"] == min((1 - 517.1 / 669) / (1 - 1 / 9), 1)
    assert attrib.details["bins"] == {"Clump_Thickness": {"groups_asked": 4, "groups": 3, "style": "quantile",
                                                          "infinite_values": 0}}
    warnings = attrib.details["warnings"]
    assert [w.split(":")[1].strip() for w in warnings] == ["target 'Mitoses'", "target 'Bare_Nuclei'"]
    assert "check_1way" in warnings[0] and "check_2way" in warnings[1]
    assert str(CANARY_NUMBER) not in repr(attrib.details) + repr(ident.details)  # no break, ever


def test_disclosure_section_draws_its_figure_and_reads_only_numbers(tmp_path):
    ident, attrib = _disclosure()
    attrib.details["per_target"]["Mitoses"]["example_value"] = CANARY_TEXT
    attrib.details["per_target"]["Mitoses"]["Dorig"] = CANARY_TEXT  # a whitelisted key holding text
    text = "\n".join(disclosure.METRIC.report_section(tmp_path, [ident, attrib], []))
    assert text.startswith("## Identity and attribute disclosure")
    assert _is_png(tmp_path / disclosure.FIGURE) and f"]({disclosure.FIGURE})" in text
    assert "| per target | `Mitoses` | `Bare_Nuclei` |" in text
    assert "| DiSCO | 41.1429 | 1.8571 |" in text and "| Dorig | — | 9.2857 |" in text
    assert "| check_1way | flagged | no |" in text and "| check_2way | no | flagged |" in text
    assert "Identity: UiO = 2.8571, UiS = 2.5714, UiOiS = 1.2857, repU = 0.5714" in text
    assert CANARY_TEXT not in text and "example_value" not in text
    assert disclosure.METRIC.report_section(tmp_path, _rows()[0], []) == []  # nothing without its rows
