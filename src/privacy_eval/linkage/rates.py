"""From the scoring histograms to the figures: rates and baselines, top-k, the
confidence (eccentricity) and precision-recall summary, true pairs and blocking
recall, the single-column check, and the warnings about what the numbers mean. Every
rate is computed with ``math.fsum`` over integer counts, so the numbers are identical
whatever the partitioning or splitting.

See docs/metrics.md, Linkage attack: rates and baselines; top-k; eccentricity and
precision-recall; truth coverage and "not measurable".
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from privacy_eval.linkage import names as N
from privacy_eval.linkage.attack_result import LinkageMethodResult, PrecisionRecallSummary
from privacy_eval.linkage.kernel.risk import top_k_probability

__all__ = [
    "PR_COVERAGE_LEVELS",
    "PR_EXACT_LIMIT",
    "SINGLE_COLUMN_LIMIT",
    "RateSummary",
    "TruePairs",
    "interpretation_warnings",
    "method_results",
    "single_column",
    "summarize_rates",
    "true_pairs_of",
]

#: Up to this many distinct eccentricity values the PR sweep is reported in full.
PR_EXACT_LIMIT = 200
#: The single-column check runs for 2 .. this many targets.
SINGLE_COLUMN_LIMIT = 10
#: Coverage levels (approximately) at which a long PR sweep is reported.
PR_COVERAGE_LEVELS = (0.01, 0.05, 0.1, 0.25, 0.5, 0.75, 0.9)

Histogram = list[tuple[int, int, int]]


# --------------------------------------------------------------------------
# rates
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class RateSummary:
    """Every rate of one method, from its two histograms."""

    n: int  # synthetic records scored
    n_pairs: int  # candidate pairs
    max_nc: int  # largest candidate set
    status: str
    success_rate: float
    baseline_random: float
    lift: float | None
    top_k: dict[int, float]
    max_risk: float
    n_true_missing: int
    truth_coverage: float
    n_zero_candidate: int
    n_certain: int
    n_at_risk: int


def summarize_rates(cand: Histogram, rank: Histogram, top_k: Sequence[int]) -> RateSummary:
    """Every rate from the candidate histogram (n_candidates, truth present, count) and
    the rank histogram (N_BETTER, TRUE_TIE_SIZE, count), exactly."""
    n = sum(c for _, _, c in cand)
    missing = sum(c for _, has, c in cand if not has)
    max_nc = max((nc for nc, _, c in cand if c), default=0)
    base = math.fsum(c / nc for nc, has, c in cand if has and nc > 0) / n if n else 0.0
    hits = [(m, c) for b, m, c in rank if b == 0]
    success = math.fsum(c / m for m, c in hits) / n if n else 0.0
    return RateSummary(
        n=n,
        n_pairs=sum(nc * c for nc, _, c in cand),
        max_nc=max_nc,
        status="ok" if n and missing < n else "not_measurable",
        success_rate=success,
        baseline_random=base,
        lift=success / base if base > 0 else None,
        top_k=_top_k(rank, top_k, max_nc, n),
        max_risk=max((1.0 / m for m, _ in hits), default=0.0),
        n_true_missing=missing,
        truth_coverage=1.0 - missing / n if n else 0.0,
        n_zero_candidate=sum(c for nc, _, c in cand if nc == 0),
        n_certain=sum(c for m, c in hits if m == 1),
        n_at_risk=sum(c for _, c in hits),
    )


def _top_k(rank: Histogram, top_k: Sequence[int], max_nc: int, n: int) -> dict[int, float]:
    top: dict[int, float] = {}
    for k in top_k:
        if k > max_nc:
            continue
        probs = top_k_probability(
            np.array([b for b, _, _ in rank], dtype=np.int64), np.array([m for _, m, _ in rank], dtype=np.int64), k
        ) if rank else np.zeros(0)
        top[int(k)] = math.fsum(float(pr) * c for pr, (_, _, c) in zip(probs, rank)) / n if n else 0.0
    return top


def method_results(
    scored: DataFrame,
    histograms: list[tuple[int, int, int, int, int]],
    n_conf_rows: dict[int, int],
    methods: Sequence[str],
    top_k: Sequence[int],
    targets_by_method: dict[str, tuple[str, ...]],
    bound: int,
) -> tuple[dict[str, LinkageMethodResult], dict[str, RateSummary]]:
    """One result per method, in the configured order, and the rates behind each."""
    exact_conf = _collect_small_confidence(scored, n_conf_rows)
    results: dict[str, LinkageMethodResult] = {}
    summaries: dict[str, RateSummary] = {}
    for name in methods:
        code = N.MAHALANOBIS if name == "mahalanobis" else N.WEIGHTED
        cand = [(a, b, n) for m, k, a, b, n in histograms if m == code and k == N.K_CAND]
        rank = [(a, b, n) for m, k, a, b, n in histograms if m == code and k == N.K_RANK]
        s = summaries[name] = summarize_rates(cand, rank, top_k)
        conf = _confidence_summary(scored, code, n_conf_rows.get(code, 0), exact_conf.get(code), s.n, bound)
        results[name] = LinkageMethodResult(
            method=name, targets=targets_by_method[name], confidence=conf,
            status=s.status, success_rate=s.success_rate, baseline_random=s.baseline_random, lift=s.lift,
            top_k=s.top_k, max_risk=s.max_risk, n_true_missing=s.n_true_missing, truth_coverage=s.truth_coverage,
            n_zero_candidate=s.n_zero_candidate, n_certain=s.n_certain, n_at_risk=s.n_at_risk, n_records=s.n,
        )
    return results, summaries


def single_column(
    histograms: list[tuple[int, int, int, int, int]], targets: Sequence[str], n_synthetic: int
) -> tuple[dict[str, float] | None, str]:
    """Each target's success alone, and whether the check ran (or why not)."""
    p = len(targets)
    if 2 <= p <= SINGLE_COLUMN_LIMIT:
        success = {}
        for j, t in enumerate(targets):
            hits = [(b, n) for m, k, a, b, n in histograms if m == N.SINGLE0 + j and k == N.K_RANK and a == 0]
            success[t] = math.fsum(n / b for b, n in hits) / n_synthetic
        return success, "computed"
    if p < 2:
        return None, "skipped: a single target is its own best column"
    return None, f"skipped: more than {SINGLE_COLUMN_LIMIT} targets"


