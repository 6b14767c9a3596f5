"""The linkage attack: prepare -> whiten -> block -> score -> evaluate.

For every synthetic record the candidates are the originals that agree with it on the
blocking columns (exact, null-safe; no blocking = every original). Each candidate is
scored by the Mahalanobis distance over the numeric targets and, for comparison, by the
range-normalised weighted sum of per-column absolute differences. The record's RISK is
1/(size of the tie group at the best score) when its true original (same row key) is
in that group, else 0; the success rate is the mean RISK over all synthetic records.
The definitions are in docs/metrics.md, Linkage attack (tie snapping, per-record
reduction and risk, rates and baselines, top-k, eccentricity and precision-recall,
truth coverage and "not measurable").

How it runs (one distributed pass per step, nothing row-level reaches the driver):

1. Schema checks (targets, blocking columns, ridge, top-k) without touching data.
2. One native aggregation over both sides (or the figures ``prepare_inputs`` computed
   in its profile pass, ``inputs.pass_figures``): null/NaN/inf counts per target and the
   minima and maxima of the complete records. From them: the incomplete-record check
   (or the drop counts), the record counts and the constant columns. With the
   Mahalanobis method, one more aggregation per side ``cov_from`` names (raw / anon /
   pooled) gives the :class:`~privacy_eval.linkage.kernel.Moments` for the covariance
   S, from exact sums (:func:`~privacy_eval.linkage.prepare.covariance_moments`: the
   same under any partitioning; only p x p numbers are collected).
3. Whitening W (W Wᵀ = S⁻¹, ridge ``ridge * mean(diag S)``) on the driver; W reaches
   the executors by closure.
4. Both sides stacked, shuffled once by a 64-bit hash of the blocking values (the
   block id) and sorted by it, so that each block's rows are adjacent; ``mapInArrow``
   streams the rows, splits each block into its originals and synthetic records and
   calls a per-block function on one block at a time (:func:`~privacy_eval.linkage.scoring.map_blocks`). This
   unsplit pass over the blocks is the weighted method's ranges (step 6) when that
   method is asked for, else the scoring itself (step 7). It also counts each block:
   the block figures (candidate pairs, blocks, largest block) come from one meta row
   per block, aggregated by Spark; no separate pass over the data measures the blocks.
   A second hash of the blocking values travels along: an id whose rows carry two of
   them belongs to two blocks, and the unsplit pass is made again with another seed.
5. A block with more than ``split_rows`` synthetic records is not scored in the
   unsplit pass (its rows are counted, not buffered). When there are such blocks, one grouped
   pass finds them (a small DataFrame that is broadcast-joined, never collected) and a
   second pass over them alone splits each on the synthetic side into
   ``ceil(n_syn / split_rows)`` sub-blocks by ``pmod(xxhash64(key), n_splits)``; its
   originals are replicated once per sub-block. Every synthetic record still sees all
   originals of its block, so results do not depend on the split; a task holds one
   block's originals plus about ``split_rows`` synthetic records (the kd-tree path
   processes those in chunks).
6. Weighted method only: per block the smallest and largest |x - y| of each column over
   the candidate pairs (``min_abs_diff_sorted``, ``max_abs_diff``), reduced by Spark
   ``min``/``max``; ``weighted_scaling`` turns them into per-column multipliers and the
   offset used for snapping.
7. The scoring pass. Per (block, sub-block): blocks whose
   whole ``n_orig * n_syn`` is at most ``max_pairs_per_block_for_confidence`` are scored
   pair by pair (``evaluate_block_bruteforce``: also eccentricity), larger ones by the
   kd-tree (``evaluate_block_kdtree``, exact N_BETTER / TRUE_TIE_SIZE with
   ``max_k = max(top_k)``). The same pass scores every target on its own (|x - y|, the
   reference's single-axis score) when there are 2 to 10 targets. The UDF emits
   histograms, not records: counts by (n_candidates, truth present), by
   (N_BETTER < max_k, TRUE_TIE_SIZE) and by (eccentricity, tie size of a hit); Spark sums
   them by key, the driver gets a few hundred rows and computes every rate with
   ``math.fsum`` over integer counts, so the numbers are identical whatever the
   partitioning or splitting. When some synthetic records miss their true original,
   the number of true pairs tells "blocked away" from "no original with this key"
   (blocking recall): ``inputs.pass_figures.n_paired_where`` when the inputs were
   prepared for this configuration (the job's key check counts it, see
   :func:`~privacy_eval.linkage.prepare.input_pass_work`), else one join on the row
   key, which also cross-checks the scoring pass.
8. The precision-recall sweep is exact (one row per distinct eccentricity) when
   there are at most ``PR_EXACT_LIMIT`` distinct values, else it is reported at
   thresholds taken from approximate quantiles of the eccentricity, each row exact for
   its threshold.

Deliberate deviations from the reference, on purpose:

* **S comes from the whole population** of the chosen side (each row key once, after
  ``drop_incomplete``), not from the records present in a blocked candidate table as in
  the reference: the attacker whitens with the population they hold,
  and the figure does not change with the blocking. ``condition_number`` is that of
  this S plus the ridge.
* The denominator of every rate is every synthetic record evaluated, including records
  with no candidate at all (their block has no original): the reference's score table
  cannot contain those records.
* A ±infinite target value is refused like a null or NaN (it has no finite distance).
* The weighted method uses every target; a column whose |x - y| has zero range over
  the candidate pairs gets weight 0 (the reference normalises a constant score to 0).
  Only the Mahalanobis method drops the columns that are constant on the covariance side.
* The single-column comparison uses |x - y| of each target alone (the reference's
  screening singles, ``score_num``), for 2 to 10 targets; above 10 it is skipped and said so.
* Eccentricity and the precision-recall summary cover only the synthetic records of
  blocks small enough to score every pair; when that is not every record the summary's
  denominators are those records (``scope``), reported with their count.
* Only the analytic (RNG-free) rate is computed: no simulated seeds, no mode baseline.

Messages and results hold counts, rates and column names only, never a record value.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from privacy_eval.columns import KEY
from privacy_eval.config import LinkageConfig
from privacy_eval.linkage import blocking
from privacy_eval.linkage.attack_result import LinkageMethodResult, LinkageResult
from privacy_eval.linkage.covariance import Whitened, whiten
from privacy_eval.linkage.kernel.risk import blocking_recall
from privacy_eval.linkage.prepare import (
    AttackPlan,
    PreparedSides,
    checked_plan,
    covariance_moments,
    prepare_sides,
)
from privacy_eval.linkage.rates import (
    SINGLE_COLUMN_LIMIT,
    TruePairs,
    interpretation_warnings,
    method_results,
    single_column,
    true_pairs_of,
)
from privacy_eval.linkage.scoring import Scored, ScoringSetup, score_blocks

if TYPE_CHECKING:
    from privacy_eval.inputs import EvaluationInputs

__all__ = ["linkage_attack"]


@dataclass(frozen=True)
class _Hints:
    """What the input passes counted for this configuration: the true pairs and the
    per-side statistics (None: the attack computes them)."""

    true_pairs: int | None
    side_aggregates: Mapping[str, Mapping[str, Any]] | None


def linkage_attack(
    inputs: EvaluationInputs,
    config: LinkageConfig,
    *,
    max_pairs_per_block_for_confidence: int = 1_000_000,
    split_rows: int = 50_000,
) -> LinkageResult:
    """Run the linkage attack of ``config`` on prepared inputs.

    ``inputs.original`` and ``inputs.synthetic`` hold the row key (unique, non-null, one
    type on both sides) and the compared columns (types reconciled). When the inputs
    were prepared for this configuration (``prepare_inputs(...,
    work=prepare.input_pass_work(config))``, as the job prepares them), their key
    check's count of true pairs spares the attack a join on the key, and their per-side
    statistics its pass for the null counts and moments. Raises :class:`InputError` for
    anything the user must fix; the message names the column.
    """
    plan = checked_plan(inputs, config)
    hints = _hints(inputs, config)
    bound = _checked_arguments(split_rows, hints.true_pairs, max_pairs_per_block_for_confidence)
    sides = prepare_sides(inputs.original, inputs.synthetic, KEY, plan, config, hints.side_aggregates)
    moments = covariance_moments(sides, plan.target_columns, config.cov_from) if "mahalanobis" in plan.methods else None
    whitened = whiten(moments, config, plan.targets, plan.methods)
    setup = ScoringSetup(
        methods=plan.methods, whitening=whitened.whitening, targets=tuple(plan.targets), tcols=plan.target_columns,
        bcols=plan.blocking_columns, integral_key=sides.integral_key, squared=config.squared,
        tol=float(config.tolerance), max_k=max(plan.top_k), bound=bound,
        singles=2 <= len(plan.targets) <= SINGLE_COLUMN_LIMIT, split_rows=split_rows,
    )
    persisted: list[Any] = []
    try:
        scored = score_blocks(sides.original, sides.synthetic, setup, persisted)
        results = _method_results(scored, plan, whitened, sides, bound)
        pairs = true_pairs_of(
            next(iter(results.values())), sides.n_synthetic, hints.true_pairs,
            lambda: blocking.true_pairs(scored.original, scored.synthetic),
        )
        single_success, single_check = single_column(scored.histograms, plan.targets, sides.n_synthetic)
    finally:
        for frame in persisted:
            frame.unpersist()
    warnings = [
        *sides.warnings,
        *whitened.warnings,
        *interpretation_warnings(results, pairs, sides.n_synthetic, plan.blocking, single_success),
    ]
    return _result(config, plan, sides, whitened, scored, results, pairs, single_success, single_check, warnings, split_rows)


def _hints(inputs: EvaluationInputs, config: LinkageConfig) -> _Hints:
    figures = inputs.pass_figures
    if figures is None or figures.made_for != config:
        return _Hints(None, None)
    return _Hints(figures.n_paired_where, figures.side_aggregates)


def _checked_arguments(split_rows: int, hinted_true_pairs: int | None, max_pairs_per_block_for_confidence: int) -> int:
    if isinstance(split_rows, bool) or not isinstance(split_rows, int) or split_rows < 1:
        raise ValueError("split_rows must be a positive integer")
    t = hinted_true_pairs
    if t is not None and (isinstance(t, bool) or not isinstance(t, int) or t < 0):
        raise ValueError("n_paired_where (the true pairs) must be a non-negative integer or None")
    bound = int(max_pairs_per_block_for_confidence)
    if bound < 0:
        raise ValueError("max_pairs_per_block_for_confidence must not be negative")
    return bound


def _method_results(
    scored: Scored, plan: AttackPlan, whitened: Whitened, sides: PreparedSides, bound: int
) -> dict[str, LinkageMethodResult]:
    kept = tuple(t for t in plan.targets if t not in whitened.dropped_constant)
    results, summaries = method_results(
        scored.frame, scored.histograms, scored.n_confidence_rows, plan.methods, plan.top_k,
        {"mahalanobis": kept, "weighted": plan.targets}, bound,
    )
    for summary in summaries.values():
        if summary.n != sides.n_synthetic:  # pragma: no cover - a plumbing bug, never user input
            raise AssertionError(f"scoring saw {summary.n} synthetic records, expected {sides.n_synthetic}")
        if summary.n_pairs != scored.figures.pairs:  # pragma: no cover
            raise AssertionError("the scoring and the block figures disagree on the number of candidate pairs")
    return results


def _result(
    config: LinkageConfig,
    plan: AttackPlan,
    sides: PreparedSides,
    whitened: Whitened,
    scored: Scored,
    results: dict[str, LinkageMethodResult],
    pairs: TruePairs,
    single_success: dict[str, float] | None,
    single_check: str,
    warnings: list[str],
    split_rows: int,
) -> LinkageResult:
    n_o, n_s = sides.n_original, sides.n_synthetic
    n_full = n_o * n_s
    figures, w = scored.figures, whitened.whitening
    return LinkageResult(
        methods=results,
        n_original=n_o,
        n_synthetic=n_s,
        dropped_incomplete_original=sides.stats[0].n_incomplete,
        dropped_incomplete_synthetic=sides.stats[1].n_incomplete,
        targets=plan.targets,
        targets_mahalanobis=(
            tuple(t for t in plan.targets if t not in whitened.dropped_constant) if w is not None else ()
        ),
        targets_dropped_constant=whitened.dropped_constant,
        cov_from=config.cov_from,
        ridge=float(config.ridge),
        ridge_added=float(w.ridge_added[0]) if w is not None else None,
        condition_number=w.condition_number if w is not None else None,
        condition_number_correlation=w.condition_number_correlation if w is not None else None,
        squared=bool(config.squared),
        tolerance=float(config.tolerance),
        blocking=tuple(plan.blocking),
        n_blocks=figures.blocks,
        n_blocks_with_candidates=figures.with_candidates,
        largest_block_pairs=figures.largest_pairs,
        largest_block_original=figures.largest_original,
        largest_block_synthetic=figures.largest_synthetic,
        n_split_blocks=figures.big,
        split_rows=split_rows,
        n_candidate_pairs=figures.pairs,
        candidate_share=figures.pairs / n_full if n_full else 0.0,
        n_true_pairs=pairs.n,
        n_true_pairs_kept=pairs.kept,
        blocking_recall=blocking_recall(pairs.n, pairs.kept),
        single_column_success=single_success,
        single_column_check=single_check,
        warnings=warnings,
    )
