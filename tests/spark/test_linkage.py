"""The Spark linkage attack against an independent numpy reference on blocked data:
every method, partitionings, split and colliding blocks, the input passes' figures. Its
invariances, the hand-computed fixture, errors and warnings are in test_linkage_cases.py.

The reference (tests/support/reference_linkage.py) scores every candidate pair explicitly and
groups blocks with pandas; the Spark path whitens, streams the blocks, uses kd-trees or
brute force per block and reduces histograms. Rates are compared to 1e-12.
"""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pandas as pd
import pytest

from privacy_eval.config import LinkageConfig
from privacy_eval.inputs import InputPassWork, prepare_inputs
from privacy_eval.linkage import block_stream, blocking, prepare, rates, scoring
from privacy_eval.linkage import names as N
from privacy_eval.linkage.attack import linkage_attack
from privacy_eval.linkage.prepare import SideStats, complete_targets, side_statistics
from tests.support.asserts import assert_same
from tests.support.linkage_frames import assert_matches_reference, attack, frames
from tests.support.reference_linkage import linkage_reference


def with_figures(inputs, **changes):
    """``inputs`` whose input passes' figures differ by ``changes``."""
    return dataclasses.replace(inputs, pass_figures=dataclasses.replace(inputs.pass_figures, **changes))


TOP_K = [1, 2, 5, 10]
SECRET = "val_"  # every blocking label contains it: it must never reach details or messages


# --------------------------------------------------------------------------
# data
# --------------------------------------------------------------------------


