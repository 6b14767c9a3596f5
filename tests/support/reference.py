"""A plain pandas/numpy implementation of the exact metrics of docs/metrics.md.

Independent of the Spark code on purpose: it shares no function with src/, so a
mistake in one is caught by the other. Used by the tests and by scripts/bench.
Rows are aligned by a key column; equality is pandas' own (NaN/None match in
groupby(dropna=False) and merge), which is the spec's null-safe equality for data
without NaN-vs-null distinctions.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd


def singletons(original: pd.DataFrame, columns: Sequence[str]) -> pd.DataFrame:
    counts = original.groupby(list(columns), dropna=False, sort=False).size()
    # to_frame, not reset_index: the latter inserts one column at a time, which pandas
    # warns about (PerformanceWarning) on tables of a few hundred columns.
    return counts[counts == 1].index.to_frame(index=False)[list(columns)]


def row_direct_match(original: pd.DataFrame, synthetic: pd.DataFrame, columns: Sequence[str]) -> dict:
    columns = list(columns)
    once = singletons(original, columns)
    reproduced = len(once.merge(synthetic[columns].drop_duplicates(), on=columns, how="inner"))
    n = len(original)
    return {
        "n": n,
        "n_singletons": len(once),
        "reproduced": reproduced,
        "protection": 100.0 * (1.0 - reproduced / n),
    }


def column_direct_match(
    original: pd.DataFrame, synthetic: pd.DataFrame, columns: Sequence[str], key: str
) -> dict:
    n = len(original)
    aligned = original.merge(synthetic, on=key, how="inner", suffixes=("_o", "_s"))
    per_column = {}
    for c in columns:
        x, y = aligned[f"{c}_o"], aligned[f"{c}_s"]
        matches = int(((x == y) | (x.isna() & y.isna())).sum())
        distinct = int(synthetic[c].nunique(dropna=False))
        per_column[c] = {
            "matches": matches,
            "distinct": distinct,
            "protection": 100.0 * (1.0 - matches * distinct / n**2),
        }
    return {"per_column": per_column, "protection": min(p["protection"] for p in per_column.values())}


def knowledge_protection(
    original: pd.DataFrame,
    synthetic: pd.DataFrame,
    columns: Sequence[str],
    known: Sequence[str],
    numeric: Sequence[str],
    bin_width: Mapping[str, float] | None = None,
) -> dict:
    known = list(known)
    once = singletons(original, columns)
    bin_width = bin_width or {}
    once_profiles = once[known].copy()
    synthetic_profiles = synthetic[known].copy()
    for v in known:
        if v not in numeric:
            continue
        values = once[v].astype(float)
        step = bin_width.get(v, 0.05 * abs(values.mean()))
        sd = values.std(ddof=1)
        low = values.min() - (0.0 if np.isnan(sd) else sd) / 10.0
        once_profiles[v] = np.floor((values - low) / step)
        synthetic_profiles[v] = np.floor((synthetic[v].astype(float) - low) / step)
    counts = synthetic_profiles.groupby(known, dropna=False, sort=False).size()
    unique_profiles = counts[counts == 1].reset_index()[known]
    exposed = len(once_profiles.merge(unique_profiles, on=known, how="inner"))
    n = len(original)
    return {
        "n": n,
        "n_singletons": len(once),
        "exposed": exposed,
        "unique_synthetic_profiles": len(unique_profiles),
        "protection": 100.0 * (1.0 - exposed / n),
    }
