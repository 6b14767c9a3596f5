"""Tests of the numpy/scipy linkage kernel against small hand-checkable fixtures, with
the figures the R package ``reidentify`` gives for them (docs/metrics.md, Linkage
attack); each test's docstring says what its fixture is. Figures given with fewer than
ten significant digits are checked to half a unit of their last digit; all others to
1e-9 or better. The kd-tree path's randomized checks are in test_linkage_kdtree.py.
"""

from __future__ import annotations

import math
from decimal import Decimal

import numpy as np
import pytest

from privacy_eval.linkage import kernel as lk
from tests.support import linkage_oracle as oracle
from tests.support.linkage_oracle import TOL, summary_of
from tests.support.paths import DATA

# --------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------


def assert_printed(actual, printed: str) -> None:
    """Equal to a figure given to so many digits, to half a unit of its last digit."""
    exp = Decimal(printed).as_tuple().exponent
    tol = 0.5 * 10.0**exp + 1e-15 * abs(float(printed))
    assert abs(float(actual) - float(printed)) <= tol, (actual, printed)


def close(actual, expected, tol=1e-12) -> None:
    np.testing.assert_allclose(np.asarray(actual, dtype=float), np.asarray(expected, dtype=float), rtol=0, atol=tol)


def num_block(raw_v, anon_v, raw_ids=None, anon_ids=None, *, max_k=10, confidence="margin"):
    """score_num on one column = L1 distance on one coordinate; run both block paths."""
    raw_v = np.asarray(raw_v, dtype=float)
    anon_v = np.asarray(anon_v, dtype=float)
    raw_ids = np.arange(1, raw_v.size + 1) if raw_ids is None else np.asarray(raw_ids)
    anon_ids = np.arange(1, anon_v.size + 1) if anon_ids is None else np.asarray(anon_ids)
    args = (raw_ids, raw_v[:, None], anon_ids, anon_v[:, None])
    bf = lk.evaluate_block_bruteforce(*args, p=1, confidence=confidence)
    kd = lk.evaluate_block_kdtree(*args, p=1, max_k=max_k)
    np.testing.assert_array_equal(kd.n_better, bf.n_better)
    np.testing.assert_array_equal(kd.true_tie_size, bf.true_tie_size)
    return bf, kd


# --------------------------------------------------------------------------
# one-column fixtures (the reference's score_num): snapping, eccentricity, rates, baselines
# --------------------------------------------------------------------------


def test_tie_snapping_examples():
    """Single-linkage snapping with relative tolerance tol (docs/metrics.md, Tie snapping)."""
    np.testing.assert_array_equal(oracle.snap_tied_values([1, 1 + 1e-7, 1 + 2e-7, 5]), [1, 1 + 1e-7, 1 + 2e-7, 5])
    np.testing.assert_array_equal(oracle.snap_tied_values([1, 1 + 1e-12, 5]), [1, 1, 5])
    np.testing.assert_array_equal(oracle.snap_tied_values([1, np.inf, np.inf, 2]), [1, np.inf, np.inf, 2])
    # single linkage: a chain of sub-tolerance steps fuses to its minimum, in any input order
    chain = [2 + 0.9 * TOL * 2 * i for i in range(6)]
    np.testing.assert_array_equal(oracle.snap_tied_values(chain[::-1]), [2.0] * 6)
    # below 1 the tolerance is absolute
    np.testing.assert_array_equal(oracle.snap_tied_values([0.0, 0.9 * TOL, 3.0]), [0.0, 0.0, 3.0])
    np.testing.assert_array_equal(oracle.snap_tied_values([0.0, 1.1 * TOL]), [0.0, 1.1 * TOL])
    # the boundary itself joins (<=): a gap of exactly tol * max(1, |a|, |b|)
    np.testing.assert_array_equal(oracle.snap_tied_values([0.0, TOL, 2.0]), [0.0, 0.0, 2.0])
    # tol = 0 keeps values; NaN never joins
    np.testing.assert_array_equal(oracle.snap_tied_values([1, 1 + 1e-12], tol=0), [1, 1 + 1e-12])
    out = oracle.snap_tied_values([np.nan, 1.0, 1.0 + 1e-12])
    assert np.isnan(out[0]) and out[1] == out[2] == 1.0
    with pytest.raises(ValueError):
        oracle.snap_tied_values([1.0, 2.0], tol=-1)
    with pytest.raises(ValueError):
        oracle.snap_tied_values([1.0, 2.0], tol=np.inf)


@pytest.mark.parametrize(
    "scores, best, second, margin, sd, ecc, tie",
    [
        ([1, 4, 6, 9], 1, 4, 3, "3.366501646", "0.8911327887", 1),
        ([2, 2, 20], 2, 2, 0, None, "0", 2),
        ([5, 5, 5], 5, 5, 0, "0", "0", 3),
        ([2, 8], 2, 8, 6, None, "1.414213562", 1),
        ([4, 4], 4, 4, 0, None, "0", 2),
    ],
)
def test_eccentricity_by_hand(scores, best, second, margin, sd, ecc, tie):
    """One synthetic record's candidate scores: best, second, margin, their sd and the
    eccentricity margin / sd, worked out by hand."""
    red = lk.reduce_value_matrix(np.array([scores], dtype=float), np.array([-1]))
    assert red.best_score[0] == best and red.second_score[0] == second and red.margin[0] == margin
    assert red.best_tie_size[0] == tie
    if sd is not None:
        assert_printed(red.sd_score[0], sd)
    assert_printed(red.eccentricity[0], ecc)
    tie_conf = lk.reduce_value_matrix(np.array([scores], dtype=float), np.array([-1]), confidence="tie")
    assert tie_conf.confidence[0] == pytest.approx(1 / tie, abs=1e-15)


