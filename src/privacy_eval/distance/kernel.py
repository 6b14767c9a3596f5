"""What the executors compute for the distance metrics, on numpy arrays: the scaled and
projected coordinates of a batch of records, and the exact searches of one index
chunk (docs/metrics.md, "Distance-based metrics").

Imported by the Spark workers: numpy, pandas and scipy only.

Every coordinate of a record is computed by elementwise operations in a fixed column
order, never by a matrix product: a BLAS product may round a row differently with
the size of its batch, and equal records must get bit-for-bit equal coordinates under
any partitioning (a duplicated record then sits at distance exactly 0).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy.spatial import cKDTree

# 5.2: d and r are tied when |d - r| <= TIE * max(1, r).
TIE = 1e-9
# A constant column (sd at or below this) is scaled by 1.
TINY_SD = 2.2e-308
# A coordinate larger than this in size (a value that many of the original's standard
# deviations from its mean) is refused: the squared distances of up to MAX_WIDTH (2000)
# coordinates, each below 2 * sqrt(2000) * 1e150 once projected, stay below 1.6e307,
# short of the largest double (1.8e308).
MAX_COORDINATE = 1e150


@dataclass(frozen=True)
class Scaling:
    """How a record becomes its scaled vector (5.1), in coordinate order: numeric
    columns first, then one coordinate per modality of each categorical column."""

    numeric: tuple[str, ...]
    means: tuple[float, ...]
    sds: tuple[float, ...]
    categorical: tuple[str, ...]
    # Per categorical column: its modalities (None = the null modality) and shares.
    modalities: tuple[tuple[str | None, ...], ...]
    shares: tuple[tuple[float, ...], ...]
    # Per numeric column, e: its values are read as x·2^-e, in which units its mean and
    # sd are given (frames.binary_exponent); empty: 0 for every column.
    exponents: tuple[int, ...] = ()

    @property
    def width(self) -> int:
        return len(self.numeric) + sum(len(m) for m in self.modalities)


def scaled(batch: pd.DataFrame, scaling: Scaling) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(Z, imputed, far): the batch's scaled vectors (rows x width); per row, how many
    numeric cells were null, NaN or infinite (imputed at the original's mean: 0); and
    per row the first numeric column whose coordinate exceeds MAX_COORDINATE in size,
    or -1."""
    n = len(batch)
    z = np.zeros((n, scaling.width))
    imputed = np.zeros(n, dtype=np.int64)
    far = np.full(n, -1, dtype=np.int64)
    exponents = scaling.exponents or (0,) * len(scaling.numeric)
    for j, (name, mean, sd, e) in enumerate(zip(scaling.numeric, scaling.means, scaling.sds, exponents)):
        x = pd.to_numeric(batch[name], errors="coerce").to_numpy(dtype=float, na_value=np.nan)
        bad = ~np.isfinite(x)
        imputed += bad
        with np.errstate(over="ignore", invalid="ignore"):  # what overflows is refused through `far`
            if e:
                x = np.ldexp(x, -e)  # exact: the column's units (Scaling.exponents)
            z[:, j] = np.where(bad, 0.0, (np.where(bad, mean, x) - mean) / sd)
        far[(far < 0) & ~(np.abs(z[:, j]) <= MAX_COORDINATE)] = j
    j = len(scaling.numeric)
    for name, modalities, shares in zip(scaling.categorical, scaling.modalities, scaling.shares):
        values = batch[name]
        missing = values.isna().to_numpy()
        text = values.to_numpy(dtype=object)
        for modality, p in zip(modalities, shares):
            hit = missing if modality is None else (~missing & (text == modality))
            # (1[x = k] - p) / sqrt(p), with both constants computed once.
            z[:, j] = np.where(hit, (1.0 - p) / np.sqrt(p), -p / np.sqrt(p))
            j += 1
    return z, imputed, far


def projected(z: np.ndarray, basis: np.ndarray | None) -> np.ndarray:
    """Z's coordinates on the basis (width x K), or Z itself without one; accumulated
    one input coordinate at a time (see the module docstring)."""
    if basis is None:
        return z
    out = np.zeros((z.shape[0], basis.shape[1]))
    for j in range(basis.shape[0]):
        out += z[:, j : j + 1] * basis[j]
    return out


