"""`scripts/bench linkage --rows N`: the linkage attack in Spark against numpy + cKDTree
in one process, on the seeded pair of bench_data.py (Mahalanobis, blocking on three
columns); both success rates must agree exactly."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd
from bench_data import generate, generated
from measure import PeakMemory, machine, timed

LINK_TARGETS = ["age", "income", "score"]
LINK_BLOCKING = ["city", "sex", "visits"]


def linkage_numpy(original_path: Path, synthetic_path: Path) -> tuple[float, float]:
    """Single-process reference: same analytic success rate, blocks by pandas groupby."""
    from privacy_eval.linkage import kernel as lk
    from tests.support.linkage_oracle import concat_block_results, summarize_linkage

    def work():
        cols = ["id"] + LINK_TARGETS + LINK_BLOCKING
        o = pd.read_parquet(original_path, columns=cols).dropna(subset=LINK_TARGETS)
        s = pd.read_parquet(synthetic_path, columns=cols).dropna(subset=LINK_TARGETS)
        for frame in (o, s):  # null blocks together; NaN keys would never match across frames
            for c in LINK_BLOCKING:
                frame[c] = frame[c].astype(object).where(frame[c].notna(), "\0null")
        _, cov = lk.Moments.from_array(o[LINK_TARGETS].to_numpy(float)).covariance()
        whitening = lk.whitening_from_covariance(cov, 1e-6)
        groups_o = o.groupby(LINK_BLOCKING, dropna=False, sort=False).indices
        groups_s = s.groupby(LINK_BLOCKING, dropna=False, sort=False).indices
        xo = whitening.transform(o[LINK_TARGETS].to_numpy(float))
        xs = whitening.transform(s[LINK_TARGETS].to_numpy(float))
        ido, ids = o["id"].to_numpy(), s["id"].to_numpy()
        results = []
        for block, rows_s in groups_s.items():
            rows_o = groups_o.get(block, np.array([], dtype=np.int64))
            results.append(lk.evaluate_block_kdtree(ido[rows_o], xo[rows_o], ids[rows_s], xs[rows_s], max_k=10, p=2))
        r = concat_block_results(results)
        return summarize_linkage(r.n_candidates, r.n_better, r.true_tie_size, capped=r.capped).success_analytic
    return timed(work)


def linkage_spark(spark, original_path: Path, synthetic_path: Path) -> tuple[float, float]:
    from privacy_eval.config import LinkageConfig
    from privacy_eval.inputs import prepare_inputs
    from privacy_eval.linkage.attack import linkage_attack
    from privacy_eval.linkage.prepare import input_pass_work

    config = LinkageConfig(targets=LINK_TARGETS, blocking=LINK_BLOCKING, methods=["mahalanobis"],
                           drop_incomplete=True)

    def work():
        # As the job does it (evaluation.load_inputs): Parquet sides are not cached, the
        # key check counts the true pairs and the profile pass the moments for the attack.
        cols = ["id"] + LINK_TARGETS + LINK_BLOCKING
        inputs = prepare_inputs(spark.read.parquet(str(original_path)).select(*cols),
                                spark.read.parquet(str(synthetic_path)).select(*cols), row_key="id", cache=(),
                                work=input_pass_work(config))
        try:
            return linkage_attack(inputs, config).methods["mahalanobis"].success_rate
        finally:
            inputs.unpersist()
    return timed(work)


def main(args: argparse.Namespace) -> int:
    from privacy_eval.session import build_session

    original_path, synthetic_path = generated(args)

    spark = build_session("privacy-eval-bench", {
        "spark.master": args.master, "spark.driver.memory": "8g",
        "spark.sql.shuffle.partitions": "8", "spark.ui.enabled": "false",
    })
    spark.sparkContext.setLogLevel("ERROR")
    linkage_spark(spark, *generate(2_000, args.seed, Path(args.data)))  # warm-up
    with PeakMemory() as memory:
        spark_rate, spark_s = linkage_spark(spark, original_path, synthetic_path)
    # The same run again in the same session: JIT-compiled code and Python workers warm,
    # as in a long-lived session evaluating several releases.
    again_rate, again_s = linkage_spark(spark, original_path, synthetic_path)
    spark.stop()
    numpy_rate, numpy_s = linkage_numpy(original_path, synthetic_path)
    print(f"{machine()}, Spark master {args.master}")
    print()
    print("| linkage (Mahalanobis, blocking city+sex+visits) | records per side | wall time (s) | vs numpy | success rate |")
    print("|---|---:|---:|---:|---:|")
    print(f"| Spark (privacy_eval) | {args.rows:,} | {spark_s:.1f} | {spark_s / numpy_s:.2f}x | {spark_rate!r} |")
    print(f"| Spark, same run repeated in the session | {args.rows:,} | {again_s:.1f} | {again_s / numpy_s:.2f}x | {again_rate!r} |")
    print(f"| numpy + cKDTree, one process | {args.rows:,} | {numpy_s:.1f} | 1.00x | {numpy_rate!r} |")
    print(f"\npeak resident memory during the Spark run: JVM (driver = executor in local mode) "
          f"{memory.jvm / 2**20:.0f} MiB, largest Python worker {memory.worker / 2**20:.0f} MiB")
    if not spark_rate == again_rate == numpy_rate:
        print("\nERROR: the success rates differ", file=sys.stderr)
        return 1
    print("\nboth agree exactly")
    return 0