def test_eccentricity_of_a_single_candidate():
    red = lk.reduce_value_matrix(np.array([[3.0]]), np.array([0]), confidence="tie")
    assert red.n_candidates[0] == 1 and np.isnan(red.second_score[0])
    assert red.margin[0] == 0 and red.sd_score[0] == 0 and red.eccentricity[0] == np.inf
    assert red.confidence[0] == 1.0
    assert lk.reduce_value_matrix(np.array([[3.0]]), np.array([0])).confidence[0] == np.inf


def test_three_unique_three_tied():
    """V = 10, 20, 30, 40, 40, 40, synthetic = original: three records found alone, three
    tied in a group of three. Rates, top-k, margin confidence, precision-recall, the
    tie confidence and the per-record reduction, and the mode baseline."""
    v = [10, 20, 30, 40, 40, 40]
    bf, kd = num_block(v, v)
    close(bf.risk, [1, 1, 1, 1 / 3, 1 / 3, 1 / 3])
    close(kd.risk, [1, 1, 1, 1 / 3, 1 / 3, 1 / 3])
    np.testing.assert_array_equal(bf.n_better + 1, [1] * 6)  # TRUE_RANK
    np.testing.assert_array_equal(bf.true_tie_size, [1, 1, 1, 3, 3, 3])
    s = summary_of(kd, top_k=(1, 2, 3, 6))
    assert_printed(s.success_analytic, "0.6666666667")
    close(s.success_analytic, 4 / 6)
    close(s.baseline_random, 1 / 6)
    close(s.lift, 4)
    assert s.max_risk == 1
    assert list(s.top_k) == [1, 2, 3, 6]
    close(list(s.top_k.values()), [4 / 6, 5 / 6, 1, 1])
    # margin confidence
    for got, want in zip(bf.sd_score, ["12.649110641", "8.164965809", "6.324555320"] + ["12.649110641"] * 3):
        assert_printed(got, want)
    close(bf.margin, [10, 10, 10, 0, 0, 0])
    for got, want in zip(bf.eccentricity, ["0.790569415", "1.224744871", "1.581138830", "0", "0", "0"]):
        assert_printed(got, want)
    pr = oracle.precision_recall(bf.confidence, bf.risk)
    for got, want in zip(pr["threshold"], ["1.5811388", "1.2247449", "0.7905694", "0"]):
        assert_printed(got, want)
    np.testing.assert_array_equal(pr["n_attacked"], [1, 2, 3, 6])
    close(pr["precision"], [1, 1, 1, 4 / 6])
    close(pr["recall"], [1 / 6, 2 / 6, 3 / 6, 4 / 6])
    # tie confidence: 2 rows
    bft = lk.evaluate_block_bruteforce(np.arange(1, 7), np.array(v, float)[:, None], np.arange(1, 7),
                                       np.array(v, float)[:, None], p=1, confidence="tie")
    pr = oracle.precision_recall(bft.confidence, bft.risk)
    close(pr["threshold"], [1.0, 1 / 3])
    np.testing.assert_array_equal(pr["n_attacked"], [3, 6])
    close(pr["coverage"], [0.5, 1.0])
    close(pr["precision"], [1.0, 4 / 6])
    close(pr["recall"], [0.5, 4 / 6])
    # per-record reduction (tie measure)
    np.testing.assert_array_equal(bft.best_tie_size, [1, 1, 1, 3, 3, 3])
    close(bft.confidence, [1, 1, 1, 1 / 3, 1 / 3, 1 / 3])
    close(bft.true_score, [0] * 6)
    np.testing.assert_array_equal(bft.n_better, [0] * 6)
    # mode baseline on the explicit table
    ids = np.arange(1, 7)
    a, r = np.repeat(ids, 6), np.tile(ids, 6)
    sc = np.abs(np.array(v, float)[r - 1] - np.array(v, float)[a - 1])
    close(oracle.mode_baseline_from_pairs(a, r, sc), 1 / 6)


def test_every_record_tied_with_one_other():
    """V = 1, 1, 2, 2, 3, 3, synthetic = original: every record tied with one other."""
    v = [1, 1, 2, 2, 3, 3]
    bf, kd = num_block(v, v)
    close(kd.risk, [0.5] * 6)
    np.testing.assert_array_equal(kd.true_tie_size, [2] * 6)
    s = summary_of(kd, top_k=range(1, 7))
    close([s.success_analytic, s.baseline_random, s.lift, s.max_risk], [0.5, 1 / 6, 3, 0.5])
    close(list(s.top_k.values()), [0.5, 1, 1, 1, 1, 1])
    close(bf.confidence, [0] * 6)
    pr = oracle.precision_recall(bf.confidence, bf.risk)
    assert pr["threshold"].tolist() == [0.0] and pr["n_attacked"].tolist() == [6]
    close([pr["coverage"][0], pr["precision"][0], pr["recall"][0]], [1, 0.5, 0.5])
    bft = lk.evaluate_block_bruteforce(np.arange(1, 7), np.array(v, float)[:, None], np.arange(1, 7),
                                       np.array(v, float)[:, None], p=1, confidence="tie")
    close(bft.confidence, [0.5] * 6)
    for got, want in zip(bf.sd_score, ["0.8944271910", "0.8944271910", "0.5163977795", "0.5163977795",
                                       "0.8944271910", "0.8944271910"]):
        assert_printed(got, want)
    ids = np.arange(1, 7)
    a, r = np.repeat(ids, 6), np.tile(ids, 6)
    sc = np.abs(np.array(v, float)[r - 1] - np.array(v, float)[a - 1])
    close(oracle.mode_baseline_from_pairs(a, r, sc), 1 / 6)