def nearest(index: np.ndarray, queries: np.ndarray, k: int) -> np.ndarray:
    """Distances from each query to its k nearest index points, ascending (queries x k);
    inf where the index has fewer than k points. Exact (eps = 0)."""
    out = np.full((len(queries), k), np.inf)
    if len(index) and len(queries):
        d, _ = cKDTree(index).query(queries, k=k)
        out[:] = np.asarray(d).reshape(len(queries), k)
    return out


def cloaking_in_chunk(
    index: np.ndarray, queries: np.ndarray, r: np.ndarray, limit: int
) -> tuple[np.ndarray, np.ndarray]:
    """Per query q with radius r_q, against the index points: (whether one is closer than
    r_q, how many are closer than or tied with it), under the tie rule (5.2). The count
    is exact up to `limit`; above it, it is `limit` or more, except where no point is
    closer, where it is exact (every point counted is then tied: the hit needs it).

    A ball count costs as many steps as it counts, and counts grow with the data; a
    k-nearest query costs about k steps, each dearer than a ball count's. So: a k = 16
    query bounded by r_q + tau settles the balls that hold few; for the others, the
    16th distance estimates the ball's count (16 (r_q / d_16)^dims, a uniform density);
    balls estimated below BALL_FACTOR x limit are counted, the rest take a `limit`
    query, whose cost does not grow with the ball. The estimate only routes the work:
    both routes count the same points.
    """
    n, n_index = len(queries), len(index)
    closer = np.zeros(n, dtype=bool)
    either = np.zeros(n, dtype=np.int64)
    if not n_index or not n:
        return closer, either
    tree = cKDTree(index)
    tau = TIE * np.maximum(1.0, r)
    outer = r + tau
    k = min(_FIRST_K, limit, n_index)
    either[:], nearest_distance, kth = _bounded_counts(tree, queries, outer, k)
    closer[:] = nearest_distance < r - tau
    full = np.flatnonzero(either >= k) if k < n_index else np.zeros(0, dtype=np.int64)
    if len(full) and k < min(limit, n_index):
        with np.errstate(divide="ignore", over="ignore"):
            estimate = k * (outer[full] / kth[full]) ** index.shape[1]
        by_ball = estimate <= BALL_FACTOR * limit
        small, full = full[by_ball], full[~by_ball]
        either[small] = tree.query_ball_point(queries[small], outer[small], return_length=True)
        k = min(limit, n_index)
        either[full], _, _ = _bounded_counts(tree, queries[full], outer[full], k)
        full = full[either[full] >= k] if k < n_index else full[:0]
    tied_only = full[~closer[full]]
    if len(tied_only):
        either[tied_only] = tree.query_ball_point(queries[tied_only], outer[tied_only], return_length=True)
    return closer, either


_FIRST_K = 16
# A ball count is about 2.4x cheaper per point than a k-nearest query is per neighbour
# (measured: 1e7 and 2e6 records of 5 coordinates, docs/benchmarks.md).
BALL_FACTOR = 4
_QUERY_BATCH = 4096


def _bounded_counts(
    tree: cKDTree, queries: np.ndarray, outer: np.ndarray, k: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per query, #points within its radius `outer` among its k nearest, its nearest
    distance and its k-th (inf past the radius). scipy takes one distance bound per
    call: queries go in batches of similar radius (sorted), each bounded just above its
    largest radius."""
    found = np.zeros(len(queries), dtype=np.int64)
    nearest_distance = np.full(len(queries), np.inf)
    kth = np.full(len(queries), np.inf)
    order = np.argsort(outer, kind="stable")
    for s in range(0, len(order), _QUERY_BATCH):
        batch = order[s : s + _QUERY_BATCH]
        bound = np.nextafter(outer[batch].max(), np.inf)  # scipy's bound is strict
        d, _ = tree.query(queries[batch], k=k, distance_upper_bound=bound)
        d = np.asarray(d).reshape(len(batch), k)
        found[batch] = (d <= outer[batch, None]).sum(axis=1)
        nearest_distance[batch] = d[:, 0]
        kth[batch] = d[:, -1]
    return found, nearest_distance, kth


def coordinate_names(k: int) -> list[str]:
    return [f"__c{j}" for j in range(k)]


def as_matrix(frame: pd.DataFrame, names: Sequence[str]) -> np.ndarray:
    return frame[list(names)].to_numpy(dtype=float) if len(names) else np.zeros((len(frame), 0))
