"""Covariance moments and whitening (kernel section (a)): the Mahalanobis distance of
two records is the Euclidean distance of their whitened coordinates.

See docs/metrics.md, Linkage attack: scores (Mahalanobis, weighted, single-column).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import numpy as np
from scipy.linalg import LinAlgError, cholesky, solve_triangular

__all__ = ["CONDITION_LIMIT", "Moments", "Whitening", "whitening_from_covariance", "zero_constant"]

#: Above this 2-norm condition number of the ridged covariance the Mahalanobis
#: figure is fragile (reference constant MAHALANOBIS_CONDITION_LIMIT).
CONDITION_LIMIT: float = 100.0


@dataclass(frozen=True)
class Moments:
    """First and second moments of a set of records: the centred cross-product matrix
    rather than raw ``XᵀX``, which would cancel catastrophically when the columns have
    large means.  ``col_min``/``col_max`` make zero-variance detection exact (a rounding
    residue such as 1e-34 would otherwise survive as a "variance" and whitening would
    blow it up).

    ``cov_from`` names the records: ``raw`` the distinct originals (one row per row
    key), ``anon`` the distinct synthetic records, ``pooled`` both (a person present on
    both sides contributes two rows, as in the reference); the job computes them from
    exact sums (``linkage.prepare.covariance_moments``).
    """

    n: int
    mean: np.ndarray  # (p,)
    m2: np.ndarray  # (p, p): sum of (x - mean)(x - mean)^T
    col_min: np.ndarray  # (p,)
    col_max: np.ndarray  # (p,)

    @classmethod
    def from_array(cls, x: np.ndarray) -> Moments:
        """Moments of the rows of ``x`` (n × p); ``n`` may be 0."""
        x = np.asarray(x, dtype=np.float64)
        if x.ndim != 2:
            raise ValueError("expected a 2-d array (records × columns)")
        n, p = x.shape
        if n == 0:
            return cls(0, np.zeros(p), np.zeros((p, p)), np.full(p, np.inf), np.full(p, -np.inf))
        if not np.all(np.isfinite(x)):
            raise ValueError("NA/NaN/Inf in a target column: remove or impute first")
        mean = x.mean(axis=0)
        c = x - mean
        return cls(n, mean, c.T @ c, x.min(axis=0), x.max(axis=0))

    def covariance(self) -> tuple[np.ndarray, np.ndarray]:
        """(mean, sample covariance with denominator n-1); constant columns get exact zeros."""
        if self.n < 2:
            raise ValueError(f"need at least 2 distinct records to estimate a covariance; got {self.n}")
        cov = self.m2 / (self.n - 1)
        cov = 0.5 * (cov + cov.T)
        return self.mean.copy(), zero_constant(cov, self.col_min == self.col_max)


def zero_constant(cov: np.ndarray, constant: np.ndarray) -> np.ndarray:
    cov = cov.copy()
    cov[constant, :] = 0.0
    cov[:, constant] = 0.0
    return cov


@dataclass(frozen=True)
class Whitening:
    """Whitening of the kept target columns.

    ``w`` satisfies ``w @ w.T == inv(cov_ridged)`` so the Mahalanobis distance
    of two records is the Euclidean distance of ``transform(x)`` and
    ``transform(y)``.
    """

    w: np.ndarray  # (q, q), upper triangular
    kept: np.ndarray  # bool (p,)
    dropped: tuple[int, ...]  # indices of zero-variance columns (caller warns)
    cov_ridged: np.ndarray  # (q, q)
    ridge_added: np.ndarray  # (q,) what was added to the diagonal
    condition_number: float  # 2-norm κ of cov_ridged (R: kappa(S, exact=TRUE))
    condition_number_correlation: float  # κ of the correlation matrix (unit-free diagnostic)

    @property
    def ill_conditioned(self) -> bool:
        """The reference warns when κ > 100 or is not finite, but not for a single column."""
        if self.w.shape[0] < 2:
            return False
        return not (math.isfinite(self.condition_number) and self.condition_number <= CONDITION_LIMIT)

    def transform(self, x: np.ndarray) -> np.ndarray:
        """Whitened coordinates ``x[:, kept] @ w`` (n × q).

        Written as an explicit column loop rather than a BLAS product on
        purpose: a BLAS kernel may round a row differently depending on the
        batch it sits in, and an original and its identical synthetic twin
        arrive in different batches; they must get bit-identical coordinates
        so that their distance is exactly 0 (fixture F12).
        """
        x = np.asarray(x, dtype=np.float64)
        if x.ndim != 2 or x.shape[1] != self.kept.shape[0]:
            raise ValueError(f"expected an array with {self.kept.shape[0]} columns")
        xk = x[:, self.kept]
        q = self.w.shape[0]
        out = np.empty((x.shape[0], q))
        for j in range(q):
            acc = xk[:, 0] * self.w[0, j]
            for c in range(1, q):
                acc = acc + xk[:, c] * self.w[c, j]
            out[:, j] = acc
        return out


def whitening_from_covariance(
    cov: np.ndarray,
    ridge: float = 1e-6,
    *,
    ridge_scale: Literal["mean_diag", "per_column"] = "mean_diag",
) -> Whitening:
    """Drop zero-variance columns, add the ridge, and factor the inverse.

    ``ridge_scale="mean_diag"`` (reference) adds ``ridge * mean(diag S)`` to every
    diagonal entry, which makes the metric unit-dependent when columns have very
    different scales (docs/metrics.md, Linkage attack: deliberate deviations).  ``"per_column"`` adds ``ridge * S_jj`` to
    column j instead (the ridge applied to the correlation matrix), which keeps
    invariance under rescaling of a column.

    Raises ``ValueError`` for: no columns, a bad ridge, a non-finite or
    non-square covariance, every column constant, or a covariance that cannot be
    inverted (Cholesky fails, or κ > 1/eps where R's ``solve`` gives up).
    """
    cov = np.asarray(cov, dtype=np.float64)
    if cov.ndim != 2 or cov.shape[0] != cov.shape[1]:
        raise ValueError("covariance must be a square matrix")
    p = cov.shape[0]
    if p == 0:
        raise ValueError("targets must name at least one column")
    if not isinstance(ridge, (int, float, np.floating, np.integer)) or isinstance(ridge, bool):
        raise ValueError("ridge must be a single non-negative number")
    if not math.isfinite(float(ridge)) or ridge < 0:
        raise ValueError("ridge must be a single non-negative number")
    if ridge_scale not in ("mean_diag", "per_column"):
        raise ValueError("ridge_scale must be 'mean_diag' or 'per_column'")
    diag = np.diag(cov)
    kept = np.isfinite(diag) & (diag > 0)
    if not kept.any():
        raise ValueError(
            "every target column is constant on the reference side: the covariance is zero "
            "and no candidate can be told apart"
        )
    s = cov[np.ix_(kept, kept)]
    if not np.all(np.isfinite(s)):
        raise ValueError("covariance contains non-finite values")
    s = 0.5 * (s + s.T)
    sd = np.diag(s)
    if ridge_scale == "mean_diag":
        added = np.full(sd.shape[0], float(ridge) * float(np.mean(sd)))
    else:
        added = float(ridge) * sd
    s_r = s + np.diag(added)
    try:
        cond = float(np.linalg.cond(s_r, 2))
    except np.linalg.LinAlgError:
        cond = math.inf
    if not math.isfinite(cond):
        cond = math.inf
    corr = s / np.sqrt(np.outer(sd, sd))
    try:
        cond_corr = float(np.linalg.cond(corr, 2))
    except np.linalg.LinAlgError:
        cond_corr = math.inf
    fail = None
    if cond * np.finfo(np.float64).eps > 1.0:
        fail = f"reciprocal condition number {1.0 / cond:.3g} is below machine precision"
    else:
        try:
            chol = cholesky(s_r, lower=True)
        except LinAlgError as exc:
            fail = str(exc)
    if fail is not None:
        raise ValueError(
            f"the covariance of the target columns could not be inverted even after ridge = {ridge}; "
            f"use a larger ridge or drop one column of an exactly collinear pair ({fail})"
        )
    # S = L Lᵀ  =>  S⁻¹ = L⁻ᵀ L⁻¹, so W = L⁻ᵀ gives W Wᵀ = S⁻¹.
    linv = solve_triangular(chol, np.eye(chol.shape[0]), lower=True)
    return Whitening(
        w=np.ascontiguousarray(linv.T),
        kept=kept,
        dropped=tuple(int(i) for i in np.flatnonzero(~kept)),
        cov_ridged=s_r,
        ridge_added=added,
        condition_number=cond,
        condition_number_correlation=cond_corr,
    )