# --------------------------------------------------------------------------
# confidence / precision-recall
# --------------------------------------------------------------------------


def _collect_small_confidence(scored: DataFrame, n_conf_rows: dict[int, int]) -> dict[int, list[tuple[float, int, int]]]:
    """The confidence histograms short enough for an exact sweep, all methods in one job."""
    codes = [code for code, n in n_conf_rows.items() if 0 < n <= PR_EXACT_LIMIT]
    out: dict[int, list[tuple[float, int, int]]] = {code: [] for code in codes}
    if not codes:
        return out
    rows = scored.filter((F.col("kind") == N.K_CONF) & F.col("method").isin(codes)).select("method", "conf", "a", "n").collect()
    for r in rows:
        # pandas NaN reaches Spark as null: both mean "no candidate, no eccentricity".
        c = math.nan if r["conf"] is None else float(r["conf"])
        out[r["method"]].append((c, int(r["a"]), int(r["n"])))
    for data in out.values():
        data.sort(key=lambda x: (math.isnan(x[0]), x[0], x[1]))
    return out


@dataclass(frozen=True)
class _Sweep:
    """A precision-recall sweep with the counts of its scope."""

    n_scope: int
    n_nan: int
    n_inf: int
    rows: list[tuple[float, int, float, float, float]]
    exact: bool


