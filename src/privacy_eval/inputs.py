"""Reading the two tables and making them comparable.

Everything a metric may assume is established here, once: which columns are compared,
that they have one type on both sides, that every row has a unique, non-null row key,
and how many rows each side has.
"""

from __future__ import annotations

import hashlib
import logging
import os
from dataclasses import dataclass
from typing import Sequence

from pyspark.errors import AnalysisException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from privacy_eval.config import FORMATS, POSITION_KEY, Source
from privacy_eval.errors import InputError
from privacy_eval.frames import INTERNAL_PREFIX, qcol

log = logging.getLogger(__name__)

KEY = INTERNAL_PREFIX + "key"
POSITION = INTERNAL_PREFIX + "position"
_FILE = INTERNAL_PREFIX + "file"
_START = INTERNAL_PREFIX + "block_start"
_ROW_ID = INTERNAL_PREFIX + "row_id"

# Readers default to what real releases look like: a header line, typed columns.
_DEFAULT_OPTIONS = {"csv": {"header": "true", "inferSchema": "true"}}


@dataclass(frozen=True)
class EvaluationInputs:
    """The two tables, ready for every metric.

    `original` and `synthetic` hold the row key (column KEY) and the compared columns,
    cast to one type per column, and are cached: call `unpersist()` when done.
    Nothing here holds record values on the driver.
    """

    original: DataFrame
    synthetic: DataFrame
    columns: tuple[str, ...]
    numeric: frozenset[str]
    n_original: int
    n_synthetic: int
    fingerprint: str
    row_key: str

    def unpersist(self) -> None:
        self.original.unpersist()
        self.synthetic.unpersist()


def read_table(spark: SparkSession, source: Source, side: str, with_position: bool = False) -> DataFrame:
    """Read one input; with `with_position`, add column POSITION = row number in the file(s).

    Position is the order of the rows in the files, independent of how Spark splits
    them: files of a folder are taken in lexicographic order of their paths, rows in
    their order within the file.
    """
    if source.table is not None:
        try:
            frame = spark.table(source.table)
        except AnalysisException:
            raise InputError(f"{side}: table '{source.table}' not found in the catalog") from None
        if with_position:
            raise InputError(
                f"{side}: row_key '@position' needs file input, not table '{source.table}'; "
                "name a key column in row_key"
            )
        return frame

    path = source.path
    assert path is not None
    fmt = source.format or _format_from_path(path, side)
    options = {**_DEFAULT_OPTIONS.get(fmt, {}), **{k: _option_text(v) for k, v in source.options.items()}}
    if "://" not in path and not path.startswith("file:") and not os.path.exists(path):
        raise InputError(f"{side}: file not found: {path}")
    try:
        frame = spark.read.format(fmt).options(**options).load(path)
        columns = frame.columns
    except AnalysisException as exc:
        raise InputError(f"{side}: cannot read {path} as {fmt} ({_reason(exc)})") from None
    if not columns:
        raise InputError(f"{side}: {path} has no columns (empty file?)")
    if with_position:
        frame = _with_position(frame)
    return frame


def _format_from_path(path: str, side: str) -> str:
    target = path
    if os.path.isdir(path):
        names = sorted(n for n in os.listdir(path) if not n.startswith((".", "_")))
        target = names[0] if names else ""
    suffixes = [s.lower().lstrip(".") for s in os.path.basename(target).split(".")[1:]]
    for suffix in reversed(suffixes):
        if suffix in FORMATS:
            return suffix
    raise InputError(
        f"{side}: cannot tell the format of {path} from its name; set '{side}.format' "
        f"to one of {', '.join(FORMATS)}"
    )


def _option_text(value: object) -> str:
    # Spark reader options are strings; YAML gives booleans for `header: true`.
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _reason(exc: AnalysisException) -> str:
    # The first line of Spark's message names the path or problem; later lines may quote
    # data, so they are dropped.
    return str(exc).splitlines()[0][:300]


