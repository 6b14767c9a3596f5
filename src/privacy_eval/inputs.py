"""Making the two tables comparable (reading one table: reading.py; one type per column
on both sides: type_plan.py).

Everything a metric may assume is established here, once: which columns are compared,
that they have one type on both sides, that every row has a unique, non-null row key,
and how many rows each side has.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable, Collection, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from pyspark.sql import Column, DataFrame, Row
from pyspark.sql import functions as F
from pyspark.sql import types as T
from pyspark.util import inheritable_thread_target

from privacy_eval.alignment import AlignmentResult, alignment_check
from privacy_eval.columns import INTERNAL_PREFIX, KEY
from privacy_eval.config import POSITION_KEY
from privacy_eval.errors import InputError, is_read_error, spark_error_logs_silenced
from privacy_eval.frames import (
    collect_grouped_by_key,
    from_slice_sums,
    long_slices,
    null_flagged,
    qcol,
    stacked_sides,
)
from privacy_eval.reading import POSITION, SPARK_ERRORS, unreadable_table
from privacy_eval.type_plan import TypePlan, plan_types, typed_holdout

log = logging.getLogger(__name__)

# A side's frame (typed as returned) -> a condition on its rows, or None.
PairedWhere = Callable[[DataFrame], Column | None]
# A side's frame (typed as returned) -> (that frame with the per-row columns the
# aggregates need, named aggregates over it), or None.
SideAggregates = Callable[[DataFrame], tuple[DataFrame, dict[str, Column]] | None]


@dataclass(frozen=True)
class InputPassWork:
    """Work for the input passes: the two passes over the data `prepare_inputs` makes
    anyway (the profile pass over each side and the key check over both) also compute
    what a metric would otherwise need passes of its own for.

    - `paired_where`: the key check also counts the key values whose row meets this
      condition on both sides (`InputPassFigures.n_paired_where`);
    - `side_aggregates`: the profile pass also computes these aggregates per side
      (`InputPassFigures.side_aggregates`).

    `made_for` is the configuration the work was made for: a metric reads the figures
    only when its own configuration equals it.
    """

    made_for: Any
    paired_where: PairedWhere | None = None
    side_aggregates: SideAggregates | None = None


@dataclass(frozen=True)
class InputPassFigures:
    """What the input passes computed of an `InputPassWork`, for `made_for`: the key
    values paired under `paired_where` (None when it gave no condition) and, per side,
    the values of `side_aggregates` by name (None when it gave no aggregates)."""

    made_for: Any
    n_paired_where: int | None
    side_aggregates: dict[str, dict[str, Any]] | None


@dataclass(frozen=True)
class EvaluationInputs:
    """The two tables, ready for every metric.

    `original` and `synthetic` hold the row key (column KEY) and the compared columns,
    cast to one type per column. A side read from a source that is not cheap to read
    again is cached: call `unpersist()` when done. Nothing here holds record values on
    the driver.
    """

    original: DataFrame
    synthetic: DataFrame
    columns: tuple[str, ...]
    numeric: frozenset[str]
    n_original: int
    n_synthetic: int
    fingerprint: str
    row_key: str
    # Key values present on both sides (= synthetic rows with an original partner).
    n_paired_keys: int | None = None
    # What the input passes computed of `prepare_inputs(work=...)`; None without.
    pass_figures: InputPassFigures | None = None
    # An optional third table (`holdout`: original records the generator never saw), as
    # read; only the distance metrics use it, through `typed_holdout`.
    holdout: DataFrame | None = None
    # What is cached: the columns as read, under the typed projections above.
    cached: tuple[DataFrame, ...] = field(default=(), repr=False, compare=False)
    # The compared columns under `cast` (the holdout gets the same casts).
    cast: frozenset[str] = frozenset()
    # The alignment check, once run (see `alignment`).
    _alignment: list[AlignmentResult] = field(default_factory=list, init=False, repr=False, compare=False)
    # The holdout's typed columns and row count, per column list (see `typed_holdout`).
    _holdouts: dict[tuple[str, ...], tuple[DataFrame, int]] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )

    def alignment(self) -> AlignmentResult:
        """Are the rows the row key pairs closer than random pairs? (docs/metrics.md,
        "Alignment check"). Run on first use, by the metrics that trust the row key;
        the result is kept for the next one."""
        if not self._alignment:
            self._alignment.append(alignment_check(
                self.original, self.synthetic, self.columns, self.numeric, KEY, self.n_synthetic
            ))
        return self._alignment[0]

    def typed_holdout(self, columns: Sequence[str]) -> tuple[DataFrame, int]:
        """The holdout's `columns`, each of the type the two tables have (the same type
        plan and the same `cast`), and its row count.

        Categorical values are compared by their text form, so a holdout writing `2` where
        the two tables hold `2.0` must be converted, not read as it is. A conversion that
        would change a value (2.5 to a whole number, text to a number) is refused, naming
        the column; so are values a configured cast cannot convert. One pass over the
        holdout, on first use for these columns.
        """
        if self.holdout is None:
            raise ValueError("these inputs have no holdout table")
        key = tuple(columns)
        if key not in self._holdouts:
            types = {c: self.original.schema[c].dataType for c in columns}
            self._holdouts[key] = typed_holdout(self.holdout, types, self.cast)
        return self._holdouts[key]

    def unpersist(self) -> None:
        for frame in self.cached:
            frame.unpersist()


def prepare_inputs(
    original: DataFrame,
    synthetic: DataFrame,
    row_key: str,
    exclude: Sequence[str] = (),
    categorical: Sequence[str] = (),
    cast: dict[str, str] | None = None,
    cache: Collection[str] = ("original", "synthetic"),
    *,
    work: InputPassWork | None = None,
    holdout: DataFrame | None = None,
) -> EvaluationInputs:
    """Check the two tables against each other and bring them to one shape.

    `row_key` is a column of both tables, or POSITION when `read_table` added positions.
    `cache` names the sides to cache, so that every pass reads the same rows without
    parsing the source again; leave out a side read from Parquet or ORC files
    (:func:`rereads_cheaply`), which later passes read again as cheaply. Files read
    again must not change while the evaluation runs.

    `work` is what the configured metrics ask of the input passes (the linkage attack's
    true pairs and per-side statistics: `privacy_eval.metrics.input_pass_work` gathers
    it); the result's `pass_figures` holds what they computed.

    `holdout`, an optional third table of originals the generator never saw, is kept as
    read; `EvaluationInputs.typed_holdout` brings it to the same types when a metric
    uses it.
    """
    cast = cast or {}
    sides = {"original": original, "synthetic": synthetic}
    columns = _compared_columns(sides, row_key, exclude, categorical, cast)
    plan = plan_types(original, synthetic, row_key, columns, cast)
    numeric = frozenset(
        c for c in columns if isinstance(plan.types[c], T.NumericType) and c not in categorical
    )

    # Every later pass (checks, fingerprint, each metric) reads these frames: a cached
    # side is not parsed again, and with @position the cache also pins positions.
    # They hold the columns as read: the one pass below also checks what the type plan
    # left to the data (all-null columns, configured casts) before anything casts.
    by_position = row_key == POSITION
    as_read = {
        side: frame.select(qcol(row_key).alias(KEY), *(qcol(c) for c in columns))
        for side, frame in sides.items()
    }
    cached = [as_read[side].cache() for side in sides if side in cache or by_position]
    try:
        profiles, typed, n_paired, n_paired_where = _input_passes(as_read, plan, row_key, columns, work)
    except BaseException:
        for frame in cached:
            frame.unpersist()
        raise

    figures = None
    if work is not None and (work.paired_where or work.side_aggregates):
        with_extras = profiles["original"].extra is not None
        figures = InputPassFigures(
            made_for=work.made_for,
            n_paired_where=n_paired_where,
            side_aggregates={side: profiles[side].extra for side in sides} if with_extras else None,
        )
    return EvaluationInputs(
        original=typed["original"],
        synthetic=typed["synthetic"],
        columns=columns,
        numeric=numeric,
        n_original=profiles["original"].n,
        n_synthetic=profiles["synthetic"].n,
        fingerprint=hashlib.sha256(
            "|".join(profiles[side].digest for side in sides).encode()
        ).hexdigest(),
        row_key=POSITION_KEY if row_key == POSITION else row_key,
        n_paired_keys=n_paired,
        pass_figures=figures,
        holdout=holdout,
        cached=tuple(cached),
        cast=frozenset(cast),
    )


def _compared_columns(
    sides: dict[str, DataFrame],
    row_key: str,
    exclude: Sequence[str],
    categorical: Sequence[str],
    cast: dict[str, str],
) -> tuple[str, ...]:
    """The compared columns (the original's order), after checking every name given."""
    user_columns = {
        side: [c for c in frame.columns if c != POSITION] for side, frame in sides.items()
    }
    for side, names in user_columns.items():
        reserved = [c for c in names if c.startswith(INTERNAL_PREFIX)]
        if reserved:
            raise InputError(
                f"column '{reserved[0]}' of the {side} table starts with '{INTERNAL_PREFIX}', "
                "a prefix this tool reserves for its own columns; rename it"
            )
    for side, frame in sides.items():
        if row_key not in frame.columns:
            raise InputError(f"row_key column '{row_key}' is missing from the {side} table")
    for name in exclude:
        if name not in user_columns["original"] and name not in user_columns["synthetic"]:
            raise InputError(f"exclude: column '{name}' is in neither table")
    if row_key in exclude:
        raise InputError(f"exclude: '{row_key}' is the row key and is never compared anyway")

    left_out = set(exclude) | {row_key}
    for side, other in (("original", "synthetic"), ("synthetic", "original")):
        names = [c for c in user_columns[side] if c not in left_out and c not in user_columns[other]]
        if names:
            raise InputError(
                f"column '{names[0]}' is in the {side} table but not in the {other} table "
                f"({len(names)} such column(s)); list it under 'exclude' to leave it out"
            )
    columns = tuple(c for c in user_columns["original"] if c not in left_out)
    if not columns:
        raise InputError("no column left to compare after removing the row key and 'exclude'")
    for key, names in (("categorical", categorical), ("cast", cast)):
        for name in names:
            if name not in columns:
                raise InputError(f"{key}: column '{name}' is not a compared column")
    return columns


def _input_passes(
    as_read: dict[str, DataFrame],
    plan: TypePlan,
    row_key: str,
    columns: tuple[str, ...],
    work: InputPassWork | None,
) -> tuple[dict[str, _Profile], dict[str, DataFrame], int, int | None]:
    """The profile pass and the key check: (profiles, typed sides, paired keys, paired
    keys meeting `work.paired_where` or None)."""
    paired_where = work.paired_where if work is not None else None
    side_aggregates = work.side_aggregates if work is not None else None
    by_position = row_key == POSITION
    converted = {side: [plan.converted(c, side) for c in (KEY, *columns)] for side in as_read}
    key_name = None if by_position else row_key
    profiles = _profiles(
        as_read, columns, key_name, {side: plan.checks(side) for side in as_read}, converted, side_aggregates
    )
    plan.verify({side: profile.checks for side, profile in profiles.items()})
    if by_position and profiles["original"].n != profiles["synthetic"].n:
        raise InputError(
            f"row_key '@position' pairs row i with row i, but the original has "
            f"{profiles['original'].n} rows and the synthetic table {profiles['synthetic'].n}"
        )
    typed = {side: frame.select(*converted[side]) for side, frame in as_read.items()}
    if by_position:  # positions are unique by construction, and 0..n-1 on both sides
        return profiles, typed, profiles["original"].n, None
    where = {side: paired_where(frame) for side, frame in typed.items()} if paired_where else {}
    n_paired, n_paired_where = _check_unique_keys(
        typed["original"], typed["synthetic"], row_key,
        where if where and all(c is not None for c in where.values()) else None,
    )
    return profiles, typed, n_paired, n_paired_where


@dataclass(frozen=True)
class _Profile:
    """What the one pass over a side found: its row count, content hash and checks."""

    n: int
    digest: str
    checks: dict[str, int]
    extra: dict[str, Any] | None = None  # the values of InputPassWork.side_aggregates


def _profiles(
    frames: dict[str, DataFrame],
    columns: Sequence[str],
    key_name: str | None,
    checks: dict[str, dict[str, Column]],
    typed: dict[str, list[Column]],
    side_aggregates: SideAggregates | None = None,
) -> dict[str, _Profile]:
    """The profile pass. Per side: row count, an order-independent content hash, how
    many rows meet each of the `checks` and the caller's `side_aggregates` over the
    `typed` columns, from one pass over the columns as read; refuses null keys.

    Both sides at once, one job each from a thread of its own (`_collect_at_once`):
    each side's scan may be a single task (a Parquet file of one row group is), and side
    by side they use two cores instead of one after the other. Not as one job of two
    cross-joined one-row aggregates: that job's final stage carried both sides'
    aggregation plans, a task binary large enough with the linkage's statistics for
    Spark to warn "Broadcasting large task binary".

    The hash covers the compared columns (sorted by name, so column order does not
    matter) and, when the key is a real column, the key; positions are left out so that
    reordering the rows keeps the fingerprint. Each column comes with its null flag
    (`null_flagged`). Summing row hashes exactly (`frames.long_slices`) makes the result
    independent of row order.
    """
    content = sorted(columns) + ([KEY] if key_name is not None else [])
    hashed = null_flagged([qcol(c) for c in content])
    labels = {side: list(checks[side]) for side in frames}
    hash_, null_key, check = INTERNAL_PREFIX + "row_hash", INTERNAL_PREFIX + "null_key", INTERNAL_PREFIX + "check"
    # Per row: what the profile needs of the columns as read, then the typed columns,
    # which the caller's aggregates see under their own names.
    views = {
        side: frame.select(
            F.xxhash64(*hashed).alias(hash_),
            F.col(KEY).isNull().alias(null_key),
            *(checks[side][label].alias(f"{check}{j}") for j, label in enumerate(labels[side])),
            *typed[side],
        )
        for side, frame in frames.items()
    }
    extras: dict[str, dict[str, Column]] = {side: {} for side in frames}
    extended = {side: side_aggregates(view) for side, view in views.items()} if side_aggregates else {}
    if extended and all(e is not None for e in extended.values()):
        for side, (view, aggregates) in extended.items():
            views[side], extras[side] = view, aggregates
    with_extras = any(extras.values())

    def aggregated(side: str, i: int) -> DataFrame:
        # No count_distinct(KEY) here: it turns this scan into an expand and two shuffles,
        # slower than the scan plus one grouped shuffle of the keys (_check_unique_keys).
        return views[side].agg(
            F.count(F.lit(1)).alias(f"{i}_n"),
            *(F.sum(part).alias(f"{i}_hash_sum{k}") for k, part in enumerate(long_slices(F.col(hash_)))),
            F.count(F.when(F.col(null_key), 1)).alias(f"{i}_null_keys"),
            *(F.count(F.when(F.col(f"{check}{j}"), 1)).alias(f"{i}_check{j}") for j in range(len(labels[side]))),
            *(aggregate.alias(f"{i}_extra_{name}") for name, aggregate in extras[side].items()),
        )

    parts = {side: aggregated(side, i) for i, side in enumerate(frames)}
    # The first pass over all the data: records the schema inference did not read fail
    # here (e.g. under mode FAILFAST), with messages that quote them.
    with spark_error_logs_silenced():
        outcomes = _collect_at_once(list(parts.values()))
    row: dict[str, Any] = {}
    for side, outcome in zip(parts, outcomes):
        if isinstance(outcome, BaseException):
            if isinstance(outcome, SPARK_ERRORS) and is_read_error(outcome):
                raise unreadable_table(side, outcome) from None
            raise outcome
        row.update(outcome[0].asDict())
    profiles = {}
    for i, side in enumerate(frames):
        n = int(row[f"{i}_n"])
        if n == 0:
            raise InputError(f"the {side} table has no rows")
        if key_name is not None and row[f"{i}_null_keys"]:
            raise InputError(f"row_key '{key_name}' is null in {row[f'{i}_null_keys']} row(s) of the {side} table")
        profiles[side] = _Profile(
            n=n,
            digest=f"{side}:{n}:{from_slice_sums([row[f'{i}_hash_sum{k}'] for k in range(3)])}",
            checks={label: int(row[f"{i}_check{j}"]) for j, label in enumerate(labels[side])},
            extra={name: row[f"{i}_extra_{name}"] for name in extras[side]} if with_extras else None,
        )
    return profiles


def _collect_at_once(frames: Sequence[DataFrame]) -> list[list[Row] | BaseException]:
    """`frame.collect()` of each of `frames`, as concurrent Spark jobs from threads that
    carry the caller's local properties and tags (job group, scheduler pool); the rows,
    or the exception a collect raised, in the order of `frames`."""
    target = inheritable_thread_target(frames[0].sparkSession)(DataFrame.collect)
    with ThreadPoolExecutor(max_workers=len(frames), thread_name_prefix="privacy-eval-collect") as pool:
        futures = [pool.submit(target, frame) for frame in frames]
    return [future.exception() or future.result() for future in futures]


def _check_unique_keys(
    original: DataFrame, synthetic: DataFrame, row_key: str, where: dict[str, Column] | None
) -> tuple[int, int | None]:
    """Refuse repeated row keys; return how many key values occur on both sides, and
    how many have a row meeting ``where[side]`` on both sides (None without ``where``).

    Both sides in one grouped shuffle, counts only; the paired counts come with it at
    no extra pass (they spare the linkage attack a join on the key of its own).
    """
    side, flag = INTERNAL_PREFIX + "side", INTERNAL_PREFIX + "where"
    # The flag only when asked for: every job runs this shuffle, most without a linkage.
    columns = [KEY, flag] if where else [KEY]

    def keys(frame: DataFrame, name: str) -> DataFrame:
        return frame.select(KEY, where[name].alias(flag)) if where else frame.select(KEY)

    def count_side(i: int, extra: Column | None = None) -> Column:
        on_side = F.col(side) == i
        return F.count(F.when(on_side if extra is None else on_side & extra, 1))

    def both(prefix: str) -> Column:
        return F.count(F.when((F.col(f"{prefix}0") > 0) & (F.col(f"{prefix}1") > 0), 1))

    # Per key: its rows on each side (n0, n1) and, with `where`, those meeting it (w0, w1).
    stacked = stacked_sides(keys(original, "original"), keys(synthetic, "synthetic"), columns, side)
    per_key = stacked.groupBy(KEY).agg(
        *(count_side(i).alias(f"n{i}") for i in (0, 1)),
        *(count_side(i, F.col(flag)).alias(f"w{i}") for i in (0, 1) if where),
    )
    row = collect_grouped_by_key(per_key.agg(
        *(F.count(F.when(F.col(f"n{i}") > 1, 1)).alias(f"keys{i}") for i in (0, 1)),
        *(F.max(f"n{i}").alias(f"worst{i}") for i in (0, 1)),
        both("n").alias("paired"),
        *([both("w").alias("paired_where")] if where else []),
    ))[0]
    for i, name in enumerate(("original", "synthetic")):
        if row[f"keys{i}"]:
            raise InputError(
                f"row_key '{row_key}' is not unique in the {name} table: {row[f'keys{i}']} key value(s) "
                f"occur more than once (the most repeated occurs {row[f'worst{i}']} times)"
            )
    return int(row["paired"]), (int(row["paired_where"]) if where else None)
