"""Numeric kernel of the linkage attack, one block at a time: numpy and scipy only, no
Spark. This is what the Spark workers import.

The driver (:mod:`privacy_eval.linkage`) computes the covariance moments of each side
with native Spark aggregates and turns them into a :class:`Whitening` here; the
workers then receive each (block, sub-block) of the candidate table from one
``mapInArrow`` pass and score it with :func:`evaluate_block_bruteforce` (small blocks:
every pair, eccentricity included) or :func:`evaluate_block_kdtree` (exact counts
without scoring every pair), and every target alone with :func:`evaluate_column_best`.
The per-record results are reduced to histograms on the worker; the rates are computed
on the driver from those histograms (:mod:`privacy_eval.linkage.rates`), with
:func:`top_k_probability` and :func:`blocking_recall` from here.

Semantics (docs/metrics.md, Linkage attack):

* every score is a *distance* (smaller = better); ties are decided after per-record
  single-linkage snapping with relative tolerance ``tol`` (tie snapping);
* per record: ``N_BETTER = #(snapped < snapped true)``,
  ``TRUE_TIE_SIZE = #(snapped == snapped true)``,
  ``RISK = 1/TRUE_TIE_SIZE`` if ``N_BETTER == 0`` else 0 (per-record reduction and risk).

Sentinels in per-record integer arrays: ``-1`` means "not applicable" (the true
original is not among the record's candidates) or, for ``true_tie_size`` of a record
whose ``n_better`` is capped, "not computed".

Distances are Euclidean / L1 distances of whitened / rescaled coordinates rather than
the reference's explicit quadratic form (equal to within rounding).

Sections: (a) :mod:`.whitening`; distances, snapping and (c) the dense reduction:
:mod:`.distances`; (b) per-block evaluation: :mod:`.blocks` (every pair) and
:mod:`.kdtree`; (d) :mod:`.risk`; (e) :mod:`.weighted`.
"""

from privacy_eval.linkage.kernel.blocks import (
    BlockResult,
    BruteForceResult,
    evaluate_block_bruteforce,
    truth_index,
)
from privacy_eval.linkage.kernel.distances import (
    DEFAULT_TOL,
    RecordReduction,
    reduce_value_matrix,
)
from privacy_eval.linkage.kernel.kdtree import (
    evaluate_block_kdtree,
    evaluate_column_best,
)
from privacy_eval.linkage.kernel.risk import (
    blocking_recall,
    risk_from_counts,
    top_k_probability,
)
from privacy_eval.linkage.kernel.weighted import (
    max_abs_diff,
    min_abs_diff_sorted,
    weighted_scaling,
)
from privacy_eval.linkage.kernel.whitening import (
    CONDITION_LIMIT,
    Moments,
    Whitening,
    whitening_from_covariance,
)

__all__ = [
    "CONDITION_LIMIT",
    "DEFAULT_TOL",
    "BlockResult",
    "BruteForceResult",
    "Moments",
    "RecordReduction",
    "Whitening",
    "blocking_recall",
    "evaluate_block_bruteforce",
    "evaluate_block_kdtree",
    "evaluate_column_best",
    "max_abs_diff",
    "min_abs_diff_sorted",
    "reduce_value_matrix",
    "risk_from_counts",
    "top_k_probability",
    "truth_index",
    "weighted_scaling",
    "whitening_from_covariance",
]
