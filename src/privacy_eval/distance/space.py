"""The space of the distance metrics: a FAMD of the original, fitted exactly (docs/metrics.md,
"Distance-based metrics", "The space").

Fitting takes up to three passes over the original: one aggregation for the numeric
columns' exact sums (means and population sds), one for the categorical columns'
modality counts, and one ``mapInArrow`` pass summing ZᵀZ per task (a width x width
matrix). The driver adds the partial matrices and decomposes the sum with
``numpy.linalg.eigh``: exact, no randomised SVD. Only aggregates reach the driver:
moments, modality counts (a categorical column's distinct values, never logged or
written) and the matrices.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from privacy_eval.columns import INTERNAL_PREFIX
from privacy_eval.distance.kernel import CONSTANT, MAX_COORDINATE, TINY_SD, Scaling, coordinate_names, projected, scaled
from privacy_eval.errors import InputError
from privacy_eval.frames import binary_exponent, canonical_value, exact_moments, qcol

# A categorical column with more modalities than this is an identifier or free text, not
# a variable of a FAMD: each modality is one coordinate and ZᵀZ grows with their square.
MAX_MODALITIES = 1000
MAX_WIDTH = 2000
# The K-th and (K+1)-th eigenvalues closer than this (relative): warn that the subspace
# is ill-determined. Wider than an exact tie (1e-9): with a gap of 1e-6, measured, the
# order of summation (the partitioning) moved distances by a few 1e-12.
EIGEN_TIE = 1e-6
IMPUTED = INTERNAL_PREFIX + "imputed"
_INPUT = INTERNAL_PREFIX + "input"
FAR = INTERNAL_PREFIX + "far"


@dataclass(frozen=True)
class Space:
    """The fitted space: how a record is scaled, and the basis it is projected on (None
    with `components: all` or K >= width)."""

    scaling: Scaling
    basis: np.ndarray | None
    variance_kept: float
    eigen_tie: bool   # the K-th and (K+1)-th eigenvalues are equal: the subspace is not unique

    @property
    def width(self) -> int:
        return self.scaling.width

    @property
    def components(self) -> int:
        return self.width if self.basis is None else self.basis.shape[1]

    def details(self) -> dict[str, Any]:
        return {"components": self.components, "width": self.width, "variance_kept": self.variance_kept}


def typed_columns(frame: DataFrame, columns: Sequence[str], numeric: Sequence[str]) -> list[Column]:
    """The columns as the kernel reads them: numeric ones as doubles, the others as text
    (categorical values are compared by their text form, of the canonical value: -0.0 and
    0.0 one modality). Named by position (`kernel_input`): PySpark's mapInArrow reads its
    input columns by unquoted name, which fails on a name with a backtick or a dot."""
    return [
        (qcol(c, frame).cast("double") if c in numeric else categorical_text(frame, c)).alias(f"{_INPUT}{i}")
        for i, c in enumerate(columns)
    ]


def kernel_input(batch: Any, columns: Sequence[str]) -> pd.DataFrame:
    """An Arrow batch of `typed_columns` as a pandas frame with the columns' own names."""
    frame = batch.to_pandas()
    frame.columns = list(frame.columns[: len(frame.columns) - len(columns)]) + list(columns)
    return frame


def categorical_text(frame: DataFrame, name: str) -> Column:
    """A categorical value as the space compares it: the text of its canonical form."""
    return canonical_value(frame, name).cast("string")


def fit_space(original: DataFrame, columns: Sequence[str], numeric: Sequence[str], components: int | str) -> Space:
    """The FAMD of `original` over `columns` (5.1), projected on the top `components`
    eigenvectors of ZᵀZ unless `components` is "all" or at least the width."""
    scaling = _scaling(original, columns, numeric)
    if scaling.width > MAX_WIDTH:
        raise InputError(
            f"metrics.distance: the space would have {scaling.width} coordinates (numeric columns + "
            f"modalities), more than {MAX_WIDTH}; leave high-cardinality columns out with 'metrics.distance.columns'"
        )
    if components == "all" or int(components) >= scaling.width:
        return Space(scaling, None, 1.0, False)
    k = int(components)
    gram = _gram(original, columns, numeric, scaling)
    values, vectors = np.linalg.eigh(gram)  # ascending
    values = np.clip(values[::-1], 0.0, None)
    vectors = vectors[:, ::-1]
    total = float(values.sum())
    kept = float(values[:k].sum() / total) if total > 0 else 1.0
    tie = bool(abs(values[k - 1] - values[k]) <= EIGEN_TIE * max(abs(values[k - 1]), np.finfo(float).tiny))
    return Space(scaling, np.ascontiguousarray(vectors[:, :k]), kept, tie)


def _scaling(original: DataFrame, columns: Sequence[str], numeric: Sequence[str]) -> Scaling:
    """Each numeric column's mean and population sd over its finite values, from exact
    sums (`frames.exact_moments`: the same under any partitioning), in units of 2^e for
    values beyond frames.RESCALE_ABOVE or below RESCALE_BELOW in size; each categorical
    column's modalities and shares."""
    nums = [c for c in columns if c in numeric]
    cats = [c for c in columns if c not in numeric]
    moments = exact_moments(original, nums)
    modalities, shares, n = _modalities(original, cats)
    if moments:
        n = moments[0].rows
    if n == 0:
        raise InputError("metrics.distance: the original has no rows to fit the space on")
    means, sds, exponents = [], [], []
    for c, m in zip(nums, moments):
        if m.low is None:
            raise InputError(
                f"metrics.distance: numeric column '{c}' has no finite value in the original (its mean "
                "is undefined); leave it out with 'metrics.distance.columns'"
            )
        if m.low == m.high:
            # Constant: told by min = max, not by a rounded sd such as 1e-17 for a column
            # of 0.1s, which would blow rounding residues up to O(1).
            exponents.append(0)
            means.append(float(m.low))
            sds.append(CONSTANT)
            continue
        e = binary_exponent(max(abs(m.low), abs(m.high)))
        mean, sd = m.mean(e), m.sd(e, ddof=0)
        exponents.append(e)
        means.append(mean)
        sds.append(sd if sd > TINY_SD else 1.0)
    return Scaling(tuple(nums), tuple(means), tuple(sds), tuple(cats), modalities, shares, tuple(exponents))