def _with_position(frame: DataFrame) -> DataFrame:
    """Number rows by their position in the files, exactly, however Spark splits them.

    Spark packs file splits into partitions ordered by size, not by file order, so
    partition order means nothing. Within one split, rows arrive in file order with
    consecutive monotonically_increasing_id values. So: per split (file, start offset),
    take the first id and the row count (one small row per split, collected), order the
    splits, and give each a shift that turns its ids into global positions.
    """
    tagged = frame.select(
        "*",
        F.col("_metadata.file_path").alias(_FILE),
        F.col("_metadata.file_block_start").alias(_START),
        F.monotonically_increasing_id().alias(_ROW_ID),
    )
    splits = (
        tagged.groupBy(_FILE, _START)
        .agg(F.min(_ROW_ID).alias("first"), F.count(F.lit(1)).alias("n"))
        .orderBy(_FILE, _START)
        .collect()
    )
    shifts, offset = [], 0
    for split in splits:
        shifts.append((split[_FILE], split[_START], offset - split["first"]))
        offset += split["n"]
    spark = frame.sparkSession
    shift_frame = spark.createDataFrame(
        shifts, T.StructType([
            T.StructField(_FILE, T.StringType()),
            T.StructField(_START, T.LongType()),
            T.StructField("shift", T.LongType()),
        ])
    )
    return (
        tagged.join(F.broadcast(shift_frame), [_FILE, _START])
        .withColumn(POSITION, F.col(_ROW_ID) + F.col("shift"))
        .drop(_FILE, _START, _ROW_ID, "shift")
    )


def prepare_inputs(
    original: DataFrame,
    synthetic: DataFrame,
    row_key: str,
    exclude: Sequence[str] = (),
    categorical: Sequence[str] = (),
    cast: dict[str, str] | None = None,
) -> EvaluationInputs:
    """Check the two tables against each other and bring them to one shape.

    `row_key` is a column of both tables, or POSITION when `read_table` added positions.
    """
    cast = cast or {}
    sides = {"original": original, "synthetic": synthetic}
    user_columns = {
        side: [c for c in frame.columns if c != POSITION] for side, frame in sides.items()
    }
    for side, frame in sides.items():
        if row_key not in frame.columns:
            raise InputError(f"row_key column '{row_key}' is missing from the {side} table")
    for name in exclude:
        if name not in user_columns["original"] and name not in user_columns["synthetic"]:
            raise InputError(f"exclude: column '{name}' is in neither table")
    if row_key in exclude:
        raise InputError(f"exclude: '{row_key}' is the row key and is never compared anyway")

    left_out = set(exclude) | {row_key}
    only = {
        side: [c for c in user_columns[side] if c not in left_out and c not in user_columns[other]]
        for side, other in (("original", "synthetic"), ("synthetic", "original"))
    }
    for side, names in only.items():
        if names:
            other = "synthetic" if side == "original" else "original"
            raise InputError(
                f"column '{names[0]}' is in the {side} table but not in the {other} table "
                f"({len(names)} such column(s)); list it under 'exclude' to leave it out"
            )
    columns = tuple(c for c in user_columns["original"] if c not in left_out)
    if not columns:
        raise InputError("no column left to compare after removing the row key and 'exclude'")
    for name in list(categorical) + list(cast):
        if name not in columns:
            raise InputError(f"column '{name}' named in the configuration is not a compared column")

    types = _reconcile_types(original, synthetic, columns, cast)
    key_type = _reconcile_key(original, synthetic, row_key)
    numeric = frozenset(
        c for c in columns if isinstance(types[c], T.NumericType) and c not in categorical
    )

    def shape(frame: DataFrame) -> DataFrame:
        return frame.select(
            qcol(row_key).cast(key_type).alias(KEY),
            *(qcol(c).cast(types[c]).alias(c) for c in columns),
        )

    # Every later pass (checks, fingerprint, each metric) reads these cached frames
    # instead of parsing the files again; with @position the cache also pins positions.
    shaped = {side: shape(frame).cache() for side, frame in sides.items()}
    try:
        by_position = row_key == POSITION
        counts, fingerprints = {}, []
        for side, frame in shaped.items():
            n, digest = _profile(frame, columns, side, key_name=None if by_position else row_key)
            counts[side] = n
            fingerprints.append(digest)
        if by_position and counts["original"] != counts["synthetic"]:
            raise InputError(
                f"row_key '@position' pairs row i with row i, but the original has "
                f"{counts['original']} rows and the synthetic table {counts['synthetic']}"
            )
    except BaseException:
        for frame in shaped.values():
            frame.unpersist()
        raise

    return EvaluationInputs(
        original=shaped["original"],
        synthetic=shaped["synthetic"],
        columns=columns,
        numeric=numeric,
        n_original=counts["original"],
        n_synthetic=counts["synthetic"],
        fingerprint=hashlib.sha256("|".join(fingerprints).encode()).hexdigest(),
        row_key=POSITION_KEY if row_key == POSITION else row_key,
    )


