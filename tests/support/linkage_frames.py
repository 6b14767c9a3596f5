"""Frames and shortcuts the Spark linkage tests share: pandas tables as Spark frames,
the attack as the job runs it, and the comparison with the single-process reference
(tests/support/reference_linkage.py)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from privacy_eval.config import LinkageConfig
from privacy_eval.inputs import prepare_inputs
from privacy_eval.linkage.attack import linkage_attack
from privacy_eval.linkage.prepare import input_pass_work


def _plain(v):
    """A Python value for createDataFrame: numpy scalars converted, NaN read as null."""
    if isinstance(v, (np.integer,)):
        return int(v)
    if isinstance(v, (float, np.floating)):
        return None if math.isnan(v) else float(v)
    return v


def frames(spark, o: pd.DataFrame, s: pd.DataFrame, schema: str):
    def rows(df):
        return [tuple(_plain(v) for v in r) for r in df.itertuples(index=False)]
    return spark.createDataFrame(rows(o), schema), spark.createDataFrame(rows(s), schema)


def prepared(so, ss, config: LinkageConfig | None = None, **kw):
    """Inputs as the job prepares them (nothing cached); with ``config``, also the
    attack's true pairs and per-side statistics for that configuration."""
    work = None if config is None else input_pass_work(config)
    return prepare_inputs(so, ss, row_key="id", cache=(), work=work, **kw)


def attack(so, ss, config: LinkageConfig, **kw):
    """The attack on two tables with row key ``id``, without hints."""
    return linkage_attack(prepared(so, ss), config, **kw)


def assert_matches_reference(res, ref):
    assert res.success_rate == pytest.approx(ref["success"], abs=1e-12)
    assert res.baseline_random == pytest.approx(ref["baseline"], abs=1e-12)
    assert res.max_risk == pytest.approx(ref["max_risk"], abs=1e-12)
    assert res.truth_coverage == pytest.approx(ref["truth_coverage"], abs=1e-12)
    assert res.n_true_missing == ref["n_true_missing"]
    assert res.n_zero_candidate == ref["n_zero_candidate"]
    assert sorted(res.top_k) == sorted(ref["top_k"])
    for k, v in ref["top_k"].items():
        assert res.top_k[k] == pytest.approx(v, abs=1e-12), k
    if ref["lift"] is None:
        assert res.lift is None
    else:
        assert res.lift == pytest.approx(ref["lift"], rel=1e-12)