def test_every_record_unique():
    """V = 10, 20, 30, 40, 50, synthetic = original: every record found alone."""
    v = [10, 20, 30, 40, 50]
    bf, kd = num_block(v, v)
    s = summary_of(kd, top_k=(1, 5, 10))
    close([s.success_analytic, s.baseline_random, s.lift], [1, 0.2, 5])
    assert s.top_k == {1: 1.0, 5: 1.0}  # 10 > max N_CANDIDATES is dropped
    for got, want in zip(bf.eccentricity, ["0.6324555320", "0.8770580193", "1.1952286093", "0.8770580193",
                                           "0.6324555320"]):
        assert_printed(got, want)
    for got, want in zip(bf.sd_score[:3], ["15.8113883", "11.4017543", "8.3666003"]):
        assert_printed(got, want)
    pr = oracle.precision_recall(bf.confidence, bf.risk)
    for got, want in zip(pr["threshold"], ["1.1952286", "0.8770580", "0.6324555"]):
        assert_printed(got, want)
    np.testing.assert_array_equal(pr["n_attacked"], [1, 3, 5])
    ids = np.arange(1, 6)
    a, r = np.repeat(ids, 5), np.tile(ids, 5)
    close(oracle.mode_baseline_from_pairs(a, r, np.abs(np.array(v, float)[r - 1] - np.array(v, float)[a - 1])), 0.2)


def test_one_record_outranked():
    """Original V = 10, 20, 30, 40, synthetic 10, 20, 30, 21: the last synthetic record's
    true original ranks fourth, counted by hand."""
    bf, kd = num_block([10, 20, 30, 40], [10, 20, 30, 21])
    assert kd.n_better[3] + 1 == 4 and kd.risk[3] == 0
    close(summary_of(kd).success_analytic, 0.75)
    for got, want in zip(bf.eccentricity, ["0.7745966692", "1.2247448714", "1.2247448714", "1.0820035616"]):
        assert_printed(got, want)
    assert bf.margin[3] == 8
    pr = oracle.precision_recall(bf.confidence, bf.risk)
    for t, want in zip(pr["threshold"], ["1.2247449", "1.0820036", "0.7745967"]):
        assert_printed(t, want)
    np.testing.assert_array_equal(pr["n_attacked"], [2, 3, 4])
    for got, want in zip(pr["precision"], ["1.0", "0.6667", "0.75"]):
        assert_printed(got, want)
    close(pr["recall"], [0.5, 0.5, 0.75])


def test_synthetic_records_without_an_original():
    """Originals 10..40, synthetic 10..60: two synthetic records have no original."""
    bf, kd = num_block([10, 20, 30, 40], [10, 20, 30, 40, 50, 60])
    close(kd.risk, [1, 1, 1, 1, 0, 0])
    assert kd.has_true.tolist() == [True] * 4 + [False] * 2
    assert kd.n_better[4:].tolist() == [-1, -1]  # TRUE_RANK NA
    s = summary_of(kd, n_raw=4)
    close([s.success_analytic, s.baseline_random], [4 / 6, 1 / 6])
    assert s.n_true_missing == 2
    close([s.truth_coverage, s.candidate_coverage], [2 / 3, 1])
    assert s.blocked is True and s.truth_measurable


def _pairs_summary(red):
    return oracle.summarize_linkage(red.n_candidates, red.n_better, red.true_tie_size)


def test_mode_baseline_picks_the_original_best_most_often():
    """A pair table where original 1 scores best for three synthetic records."""
    raw = np.array([1, 99, 1, 99, 1, 99, 1, 99])
    anon = np.array([1, 1, 2, 2, 3, 3, 4, 4])
    sc = np.array([0, 5, 0, 5, 0, 5, 5, 0], float)
    ids, red = oracle.reduce_score_pairs(anon, raw, sc)
    s = _pairs_summary(red)
    close(oracle.mode_baseline_from_pairs(anon, raw, sc), 0.25)
    close([s.baseline_random, s.success_analytic, s.lift], [0.125, 0.25, 2])
    assert s.n_true_missing == 3


def test_mode_baseline_zero_and_score_orientation():
    raw = np.array([9, 1, 9, 2, 9, 3])
    anon = np.array([1, 1, 2, 2, 3, 3])
    ids, red = oracle.reduce_score_pairs(anon, raw, np.array([0, 5, 0, 5, 0, 5], float))
    assert oracle.mode_baseline_from_pairs(anon, raw, np.array([0, 5, 0, 5, 0, 5], float)) == 0
    close(_pairs_summary(red).baseline_random, 0.5)
    sim = np.array([100, 1, 100, 1, 100, 1], float)
    assert oracle.mode_baseline_from_pairs(anon, raw, sim, score_type="similarity") == 0
    close(oracle.mode_baseline_from_pairs(anon, raw, sim, score_type="distance"), 1 / 3)
    with pytest.raises(ValueError, match="score_type"):
        oracle.reduce_score_pairs(anon, raw, sim, score_type="cosine")


