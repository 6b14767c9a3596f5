"""`distance_metrics`: every configured distance metric in one pipeline over the sides'
projections (docs/metrics.md, "Distance-based metrics")."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from typing import Any

from pyspark import StorageLevel
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from privacy_eval.distance.figures import (
    CloakingFigures,
    ClosestFigures,
    HoldoutFigures,
    cloaking_figures,
    closest_figures,
    holdout_figures,
)
from privacy_eval.distance.kernel import coordinate_names
from privacy_eval.distance.search import ID, RADIUS, Grid, cloaking_counts, nearest_distances, with_own_chunk
from privacy_eval.distance.space import EIGEN_TIE, Space, counted, fit_space, project
from privacy_eval.errors import InputError

CLOAKING = ("hidden_rate", "local_cloaking")
CLOSEST = ("distance_to_closest_record", "nearest_neighbour_distance_ratio")
HOLDOUT = "holdout_distance_share"
EMPTY_HOLDOUT = "holdout: the table has no rows (holdout_distance_share needs records to compare with)"


@dataclass(frozen=True)
class DistanceResult:
    space: Space
    imputed: dict[str, int]           # imputed numeric cells per side
    n_original: int
    n_synthetic: int
    cloaking: CloakingFigures | None = None
    closest: ClosestFigures | None = None
    holdout: HoldoutFigures | None = None
    warnings: tuple[str, ...] = field(default=())

    def space_details(self) -> dict[str, Any]:
        return {**self.space.details(), **{f"imputed_{side}": n for side, n in self.imputed.items()}}


def distance_metrics(
    original: DataFrame,
    synthetic: DataFrame,
    key: str,
    columns: Sequence[str],
    numeric: Collection[str],
    chosen: Collection[str],
    components: int | str = 5,
    cap: int = 1000,
    holdout: DataFrame | None = None,
) -> DistanceResult:
    """The `chosen` distance metrics of `synthetic` against `original` (both with the row
    key `key`, pairing original i with synthetic a_i), in the FAMD space of the original
    over `columns` (5.1). With d the Euclidean distance in that space and the tie rule
    |d - r| <= 1e-9 max(1, r):

    - hidden rate = 100 (1 - Σ hit_i / n_p), hit_i = 1/(1 + t_i) when no other synthetic
      record is closer to x_i than a_i (c_i = 0), t_i those tied with it;
      local cloaking = median of min(c_i + t_i, cap), over the n_p paired originals;
    - DCR = median of d1(s), NNDR = median of d1(s)/d2(s) (1 when d2 = 0), d1 and d2 the
      two smallest distances from synthetic record s to the originals;
    - holdout share = (#{d_O(s) closer than d_H(s)} + ½ #{tied}) / m against `holdout`.
    """
    numeric = [c for c in columns if c in numeric]
    space = fit_space(original, columns, numeric, components)
    k = space.components
    names = coordinate_names(k)
    tasks = original.sparkSession.sparkContext.defaultParallelism

    def placed(frame: DataFrame, keep: list[str]) -> DataFrame:
        return project(frame, space, columns, numeric, keep).persist(StorageLevel.MEMORY_AND_DISK)

    o = placed(original.withColumnRenamed(key, ID), [ID])
    s = placed(synthetic.withColumnRenamed(key, ID), [ID])
    h = placed(holdout, []) if holdout is not None and HOLDOUT in chosen else None
    cached: list[DataFrame] = [frame for frame in (o, s, h) if frame is not None]
    try:
        sizes = {side: counted(frame, side, space.scaling)
                 for side, frame in (("original", o), ("synthetic", s), ("holdout", h)) if frame is not None}
        n, m = sizes["original"][0], sizes["synthetic"][0]
        if h is not None and sizes["holdout"][0] == 0:
            raise InputError(EMPTY_HOLDOUT)
        result: dict[str, Any] = {}
        if any(c in chosen for c in (*CLOSEST, HOLDOUT)):
            near = nearest_distances(o, s, k, 2, Grid.sized(n, m, tasks)).persist(StorageLevel.MEMORY_AND_DISK)
            cached.append(near)
            if any(c in chosen for c in CLOSEST):
                result["closest"] = closest_figures(near, n)
            if h is not None:
                n_h = sizes["holdout"][0]
                to_holdout = nearest_distances(h, s, k, 1, Grid.sized(n_h, m, tasks))
                result["holdout"] = holdout_figures(near, to_holdout, ID, n, n_h)
        if any(c in chosen for c in CLOAKING):
            paired = _paired_radii(o, s, names)
            grid = Grid.sized(m, n, tasks)
            counts = cloaking_counts(s, with_own_chunk(paired, grid), k, grid, cap).persist(StorageLevel.MEMORY_AND_DISK)
            cached.append(counts)
            if counts.count() > 0:
                result["cloaking"] = cloaking_figures(counts, cap)
    finally:
        for frame in cached:
            frame.unpersist()
    warnings = ()
    if space.eigen_tie:
        warnings = (
            f"distance: the {k}th and {k + 1}th eigenvalues of the space are equal or nearly so (within "
            f"{EIGEN_TIE:g}, relative): the {k}-dimensional projection is not unique, and its distances depend on "
            "an arbitrary choice or on rounding; use 'components: all' or another number of components",
        )
    return DistanceResult(
        space=space, imputed={side: v[1] for side, v in sizes.items()}, n_original=n, n_synthetic=m,
        warnings=warnings, **result,
    )


def _paired_radii(o: DataFrame, s: DataFrame, names: Sequence[str]) -> DataFrame:
    """Per paired original: ID, its coordinates and RADIUS = r_i, its distance to its own
    synthetic record, summed one coordinate at a time like the kernel's distances."""
    own = s.select(ID, *(F.col(c).alias("own" + c) for c in names))
    joined = o.select(ID, *names).join(own, ID)
    total = F.lit(0.0)
    for c in names:
        total = total + (F.col(c) - F.col("own" + c)) * (F.col(c) - F.col("own" + c))
    return joined.select(ID, F.sqrt(total).alias(RADIUS), *names)
