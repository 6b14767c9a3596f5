"""Single-process numpy + scipy cKDTree computation of the distance metrics' figures
(docs/metrics.md, "Distance-based metrics"), for the benchmark (`scripts/bench distance`).

Independent of ``privacy_eval`` (imports nothing from it), like the brute-force oracle
(tests/support/distance_oracle.py), but with exact k-d-tree searches instead of every
pair, so that it runs at 1e6-1e7 rows in one process:

    space        numeric v: (x - μ_v) / σ_v, μ and population σ over the finite original
                 values (min = max: μ = that value, σ = 1; σ ≤ 2.2e-308 → 1), a null / NaN /
                 ±inf cell → 0; categorical c: (1[x = k] - p_k) / √p_k per original
                 modality k, null a modality of its own, an unseen value all indicators 0;
                 K < width: top-K eigenvectors of ZᵀZ (numpy.linalg.eigh)
    projection   accumulated one input coordinate at a time, never a matrix product, so
                 equal records get bit-identical coordinates (distance exactly 0)
    DCR / NNDR   cKDTree over the originals, k = 2 query per synthetic record
    cloaking     cKDTree over the synthetic records, per paired original two ball counts
                 at its own radius r: d ≤ r + τ (closer or tied) and d < r - τ (closer),
                 τ = 1e-9·max(1, r); its own synthetic record (tied by construction) left out
    medians      numpy's median; quantiles np.quantile(method="lower")

`distance_fast` returns the same scalar keys as `distance_reference` (the oracle).
The searches run on one thread unless ``workers`` says otherwise (cKDTree's ``workers``).
"""

from __future__ import annotations

import math
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from scipy.spatial import cKDTree

SD_FLOOR = 2.2e-308
TIE_REL = 1e-9


@dataclass(frozen=True)
class FastSpace:
    numeric: tuple[str, ...]
    means: tuple[float, ...]
    sds: tuple[float, ...]
    categorical: tuple[str, ...]
    modalities: tuple[tuple[str | None, ...], ...]
    shares: tuple[tuple[float, ...], ...]
    basis: np.ndarray | None  # width x K
    variance_kept: float

    @property
    def width(self) -> int:
        return len(self.numeric) + sum(len(m) for m in self.modalities)

    @property
    def components(self) -> int:
        return self.width if self.basis is None else self.basis.shape[1]


def _numbers(series: pd.Series) -> np.ndarray:
    return pd.to_numeric(series, errors="coerce").to_numpy(dtype=np.float64, na_value=np.nan)


def _text(series: pd.Series) -> np.ndarray:
    """Categorical cells as text (None for null); booleans as Spark writes them."""
    if pd.api.types.is_bool_dtype(series.dtype):
        return np.where(series.to_numpy(dtype=bool), "true", "false").astype(object)
    values = series.astype(object).to_numpy()
    missing = pd.isna(values)
    out = np.empty(len(values), dtype=object)
    out[~missing] = [str(v) for v in values[~missing]] if (~missing).any() else []
    out[missing] = None
    return out


def scaled(space: FastSpace, frame: pd.DataFrame) -> tuple[np.ndarray, int]:
    """Z (rows x width) of `frame` and its number of imputed numeric cells."""
    z = np.zeros((len(frame), space.width))
    imputed = 0
    for j, (c, mu, sd) in enumerate(zip(space.numeric, space.means, space.sds)):
        x = _numbers(frame[c])
        bad = ~np.isfinite(x)
        imputed += int(bad.sum())
        if sd == 0.0:
            z[:, j] = np.where(bad | (x == mu), 0.0, 1.0)
        else:
            z[:, j] = np.where(bad, 0.0, (np.where(bad, mu, x) - mu) / sd)
    j = len(space.numeric)
    for c, mods, shares in zip(space.categorical, space.modalities, space.shares):
        text = _text(frame[c])
        missing = pd.isna(text)
        for k, p in zip(mods, shares):
            hit = missing if k is None else (~missing & (text == k))
            z[:, j] = np.where(hit, (1.0 - p) / np.sqrt(p), -p / np.sqrt(p))
            j += 1
    return z, imputed