def test_random_baseline_with_missing_truth():
    raw = np.array([2, 3, 2, 3, 3, 4])
    anon = np.array([1, 1, 2, 2, 3, 3])
    sc = np.array([1, 2, 1, 2, 1, 2], float)
    ids, red = oracle.reduce_score_pairs(anon, raw, sc)
    s = oracle.summarize_linkage(red.n_candidates, red.n_better, red.true_tie_size, n_raw=3)
    close([s.baseline_random, s.success_analytic, s.candidate_coverage], [1 / 3, 2 / 3, 6 / 9])
    assert s.n_true_missing == 1 and s.blocked is True
    order = np.lexsort((ids, -red.risk))
    assert ids[order].tolist() == [2, 3, 1]


def test_constant_score():
    """Eight identical records: every candidate ties, the success rate is 1/8."""
    bf, kd = num_block([1] * 8, [1] * 8)
    s = summary_of(kd)
    close([s.success_analytic, s.baseline_random, s.lift, s.max_risk], [1 / 8, 1 / 8, 1, 1 / 8])


def test_margin_confidence():
    """V = 1, 2, 4, synthetic = original: the margin confidence of each record."""
    bf, _ = num_block([1, 2, 4], [1, 2, 4])
    for got, want in zip(bf.confidence, ["0.6546537", "1.0", "1.3093073"]):
        assert_printed(got, want)


def test_two_way_tie_and_duplicates_refused():
    """Originals 0 and 10, two synthetic records at 5: each ties between both; a pair
    table or a block with a repeated id is refused."""
    _, kd = num_block([0, 10], [5, 5])
    close(kd.risk, [0.5, 0.5])
    anon = np.array([1, 1, 2, 2])
    raw = np.array([1, 2, 1, 2])
    sc = np.array([5, 5, 5, 5], float)
    with pytest.raises(ValueError, match="set"):
        oracle.reduce_score_pairs(np.append(anon, 1), np.append(raw, 2), np.append(sc, 5))
    with pytest.raises(ValueError, match="set"):
        oracle.mode_baseline_from_pairs(np.append(anon, 1), np.append(raw, 2), np.append(sc, 5))
    ids = np.array([1, 2, 3, 3, 4, 5])
    x = np.arange(6, dtype=float)[:, None]
    for fn in (lk.evaluate_block_bruteforce, lambda *a, **k: lk.evaluate_block_kdtree(*a, max_k=1, **k)):
        with pytest.raises(ValueError, match="duplicated"):
            fn(ids, x, np.arange(1, 6), x[:5], p=1)
        with pytest.raises(ValueError, match="duplicated"):
            fn(np.arange(1, 6), x[:5], np.array([1, 1, 2]), x[:3], p=1)


# --------------------------------------------------------------------------
# Mahalanobis: by hand, exact zeros, constant columns, units, the seed example, invariance
# --------------------------------------------------------------------------

BY_HAND_ORIGINAL = np.array([[0, 0], [1, 2], [5, 3]], dtype=float)
BY_HAND_SYNTHETIC = np.array([[0.1, 0.2], [1.2, 1.8], [4.7, 3.4]])


def _mahalanobis_matrix(raw, anon, cov, ridge):
    w = lk.whitening_from_covariance(cov, ridge)
    return w, oracle.pairwise_values(w.transform(raw), w.transform(anon))


def test_mahalanobis_by_hand():
    """Three originals and their synthetic records in two columns: the distances under
    each covariance choice (raw, anon, pooled), with and without the ridge."""
    mo_raw = lk.Moments.from_array(BY_HAND_ORIGINAL)
    _, s_raw = mo_raw.covariance()
    close(s_raw, [[7, 3.5], [3.5, 7 / 3]], 1e-13)
    w, d = _mahalanobis_matrix(BY_HAND_ORIGINAL, BY_HAND_SYNTHETIC, s_raw, 0)
    assert_printed(w.condition_number, "19.2814700679")
    assert not w.ill_conditioned
    raw_r0 = [0.2, 1.8, 1.90787840283389, 1.63532434528619, 0.4, 1.70377731610007, 2.24626674411439,
              1.5175167685588, 0.728991475552747]
    close(d.ravel(), raw_r0, 1e-12)
    _, s_anon = lk.Moments.from_array(BY_HAND_SYNTHETIC).covariance()
    close(_mahalanobis_matrix(BY_HAND_ORIGINAL, BY_HAND_SYNTHETIC, s_anon, 0)[1].ravel(),
          [0.298106000442796, 2.68295400398516, 2.15813625226336, 2.29703443324213, 0.714662289126829,
           3.0874831308581, 2.14216413645173, 2.58809624772727, 1.28745954629003], 1e-12)
    _, s_pool = lk.Moments.from_array(np.vstack([BY_HAND_ORIGINAL, BY_HAND_SYNTHETIC])).covariance()
    close(_mahalanobis_matrix(BY_HAND_ORIGINAL, BY_HAND_SYNTHETIC, s_pool, 0)[1].ravel(),
          [0.247749284113123, 2.2297435570181, 2.16939573118272, 1.98041113450684, 0.537093678324125,
           2.31267564929258, 2.44410336163618, 2.00267101005843, 0.973272044754692], 1e-12)
    w, d = _mahalanobis_matrix(BY_HAND_ORIGINAL, BY_HAND_SYNTHETIC, s_raw, 1e-6)
    close(d.ravel(), [0.199999076197663, 1.79999168577897, 1.90787776687601, 1.63531725893657,
                      0.399997980967755, 1.70377355530019, 2.24626332428808, 1.51751456824007,
                      0.728987783591749], 1e-12)
    ids = np.arange(1, 4)
    zr, za = w.transform(BY_HAND_ORIGINAL), w.transform(BY_HAND_SYNTHETIC)
    bf = lk.evaluate_block_bruteforce(ids, zr, ids, za)
    kd = lk.evaluate_block_kdtree(ids, zr, ids, za, max_k=3)
    s = summary_of(kd)
    close([s.success_analytic, s.baseline_random], [1, 1 / 3])
    close(bf.risk, kd.risk)
    for got, want in zip(bf.eccentricity, ["1.672892897", "1.683518549", "1.039129476"]):
        assert_printed(got, want)