def blocked_data(seed: int = 7) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Originals with duplicates and exact ties, a noisy synthetic side whose blocking
    sometimes moves (true pair lost), synthetic keys without an original, a block that
    exists on the synthetic side only (records without candidates) and one that exists
    on the original side only."""
    rng = np.random.default_rng(seed)
    n = 200
    g1 = np.array(["val_x", "val_y", None], dtype=object)
    o = pd.DataFrame({
        "id": np.arange(n, dtype=np.int64),
        "a": rng.integers(0, 12, n),                     # small integer range: many exact ties
        "b": np.round(rng.normal(50.0, 8.0, n), 0),
        "c d": rng.integers(0, 4, n).astype(np.int32),   # an int column whose name needs quoting
        "g1": g1[rng.integers(0, 3, n)],
        "g2": rng.integers(1, 3, n).astype(np.int64),
    })
    dup = o.iloc[:25].copy()                              # 25 exact duplicates of originals
    dup["id"] = np.arange(1000, 1025, dtype=np.int64)
    orphans = o.iloc[30:35].copy()                        # a block no synthetic record has
    orphans["id"] = np.arange(2000, 2005, dtype=np.int64)
    orphans["g1"] = "val_orphan"
    o = pd.concat([o, dup, orphans], ignore_index=True)

    s = o.iloc[: n - 10].copy()                           # the last 10 originals have no twin
    m = len(s)
    noise = rng.random(m) < 0.7                           # 30 % exact copies: distance 0
    s.loc[noise, "a"] = s.loc[noise, "a"] + rng.integers(-1, 2, noise.sum())
    s.loc[noise, "b"] = s.loc[noise, "b"] + rng.integers(-2, 3, noise.sum())
    moved = rng.random(m) < 0.06                          # blocking changed: truth blocked away
    s.loc[moved, "g2"] = 3 - s.loc[moved, "g2"]
    extra = pd.DataFrame({                                # keys with no original
        "id": np.arange(5000, 5006, dtype=np.int64),
        "a": rng.integers(0, 12, 6),
        "b": np.round(rng.normal(50.0, 8.0, 6), 0),
        "c d": rng.integers(0, 4, 6).astype(np.int32),
        "g1": g1[rng.integers(0, 2, 6)],
        "g2": np.array([1, 2, 1, 2, 1, 2], dtype=np.int64),
    })
    lonely = s.iloc[:4].copy()                            # a block no original has
    lonely["id"] = np.arange(7000, 7004, dtype=np.int64)
    lonely["g1"] = "val_lonely"
    s = pd.concat([s, extra, lonely], ignore_index=True)
    return o.reset_index(drop=True), s.reset_index(drop=True)


TARGETS = ["a", "b", "c d"]
BLOCKING = ["g1", "g2"]
SCHEMA = "id long, a long, b double, `c d` int, g1 string, g2 long"


def cfg(**kw) -> LinkageConfig:
    base = dict(targets=list(TARGETS), blocking=list(BLOCKING), top_k=list(TOP_K))
    base.update(kw)
    return LinkageConfig(**base)


# --------------------------------------------------------------------------
# the Spark path equals the numpy reference
# --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def blocked(spark):
    o, s = blocked_data()
    so, ss = frames(spark, o, s, SCHEMA)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(rates, "PR_EXACT_LIMIT", 100_000)  # full sweep, to compare with the reference row by row
        result = attack(so, ss, cfg())
    return o, s, so, ss, result


@pytest.fixture(scope="module")
def blocked_maha(blocked):
    """Mahalanobis alone: the unsplit pass over the blocks is the scoring itself (with
    both methods it is the weighted method's ranges)."""
    _, _, so, ss, _ = blocked
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(rates, "PR_EXACT_LIMIT", 100_000)
        return attack(so, ss, cfg(methods=["mahalanobis"]))


def base_for(blocked, blocked_maha, methods):
    return blocked[4] if "weighted" in methods else blocked_maha


BOTH, MAHALANOBIS_ALONE = ["mahalanobis", "weighted"], ["mahalanobis"]


@pytest.mark.parametrize("method", ["mahalanobis", "weighted"])
def test_blocked_matches_reference(blocked, method):
    o, s, _, _, result = blocked
    ref = linkage_reference(o, s, "id", TARGETS, BLOCKING, method=method, top_k=TOP_K)
    res = result.methods[method]
    assert res.status == "ok"
    assert_matches_reference(res, ref)
    assert result.n_candidate_pairs == ref["n_pairs"]
    # the data has every kind of record the spec cares about
    assert 0 < res.n_true_missing < res.n_records
    assert res.n_zero_candidate == 4
    assert 0 < res.max_risk <= 1 and res.n_certain < res.n_at_risk  # some RISK is 1/2
    # full precision-recall sweep over eccentricity, row by row
    conf = res.confidence
    assert conf.computed == "all" and conf.exact and conf.n_in_scope == res.n_records
    assert conf.n_no_candidate == ref["n_nan"] and conf.n_single_candidate == ref["n_inf"]
    pr = ref["pr"]
    assert len(conf.rows) == len(pr["threshold"])
    for row, t, n_att, prec, rec in zip(conf.rows, pr["threshold"], pr["n_attacked"], pr["precision"], pr["recall"]):
        assert row[0] == pytest.approx(t, rel=1e-9, abs=1e-12)
        assert row[1] == n_att
        assert row[3] == pytest.approx(prec, abs=1e-12)
        assert row[4] == pytest.approx(rec, abs=1e-12)
    assert conf.rows[-1][4] == pytest.approx(res.success_rate, abs=1e-12)  # last row: recall = success


def test_blocked_shared_fields_and_warnings(blocked):
    o, s, _, _, result = blocked
    n_o, n_s = len(o), len(s)
    assert (result.n_original, result.n_synthetic) == (n_o, n_s)
    assert result.candidate_share == pytest.approx(result.n_candidate_pairs / (n_o * n_s))
    assert result.n_true_pairs == n_s - 10  # 6 extra keys + 4 lonely ones have no original
    assert result.n_true_pairs_kept == n_s - result.methods["weighted"].n_true_missing
    assert result.blocking_recall == pytest.approx(result.n_true_pairs_kept / result.n_true_pairs)
    blocks_s = set(map(tuple, s[BLOCKING].astype(object).where(s[BLOCKING].notna(), None).to_numpy().tolist()))
    blocks_o = set(map(tuple, o[BLOCKING].astype(object).where(o[BLOCKING].notna(), None).to_numpy().tolist()))
    assert (None, 1) in blocks_s & blocks_o  # null blocks with null
    assert result.n_blocks == len(blocks_s) == 8
    assert result.n_blocks_with_candidates == len(blocks_s & blocks_o) == 6
    assert result.n_split_blocks == 0
    assert result.targets_mahalanobis == tuple(TARGETS) and result.targets_dropped_constant == ()
    assert result.condition_number is not None and result.condition_number < 100
    assert set(result.single_column_success) == set(TARGETS)
    assert result.headline_method in ("mahalanobis", "weighted")
    assert result.headline.success_rate == max(r.success_rate for r in result.methods.values())
    # blocking lost true pairs: loud, and says the rate is a lower bound
    lost = [w for w in result.warnings if "LOWER bound" in w]
    assert len(lost) == 1 and "discarded" in lost[0] and "'g2'" in lost[0]
    # JSON-safe and free of record values
    for d in [result.details()] + [result.method_details(m) for m in result.methods]:
        text = json.dumps(d, allow_nan=False)
        assert SECRET not in text
    assert all(SECRET not in w for w in result.warnings)


def test_partitioning_does_not_change_anything(spark, sql_conf, blocked):
    _, _, so, ss, base = blocked
    sql_conf({"spark.sql.shuffle.partitions": "16"})
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(rates, "PR_EXACT_LIMIT", 100_000)
        other = attack(so.repartition(7), ss.repartition(5), cfg())
    for m in base.methods:  # rates come from integer counts: exactly equal
        assert other.methods[m].success_rate == base.methods[m].success_rate
        assert other.methods[m].top_k == base.methods[m].top_k
    assert_same(other.details(), base.details())


def test_block_figures_agree_with_pandas_whichever_pass_comes_first(blocked, blocked_maha):
    """The block figures come from the meta rows of the unsplit pass over the blocks: the
    weighted ranges with both methods, the scoring with Mahalanobis alone. Both give the
    figures pandas counts, and the same Mahalanobis results."""
    o, s, _, _, both = blocked
    null_safe = lambda f: f[BLOCKING].astype(object).where(f[BLOCKING].notna(), "\0null")  # noqa: E731
    n_o = null_safe(o).value_counts()
    n_s = null_safe(s).value_counts()
    attacked = pd.DataFrame({"n_s": n_s}).join(pd.DataFrame({"n_o": n_o}), how="left").fillna(0).astype(int)
    pairs = attacked["n_o"] * attacked["n_s"]
    for result in (both, blocked_maha):
        assert result.n_blocks == len(attacked)
        assert result.n_blocks_with_candidates == int((attacked["n_o"] > 0).sum())
        assert result.n_candidate_pairs == int(pairs.sum())
        assert result.largest_block_pairs == int(pairs.max())
        assert result.largest_block_original == int(attacked["n_o"].max())
        assert result.largest_block_synthetic == int(attacked["n_s"].max())
        assert result.n_split_blocks == 0
    assert_same(blocked_maha.methods["mahalanobis"].details(), both.methods["mahalanobis"].details())
    assert blocked_maha.single_column_success == both.single_column_success


def test_blocks_across_arrow_batches_and_many_output_flushes(sql_conf, blocked):
    """Scoring streams each partition's rows in Arrow batches and cuts them into blocks:
    with batches of 3 rows every block spans several batches (and a batch holds the end
    of one block and the start of the next); with a flush after every block the output
    leaves in many small batches. Nothing may change."""
    _, _, so, ss, base = blocked
    sql_conf({"spark.sql.execution.arrow.maxRecordsPerBatch": "3"})
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(rates, "PR_EXACT_LIMIT", 100_000)
        mp.setattr(block_stream, "FLUSH_ROWS", 1)
        streamed = attack(so, ss, cfg(), split_rows=11)
    d_streamed, d_base = streamed.details(), base.details()
    assert streamed.n_split_blocks > 0
    for d in (d_streamed, d_base):
        d.pop("n_split_blocks"), d.pop("split_rows")
    assert_same(d_streamed, d_base)


@pytest.mark.parametrize("methods", [BOTH, MAHALANOBIS_ALONE])
def test_split_blocks_give_identical_results(blocked, blocked_maha, methods):
    """The unsplit pass leaves the blocks with more than split_rows synthetic records to a
    second pass over them alone, split: the weighted ranges and the scoring both."""
    _, _, so, ss, _ = blocked
    base = base_for(blocked, blocked_maha, methods)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(rates, "PR_EXACT_LIMIT", 100_000)
        split = attack(so, ss, cfg(methods=methods), split_rows=7)
    assert split.n_split_blocks == 6  # every block but the 4-record one
    d_split, d_base = split.details(), base.details()
    for d in (d_split, d_base):
        d.pop("n_split_blocks"), d.pop("split_rows")
    assert_same(d_split, d_base)


@pytest.mark.parametrize("methods", [BOTH, MAHALANOBIS_ALONE])
def test_colliding_block_ids_are_rehashed(blocked, blocked_maha, methods):
    """Scoring groups by a 64-bit hash of the blocking values; if two blocks shared one,
    their records would become each other's candidates. With every block given the same
    id by the first seed the unsplit pass must notice and hash again: results identical.
    Also split, so that the salted path sees the second id too."""
    from pyspark.sql import functions as F

    _, _, so, ss, _ = blocked
    base = base_for(blocked, blocked_maha, methods)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(rates, "PR_EXACT_LIMIT", 100_000)
        real = blocking.block_id
        mp.setattr(blocking, "block_id", lambda bcols, attempt: F.lit(7).cast("long") if attempt == 0 else real(bcols, attempt))
        collided = attack(so, ss, cfg(methods=methods))
        collided_split = attack(so, ss, cfg(methods=methods), split_rows=7)
    assert_same(collided.details(), base.details())
    d_split, d_base = collided_split.details(), base.details()
    for d in (d_split, d_base):
        d.pop("n_split_blocks"), d.pop("split_rows")
    assert_same(d_split, d_base)


@pytest.mark.parametrize("methods", [BOTH, MAHALANOBIS_ALONE])
def test_only_two_blocks_sharing_an_id_are_noticed(blocked, blocked_maha, methods):
    """The first seed gives one id to two blocks only, one of them on the original side
    only: its originals would become false candidates of the other block's records. The
    check hash must show the shared id in the unsplit pass, and the attack hash again."""
    from pyspark.sql import functions as F

    _, _, so, ss, _ = blocked
    base = base_for(blocked, blocked_maha, methods)
    attempts = []
    real = blocking.block_id

    def block_id(bcols, attempt):
        attempts.append(attempt)
        if attempt:
            return real(bcols, attempt)
        return F.when(F.col(bcols[0]).isin("val_x", "val_orphan"), F.lit(7).cast("long")).otherwise(real(bcols, 0))

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(rates, "PR_EXACT_LIMIT", 100_000)
        mp.setattr(blocking, "block_id", block_id)
        shared = attack(so, ss, cfg(methods=methods))
    assert attempts == [0, 1]
    assert_same(shared.details(), base.details())


def test_side_statistics_of_the_profile_pass_replace_the_attack_s_own(blocked):
    """prepare_inputs computes the attack's per-side counts and ranges in its profile
    pass over the data (side_aggregates); given them, the attack measures neither side
    again and its results are identical. The ranges agree with numpy."""
    o, s, so, ss, base = blocked
    inputs = prepare_inputs(so, ss, row_key="id", work=InputPassWork(cfg(), side_aggregates=side_statistics(cfg())))
    try:
        for side, frame in (("original", o), ("synthetic", s)):
            stats = SideStats.from_values(inputs.pass_figures.side_aggregates[side], len(TARGETS))
            x = frame[TARGETS].to_numpy(float)
            assert (stats.n_rows, stats.n_incomplete) == (len(frame), 0)
            np.testing.assert_array_equal(stats.col_min, x.min(axis=0))
            np.testing.assert_array_equal(stats.col_max, x.max(axis=0))
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(rates, "PR_EXACT_LIMIT", 100_000)
            mp.setattr(prepare, "measure_sides", lambda *a: pytest.fail("a pass of its own although statistics were given"))
            hinted = linkage_attack(inputs, cfg())
        with pytest.raises(ValueError, match="side_aggregates must be"):
            linkage_attack(with_figures(inputs, side_aggregates={"original": {}}), cfg())
    finally:
        inputs.unpersist()
    assert_same(hinted.details(), base.details())
    # a target the attack will refuse: no statistics, the attack's validation says why
    bad_config = cfg(targets=["a", "g1"])
    bad = prepare_inputs(so, ss, row_key="id", work=InputPassWork(bad_config, side_aggregates=side_statistics(bad_config)))
    assert bad.pass_figures.side_aggregates is None
    bad.unpersist()


def test_true_pairs_counted_by_the_key_check_replace_the_key_join(blocked):
    """The job's key check counts the keys with a complete record on both sides; given
    that count, the attack skips its own join on the key, with identical results."""
    o, s, so, ss, base = blocked
    paired = len(set(o["id"]) & set(s["id"]))  # counted independently of Spark
    assert base.n_true_pairs == paired and base.n_true_pairs_kept < paired  # the join path
    inputs = prepare_inputs(so, ss, row_key="id", cache=(), work=InputPassWork(cfg(), paired_where=complete_targets(cfg())))
    assert inputs.pass_figures.n_paired_where == inputs.n_paired_keys == paired
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(rates, "PR_EXACT_LIMIT", 100_000)
        mp.setattr(blocking, "true_pairs", lambda *a: pytest.fail("joined on the key although true_pairs was given"))
        hinted = linkage_attack(inputs, cfg())
    assert_same(hinted.details(), base.details())
    with pytest.raises(ValueError, match="n_paired_where=3 \\(the true pairs\\) cannot be right"):
        linkage_attack(with_figures(inputs, n_paired_where=3), cfg())  # fewer than the pairs scoring kept
    with pytest.raises(ValueError, match="non-negative integer"):
        linkage_attack(with_figures(inputs, n_paired_where=-1), cfg())


def test_hints_prepared_for_another_configuration_are_ignored(blocked):
    """Figures counted for another configuration are not this attack's: it computes its
    own (here a wrong count would be refused if it were used)."""
    _, _, so, ss, base = blocked
    inputs = prepare_inputs(so, ss, row_key="id", cache=(), work=InputPassWork(cfg(), paired_where=complete_targets(cfg())))
    other = with_figures(inputs, n_paired_where=3, made_for=cfg(top_k=[1]))
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(rates, "PR_EXACT_LIMIT", 100_000)
        unhinted = linkage_attack(other, cfg())
    assert_same(unhinted.details(), base.details())


def test_map_blocks_splits_a_block_by_side_in_any_row_order(spark, sql_conf):
    """Scoring sorts by block id only: within a block, originals and synthetic records
    arrive in any order, and a block may span Arrow batches. The unsplit pass (split_rows)
    adds one meta row per block with a synthetic record: scored, or too big to score in
    one piece (more than split_rows synthetic records, not handed to the function), or
    an id whose rows carry two check hashes (two blocks sharing it, not scored)."""
    rows = [  # block id, check hash, key, target, side (1 = synthetic); one partition, this order
        (7, 70, 10, 1.0, 1), (7, 70, 1, 0.5, 0), (7, 70, 11, 2.0, 1), (7, 70, 2, 0.25, 0),
        (9, 90, 20, 3.0, 1),  # a block without originals
        (5, 50, 3, 8.0, 0),   # a block without synthetic records: nobody's candidates
        (4, 40, 4, 1.0, 0), (4, 40, 40, 4.0, 1),
        (8, 80, 5, 1.0, 0), (8, 81, 50, 2.0, 1),  # one id, two blocks
    ]
    frame = spark.createDataFrame(
        rows, f"{N.BLOCK_ID} long, {N.CHECK_HASH} long, {N.KEY} long, t0 double, {N.SIDE} int"
    ).coalesce(1)

    def fn(o, s, pairs):
        return {
            "n_o": np.array([len(o)]), "n_s": np.array([len(s)]), "pairs": np.array([pairs]),
            "keys_o": np.array([int(o.ids.sum())]), "keys_s": np.array([int(s.ids.sum())]),
            "x_s": np.array([float(s.x.sum())]),
        }

    schema = "n_o long, n_s long, pairs double, keys_o long, keys_s long, x_s double"
    fields = ["n_o", "n_s", "pairs", "keys_o", "keys_s", "x_s"]
    meta = [N.META, N.M_BLOCK, N.M_NO, N.M_NS]
    sql_conf({"spark.sql.execution.arrow.maxRecordsPerBatch": "3"})
    got = scoring.map_blocks(frame, fn, schema, ["t0"], integral_key=True).orderBy("keys_s").collect()
    assert [tuple(r[f] for f in fields) for r in got] == [  # (originals, synthetic, pairs, key sums, target sum)
        (0, 1, 0.0, 0, 20, 3.0),
        (2, 2, 4.0, 3, 21, 3.0),
        (1, 1, 1.0, 4, 40, 4.0),
        (1, 1, 1.0, 5, 50, 2.0),  # not the unsplit pass: the check hash is not looked at
    ]
    assert all(r[m] is None for r in got for m in meta)

    unsplit = scoring.map_blocks(frame, fn, schema, ["t0"], integral_key=True, split_rows=1).collect()
    scored = sorted(tuple(r[f] for f in fields) for r in unsplit if r[N.META] is None)
    assert scored == [(0, 1, 0.0, 0, 20, 3.0), (1, 1, 1.0, 4, 40, 4.0)]
    assert all(r[m] is None for r in unsplit if r[N.META] is None for m in meta)
    assert all(r[f] is None for r in unsplit if r[N.META] is not None for f in fields)
    assert sorted(tuple(r[m] for m in meta) for r in unsplit if r[N.META] is not None) == [
        (N.SCORED_BLOCK, 4, 1, 1), (N.SCORED_BLOCK, 9, 0, 1), (N.BIG_BLOCK, 7, 2, 2), (N.SHARED_ID, 8, 1, 1),
    ]


def test_kdtree_path_equals_brute_force(blocked):
    """Bound 0: every block with candidates goes through the kd-tree (and is split)."""
    _, _, so, ss, base = blocked
    kd = attack(so, ss, cfg(), max_pairs_per_block_for_confidence=0, split_rows=11)
    for m, r in kd.methods.items():
        b = base.methods[m]
        assert (r.success_rate, r.baseline_random, r.top_k, r.max_risk, r.n_true_missing) == (
            b.success_rate, b.baseline_random, b.top_k, b.max_risk, b.n_true_missing
        )
        # only the records without any candidate were "brute-forced" (0 pairs)
        assert r.confidence.computed == "partial" and r.confidence.n_in_scope == 4
        assert r.confidence.n_no_candidate == 4 and "more than 0 candidate pairs" in r.confidence.reason
    assert kd.single_column_success == base.single_column_success


def test_long_precision_recall_is_summarised_at_thresholds(blocked, monkeypatch):
    o, s, so, ss, base = blocked
    monkeypatch.setattr(rates, "PR_EXACT_LIMIT", 20)
    coarse = attack(so, ss, cfg(methods=["weighted"]))
    conf, full = coarse.methods["weighted"].confidence, base.methods["weighted"].confidence
    assert not conf.exact and 3 <= len(conf.rows) < len(full.rows)
    by_threshold = {row[0]: row for row in full.rows}
    for row in conf.rows:  # every reported row is an exact row of the full sweep
        match = min(by_threshold, key=lambda t: abs(t - row[0]))
        assert match == pytest.approx(row[0], rel=1e-12)
        assert row[1:] == pytest.approx(by_threshold[match][1:], abs=1e-12)
    assert conf.rows[0][0] == full.rows[0][0] and conf.rows[-1] == full.rows[-1]
