"""Brute-force float64 oracle for the distance-based metrics (docs/metrics.md,
"Distance-based metrics"; the headings below are its sections).

Independent of the Spark implementation on purpose: it imports nothing from
``privacy_eval`` and scores every pair (no index, no tree), so a mistake in either is
caught by the other.  Small data only (a few thousand rows per side).

The space, fitted on every row of the original (duplicates included):

    numeric v       (x - μ_v) / σ_v, μ and the population σ over the finite original values,
                    σ ≤ 2.2e-308 → 1; a null, NaN or ±inf cell → 0 (imputed at the mean)
    categorical c   one coordinate per original modality k: (1[x = k] - p_k) / √p_k,
                    null being a modality of its own; an unseen value has every indicator 0
    components K    K < width: project on the top-K eigenvectors of ZᵀZ (Z = scaled original);
                    "all" or K ≥ width: no projection

Tie rule: d tied with r when |d - r| ≤ τ(r) = 1e-9·max(1, r); closer when d < r - τ(r).

Hidden rate and local cloaking, per paired original i with own synthetic a_i, r_i = d(x_i, a_i),
over every synthetic j ≠ a_i (unpaired synthetic records included):

    c_i = #{j closer than r_i},  t_i = #{j tied with r_i},  hit_i = 1/(1 + t_i) if c_i = 0 else 0
    hidden_rate = 100·(1 - Σ hit_i / n_p),  LC_i = c_i + t_i,  local_cloaking = median min(LC_i, cap)

Distance to closest record and nearest-neighbour distance ratio, per synthetic s over all
originals: d1, d2 the two smallest distances, DCR = median d1, NNDR = median d1/d2 (:= 1
when d2 is tied with 0, d2 <= 1e-9: the job's documented reading of "d2 = 0", which
rounding in the space would otherwise decide).

Holdout distance share: (#{d_O closer than d_H} + ½·#{d_O tied with d_H}) / m, expected n/(n + n_H).
"""

from __future__ import annotations

import math
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

SD_FLOOR = 2.2e-308
TIE_REL = 1e-9
# Rows of the left operand per distance block: keeps one block's difference tensor near 128 MB.
_BLOCK_BYTES = 128 * 2**20


def tau(r: np.ndarray | float) -> np.ndarray | float:
    """Tie tolerance τ(r) = 1e-9 · max(1, r) (docs/metrics.md, "Tie rule")."""
    return TIE_REL * np.maximum(1.0, r)


def is_categorical(series: pd.Series, listed: Collection[str] = ()) -> bool:
    """Text, boolean (or pandas categorical) dtype, or named in ``listed``."""
    dt = series.dtype
    return (
        series.name in listed
        or pd.api.types.is_object_dtype(dt)
        or pd.api.types.is_string_dtype(dt)
        or pd.api.types.is_bool_dtype(dt)
        or isinstance(dt, pd.CategoricalDtype)
    )


def as_text(value: Any) -> str | None:
    """A categorical cell as Spark would compare it: null → None, bool → "true"/"false", else str().

    Spark casts a boolean to "true"/"false" while Python's str() gives "True"/"False", so
    booleans are mapped explicitly; a text "true" and a boolean True are the same modality.
    Floats listed as categorical use Python's str() (1.0 → "1.0", as Spark; exponent forms
    such as 1e+20 differ from Spark's 1.0E20 and are not used in tests), -0.0 that of 0.0
    (equal values, docs/metrics.md).
    """
    if value is None or value is pd.NA or value is pd.NaT:
        return None
    if isinstance(value, (float, np.floating)) and math.isnan(value):
        return None
    if isinstance(value, (bool, np.bool_)):
        return "true" if value else "false"
    if isinstance(value, (float, np.floating)) and value == 0:
        return str(abs(value))
    return str(value)


def _numeric_values(series: pd.Series) -> np.ndarray:
    # Unparseable text and pandas' nullable NA become NaN, i.e. imputed cells.
    return pd.to_numeric(series, errors="coerce").to_numpy(dtype="float64", na_value=np.nan)


@dataclass(frozen=True)
class Space:
    """The fitted FAMD space (docs/metrics.md, "The space"; before projection: ``width`` coordinates)."""

    numeric: tuple[str, ...]
    categorical: tuple[str, ...]
    means: tuple[float, ...]
    sds: tuple[float | None, ...]  # None: constant in the original
    modalities: tuple[tuple[tuple[str | None, float], ...], ...]  # per categorical column: (modality, p_k)
    width: int
    basis: np.ndarray | None  # width × K eigenvectors, None when no projection
    eigenvalues: np.ndarray  # of ZᵀZ, descending
    variance_kept: float
    subspace_ambiguous: bool  # K-th and (K+1)-th eigenvalues equal within 1e-9 relative (or both ~0)

    @property
    def components(self) -> int:
        return self.width if self.basis is None else self.basis.shape[1]


