"""`distance_metrics`: every configured distance metric in one pipeline over the sides'
projections (docs/metrics.md, "Distance-based metrics")."""

from __future__ import annotations

import logging
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from typing import Any

from pyspark import StorageLevel
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from privacy_eval.config import DistanceConfig
from privacy_eval.distance.figures import (
    CloakingFigures,
    ClosestFigures,
    HoldoutFigures,
    cloaking_figures,
    closest_figures,
    holdout_figures,
)
from privacy_eval.distance.kernel import coordinate_names
from privacy_eval.distance.search import (
    CELL,
    CELL_RECORDS,
    ID,
    OWN,
    RADIUS,
    Cells,
    CutIndex,
    SearchCost,
    cloaking_counts,
    cut_into_cells,
    cut_together,
    nearest_distances,
)
from privacy_eval.distance.space import EIGEN_TIE, Space, counted, fit_space, project
from privacy_eval.errors import InputError
from privacy_eval.frames import sequential_sum_sql

log = logging.getLogger(__name__)

CLOAKING = ("hidden_rate", "local_cloaking")
CLOSEST = ("distance_to_closest_record", "nearest_neighbour_distance_ratio")
HOLDOUT = "holdout_distance_share"
# From this many coordinates on, the searches are estimated as if every pair were scored,
# at PAIR_COORDINATE_SECONDS per pair and coordinate (scipy's cKDTree in 32 to 1,001
# coordinates, measured: docs/operations.md, "A space too wide to search").
WIDE_SPACE = 32
PAIR_COORDINATE_SECONDS = 1e-8
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
    # What each search cost, by the figures it served: "cloaking", "closest", "holdout".
    costs: dict[str, SearchCost] = field(default_factory=dict)

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
    cell_records: int = CELL_RECORDS,
    max_core_hours: float = DistanceConfig.max_core_hours,
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
    # Before the projection, which costs 8 bytes a coordinate.
    warnings = _wide_space_check(original, synthetic, holdout, chosen, k, max_core_hours) if k >= WIDE_SPACE else ()
    names = coordinate_names(k)
    tasks = original.sparkSession.sparkContext.defaultParallelism

    def placed(frame: DataFrame, keep: list[str]) -> DataFrame:
        return project(frame, space, columns, numeric, keep).persist(StorageLevel.MEMORY_AND_DISK)

    o = placed(original.withColumnRenamed(key, ID), [ID])
    s = placed(synthetic.withColumnRenamed(key, ID), [ID])
    h = placed(holdout, []) if holdout is not None and HOLDOUT in chosen else None
    cached: list[DataFrame] = [frame for frame in (o, s, h) if frame is not None]
    cuts: list[CutIndex] = []
    try:
        sizes = {side: counted(frame, side, space.scaling)
                 for side, frame in (("original", o), ("synthetic", s), ("holdout", h)) if frame is not None}
        n, m = sizes["original"][0], sizes["synthetic"][0]
        if h is not None and sizes["holdout"][0] == 0:
            raise InputError(EMPTY_HOLDOUT)
        result: dict[str, Any] = {}
        costs: dict[str, SearchCost] = {}
        closest, cloaking = any(c in chosen for c in (*CLOSEST, HOLDOUT)), any(c in chosen for c in CLOAKING)
        if closest and cloaking:  # each side searched for the other's records: one cut for both
            of_original, of_synthetic = _cut_both(o, n, s, m, names, cell_records)
            o, s = of_original.records, of_synthetic.records
        else:
            # The originals stand for their paired records in the home counts: at least as many.
            of_original = cut_into_cells(o, names, n, cell_records, s, m) if closest else None
            of_synthetic = cut_into_cells(s, names, m, cell_records, o, n) if cloaking else None
        cuts = [cut for cut in (of_original, of_synthetic) if cut is not None]
        if of_original is not None:
            near, costs["closest"] = nearest_distances(of_original, s, names, 2, tasks, m)
            cached.append(near)
            if any(c in chosen for c in CLOSEST):
                result["closest"] = closest_figures(near, n)
            if h is not None:
                n_h = sizes["holdout"][0]
                queries = s.drop(CELL)  # its cells are not the holdout's
                cuts.append(held := cut_into_cells(h, names, n_h, cell_records, queries, m))
                to_holdout, costs["holdout"] = nearest_distances(held, queries, names, 1, tasks, m)
                cached.append(to_holdout)
                result["holdout"] = holdout_figures(near, to_holdout, ID, n, n_h)
        if of_synthetic is not None:
            counts, costs["cloaking"] = cloaking_counts(
                of_synthetic, _paired_radii(o, s, names, of_synthetic.cells), names, cap, tasks)
            cached.append(counts)
            if counts.count() > 0:
                result["cloaking"] = cloaking_figures(counts, cap)
    finally:
        for cut in cuts:
            cut.release()
        for frame in cached:
            frame.unpersist()
    if space.eigen_tie:
        warnings += (
            f"distance: the {k}th and {k + 1}th eigenvalues of the space are equal or nearly so (within "
            f"{EIGEN_TIE:g}, relative): the {k}-dimensional projection is not unique, and its distances depend on "
            "an arbitrary choice or on rounding; use 'components: all' or another number of components",
        )
    return DistanceResult(
        space=space, imputed={side: v[1] for side, v in sizes.items()}, n_original=n, n_synthetic=m,
        warnings=warnings, costs=costs, **result,
    )