def fit(original: pd.DataFrame, columns: Sequence[str], categorical: Collection[str], components: int | str) -> FastSpace:
    nums = tuple(c for c in columns if c not in categorical)
    cats = tuple(c for c in columns if c in categorical)
    n = len(original)
    means, sds = [], []
    for c in nums:
        x = _numbers(original[c])
        x = x[np.isfinite(x)]
        if x.size == 0:
            raise ValueError(f"numeric column {c!r} has no finite original value")
        if x.min() == x.max():  # constant: its coordinate says only whether a value differs
            means.append(float(x[0]))
            sds.append(0.0)
            continue
        mu = float(x.mean())
        sd = float(np.sqrt(np.mean((x - mu) ** 2)))
        means.append(mu)
        sds.append(sd if sd > SD_FLOOR else 1.0)
    modalities, shares = [], []
    for c in cats:
        counts = pd.Series(_text(original[c])).value_counts(dropna=False)
        keys = [(None if pd.isna(k) else k, int(v)) for k, v in counts.items()]
        keys.sort(key=lambda kv: (kv[0] is not None, kv[0] or ""))
        modalities.append(tuple(k for k, _ in keys))
        shares.append(tuple(v / n for _, v in keys))
    space = FastSpace(nums, tuple(means), tuple(sds), cats, tuple(modalities), tuple(shares), None, 1.0)
    if components == "all" or int(components) >= space.width:
        return space
    k = int(components)
    z, _ = scaled(space, original)
    values, vectors = np.linalg.eigh(z.T @ z)
    values, vectors = np.clip(values[::-1], 0.0, None), vectors[:, ::-1]
    total = float(values.sum())
    kept = float(values[:k].sum() / total) if total > 0 else 1.0
    return FastSpace(nums, tuple(means), tuple(sds), cats, tuple(modalities), tuple(shares),
                     np.ascontiguousarray(vectors[:, :k]), kept)


def embed(space: FastSpace, frame: pd.DataFrame) -> tuple[np.ndarray, int]:
    """Coordinates of `frame`, accumulated one input coordinate at a time."""
    z, imputed = scaled(space, frame)
    if space.basis is None:
        return z, imputed
    out = np.zeros((z.shape[0], space.basis.shape[1]))
    for j in range(space.basis.shape[0]):
        out += z[:, j : j + 1] * space.basis[j]
    return out, imputed