def _scaled(space_stats: tuple, frame: pd.DataFrame) -> tuple[np.ndarray, int]:
    """Scaled (unprojected) matrix of ``frame`` and its number of imputed numeric cells."""
    numeric, categorical, means, sds, modalities = space_stats
    blocks: list[np.ndarray] = []
    imputed = 0
    for col, mu, sd in zip(numeric, means, sds):
        x = _numeric_values(frame[col])
        bad = ~np.isfinite(x)
        imputed += int(bad.sum())
        if sd is None:  # constant in the original: 1 where the value differs from it
            z = (x != mu).astype(float)
        else:
            z = (x - mu) / sd
        z[bad] = 0.0
        blocks.append(z[:, None])
    for col, mods in zip(categorical, modalities):
        text = [as_text(v) for v in frame[col].tolist()]
        index = {k: j for j, (k, _) in enumerate(mods)}
        ind = np.zeros((len(text), len(mods)))
        for row, v in enumerate(text):
            j = index.get(v)
            if j is not None:  # an unseen value keeps every indicator at 0
                ind[row, j] = 1.0
        p = np.array([pk for _, pk in mods])
        blocks.append((ind - p) / np.sqrt(p))
    if not blocks:
        raise ValueError("no columns to compare")
    return np.hstack(blocks) if len(frame) else np.zeros((0, sum(b.shape[1] for b in blocks))), imputed


def fit_space(
    original: pd.DataFrame, *, columns: Sequence[str], categorical: Collection[str] = (), components: int | str = 5
) -> Space:
    """Fit the space on every row of ``original``: μ, population σ (σ ≤ 2.2e-308 → 1; None for a
    constant column), shares p_k, projection.

    A column's kind is decided by the original's dtype (a synthetic column that is all null
    may have dtype object without being text).
    """
    columns = list(columns)
    if not columns:
        raise ValueError("no columns to compare")
    if isinstance(components, bool) or not (components == "all" or (isinstance(components, (int, np.integer)) and components >= 1)):
        raise ValueError(f"components must be 'all' or an integer >= 1, got {components!r}")
    n = len(original)
    if n == 0:
        raise ValueError("the original is empty")
    numeric = tuple(c for c in columns if not is_categorical(original[c], categorical))
    cats = tuple(c for c in columns if is_categorical(original[c], categorical))
    means, sds = [], []
    for col in numeric:
        x = _numeric_values(original[col])
        x = x[np.isfinite(x)]
        if x.size == 0:
            raise ValueError(f"numeric column {col!r} has no finite original value (mean undefined)")
        if x.min() == x.max():
            # Exactly constant: no σ (None), and μ = the value itself; a record's coordinate
            # is whether its value differs from it (a rounded mean would leave a ~1e-17 σ).
            means.append(float(x[0]))
            sds.append(None)
            continue
        # fsum: correctly rounded sums, so the oracle's μ and σ do not depend on row order.
        mu = math.fsum(x.tolist()) / x.size
        sd = math.sqrt(math.fsum(((x - mu) ** 2).tolist()) / x.size)
        means.append(mu)
        sds.append(1.0 if sd <= SD_FLOOR else sd)
    modalities = []
    for col in cats:
        text = [as_text(v) for v in original[col].tolist()]
        counts: dict[str | None, int] = {}
        for v in text:
            counts[v] = counts.get(v, 0) + 1
        order = sorted(counts, key=lambda k: (k is not None, k or ""))  # null first; order is immaterial
        modalities.append(tuple((k, counts[k] / n) for k in order))
    stats = (numeric, cats, tuple(means), tuple(sds), tuple(modalities))
    z, _ = _scaled(stats, original)
    width = z.shape[1]
    gram = z.T @ z
    gram = 0.5 * (gram + gram.T)
    vals, vecs = np.linalg.eigh(gram)
    order = np.argsort(vals)[::-1]
    vals, vecs = vals[order], vecs[:, order]
    if components == "all" or components >= width:
        basis, kept, ambiguous = None, 1.0, False
    else:
        k = int(components)
        basis = vecs[:, :k]
        trace = float(np.trace(gram))
        kept = float(vals[:k].sum() / trace) if trace > 0 else 1.0
        # Equal within 1e-9 relative, or both rounding-level zeros (below 1e-9 of the largest eigenvalue).
        floor = TIE_REL * max(abs(vals[0]), 0.0)
        ambiguous = bool(
            abs(vals[k - 1] - vals[k]) <= TIE_REL * max(abs(vals[k - 1]), abs(vals[k])) or max(abs(vals[k - 1]), abs(vals[k])) <= floor
        )
    return Space(numeric, cats, tuple(means), tuple(sds), tuple(modalities), width, basis, vals, kept, ambiguous)