def _modalities(original: DataFrame, cats: Sequence[str]) -> tuple[tuple, tuple, int]:
    """Per categorical column, its modalities in the original (null included) and their
    shares, in one unpivoting pass; modalities in a fixed order (null first, then text);
    and the original's rows (0 without categorical columns)."""
    if not cats:
        return (), (), 0
    pairs = F.array(*(F.struct(F.lit(i).alias("i"), categorical_text(original, c).alias("v")) for i, c in enumerate(cats)))
    counted = original.select(F.explode(pairs).alias("p")).select("p.*").groupBy("i", "v").count()
    found: dict[int, list[tuple[str | None, int]]] = {i: [] for i in range(len(cats))}
    for row in counted.collect():
        found[int(row["i"])].append((row["v"], int(row["count"])))
    for i, c in enumerate(cats):
        if len(found[i]) > MAX_MODALITIES:
            raise InputError(
                f"metrics.distance: categorical column '{c}' has {len(found[i])} distinct values in the original, "
                f"more than {MAX_MODALITIES}; leave it out with 'metrics.distance.columns'"
            )
    ordered = [sorted(found[i], key=lambda vc: (vc[0] is not None, vc[0] or "")) for i in range(len(cats))]
    n = sum(count for _, count in found[0])  # every row has one value of each column, null included
    return (
        tuple(tuple(v for v, _ in mods) for mods in ordered),
        tuple(tuple(count / n for _, count in mods) for mods in ordered),
        n,
    )


def _gram(original: DataFrame, columns: Sequence[str], numeric: Sequence[str], scaling: Scaling) -> np.ndarray:
    """ZᵀZ of the original, summed per task on the executors and over tasks here."""
    width, names = scaling.width, list(columns)

    def partial(batches: Iterator[Any]) -> Iterator[Any]:
        import pyarrow as pa

        total = np.zeros((width, width))
        for batch in batches:
            z, _, _ = scaled(kernel_input(batch, names), scaling)  # the original's own values are never far
            total += z.T @ z
        yield pa.RecordBatch.from_pydict({"g": [total.ravel().tolist()]})

    parts = original.select(*typed_columns(original, columns, numeric)).mapInArrow(partial, "g array<double>").collect()
    gram = np.zeros((width, width))
    for row in parts:
        gram += np.asarray(row["g"]).reshape(width, width)
    return gram


def project(frame: DataFrame, space: Space, columns: Sequence[str], numeric: Sequence[str], keep: Sequence[str]) -> DataFrame:
    """`keep` columns of `frame` and the record's coordinates in the space (`kernel.coordinate_names`),
    plus IMPUTED, its count of imputed numeric cells, and FAR, the first numeric column
    whose coordinate is too large (kernel.MAX_COORDINATE), or -1 (see `counted`)."""
    coordinates = coordinate_names(space.components)
    from pyspark.sql.pandas.types import to_arrow_schema

    # Fields, not a DDL string: a kept name may hold any character.
    schema = T.StructType(
        list(frame.select(*(qcol(k) for k in keep)).schema.fields)
        + [T.StructField(n, T.DoubleType()) for n in coordinates]
        + [T.StructField(IMPUTED, T.LongType()), T.StructField(FAR, T.LongType())]
    )
    arrow_schema = to_arrow_schema(schema)
    scaling, basis, kept, inputs = space.scaling, space.basis, list(keep), list(columns)

    def run(batches: Iterator[Any]) -> Iterator[Any]:
        import pyarrow as pa

        for batch in batches:
            z, imputed, far = scaled(kernel_input(batch, inputs), scaling)
            with np.errstate(invalid="ignore"):  # a far record's inf * 0: refused by `counted`
                coords = projected(z, basis)
            arrays = [batch.column(k) for k in kept]
            arrays += [pa.array(coords[:, j]) for j in range(coords.shape[1])]
            arrays += [pa.array(imputed), pa.array(far)]
            yield pa.RecordBatch.from_arrays(arrays, schema=arrow_schema)

    selected = frame.select(*(qcol(k) for k in keep), *typed_columns(frame, columns, numeric))
    return selected.mapInArrow(run, schema)


def counted(frame: DataFrame, side: str, scaling: Scaling) -> tuple[int, int]:
    """(records, imputed cells) of a side `project`ed (filling its cache); refuses a side
    with a coordinate beyond kernel.MAX_COORDINATE, before any distance is computed."""
    far = F.col(FAR) >= 0
    row = frame.agg(
        F.count(F.lit(1)).alias("n"), F.sum(IMPUTED).alias("imputed"),
        F.count(F.when(far, 1)).alias("far"), F.min(F.when(far, F.col(FAR))).alias("column"),
    ).collect()[0]
    if row["far"]:
        raise InputError(
            f"metrics.distance: numeric column '{scaling.numeric[int(row['column'])]}' has {row['far']} value(s) in "
            f"the {side} table so far from the original's values that their coordinate exceeds {MAX_COORDINATE:g} "
            "(in standard deviations of the original), and distances to them would overflow; fix those values or "
            "leave the column out with 'metrics.distance.columns'"
        )
    return int(row["n"]), int(row["imputed"] or 0)