def _euclidean(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    total = np.zeros(a.shape[0])
    for j in range(a.shape[1]):
        total += (a[:, j] - b[:, j]) ** 2
    return np.sqrt(total)


def _lower(a: np.ndarray, q: float) -> Any:
    return np.quantile(a, q, method="lower").item() if a.size else None


def distance_fast(
    original: pd.DataFrame,
    synthetic: pd.DataFrame,
    *,
    columns: Sequence[str],
    categorical: Collection[str] = (),
    components: int | str = 5,
    cap: int = 1000,
    key: str | None = None,
    workers: int = 1,
    timings: dict[str, float] | None = None,
) -> dict[str, Any]:
    """The hidden rate, local cloaking, DCR and NNDR (scalar keys as `distance_reference`), with cKDTree.

    Pairs by `key` (each key unique per side, null keys pair with nothing), else by
    position. `timings`, when given, receives the seconds of each step."""
    import time

    clock = [time.perf_counter()]

    def lap(name: str) -> None:
        now = time.perf_counter()
        if timings is not None:
            timings[name] = now - clock[0]
        clock[0] = now

    space = fit(original, columns, categorical, components)
    lap("fit")
    xo, imp_o = embed(space, original)
    xs, imp_s = embed(space, synthetic)
    lap("project")
    n, m = len(original), len(synthetic)

    # DCR and NNDR: two nearest originals of every synthetic record.
    if n >= 2:
        d, _ = cKDTree(xo).query(xs, k=2, workers=workers)
        d1, d2 = d[:, 0], d[:, 1]
    else:
        d1 = cKDTree(xo).query(xs, k=1, workers=workers)[0] if n else np.full(m, np.inf)
        d2 = np.full(m, np.nan)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(d2 <= TIE_REL, 1.0, d1 / d2)  # d2 tied with 0 (docs/metrics.md)
    lap("dcr_nndr_search")

    # Hidden rate and local cloaking: pairs, radii, ball counts against the synthetic tree.
    po, ps = _paired_rows(original, synthetic, key)
    c, t = _ball_counts(xo[po], xs, ps, workers)
    lap("cloaking_search")

    hit = np.where(c == 0, 1.0 / (1.0 + t), 0.0)
    lc = c + t
    lc_capped = np.minimum(lc, cap)
    n_p = len(po)
    capped = int((lc >= cap).sum())
    have_d2 = n >= 2 and m > 0
    hits = math.fsum(hit.tolist()) if n_p else None
    out = {
        "width": space.width,
        "components": space.components,
        "variance_kept": space.variance_kept,
        "imputed_original": imp_o,
        "imputed_synthetic": imp_s,
        "n_original": n,
        "n_synthetic": m,
        "n_paired": n_p,
        "unpaired_original": n - n_p,
        "unpaired_synthetic": m - n_p,
        "hits": hits,
        "unique_hits": int(((c == 0) & (t == 0)).sum()) if n_p else None,
        "hidden_rate": 100.0 * (1.0 - hits / n_p) if n_p else None,
        "local_cloaking": float(np.median(lc_capped)) if n_p else None,
        "lc_zero_share": float((lc == 0).mean()) if n_p else None,
        "lc_p10": _lower(lc_capped, 0.10),
        "lc_p50": _lower(lc_capped, 0.50),
        "lc_p90": _lower(lc_capped, 0.90),
        "capped": capped if n_p else None,
        "lc_median_lower_bound": (2 * capped >= n_p) if n_p else None,
        "dcr": float(np.median(d1)) if m else None,
        "dcr_zero_share": float((d1 == 0.0).mean()) if m else None,
        "dcr_p05": _lower(d1, 0.05),
        "nndr": float(np.median(ratio)) if have_d2 else None,
        "nndr_below_half_share": float((ratio < 0.5).mean()) if have_d2 else None,
        "d1": d1, "d2": d2, "ratio": ratio, "c": c, "t": t, "lc": lc,
    }
    lap("figures")
    return out


def _paired_rows(original: pd.DataFrame, synthetic: pd.DataFrame, key: str | None) -> tuple[np.ndarray, np.ndarray]:
    """Row numbers (original, synthetic) of the pairs, in original row order."""
    n, m = len(original), len(synthetic)
    if key is None:
        po = ps = np.arange(min(n, m))
        return po, ps
    ko = pd.Series(np.arange(n), index=original[key].to_numpy())
    ko = ko[ko.index.notna()]
    ks = pd.Series(np.arange(m), index=synthetic[key].to_numpy())
    ks = ks[ks.index.notna()]
    both = ko.index.intersection(ks.index)
    po = ko.loc[both].to_numpy()
    ps = ks.loc[both].to_numpy()
    order = np.argsort(po, kind="stable")
    return po[order], ps[order]


def _ball_counts(q: np.ndarray, xs: np.ndarray, ps: np.ndarray, workers: int) -> tuple[np.ndarray, np.ndarray]:
    """(closer, tied) per paired original `q`: the other synthetic records strictly
    closer than its own (row `ps` of `xs`), and those as close within tau."""
    r = _euclidean(q, xs[ps])
    tau = TIE_REL * np.maximum(1.0, r)
    tree = cKDTree(xs)
    either = np.asarray(tree.query_ball_point(q, r + tau, return_length=True, workers=workers), dtype=np.int64)
    closer = np.zeros(len(ps), dtype=np.int64)
    inner = r - tau
    some = inner > 0
    if some.any():
        closer[some] = tree.query_ball_point(q[some], np.nextafter(inner[some], -np.inf), return_length=True,
                                             workers=workers)
    tied = either - closer - 1  # the own synthetic record is tied by construction
    if (tied < 0).any():
        raise RuntimeError("a record's own synthetic record was not found at its own distance")
    return closer, tied
