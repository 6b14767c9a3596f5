"""synthpop's `disclosure()` (R/disclosure.R, `group_num`, classInt's classIntervals)
and SDMetrics' CategoricalCAP / DisclosureProtection, transcribed to numpy/pandas.

Written from synthpop's R code, table by table, not from the Spark module: the two-way
tables tab_ktd / tab_kts over the union of key combinations and target levels, their
column proportions, the eight tables synthpop cuts at denom_lim one by one, and the
sums it divides. Shares no function with src/. The documented deviations are kept: a
value is its own level (no 15-digit labels, no " | "-joined keys), a missing value is
a level distinct from every value (R's "Missing" string could merge with one), and
where synthpop stops (a binned column with one value, with infinities) the job's
documented choice is followed. Ties in the checks follow the job's documented rule.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

MISSING = ("<missing>",)   # a label no value can equal
NOT_A_NUMBER = ("<NaN>",)  # an unbinned NaN: a level of its own, as R's factor("NaN")


def _is_missing(v) -> bool:
    return v is None or v is pd.NA or v is pd.NaT


def labels(values: Sequence) -> list:
    """One hashable label per value: missing, NaN and the value itself (1 == 1.0 and
    -0.0 == 0.0 hash alike in Python, as R's factor labels agree)."""
    out = []
    for v in values:
        if _is_missing(v):
            out.append(MISSING)
        elif isinstance(v, float) and math.isnan(v):
            out.append(NOT_A_NUMBER)
        else:
            out.append(v)
    return out


def r_quantile7(sorted_x: np.ndarray, probs: Sequence[float]) -> list[float]:
    """R 4.x quantile(type = 7) on an ascending array."""
    n = len(sorted_x)
    out = []
    for p in probs:
        index = 1 + max(n - 1, 0) * p
        lo, hi = math.floor(index), math.ceil(index)
        q = float(sorted_x[lo - 1])
        if index > lo and float(sorted_x[hi - 1]) != q:
            h = index - lo
            q = (1 - h) * q + h * float(sorted_x[hi - 1])
        out.append(q)
    return out


def r_breaks(pooled: np.ndarray, n: int, style: str = "quantile") -> list[float] | None:
    """classIntervals(var, n, style)$brks, unique; None where classInt stops."""
    var = pooled[np.isfinite(pooled)]
    distinct = np.unique(var)
    nobs = len(distinct)
    if nobs <= 1:
        return None
    if n >= nobs:  # style "unique"
        d = np.diff(distinct)
        half = float(np.mean(d)) / 2
        return [float(distinct[0]) - half, *(float(a) + float(g) / 2 for a, g in zip(distinct[:-1], d)),
                float(distinct[-1]) + half]
    if style == "equal":
        lo, hi = float(var.min()), float(var.max())
        return [lo, *(lo + i * ((hi - lo) / n) for i in range(1, n)), hi]
    step = 1 / n
    probs = [min(i * step, 1.0) for i in range(int(1 / step + 1e-10) + 1)]
    brks = r_quantile7(np.sort(var), probs)
    return list(dict.fromkeys(brks))  # unique(), first occurrence kept


def r_cut(x: np.ndarray, breaks: Sequence[float]) -> list:
    """cut(x, breaks, right = FALSE, include.lowest = TRUE) as interval numbers; NA
    (MISSING) for NA, NaN and values outside the breaks."""
    b = np.sort(np.asarray(breaks, dtype=float))
    k = np.minimum(np.searchsorted(b, x, side="right") - 1, len(b) - 2)  # b[k] <= x < b[k+1], last closed
    outside = np.isnan(x) | (x < b[0]) | (x > b[-1])
    return [MISSING if out else int(i) for out, i in zip(outside, k)]


def group_num(original: Sequence, synthetic: Sequence, n: int) -> tuple[list, list, int]:
    """synthpop's group_num with the fallback of disclosure(): quantile breaks on the
    pooled non-missing values; 'equal' when they give fewer than 3 groups. Returns the
    two grouped columns and the number of groups."""
    def numbers(values):
        return np.array([np.nan if _is_missing(v) else float(v) for v in values], dtype=float)

    xo, xs = numbers(original), numbers(synthetic)
    pooled = np.concatenate([xo, xs])
    pooled = pooled[~np.isnan(pooled)]
    finite = pooled[np.isfinite(pooled)]
    if len(finite) == 0:
        return [MISSING] * len(xo), [MISSING] * len(xs), 0
    if len(np.unique(finite)) == 1:  # synthpop stops; the job: one group
        value = float(finite[0])
        return ([0 if v == value else MISSING for v in xo], [0 if v == value else MISSING for v in xs], 1)
    breaks = r_breaks(finite, n)
    if len(breaks) - 1 < 3:
        breaks = r_breaks(finite, n, style="equal")
    return r_cut(xo, breaks), r_cut(xs, breaks), len(breaks) - 1


def _table(targets: list, keys: list, t_levels: list, q_levels: list) -> np.ndarray:
    t_index = {t: i for i, t in enumerate(t_levels)}
    q_index = {q: j for j, q in enumerate(q_levels)}
    tab = np.zeros((len(t_levels), len(q_levels)))
    np.add.at(tab, ([t_index[t] for t in targets], [q_index[q] for q in keys]), 1)
    return tab


def _proportions(tab: np.ndarray) -> np.ndarray:
    sums = tab.sum(axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        p = tab / sums
    p[np.isnan(p)] = 0
    return p


def disclosure(
    original: pd.DataFrame,
    synthetic: pd.DataFrame,
    keys: Sequence[str],
    target: str,
    bins: Mapping[str, int] | None = None,
    denom_lim: int = 5,
    exclude_ov_denom_lim: bool = False,
    thresh_1way: Sequence[float] = (50, 90),
    thresh_2way: Sequence[float] = (4, 80),
) -> dict:
    """disclosure.synds for one target (m = 1), as a dict of its outputs."""
    bins = bins or {}
    cols_o, cols_s, groups = {}, {}, {}
    for c in [*keys, target]:
        o, s = list(original[c]), list(synthetic[c])
        if c in bins:
            cols_o[c], cols_s[c], groups[c] = group_num(o, s, bins[c])
        else:
            cols_o[c], cols_s[c] = labels(o), labels(s)
    qd = list(zip(*(cols_o[k] for k in keys)))
    qs = list(zip(*(cols_s[k] for k in keys)))
    td, ts = cols_o[target], cols_s[target]
    nd, ns = len(td), len(ts)
    q_levels = list(dict.fromkeys(qd + qs))
    t_levels = list(dict.fromkeys(td + ts))
    tab_ktd = _table(td, qd, t_levels, q_levels)
    tab_kts = _table(ts, qs, t_levels, q_levels)
    ks_present = tab_kts.sum(axis=0) > 0  # Ks: the synthetic key levels, before exclusions

    tab_ktd_p, tab_kts_p = _proportions(tab_ktd), _proportions(tab_kts)
    tab_td = tab_ktd.sum(axis=1)
    did = np.where(tab_ktd_p == 1, tab_ktd, 0)
    dis = np.where(tab_kts_p == 1, tab_kts, 0)
    tab_iS = np.where(tab_kts.sum(axis=0) > 0, tab_ktd, 0)
    anydis = (tab_kts_p == 1).any(axis=0)
    tab_DiS = np.where(anydis, tab_ktd, 0)
    tab_DiSCO = np.where(tab_kts_p < 1, 0, tab_iS)
    tab_DiSDiO = np.where(tab_ktd_p < 1, 0, tab_DiSCO)

    def tab_exclude(xx: np.ndarray) -> np.ndarray:
        return np.where(xx > denom_lim, 0, xx) if exclude_ov_denom_lim else xx

    tab_ktd, tab_kts, did, dis, tab_iS, tab_DiS, tab_DiSCO, tab_DiSDiO = (
        tab_exclude(t) for t in (tab_ktd, tab_kts, did, dis, tab_iS, tab_DiS, tab_DiSCO, tab_DiSDiO)
    )
    tab_ks, tab_kd = tab_kts.sum(axis=0), tab_ktd.sum(axis=0)
    ident = {
        "UiS": (tab_ks == 1).sum() / ns * 100,
        "UiO": (tab_kd == 1).sum() / nd * 100,
        "UiOiS": ((tab_kd == 1) & ks_present).sum() / nd * 100,
        "repU": ((tab_ks == 1) & (tab_kd == 1)).sum() / nd * 100,
    }
    tab_ktd_p, tab_kts_p = _proportions(tab_ktd), _proportions(tab_kts)
    attrib = {
        "Dorig": did.sum() / nd * 100, "Dsyn": dis.sum() / ns * 100, "iS": tab_iS.sum() / nd * 100,
        "DiS": tab_DiS.sum() / nd * 100, "DiSCO": tab_DiSCO.sum() / nd * 100,
        "DiSDiO": tab_DiSDiO.sum() / nd * 100,
        "max_denom": int(tab_DiSCO.max()),
        "mean_denom": float(tab_DiSCO[tab_DiSCO > 0].mean()) if (tab_DiSCO > 0).any() else None,
    }
    nsboth = tab_ks[tab_kd > 0].sum()
    dcap = (tab_kts_p * tab_ktd).sum()
    pu = np.where(tab_kts_p != 1, 0, tab_kts_p)
    denom_tcap = (tab_kd * pu.sum(axis=0)).sum()
    caps = {
        "baseCAPd": ((tab_td / nd) ** 2).sum() * 100,
        "CAPd": ((tab_ktd_p ** 2).sum(axis=0) * tab_kd).sum() / nd * 100,
        "CAPs": ((tab_kts_p ** 2).sum(axis=0) * tab_ks).sum() / ns * 100,
        "DCAPb": dcap / nsboth * 100 if nsboth else None, "DCAPs": dcap / ns * 100, "DCAPd": dcap / nd * 100,
        "TCAPb": (pu * tab_ktd).sum() / nsboth * 100 if nsboth else None,
        "TCAPs": (pu * tab_ktd).sum() / ns * 100,
        "TCAP": (pu * tab_ktd).sum() / denom_tcap * 100 if denom_tcap else None,
    }
    records = {"Dorig": did, "Dsyn": dis, "iS": tab_iS, "DiS": tab_DiS, "DiSCO": tab_DiSCO, "DiSDiO": tab_DiSDiO}
    counts = {"records": {k: int(v.sum()) for k, v in records.items()} | {"N_b": int(nsboth),
                                                                         "denom_TCAP": int(denom_tcap)},
              **{f"{k}_records": int(v) for k, v in (
                  ("UiO", (tab_kd == 1).sum()), ("UiS", (tab_ks == 1).sum()),
                  ("UiOiS", ((tab_kd == 1) & ks_present).sum()), ("repU", ((tab_ks == 1) & (tab_kd == 1)).sum()))}}
    one_way = _check_1way(tab_ktd, tab_DiSCO, thresh_1way)
    two_way = _check_2way(tab_DiSCO, t_levels, q_levels, qd, td, keys, thresh_2way)
    return {**ident, **attrib, **caps, **counts, "groups": groups, "check_1way": one_way, "check_2way": two_way,
            **sdmetrics(original, synthetic, keys, target, cols_o, cols_s)}


def _check_1way(tab_ktd: np.ndarray, tab_DiSCO: np.ndarray, thresh: Sequence[float]) -> dict:
    tab_target = tab_ktd.sum(axis=1)
    dis_target = tab_DiSCO.sum(axis=1)
    total = dis_target.sum()
    # the level with the most disclosive records; on ties the one with more records
    top = max(range(len(dis_target)), key=lambda i: (dis_target[i], tab_target[i]))
    n_level = dis_target[top]
    share = n_level / total * 100 if total else None
    return {
        "flagged": bool(share is not None and n_level > thresh[0] and share > thresh[1]),
        "disclosive_records": int(total), "top_level_disclosive": int(n_level),
        "top_level_share_of_disclosive": share,
        "top_level_share_of_all": tab_target[top] / tab_target.sum() * 100 if tab_target.sum() else None,
    }


def _check_2way(tab_DiSCO, t_levels, q_levels, qd, td, keys, thresh) -> dict:
    pairs = []
    rows, cols = np.nonzero(tab_DiSCO > thresh[0])
    for i in range(len(keys)):
        npairs: dict = {}
        for r, c in zip(rows, cols):
            pair = (t_levels[r], q_levels[c][i])
            npairs[pair] = npairs.get(pair, 0) + int(tab_DiSCO[r, c])
        key_total = Counter(q[i] for q in qd)                      # table(dd[, key])
        key_target_total = Counter((q[i], t) for q, t in zip(qd, td))
        for (t, level), n in npairs.items():
            kt, k = key_target_total[(level, t)], key_total[level]
            if kt * 100 / k > thresh[1]:
                pairs.append((n, -i, kt, k))
    out = {"flagged": bool(pairs), "pairs": len(pairs)}
    if pairs:
        n, minus_i, kt, k = max(pairs)
        out |= {"largest_key": keys[-minus_i], "largest_disclosive_records": n,
                "largest_key_level_records": k, "largest_key_level_target_records": kt}
    return out


def sdmetrics(original, synthetic, keys, target, cols_o, cols_s) -> dict:
    """CategoricalCAP (CAPAttacker's score averaged over the real rows whose key occurs in
    the synthetic data, 0 when none does) and DisclosureProtection's score, on the same
    grouped, null-filled columns."""
    synth: dict = {}
    for q, t in zip(zip(*(cols_s[k] for k in keys)), cols_s[target]):
        synth.setdefault(q, {}).setdefault(t, 0)
        synth[q][t] += 1
    score, count = 0.0, 0
    for q, t in zip(zip(*(cols_o[k] for k in keys)), cols_o[target]):
        if q in synth:
            count += 1
            score += synth[q].get(t, 0) / sum(synth[q].values())
    cap = 1.0 - score / count if count else 0
    baseline = 1 - float(1 / len(set(cols_o[target])))
    protection = (0 if cap == 0 else 1) if baseline == 0 else min(cap / baseline, 1)
    return {"sdmetrics_categorical_cap": cap, "sdmetrics_disclosure_protection": protection}