def test_identity_gives_exact_zeros():
    x = np.array([[1, 4], [2, 1], [3, 3], [4, 2]], dtype=float)
    w = lk.whitening_from_covariance(lk.Moments.from_array(x).covariance()[1], 0)
    z = w.transform(x)
    d = oracle.pairwise_values(z, z)
    assert np.all(np.diag(d) == 0.0)
    off = {(0, 1): 2.32992949004287, (0, 2): 1.55838744494796, (0, 3): 2.42015347801392,
           (1, 2): 2.17124059336724, (1, 3): 2.17124059336724, (2, 3): 0.925820099772552}
    for (i, j), want in off.items():
        close([d[i, j], d[j, i]], [want, want], 1e-12)
    ids = np.arange(1, 5)
    bf = lk.evaluate_block_bruteforce(ids, z, ids, z)
    close(summary_of(bf).success_analytic, 1)
    for got, want in zip(bf.eccentricity, ["1.3910688292", "1.9480318768", "0.9980086140", "0.8206005975"]):
        assert_printed(got, want)


def test_constant_column_and_errors():
    x = np.column_stack([np.arange(1, 6, dtype=float), np.full(5, 2.0)])
    _, cov = lk.Moments.from_array(x).covariance()
    w = lk.whitening_from_covariance(cov, 0)
    assert w.dropped == (1,) and w.kept.tolist() == [True, False]
    z = w.transform(x)
    d = oracle.pairwise_values(z, z)
    delta = np.abs(x[:, 0][None, :] - x[:, 0][:, None])
    close(d, delta * 0.632455532033676, 1e-13)
    # the sums route detects the constant column exactly when given min/max
    _, cov2 = oracle.covariance_from_sums(5, x.sum(0), x.T @ x, col_min=x.min(0), col_max=x.max(0))
    assert cov2[1, 1] == 0 and cov2[0, 1] == 0
    with pytest.raises(ValueError, match="constant"):
        lk.whitening_from_covariance(np.zeros((1, 1)), 0)
    with pytest.raises(ValueError, match="at least one column"):
        lk.whitening_from_covariance(np.zeros((0, 0)), 0)
    with pytest.raises(ValueError, match="ridge"):
        lk.whitening_from_covariance(cov, -1)
    with pytest.raises(ValueError, match="at least 2 distinct records.*got 1"):
        lk.Moments.from_array(x[:1]).covariance()
    with pytest.raises(ValueError, match="at least 2"):
        oracle.covariance_from_sums(1, x[0], np.outer(x[0], x[0]))
    bad = x[:, :1].copy()
    bad[2, 0] = np.nan
    for fn in (lk.evaluate_block_bruteforce, lambda *a, **k: lk.evaluate_block_kdtree(*a, max_k=1, **k)):
        with pytest.raises(ValueError, match="NaN"):
            fn(np.arange(5), x[:, :1], np.arange(5), bad)
    with pytest.raises(ValueError, match="NaN"):
        lk.Moments.from_array(bad)


def test_exactly_collinear_needs_ridge():
    x = np.column_stack([np.arange(6.0), 2 * np.arange(6.0)])
    _, cov = lk.Moments.from_array(x).covariance()
    with pytest.raises(ValueError, match="could not be inverted"):
        lk.whitening_from_covariance(cov, 0)
    w = lk.whitening_from_covariance(cov, 1e-6)  # invertible, but flagged
    assert w.ill_conditioned and w.condition_number > 1e6


def test_condition_number_is_unit_dependent():
    """Two columns on scales a thousand apart: the condition number of the covariance
    follows the units, that of the correlation does not."""
    x = np.column_stack([[1, 3, 2, 5, 4, 6], [3000, 1000, 6000, 2000, 5000, 4000]]).astype(float)
    _, cov = lk.Moments.from_array(x).covariance()
    w0 = lk.whitening_from_covariance(cov, 0)
    assert_printed(w0.condition_number, "1007401.33")
    assert_printed(w0.condition_number_correlation, "1.1875")
    w = lk.whitening_from_covariance(cov, 1e-6)
    assert_printed(w.condition_number, "669948")
    close(w.ridge_added, [1e-6 * (3.5 + 3.5e6) / 2] * 2, 1e-15)  # 1.75: the large column's variance decides the ridge
    assert w.ill_conditioned
    # the scale-free variant adds the ridge relative to each column's own variance
    wp = lk.whitening_from_covariance(cov, 1e-6, ridge_scale="per_column")
    close(wp.ridge_added, [3.5e-6, 3.5], 1e-12)