def _confidence_summary(
    scored: DataFrame,
    code: int,
    n_rows: int,
    exact_data: list[tuple[float, int, int]] | None,
    n_records: int,
    bound: int,
) -> PrecisionRecallSummary:
    if n_rows == 0:
        return PrecisionRecallSummary(
            computed="none",
            reason=f"every block has more than {bound} candidate pairs (max_pairs_per_block_for_confidence); "
            "eccentricity needs every candidate score of a record",
            bound=bound, n_in_scope=0, n_single_candidate=0, n_no_candidate=0, exact=False, rows=(),
        )
    sweep = _exact_sweep(exact_data) if exact_data is not None else _sweep_at_quantiles(scored, code)
    computed = "all" if sweep.n_scope == n_records else "partial"
    return PrecisionRecallSummary(
        computed=computed,
        reason=None if computed == "all" else (
            f"records of blocks with more than {bound} candidate pairs are left out "
            f"({n_records - sweep.n_scope} of {n_records})"
        ),
        bound=bound,
        n_in_scope=sweep.n_scope,
        n_single_candidate=sweep.n_inf,
        n_no_candidate=sweep.n_nan,
        exact=sweep.exact,
        rows=tuple(sweep.rows),
    )


def _exact_sweep(data: list[tuple[float, int, int]]) -> _Sweep:
    """One row per distinct eccentricity, from the collected (conf, tie size, count) rows."""
    thresholds = sorted({c for c, _, _ in data if not math.isnan(c)}, reverse=True)
    n_scope = sum(n for _, _, n in data)
    n_nan = sum(n for c, _, n in data if math.isnan(c))
    n_inf = sum(n for c, _, n in data if c == math.inf)
    rows = []
    for t in thresholds:
        sel = [(m, n) for c, m, n in data if not math.isnan(c) and c >= t]
        rows.append(_pr_row(t, sel, n_scope))
    return _Sweep(n_scope, n_nan, n_inf, rows, exact=True)


def _sweep_at_quantiles(scored: DataFrame, code: int) -> _Sweep:
    """Rows at thresholds from approximate quantiles of the eccentricity (and its
    extremes), each exact for its threshold; nothing row-level is collected."""
    conf = scored.filter((F.col("method") == code) & (F.col("kind") == N.K_CONF)).select(
        F.col("conf"), F.col("a").alias("m"), "n"
    )
    undefined = F.col("conf").isNull() | F.isnan("conf")
    finite = ~undefined & (F.col("conf") != F.lit(float("inf")))
    head = conf.agg(
        F.sum("n").alias("scope"),
        F.sum(F.when(undefined, F.col("n"))).alias("nan"),
        F.sum(F.when(F.col("conf") == F.lit(float("inf")), F.col("n"))).alias("inf"),
        F.min(F.when(finite, F.col("conf"))).alias("lo"),
        F.max(F.when(finite, F.col("conf"))).alias("hi"),
        F.percentile_approx(F.when(finite, F.col("conf")), [1.0 - c for c in PR_COVERAGE_LEVELS], 10000).alias("q"),
    ).collect()[0]
    n_scope, n_nan, n_inf = int(head["scope"]), int(head["nan"] or 0), int(head["inf"] or 0)
    cands = {float(q) for q in (head["q"] or []) if q is not None}
    for edge in ("lo", "hi"):
        if head[edge] is not None:
            cands.add(float(head[edge]))
    if n_inf:
        cands.add(math.inf)
    thresholds = sorted(cands, reverse=True)
    counts = (
        conf.groupBy("m")
        .agg(*[
            F.sum(F.when(~undefined & (F.col("conf") >= F.lit(t)), F.col("n"))).alias(f"t{i}")
            for i, t in enumerate(thresholds)
        ])
        .collect()
    )
    rows = []
    for i, t in enumerate(thresholds):
        sel = [(int(r["m"]), int(r[f"t{i}"] or 0)) for r in counts]
        rows.append(_pr_row(t, sel, n_scope))
    return _Sweep(n_scope, n_nan, n_inf, rows, exact=False)


def _pr_row(threshold: float, selected: list[tuple[int, int]], n_scope: int) -> tuple[float, int, float, float, float]:
    n_att = sum(n for _, n in selected)
    hits = math.fsum(n / m for m, n in selected if m > 0)
    return (
        threshold,
        n_att,
        n_att / n_scope if n_scope else 0.0,
        hits / n_att if n_att else 0.0,
        hits / n_scope if n_scope else 0.0,
    )


# --------------------------------------------------------------------------
# true pairs and warnings
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class TruePairs:
    """Synthetic records whose row key occurs among the originals, and those whose true
    original is among their candidates."""

    n: int
    kept: int