def _reconcile_types(
    original: DataFrame, synthetic: DataFrame, columns: Sequence[str], cast: dict[str, str]
) -> dict[str, T.DataType]:
    types: dict[str, T.DataType] = {}
    for name in columns:
        if name in cast:
            try:
                types[name] = T._parse_datatype_string(cast[name])
            except Exception:
                raise InputError(f"cast: '{cast[name]}' for column '{name}' is not a Spark type") from None
            continue
        a, b = original.schema[name].dataType, synthetic.schema[name].dataType
        common = _common_type(a, b)
        if common is None:
            raise InputError(
                f"column '{name}' is {a.simpleString()} in the original and "
                f"{b.simpleString()} in the synthetic table; add `cast: {{{name}: <type>}}` "
                "to the configuration to compare it"
            )
        types[name] = common
    return types


def _common_type(a: T.DataType, b: T.DataType) -> T.DataType | None:
    if a == b:
        return a
    if isinstance(a, T.NumericType) and isinstance(b, T.NumericType):
        # int 5 must equal double 5.0: compare numbers of different kinds as doubles.
        integral = (T.ByteType, T.ShortType, T.IntegerType, T.LongType)
        if isinstance(a, integral) and isinstance(b, integral):
            return T.LongType()
        return T.DoubleType()
    if isinstance(a, T.NullType):
        return b
    if isinstance(b, T.NullType):
        return a
    return None


def _reconcile_key(original: DataFrame, synthetic: DataFrame, row_key: str) -> T.DataType:
    a, b = original.schema[row_key].dataType, synthetic.schema[row_key].dataType
    common = _common_type(a, b)
    if common is None:
        raise InputError(
            f"row_key '{row_key}' is {a.simpleString()} in the original and "
            f"{b.simpleString()} in the synthetic table; the keys must have one type"
        )
    return common


def _profile(frame: DataFrame, columns: Sequence[str], side: str, key_name: str | None) -> tuple[int, str]:
    """Row count and an order-independent content hash, in one pass; refuses null and
    repeated keys.

    The hash covers the compared columns (sorted by name, so column order does not
    matter) and, when the key is a real column, the key; positions are left out so that
    reordering the rows keeps the fingerprint. Each column comes with a null flag since
    xxhash64 skips nulls and would otherwise hash (null, 1) like (1, null). Summing row
    hashes as exact decimals makes the result independent of row order.
    """
    content = sorted(columns) + ([KEY] if key_name is not None else [])
    hashed = [part for c in content for part in (qcol(c), qcol(c).isNull())]
    aggregates = [
        F.count(F.lit(1)).alias("n"),
        F.sum(F.xxhash64(*hashed).cast("decimal(38,0)")).alias("hash_sum"),
        F.count(F.when(F.col(KEY).isNull(), 1)).alias("null_keys"),
    ]
    if key_name is not None:  # positions are unique by construction
        aggregates.append(F.count_distinct(KEY).alias("distinct_keys"))
    row = frame.agg(*aggregates).collect()[0]
    n = int(row["n"])
    if n == 0:
        raise InputError(f"the {side} table has no rows")
    if key_name is not None and row["null_keys"]:
        raise InputError(f"row_key '{key_name}' is null in {row['null_keys']} row(s) of the {side} table")
    if key_name is not None and row["distinct_keys"] != n:
        _report_duplicate_keys(frame, key_name, side)
    return n, f"{side}:{n}:{row['hash_sum']}"


def _report_duplicate_keys(frame: DataFrame, row_key: str, side: str) -> None:
    dup = (
        frame.groupBy(KEY).count().filter(F.col("count") > 1)
        .agg(F.count(F.lit(1)).alias("keys"), F.max("count").alias("worst"))
        .collect()[0]
    )
    if dup["keys"]:
        raise InputError(
            f"row_key '{row_key}' is not unique in the {side} table: {dup['keys']} key value(s) "
            f"occur more than once (the most repeated occurs {dup['worst']} times)"
        )