def _seed_example() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(ids, original, synthetic) of tests/data/linkage_seed_example.csv (see its README)."""
    table = np.loadtxt(DATA / "linkage_seed_example.csv", delimiter=",", skiprows=1)
    return table[:, 0].astype(np.int64), table[:, 1:3], table[:, 3:5]


def test_reference_seed_example():
    """The reference package's seed example (30 records, two columns, the synthetic side
    rounded to one decimal): its condition number, pair scores and eccentricity."""
    ids, xr, xa = _seed_example()
    assert xr.shape == xa.shape == (30, 2)
    _, cov = lk.Moments.from_array(xr).covariance()
    close(cov, np.cov(xr.T, ddof=1), 1e-14)
    w = lk.whitening_from_covariance(cov, 1e-6)
    assert w.condition_number == pytest.approx(45.21746096035358, rel=1e-13)
    zr, za = w.transform(xr), w.transform(xa)
    d = oracle.pairwise_values(zr, za)
    assert d.sum() == pytest.approx(1550.5950645679532, rel=1e-13)
    # an independent route, as R computes it: the quadratic form with the inverse
    s = np.cov(xr.T, ddof=1)
    s = s + 1e-6 * np.mean(np.diag(s)) * np.eye(2)
    sinv = np.linalg.inv(s)
    delta = xr[:, None, :] - xa[None, :, :]  # [raw, anon]
    ref = np.sqrt(np.maximum(np.einsum("ijk,kl,ijl->ij", delta, sinv, delta), 0)).T
    close(d, ref, 1e-12)
    bf = lk.evaluate_block_bruteforce(ids, zr, ids, za)
    kd = lk.evaluate_block_kdtree(ids, zr, ids, za, max_k=10)
    true_ref = np.diag(ref)
    np.testing.assert_allclose(bf.true_score, true_ref, rtol=1e-12)
    np.testing.assert_allclose(kd.true_score, true_ref, rtol=1e-12)
    assert summary_of(kd).success_analytic == 1.0  # 30/30 greedy hits, no ties
    assert summary_of(bf).success_analytic == 1.0
    assert bf.eccentricity[0] == pytest.approx(0.7744822980167074, rel=1e-13)


def test_invariance_under_invertible_linear_map():
    rng = np.random.default_rng(7)
    raw = rng.normal(size=(40, 3)) @ np.array([[1, 0.5, 0], [0, 2, 0.3], [0, 0, 0.7]])
    anon = raw + rng.normal(scale=0.3, size=raw.shape)
    a = np.array([[2.0, 0.3, -1.0], [0.0, 5.0, 0.2], [1.5, 0.0, 0.01]])  # rescale + shear, invertible

    def dist(r, s):
        w = lk.whitening_from_covariance(lk.Moments.from_array(r).covariance()[1], 0)
        return oracle.pairwise_values(w.transform(r), w.transform(s))

    np.testing.assert_allclose(dist(raw @ a, anon @ a), dist(raw, anon), rtol=1e-9)
    # one target: |Δ| / sd(raw)
    d1 = dist(raw[:, :1], anon[:, :1])
    np.testing.assert_allclose(d1, np.abs(anon[:, :1] - raw[:, 0][None, :]) / np.std(raw[:, 0], ddof=1), rtol=1e-12)


def test_moments_and_sums_agree_with_numpy():
    rng = np.random.default_rng(3)
    x = rng.normal(loc=1e6, scale=2.0, size=(500, 4))
    mean, cov = lk.Moments.from_array(x).covariance()
    ref = np.cov((x - x.mean(0)).T, ddof=1)
    # inputs near 1e6 carry ~1e-10 absolute noise in every deviation; the naive
    # XᵀX - n·x̄x̄ᵀ would be off by ~1e-4 here
    np.testing.assert_allclose(cov, ref, rtol=0, atol=1e-8)
    np.testing.assert_allclose(mean, x.mean(0), rtol=1e-14)
    shift = x[0]
    xs = x - shift
    mean2, cov2 = oracle.covariance_from_sums(len(x), xs.sum(0), xs.T @ xs, shift=shift)
    np.testing.assert_allclose(cov2, ref, rtol=0, atol=1e-8)
    np.testing.assert_allclose(mean2, x.mean(0), rtol=1e-14)


# --------------------------------------------------------------------------
# weighted method: combination, scaling, min/max helpers
# --------------------------------------------------------------------------


def test_weighted_combination():
    """V = 10..50 and W = 1, 1, 2, 2, 3, synthetic = original: the range-normalised sum."""
    v = np.array([10, 20, 30, 40, 50], float)
    wv = np.array([1, 1, 2, 2, 3], float)
    x = np.column_stack([v, wv])
    lo = [lk.min_abs_diff_sorted(np.sort(x[:, c]), np.sort(x[:, c])) for c in range(2)]
    hi = [lk.max_abs_diff(x[:, c].min(), x[:, c].max(), x[:, c].min(), x[:, c].max()) for c in range(2)]
    assert lo == [0, 0] and hi == [40, 2]
    mult, off = lk.weighted_scaling(lo, hi, [1, 2])
    d = oracle.pairwise_values(x * mult, x * mult, p=1, value_offset=off)
    want = {(0, 1): 0.25, (0, 2): 1.5, (0, 3): 1.75, (0, 4): 3.0, (1, 2): 1.25, (1, 3): 1.5, (1, 4): 2.75,
            (2, 3): 0.25, (2, 4): 1.5, (3, 4): 1.25}
    assert np.all(np.diag(d) == 0)
    for (i, j), val in want.items():
        close([d[i, j], d[j, i]], [val, val], 1e-12)
    mult, off = lk.weighted_scaling(lo, hi)  # score_multi(c(V="num", W="num")), equal weights
    ids = np.arange(1, 6)
    bf = lk.evaluate_block_bruteforce(ids, x * mult, ids, x * mult, p=1, value_offset=off)
    close(summary_of(bf).success_analytic, 1)
    for got, want_e in zip(bf.eccentricity, ["0.3115884764", "0.3651483717", "0.5504818826", "0.4822428222",
                                             "0.9347654293"]):
        assert_printed(got, want_e)


def test_weighted_scaling_matches_normalised_sum_with_offset():
    rng = np.random.default_rng(11)
    raw = np.round(rng.normal(size=(30, 3)) * [1, 50, 5000], 2)
    anon = raw[:20] + np.round(rng.normal(size=(20, 3)) * [0.3, 10, 800], 2)
    anon[:, 2] = 7.0  # constant on one side only: its |x - y| still has a range
    raw[:, 1] = anon[0, 1]  # a value shared by both sides: min |x - y| is 0
    absd = np.abs(raw[None, :, :] - anon[:, None, :])
    lo, hi = absd.min(axis=(0, 1)), absd.max(axis=(0, 1))
    w = np.array([1.0, 2.0, 0.5])
    # the per-block helpers give the same extremes
    assert [lk.min_abs_diff_sorted(np.sort(raw[:, c]), np.sort(anon[:, c])) for c in range(3)] == lo.tolist()
    assert [lk.max_abs_diff(raw[:, c].min(), raw[:, c].max(), anon[:, c].min(), anon[:, c].max())
            for c in range(3)] == hi.tolist()
    ref = (w * (absd - lo) / (hi - lo)).sum(axis=2)  # the reference's range normalisation, then its weighted sum
    mult, off = lk.weighted_scaling(lo, hi, w)
    got = oracle.pairwise_values(raw * mult, anon * mult, p=1, value_offset=off)
    close(got, ref, 1e-12)
    assert off > 0
    # zero range contributes 0 (reference: constant score normalises to all zeros)
    mult0, off0 = lk.weighted_scaling([0.0, 2.0], [3.0, 2.0], [1.0, 4.0])
    assert mult0.tolist() == [1 / 3, 0.0] and off0 == 0.0
    with pytest.raises(ValueError, match="all zero"):
        lk.weighted_scaling([0, 0], [1, 1], [0, 0])
    with pytest.raises(ValueError, match="non-negative"):
        lk.weighted_scaling([0, 0], [1, 1], [1, -1])
    with pytest.raises(ValueError, match="one entry"):
        lk.weighted_scaling([0, 0], [1, 1], [1])


def test_min_abs_diff_sorted_cases():
    assert lk.min_abs_diff_sorted(np.array([1.0, 5.0]), np.array([5.0, 9.0])) == 0.0
    assert lk.min_abs_diff_sorted(np.array([1.0, 5.0, 10.0]), np.array([7.5, 12.0])) == 2.0
    assert lk.min_abs_diff_sorted(np.array([3.0]), np.array([-1.0, 100.0])) == 4.0
    assert lk.min_abs_diff_sorted(np.array([]), np.array([1.0])) == math.inf
    rng = np.random.default_rng(5)
    for _ in range(20):
        a = np.sort(rng.integers(-50, 50, size=rng.integers(1, 30)) * 0.1)
        b = np.sort(rng.integers(-50, 50, size=rng.integers(1, 30)) * 0.1)
        assert lk.min_abs_diff_sorted(a, b) == np.abs(a[:, None] - b[None, :]).min()


# --------------------------------------------------------------------------
# blocking, coverage, top-k selection
# --------------------------------------------------------------------------


def _blocked(raw_key, raw_v, anon_key, anon_v, raw_ids=None, anon_ids=None, max_k=10):
    raw_key, anon_key = np.asarray(raw_key), np.asarray(anon_key)
    raw_v, anon_v = np.asarray(raw_v, float), np.asarray(anon_v, float)
    raw_ids = np.arange(1, raw_v.size + 1) if raw_ids is None else np.asarray(raw_ids)
    anon_ids = np.arange(1, anon_v.size + 1) if anon_ids is None else np.asarray(anon_ids)
    out_kd, out_bf, order = [], [], []
    for key in np.unique(np.concatenate([raw_key, anon_key])):
        r, a = raw_key == key, anon_key == key
        if not a.any():
            continue
        args = (raw_ids[r], raw_v[r][:, None], anon_ids[a], anon_v[a][:, None])
        out_kd.append(lk.evaluate_block_kdtree(*args, p=1, max_k=max_k))
        out_bf.append(lk.evaluate_block_bruteforce(*args, p=1))
        order.append(anon_ids[a])
    return oracle.concat_block_results(out_kd), out_bf, np.concatenate(order)


def test_block_candidates_evaluation():
    """Six records blocked by ZIP (A, A, B, B, C, C), scored by age: rates, coverage and
    blocking recall; then synthetic ZIPs that lose true pairs, disjoint keys, no shared ids."""
    zip_ = ["A", "A", "B", "B", "C", "C"]
    age = [31, 42, 33, 44, 35, 46]
    kd, bf, _ = _blocked(zip_, age, zip_, age)
    s = summary_of(kd, n_raw=6)
    assert s.n_pairs == 12
    close([s.success_analytic, s.baseline_random, s.candidate_coverage], [1, 0.5, 1 / 3])
    assert s.blocked is True
    assert lk.blocking_recall(6, int(kd.has_true.sum())) == 1.0
    # mode baseline of the blocked pair table
    pairs = [(a, r) for a in range(6) for r in range(6) if zip_[a] == zip_[r]]
    a_ids = np.array([a + 1 for a, _ in pairs])
    r_ids = np.array([r + 1 for _, r in pairs])
    sc = np.array([abs(age[a] - age[r]) for a, r in pairs], float)
    close(oracle.mode_baseline_from_pairs(a_ids, r_ids, sc), 1 / 6)
    # ANON ZIP changed: 2 of 6 true pairs lost
    kd2, _, _ = _blocked(zip_, age, ["A", "B", "B", "B", "C", "A"], age)
    assert_printed(lk.blocking_recall(6, int(kd2.has_true.sum())), "0.6667")
    # disjoint keys: no pairs, recall 0, every synthetic record without a candidate
    kd3, _, _ = _blocked(["a", "b", "c"], [1, 2, 3], ["x", "y", "z"], [1, 2, 3])
    s3 = summary_of(kd3)
    assert s3.n_pairs == 0 and s3.n_zero_candidate == 3 and s3.success_analytic == 0
    assert lk.blocking_recall(3, int(kd3.has_true.sum())) == 0.0
    assert not s3.truth_measurable and s3.top_k == {}
    # no shared ids: recall NA
    kd4, _, _ = _blocked(["a"] * 3, [1, 2, 3], ["a"] * 3, [1, 2, 3], raw_ids=[1, 2, 3], anon_ids=[11, 12, 13])
    assert lk.blocking_recall(0, int(kd4.has_true.sum())) is None
    assert summary_of(kd4).n_true_missing == 3


def test_top_k_on_uneven_blocks():
    """Blocks of 5, 3 and 2 originals, one synthetic record each: the random baseline,
    lift, top-k (k beyond every block dropped) and eccentricity."""
    raw_key = ["A"] * 5 + ["B"] * 3 + ["C"] * 2
    raw_v = [0, 1, 2, 3, 4, 0, 1, 2, 0, 1]
    anon_ids = np.array([1, 6, 9])
    kd, bf, _ = _blocked(raw_key, raw_v, ["A", "B", "C"], [0, 0, 0], anon_ids=anon_ids)
    s = summary_of(kd, n_raw=10, top_k=(1, 3, 5, 6))
    close(s.success_analytic, 1)
    assert_printed(s.baseline_random, "0.3444444444")
    close(s.baseline_random, (1 / 5 + 1 / 3 + 1 / 2) / 3)
    assert_printed(s.lift, "2.903225806")
    close(s.candidate_coverage, 1 / 3)
    assert list(s.top_k) == [1, 3, 5]
    ecc = np.concatenate([b.eccentricity for b in bf])
    for got, want in zip(ecc, ["0.632455532", "1.0", "1.414213562"]):
        assert_printed(got, want)
    a_ids = np.repeat(anon_ids, [5, 3, 2])
    r_ids = np.arange(1, 11)
    close(oracle.mode_baseline_from_pairs(a_ids, r_ids, np.array(raw_v, float)), 1 / 3)
    kd6, _, _ = _blocked(["A"] * 6 + ["B"] * 3 + ["C"] * 2, list(range(6)) + [0, 1, 2, 0, 1], ["A", "B", "C"],
                         [0, 0, 0], anon_ids=np.array([1, 7, 10]))
    assert list(summary_of(kd6, top_k=(7, 1, 3, 6, 3)).top_k) == [1, 3, 6]


def test_summary_edge_cases():
    s = oracle.summarize_linkage(np.zeros(0, int), np.zeros(0, int), np.zeros(0, int))
    assert s.n_anon == 0 and s.success_analytic is None and s.lift is None and not s.truth_measurable
    s = oracle.summarize_linkage(np.array([3, 3]), np.array([-1, -1]), np.array([-1, -1]))
    assert s.success_analytic == 0 and s.baseline_random == 0 and s.lift is None and not s.truth_measurable
    # a capped record refuses a k beyond its bound
    with pytest.raises(ValueError, match="max_k"):
        oracle.summarize_linkage(np.array([50]), np.array([3]), np.array([-1]), capped=np.array([True]), top_k=(5,))
    close(lk.top_k_probability(np.array([0, 1, 2, 3, -1]), np.array([4, 2, 1, 1, -1]), 2), [0.5, 0.5, 0, 0, 0])




def test_eccentricity_is_the_same_in_any_order_of_the_candidates():
    # The candidates of a block arrive in the shuffle's order; the sd of their scores
    # must not follow it, or the precision-recall thresholds split with the partitioning.
    rng = np.random.default_rng(7)
    values = 1e3 + rng.standard_normal((200, 37)) * rng.choice([1e-6, 1.0, 1e4], size=(200, 1))
    true_col = rng.integers(-1, 37, size=200)
    base = lk.reduce_value_matrix(values, true_col)
    for seed in range(5):
        perm = np.random.default_rng(seed).permutation(37)
        inverse = np.argsort(perm)
        moved = lk.reduce_value_matrix(values[:, perm], np.where(true_col >= 0, inverse[np.maximum(true_col, 0)], -1))
        assert np.array_equal(moved.sd_score, base.sd_score)
        assert np.array_equal(moved.eccentricity, base.eccentricity)
        assert np.array_equal(moved.n_better, base.n_better) and np.array_equal(moved.true_tie_size, base.true_tie_size)