def true_pairs_of(
    result: LinkageMethodResult, n_synthetic: int, hint: int | None, join: Callable[[], tuple[int, int]]
) -> TruePairs:
    """Scoring found the records whose true original is among their candidates; only
    when some are not does it need the number of true pairs, to tell "blocked away"
    from "no original with this key": ``hint`` if given, else ``join()`` (a join on
    the key, which also cross-checks the scoring)."""
    kept = result.n_records - result.n_true_missing
    if not result.n_true_missing:
        return TruePairs(kept, kept)
    if hint is not None:
        if not kept <= hint <= n_synthetic:
            raise ValueError(
                f"n_paired_where={hint} (the true pairs) cannot be right: scoring found {kept} true "
                f"pair(s) among the candidates of {n_synthetic} synthetic records"
            )
        return TruePairs(hint, kept)
    n_true, joined_kept = join()
    if joined_kept != kept:  # pragma: no cover - a plumbing bug, never user input
        raise AssertionError("scoring and the key join disagree on the true pairs kept by blocking")
    return TruePairs(n_true, kept)


def interpretation_warnings(
    results: dict[str, LinkageMethodResult],
    pairs: TruePairs,
    n_synthetic: int,
    blocking: Sequence[str],
    single_success: dict[str, float] | None,
) -> list[str]:
    """Warnings about what the numbers mean: not measurable, a lower bound, a method
    below the other or below a single column."""
    warnings = _truth_warnings(next(iter(results.values())), pairs, n_synthetic, blocking)
    if "mahalanobis" in results and "weighted" in results:
        mr, wr = results["mahalanobis"], results["weighted"]
        if mr.status == "ok" and mr.success_rate < wr.success_rate and not _close(mr.success_rate, wr.success_rate):
            warnings.append(
                f"linkage: the Mahalanobis success rate ({mr.success_rate:.4f}) is below the weighted "
                f"one ({wr.success_rate:.4f}); the headline reports the weighted figure. Whitening "
                "loses when the release's perturbation does not follow the population covariance"
            )
    if single_success:
        best_col = max(single_success, key=lambda c: single_success[c])
        best = single_success[best_col]
        for name, r in results.items():
            if r.status == "ok" and r.success_rate < best and not _close(r.success_rate, best):
                warnings.append(
                    f"linkage: the {name} combination of the targets measures LESS risk "
                    f"({r.success_rate:.4f}) than column '{best_col}' alone ({best:.4f}); the "
                    "combination under-reports: do not quote it without the single-column figure "
                    "(uninformative columns dilute the distance"
                    + (", or whitening amplifies the noise" if name == "mahalanobis" else "")
                    + ")"
                )
    return warnings


def _truth_warnings(
    any_result: LinkageMethodResult, pairs: TruePairs, n_s: int, blocking: Sequence[str]
) -> list[str]:
    if any_result.n_true_missing == any_result.n_records:
        return [(
            f"linkage: NOT MEASURABLE: none of the {any_result.n_records} synthetic records has its "
            "true original among its candidates, so every rate is 0 by construction; this is the "
            "absence of a measurement, not evidence of safety. Check the row key and the blocking "
            "columns"
        )]
    if not any_result.n_true_missing:
        return []
    lost_by_blocking = pairs.n - pairs.kept
    without_original = n_s - pairs.n
    parts = []
    if lost_by_blocking:
        recall = pairs.kept / pairs.n
        parts.append(
            f"blocking on {', '.join(repr(b) for b in blocking)} discarded {lost_by_blocking} of "
            f"{pairs.n} true pair(s) (recall {recall:.4f})"
        )
    if without_original:
        parts.append(f"{without_original} have no original with the same row key")
    return [(
        f"linkage: {any_result.n_true_missing} of {n_s} synthetic records do not have their true "
        f"original among their candidates ({'; '.join(parts)}); truth coverage "
        f"{any_result.truth_coverage:.4f}: every success rate is a LOWER bound"
    )]


def _close(a: float, b: float) -> bool:
    return abs(a - b) <= 1e-12 * max(1.0, abs(a), abs(b))