def embed(space: Space, frame: pd.DataFrame) -> tuple[np.ndarray, int]:
    """Coordinates of ``frame`` in ``space`` and its count of imputed numeric cells.

    The projection is an explicit broadcast sum rather than a BLAS product so that equal
    input rows give bit-identical coordinates (a synthetic copy of an original lands at
    distance exactly 0.0).
    """
    stats = (space.numeric, space.categorical, space.means, space.sds, space.modalities)
    z, imputed = _scaled(stats, frame)
    if space.basis is not None:
        z = (z[:, :, None] * space.basis[None, :, :]).sum(axis=1)
    return z, imputed


def pairwise_distances(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Every Euclidean distance ‖x_i - y_j‖ in float64, by differences (exact 0 for equal rows), in blocks."""
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    out = np.empty((x.shape[0], y.shape[0]))
    rows = max(1, _BLOCK_BYTES // (8 * max(1, y.shape[0]) * max(1, x.shape[1])))
    for start in range(0, x.shape[0], rows):
        diff = x[start : start + rows, None, :] - y[None, :, :]
        out[start : start + rows] = np.sqrt((diff * diff).sum(axis=-1))
    return out


def pairs(original: pd.DataFrame, synthetic: pd.DataFrame, key: str | None) -> list[tuple[int, int]]:
    """(original row, synthetic row) positions paired by ``key``, else by position.

    A null key pairs with nothing (a Spark equi-join never matches null); a key repeated on
    one side is an error (the alignment would be ambiguous).
    """
    if key is None:
        return [(i, i) for i in range(min(len(original), len(synthetic)))]

    def positions(frame: pd.DataFrame, side: str) -> dict[Any, int]:
        where: dict[Any, int] = {}
        for pos, k in enumerate(frame[key].tolist()):
            if as_text(k) is None:
                continue
            if k in where:
                raise ValueError(f"key {k!r} repeated in the {side}")
            where[k] = pos
        return where

    po, ps = positions(original, "original"), positions(synthetic, "synthetic")
    return sorted((po[k], ps[k]) for k in po.keys() & ps.keys())


def _median(a: np.ndarray) -> float | None:
    return float(np.median(a)) if a.size else None


def _lower(a: np.ndarray, q: float) -> Any:
    return np.quantile(a, q, method="lower").item() if a.size else None


def _share(mask: np.ndarray) -> float | None:
    return float(mask.mean()) if mask.size else None


def distance_reference(
    original: pd.DataFrame,
    synthetic: pd.DataFrame,
    *,
    columns: list[str],
    categorical: Collection[str] = (),
    components: int | str = 5,
    cap: int = 1000,
    holdout: pd.DataFrame | None = None,
    key: str | None = None,
) -> dict[str, Any]:
    """Every figure by brute force (formulas in the module docstring).

    ``dcr_near_zero`` / ``nndr_near_half`` count the records within 1e-9 of the untoleranced
    boundaries d1 = 0 and d1/d2 = 0.5: a correct implementation may disagree with the oracle's
    ``dcr_zero_share`` / ``nndr_below_half_share`` by at most that many records (over m).
    Returns scalars (see keys below) and, for debugging, the arrays ``d1``, ``d2``, ``ratio``
    (per synthetic record, in synthetic row order), ``c``, ``t``, ``hit``, ``lc`` (exact, uncapped),
    ``lc_capped`` (per pair, in original row order) and ``d_holdout``.
    """
    if key is not None and key in columns:
        raise ValueError(f"the key {key!r} is not a compared column")
    if isinstance(cap, bool) or not isinstance(cap, (int, np.integer)) or cap < 1:
        raise ValueError(f"cap must be an integer >= 1, got {cap!r}")
    space = fit_space(original, columns=columns, categorical=categorical, components=components)
    xo, imp_o = embed(space, original)
    xs, imp_s = embed(space, synthetic)
    n, m = len(original), len(synthetic)
    d_os = pairwise_distances(xo, xs)  # n × m

    # Hidden rate and local cloaking over the paired originals.
    paired = pairs(original, synthetic, key)
    c, t = _closer_and_tied(d_os, paired)
    # hit uses the exact t_i even past the cap (the spec caps LC only).
    hit = np.where(c == 0, 1.0 / (1.0 + t), 0.0)
    lc = c + t
    lc_capped = np.minimum(lc, cap)
    n_p = len(paired)
    capped = int((lc >= cap).sum())

    # DCR and NNDR: two smallest distances from each synthetic record to the originals.
    d1, d2 = _two_smallest(d_os)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(d2 <= TIE_REL, 1.0, d1 / d2)  # d2 tied with 0 (docs/metrics.md)
    have_d2 = n >= 2 and m > 0

    out: dict[str, Any] = {
        "width": space.width,
        "components": space.components,
        "variance_kept": space.variance_kept,
        "subspace_ambiguous": space.subspace_ambiguous,
        "numeric_columns": list(space.numeric),
        "categorical_columns": list(space.categorical),
        "imputed_original": imp_o,
        "imputed_synthetic": imp_s,
        "imputed_holdout": None,
        "n_original": n,
        "n_synthetic": m,
        "n_paired": n_p,
        "unpaired_original": n - n_p,
        "unpaired_synthetic": m - n_p,
        "hits": float(math.fsum(hit.tolist())) if n_p else None,
        "unique_hits": int(((c == 0) & (t == 0)).sum()) if n_p else None,
        "hidden_rate": 100.0 * (1.0 - math.fsum(hit.tolist()) / n_p) if n_p else None,
        "local_cloaking": _median(lc_capped),
        "lc_zero_share": _share(lc == 0),
        "lc_p10": _lower(lc_capped, 0.10),
        "lc_p50": _lower(lc_capped, 0.50),
        "lc_p90": _lower(lc_capped, 0.90),
        "capped": capped if n_p else None,
        "lc_median_lower_bound": (2 * capped >= n_p) if n_p else None,
        "dcr": _median(d1),
        "dcr_zero_share": _share(d1 == 0.0),
        "dcr_p05": _lower(d1, 0.05),
        "nndr": _median(ratio) if have_d2 else None,
        "nndr_below_half_share": _share(ratio < 0.5) if have_d2 else None,
        # The spec's d1 = 0 and d1/d2 < 0.5 have no tolerance, so a record within rounding of either
        # boundary may fall on the other side in another (equally correct) computation, e.g. under a
        # projection fitted with a different summation order.  These counts bound that discrepancy.
        "dcr_near_zero": int(((d1 > 0) & (d1 <= TIE_REL)).sum()),
        "nndr_near_half": int((np.abs(ratio - 0.5) <= TIE_REL).sum()) if have_d2 else None,
        "holdout_share": None,
        "holdout_expected": None,
        "holdout_closer": None,
        "holdout_tied": None,
        "d1": d1,
        "d2": d2,
        "ratio": ratio,
        "c": c,
        "t": t,
        "hit": hit,
        "lc": lc,
        "lc_capped": lc_capped,
        "d_holdout": None,
    }

    # Holdout share, same space (fitted on the original only).
    if holdout is not None:
        out.update(_holdout_figures(space, holdout, xs, d1, n))
    return out


def _closer_and_tied(d_os: np.ndarray, paired: list[tuple[int, int]]) -> tuple[np.ndarray, np.ndarray]:
    """Per pair (i, a): how many other synthetic records are strictly closer to original
    i than its own a (c), and how many are as close within tau (t)."""
    m = d_os.shape[1]
    c = np.zeros(len(paired), dtype=np.int64)
    t = np.zeros(len(paired), dtype=np.int64)
    others = np.ones(m, dtype=bool)
    for p, (i, a) in enumerate(paired):
        row = d_os[i]
        r = row[a]
        others[a] = False
        d = row[others]
        others[a] = True
        c[p] = int((d < r - tau(r)).sum())
        t[p] = int((np.abs(d - r) <= tau(r)).sum())
    return c, t


def _two_smallest(d_os: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(d1, d2) per synthetic record (column of `d_os`): its two smallest distances to
    the originals; d2 is NaN with fewer than two originals."""
    n, m = d_os.shape
    if m and n >= 2:
        two = np.partition(d_os, 1, axis=0)[:2]
        return two[0], two[1]
    return (d_os.min(axis=0) if m else np.zeros(0)), np.full(m, np.nan)


def _holdout_figures(space: Space, holdout: pd.DataFrame, xs: np.ndarray, d1: np.ndarray, n: int) -> dict[str, Any]:
    m = len(xs)
    xh, imp_h = embed(space, holdout)
    n_h = len(holdout)
    d_h = pairwise_distances(xs, xh).min(axis=1) if n_h else np.full(m, np.inf)
    closer = int((d1 < d_h - tau(d_h)).sum())
    tied = int((np.abs(d1 - d_h) <= tau(d_h)).sum())
    return {
        "imputed_holdout": imp_h,
        "holdout_share": (closer + 0.5 * tied) / m if m else None,
        "holdout_expected": n / (n + n_h),
        "holdout_closer": closer,
        "holdout_tied": tied,
        "d_holdout": d_h,
    }


def tie_fixture() -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """(original, synthetic, holdout) with ties built in, deterministic (seeded).

    Compared columns: ``age``, ``visits`` (integer-valued, with NaN), ``const`` (always 7),
    ``city`` (text with None; the synthetic has the unseen "Atlantis"), ``smoker`` (bool).
    Key ``id``: ids 3 and 7 only in the original, 100 and 101 only in the synthetic.
    Duplicates: originals 10, 11 copy original 5; synthetics of ids 12, 13 copy each other;
    the synthetic of id 20 copies original 20 and that of id 21 copies original 5 (d1 = 0,
    and d2 = 0 for the latter); holdout row 0 copies original 5 (a d_O = d_H = 0 tie).
    """
    rng = np.random.default_rng(20240607)
    n = 60
    cities = np.array(["Lyon", "Paris", "Nantes", "Lille"], dtype=object)
    orig = pd.DataFrame(
        {
            "id": np.arange(n, dtype=np.int64),
            "age": rng.integers(20, 30, n).astype(np.int64),
            "visits": rng.integers(0, 5, n).astype(np.float64),
            "const": np.full(n, 7, dtype=np.int64),
            "city": rng.choice(cities, n),
            "smoker": rng.random(n) < 0.3,
        }
    )
    cols = ["age", "visits", "const", "city", "smoker"]
    orig.loc[[2, 30, 41], "visits"] = np.nan
    orig.loc[[4, 33], "city"] = None
    orig.loc[[10, 11], cols] = orig.loc[[5, 5], cols].to_numpy()
    orig = orig.astype({"age": np.int64, "visits": np.float64, "const": np.int64, "city": object, "smoker": bool})

    syn = orig.copy()
    syn["age"] = syn["age"] + rng.integers(-2, 3, n)
    syn["visits"] = np.clip(syn["visits"] + rng.integers(-1, 2, n), 0, None)
    flip = rng.random(n) < 0.25
    syn.loc[flip, "city"] = rng.choice(cities, int(flip.sum()))
    syn.loc[rng.random(n) < 0.15, "smoker"] = ~syn["smoker"]
    syn.loc[[8, 44], "visits"] = np.nan
    syn.loc[[9], "city"] = None
    syn.loc[[15, 16], "city"] = "Atlantis"
    syn.loc[13, cols] = syn.loc[12, cols].to_numpy()
    syn.loc[20, cols] = orig.loc[20, cols].to_numpy()
    syn.loc[21, cols] = orig.loc[5, cols].to_numpy()
    syn = syn[~syn["id"].isin([3, 7])]
    extra = syn.iloc[[0, 1]].copy()
    extra["id"] = [100, 101]
    syn = pd.concat([syn, extra], ignore_index=True)
    syn = syn.astype({"age": np.int64, "visits": np.float64, "const": np.int64, "city": object, "smoker": bool})
    syn = syn.iloc[rng.permutation(len(syn))].reset_index(drop=True)  # key order ≠ row order

    n_h = 40
    hold = pd.DataFrame(
        {
            "age": rng.integers(20, 30, n_h).astype(np.int64),
            "visits": rng.integers(0, 5, n_h).astype(np.float64),
            "const": np.full(n_h, 7, dtype=np.int64),
            "city": rng.choice(cities, n_h),
            "smoker": rng.random(n_h) < 0.3,
        }
    )
    hold.loc[[3], "visits"] = np.nan
    hold.loc[[6], "city"] = None
    hold.loc[0, cols] = orig.loc[5, cols].to_numpy()
    hold = hold.astype({"age": np.int64, "visits": np.float64, "const": np.int64, "city": object, "smoker": bool})
    return orig, syn, hold
