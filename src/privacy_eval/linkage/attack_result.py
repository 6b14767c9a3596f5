"""What the linkage attack returns: one :class:`LinkageMethodResult` per scoring method
inside a :class:`LinkageResult`, and their JSON-safe ``details()`` for the results
tables (key order and values are part of the output).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

__all__ = ["LinkageMethodResult", "LinkageResult", "PrecisionRecallSummary"]


@dataclass(frozen=True)
class PrecisionRecallSummary:
    """Eccentricity (margin confidence) and the precision-recall sweep (docs/metrics.md,
    Linkage attack: eccentricity and precision-recall).

    ``computed`` is ``"all"`` (every synthetic record is in scope), ``"partial"`` (only
    records of blocks with at most ``bound`` candidate pairs) or ``"none"`` (with
    ``reason``). ``rows`` hold (threshold, n_attacked, coverage, precision, recall) by
    decreasing threshold; ``exact`` says whether every distinct threshold is listed.
    Coverage and recall are relative to ``n_in_scope``.
    """

    computed: str
    reason: str | None
    bound: int
    n_in_scope: int
    n_single_candidate: int  # eccentricity Inf (one candidate): attacked first
    n_no_candidate: int  # eccentricity undefined: never attacked, still in the denominator
    exact: bool
    rows: tuple[tuple[float, int, float, float, float], ...]

    def details(self) -> dict[str, Any]:
        return {
            "computed": self.computed,
            "reason": self.reason,
            "max_pairs_per_block": self.bound,
            "n_in_scope": self.n_in_scope,
            "n_single_candidate": self.n_single_candidate,
            "n_no_candidate": self.n_no_candidate,
            "exact": self.exact,
            "precision_recall": [
                {
                    "threshold": _json_float(t),
                    "n_attacked": n,
                    "coverage": c,
                    "precision": p,
                    "recall": r,
                }
                for t, n, c, p, r in self.rows
            ],
        }


@dataclass(frozen=True)
class LinkageMethodResult:
    """The attack with one scoring method (docs/metrics.md, Linkage attack)."""

    method: str
    status: str  # "ok" | "not_measurable"
    success_rate: float  # mean RISK over all synthetic records (0 when not measurable)
    baseline_random: float
    lift: float | None  # None when the baseline is 0
    top_k: dict[int, float]  # k -> hit rate, for 1 <= k <= largest candidate set
    max_risk: float
    n_records: int
    n_true_missing: int
    truth_coverage: float
    n_zero_candidate: int
    n_certain: int  # records whose true original is the unique best candidate (RISK 1)
    n_at_risk: int  # records with RISK > 0
    targets: tuple[str, ...]
    confidence: PrecisionRecallSummary

    @property
    def value(self) -> float | None:
        """The success rate for the results table: None when not measurable."""
        return self.success_rate if self.status == "ok" else None

    @property
    def expected_reidentified(self) -> float:
        """Sum of RISK: the expected number of synthetic records correctly linked."""
        return self.success_rate * self.n_records

    def details(self) -> dict[str, Any]:
        return {
            "method": self.method,
            "status": self.status,
            "success_rate": self.success_rate,
            "baseline_random": self.baseline_random,
            "lift": self.lift,
            "top_k": {str(k): v for k, v in self.top_k.items()},
            "max_risk": self.max_risk,
            "n_records": self.n_records,
            "expected_reidentified": self.expected_reidentified,
            "n_certain": self.n_certain,
            "n_at_risk": self.n_at_risk,
            "n_true_missing": self.n_true_missing,
            "truth_coverage": self.truth_coverage,
            "n_zero_candidate": self.n_zero_candidate,
            "targets": list(self.targets),
            "confidence": self.confidence.details(),
        }


@dataclass(frozen=True)
class LinkageResult:
    """The whole attack: one result per method and the figures they share."""

    methods: dict[str, LinkageMethodResult]  # in the configured order
    n_original: int  # original records evaluated (after drop_incomplete)
    n_synthetic: int  # synthetic records evaluated (after drop_incomplete)
    dropped_incomplete_original: int
    dropped_incomplete_synthetic: int
    targets: tuple[str, ...]
    targets_mahalanobis: tuple[str, ...]  # targets kept in S (empty without that method)
    targets_dropped_constant: tuple[str, ...]  # constant on the covariance side
    cov_from: str
    ridge: float
    ridge_added: float | None  # ridge * mean(diag S), added to every diagonal entry
    condition_number: float | None  # 2-norm κ of the ridged S
    condition_number_correlation: float | None  # κ of the correlation matrix (unit-free)
    squared: bool
    tolerance: float
    blocking: tuple[str, ...]
    n_blocks: int  # distinct blocking values among the synthetic records
    n_blocks_with_candidates: int  # ... that also occur among the originals
    largest_block_pairs: int
    largest_block_original: int
    largest_block_synthetic: int
    n_split_blocks: int
    split_rows: int
    n_candidate_pairs: int
    candidate_share: float  # n_candidate_pairs / (n_original * n_synthetic)
    n_true_pairs: int  # synthetic records whose row key occurs among the originals
    n_true_pairs_kept: int  # ... whose true original is among their candidates
    blocking_recall: float | None  # kept / true pairs; None when there is no true pair
    single_column_success: dict[str, float] | None
    single_column_check: str  # "computed" or "skipped: <reason>"
    warnings: list[str] = field(default_factory=list)

    @property
    def headline_method(self) -> str:
        """The method with the larger success rate (measurable ones first)."""
        ranked = sorted(
            enumerate(self.methods.values()),
            key=lambda im: (im[1].status != "ok", -im[1].success_rate, im[0]),
        )
        return ranked[0][1].method

    @property
    def headline(self) -> LinkageMethodResult:
        return self.methods[self.headline_method]

    def method_details(self, method: str) -> dict[str, Any]:
        """JSON-safe details of one method, with the shared context and the warnings."""
        return {**self.methods[method].details(), "shared": self._shared(), "warnings": list(self.warnings)}

    def details(self) -> dict[str, Any]:
        """JSON-safe details of the whole attack (headline first)."""
        return {
            "headline_method": self.headline_method,
            **self._shared(),
            "per_method": {m: r.details() for m, r in self.methods.items()},
            "warnings": list(self.warnings),
        }

    def _shared(self) -> dict[str, Any]:
        return {
            "methods": list(self.methods),
            "n_original": self.n_original,
            "n_synthetic": self.n_synthetic,
            "dropped_incomplete_original": self.dropped_incomplete_original,
            "dropped_incomplete_synthetic": self.dropped_incomplete_synthetic,
            "targets": list(self.targets),
            "targets_mahalanobis": list(self.targets_mahalanobis),
            "targets_dropped_constant": list(self.targets_dropped_constant),
            "cov_from": self.cov_from,
            "covariance_from": "whole population of the chosen side (not the blocked candidate table)",
            "ridge": self.ridge,
            "ridge_added": self.ridge_added,
            "condition_number": _json_float(self.condition_number),
            "condition_number_correlation": _json_float(self.condition_number_correlation),
            "squared": self.squared,
            "tolerance": self.tolerance,
            "blocking": list(self.blocking),
            "n_blocks": self.n_blocks,
            "n_blocks_with_candidates": self.n_blocks_with_candidates,
            "largest_block_pairs": self.largest_block_pairs,
            "largest_block_original": self.largest_block_original,
            "largest_block_synthetic": self.largest_block_synthetic,
            "n_split_blocks": self.n_split_blocks,
            "split_rows": self.split_rows,
            "n_candidate_pairs": self.n_candidate_pairs,
            "candidate_share": self.candidate_share,
            "n_true_pairs": self.n_true_pairs,
            "n_true_pairs_kept": self.n_true_pairs_kept,
            "blocking_recall": self.blocking_recall,
            "single_column_success": self.single_column_success,
            "single_column_check": self.single_column_check,
        }


def _json_float(x: float | None) -> float | str | None:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return None
    if math.isinf(x):
        return "Infinity" if x > 0 else "-Infinity"
    return float(x)
