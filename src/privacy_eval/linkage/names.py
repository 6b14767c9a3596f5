"""Internal column names and codes shared by the driver and the scoring workers.

Every name carries the reserved prefix, so that no user column can collide with one.
"""

from __future__ import annotations

from privacy_eval.columns import INTERNAL_PREFIX

PREFIX = INTERNAL_PREFIX + "lk_"
KEY = PREFIX + "key"
SIDE = PREFIX + "side"  # 0 original, 1 synthetic
SALT = PREFIX + "salt"  # sub-block of a split block
BLOCK_PAIRS = PREFIX + "block_pairs"  # candidate pairs of the whole block, on split blocks
N_SPLITS = PREFIX + "n_splits"
BLOCK_ID = PREFIX + "block_id"
CHECK_HASH = PREFIX + "block_check"
N_ORIGINAL = PREFIX + "n_o"
N_SYNTHETIC = PREFIX + "n_s"

# Meta rows of the unsplit pass over the blocks (scoring.py): the kind, the block id
# (stays in Spark: a join key, never collected) and the block's sizes.
META, M_BLOCK, M_NO, M_NS = PREFIX + "meta", PREFIX + "m_block", PREFIX + "m_n_o", PREFIX + "m_n_s"
META_SCHEMA = f"{META} int, {M_BLOCK} long, {M_NO} long, {M_NS} long"
SCORED_BLOCK, BIG_BLOCK, SHARED_ID = 0, 1, 2  # meta kinds

MAHALANOBIS, WEIGHTED, SINGLE0 = 0, 1, 2  # method codes in the scoring output (SINGLE0 + j: target j alone)
K_CAND, K_RANK, K_CONF = 0, 1, 2  # histogram kinds

SCORE_SCHEMA = "method int, kind int, a long, b long, conf double, n long"


def target_columns(p: int) -> list[str]:
    """The internal names of the ``p`` targets, as doubles."""
    return [f"{PREFIX}t{j}" for j in range(p)]


def blocking_columns(n: int) -> list[str]:
    """The internal names of the blocking values (one constant column without blocking)."""
    return [f"{PREFIX}b{i}" for i in range(max(1, n))]
