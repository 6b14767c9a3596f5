"""Seeded original/synthetic pairs with the features that break naive metrics:
mixed types, nulls on both sides, duplicated rows on both sides, leaked rows
(verbatim copies of original rows, some at their aligned position) and int-vs-double
columns. Shared by the property test and scripts/bench, so both measure the same data.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

COLUMNS = ["age", "income", "score", "city", "sex", "visits"]
NUMERIC = ["age", "income", "score", "visits"]
KNOWN = ["age", "income", "city", "score"]


def generate(n: int, seed: int = 0) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Return (original, synthetic), each with a unique integer key column `id`.

    Original `age` and `visits` are nullable integers, synthetic `age` is a double:
    the two sides must still compare equal where the numbers agree. Numeric nulls are
    NaN while generating and become real nulls (pd.NA / None) at the end.
    """
    rng = np.random.default_rng(seed)
    cities = np.array([f"city_{i:02d}" for i in range(30)], dtype=object)

    def nulls(values: np.ndarray, share: float) -> np.ndarray:
        values = values.copy()
        values[rng.random(n) < share] = None if values.dtype == object else np.nan
        return values

    o = {
        "age": nulls(rng.integers(18, 91, n).astype(float), 0.02),
        "income": nulls(np.round(rng.lognormal(10, 0.6, n), 0), 0.03),
        "score": nulls(np.round(rng.normal(-50.0, 12.0, n), 1), 0.01),  # negative mean
        "city": nulls(cities[rng.integers(0, 30, n)], 0.02),
        "sex": np.where(rng.random(n) < 0.5, "F", "M").astype(object),
        "visits": rng.integers(0, 6, n).astype(float),
    }
    # ~8 % of rows duplicate another row on every compared column.
    copy_rows(o, o, np.flatnonzero(rng.random(n) < 0.08), rng.integers(0, n, n))

    s = {
        "age": nulls(o["age"] + rng.integers(-3, 4, n), 0.02),
        "income": nulls(np.round(o["income"] * rng.normal(1.0, 0.05, n), 0), 0.02),
        "score": np.round(o["score"] + rng.normal(0.0, 2.0, n), 1),
        "city": nulls(np.where(rng.random(n) < 0.3, cities[rng.integers(0, 30, n)], o["city"]), 0.03),
        "sex": o["sex"].copy(),
        "visits": rng.integers(0, 6, n).astype(float),
    }
    # Leaks: ~3 % of original rows reproduced verbatim, half at their aligned position.
    leak = np.flatnonzero(rng.random(n) < 0.03)
    aligned, moved = leak[: len(leak) // 2], leak[len(leak) // 2:]
    copy_rows(s, o, aligned, aligned)
    copy_rows(s, o, rng.integers(0, n, len(moved)), moved)
    # ~5 % of synthetic rows duplicate another synthetic row.
    copy_rows(s, s, np.flatnonzero(rng.random(n) < 0.05), rng.integers(0, n, n))

    original = _frame(o, n, integer_age=True)
    synthetic = _frame(s, n, integer_age=False)
    # A shuffled row order: alignment is by key, never by position here.
    synthetic = synthetic.sample(frac=1.0, random_state=seed).reset_index(drop=True)
    return original, synthetic


def copy_rows(dst: dict, src: dict, to: np.ndarray, frm: np.ndarray) -> None:
    for c in COLUMNS:
        dst[c][to] = src[c][frm[: len(to)]]


def _frame(cols: dict, n: int, integer_age: bool) -> pd.DataFrame:
    frame = pd.DataFrame({"id": np.arange(n, dtype=np.int64)})
    frame["age"] = pd.Series(cols["age"]).astype("Int64") if integer_age else cols["age"]
    frame["income"] = cols["income"]
    frame["score"] = cols["score"]
    frame["city"] = cols["city"]
    frame["sex"] = cols["sex"]
    frame["visits"] = pd.Series(cols["visits"]).astype("Int64")
    return frame