def _cut_both(
    o: DataFrame, n: int, s: DataFrame, m: int, names: Sequence[str], cell_records: int
) -> tuple[CutIndex, CutIndex]:
    """`cut_together` of the original and the synthetic side's projections; where it
    persisted their placed copies (more than one cell), the projections' caches are
    released: both sides are read from the copies (each cut's `records`) from then on."""
    of_original, of_synthetic = cut_together(o, n, s, m, names, cell_records)
    if of_original.cells.depth:
        o.unpersist()
        s.unpersist()
    return of_original, of_synthetic


def _wide_space_check(
    original: DataFrame, synthetic: DataFrame, holdout: DataFrame | None, chosen: Collection[str], k: int,
    max_core_hours: float,
) -> tuple[str, ...]:
    """`_wide_space_warnings` for the sides' sizes, each warning also logged at once:
    the user is waiting for the searches, not only for their figures."""
    n, m = original.count(), synthetic.count()
    n_h = holdout.count() if holdout is not None and HOLDOUT in chosen else 0
    warnings = _wide_space_warnings(k, _scored_pairs(chosen, n, m, n_h), n, m, max_core_hours)
    for message in warnings:
        log.info("%s; searching", message)
    return warnings


def _scored_pairs(chosen: Collection[str], n: int, m: int, n_holdout: int) -> int:
    """Record pairs the searches would score if they pruned nothing."""
    closest = n * m if any(c in chosen for c in (*CLOSEST, HOLDOUT)) else 0
    holdout = m * n_holdout if HOLDOUT in chosen else 0
    return closest + holdout + (n * m if any(c in chosen for c in CLOAKING) else 0)


def _wide_space_warnings(k: int, pairs: int, n: int, m: int, max_core_hours: float) -> tuple[str, ...]:
    """In WIDE_SPACE coordinates or more, a k-d tree prunes next to nothing and the
    searches score about every pair: refuse them past `max_core_hours` (estimated at
    PAIR_COORDINATE_SECONDS per pair and coordinate), warn past a core-minute."""
    if k < WIDE_SPACE:
        return ()
    hours = pairs * k * PAIR_COORDINATE_SECONDS / 3600
    said = (f"metrics.distance: in {k} coordinates a k-d tree prunes next to nothing, and the exact searches over "
            f"{n:,} original and {m:,} synthetic records would score about {pairs:,} pairs: an estimated "
            f"{hours:,.1f} core-hours")
    if hours > max_core_hours:
        raise InputError(
            f"{said}, more than 'metrics.distance.max_core_hours' ({max_core_hours:g}); lower "
            "'metrics.distance.components', leave high-cardinality columns out with 'metrics.distance.columns', "
            "or raise 'metrics.distance.max_core_hours'"
        )
    return (f"{said}",) if hours > 1 / 60 else ()


def _paired_radii(o: DataFrame, s: DataFrame, names: Sequence[str], cells: Cells) -> DataFrame:
    """Per paired original: ID, its coordinates, RADIUS = r_i, its distance to its own
    synthetic record, summed one coordinate at a time like the kernel's distances, and
    OWN, the cell of that synthetic record; with CELL, the original's home cell, where
    both sides carry their cells (`search.cut_together`)."""
    placed = [CELL] if CELL in o.columns and CELL in s.columns else []
    own = s.select(ID, *(F.col(c).alias("own" + c) for c in names), *(F.col(c).alias(OWN) for c in placed))
    joined = o.select(ID, *names, *placed).join(own, ID)
    total = F.expr(sequential_sum_sql([f"({c} - own{c}) * ({c} - own{c})" for c in names]))
    own_cell = F.col(OWN) if placed else cells.of([F.col("own" + c) for c in names])
    return joined.select(ID, F.sqrt(total).alias(RADIUS), own_cell.alias(OWN), *names, *placed)
