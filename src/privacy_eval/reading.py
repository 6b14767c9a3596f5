"""Reading one input table: from a file, a folder or the catalog, with the format's
defaults, checks that name the file and the key to fix, and, for `row_key: "@position"`,
each row's exact position in its file(s)."""

from __future__ import annotations

import os
from collections.abc import Sequence

from py4j.protocol import Py4JJavaError
from pyspark.errors import PySparkException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from privacy_eval.config import FORMATS, Source
from privacy_eval.errors import InputError, spark_error_logs_silenced, spark_error_name
from privacy_eval.frames import INTERNAL_PREFIX

POSITION = INTERNAL_PREFIX + "position"
_FILE = INTERNAL_PREFIX + "file"
_START = INTERNAL_PREFIX + "block_start"
_ROW_ID = INTERNAL_PREFIX + "row_id"

# Readers default to what real releases look like: a header line, typed columns.
_DEFAULT_OPTIONS = {"csv": {"header": "true", "inferSchema": "true"}}
# What a Spark call can raise: converted exceptions, or the raw py4j one for the rest.
SPARK_ERRORS = (PySparkException, Py4JJavaError)
# Separators a CSV file may really use when its header reads as one column.
_LIKELY_SEPARATORS = (",", ";", "\t", "|")
# The first bytes of every file of the binary formats. Spark finds out that a file is
# not one inside a task, whose failure goes to the log with the file's last bytes.
_MAGIC = {"parquet": b"PAR1", "orc": b"ORC"}


#: File formats read again by each pass instead of cached. Their columnar scan costs
#: what a scan of Spark's in-memory cache does, while filling the cache costs 3-4 scans
#: (1e6 rows per side: 1.5-2 s a side to fill, 0.3-0.5 s to scan either; docs/benchmarks.md).
REREAD_FORMATS = frozenset({"parquet", "orc"})


def rereads_cheaply(source: Source) -> bool:
    """Whether `source` is Parquet or ORC files, which each pass may read again."""
    if source.table is not None or source.path is None:
        return False  # a catalog table may be a view or CSV underneath
    return (source.format or _format_from_path(source.path, "input")) in REREAD_FORMATS


def read_table(spark: SparkSession, source: Source, side: str, with_position: bool = False) -> DataFrame:
    """Read one input; with `with_position`, add column POSITION = row number in the file(s).

    Position is the order of the rows in the files, independent of how Spark splits
    them: files of a folder are taken in lexicographic order of their paths, rows in
    their order within the file.
    """
    if source.table is not None:
        if with_position:
            raise InputError(
                f"{side}: row_key '@position' needs file input, not table '{source.table}'; "
                "name a key column in row_key"
            )
        try:
            with spark_error_logs_silenced():
                return spark.table(source.table)
        except SPARK_ERRORS as exc:
            raise InputError(f"{side}: cannot read table '{source.table}' ({spark_error_name(exc)})") from None

    path = source.path
    assert path is not None
    fmt = source.format or _format_from_path(path, side)
    options = {**_DEFAULT_OPTIONS.get(fmt, {}), **{k: _option_text(v) for k, v in source.options.items()}}
    local = "://" not in path and not path.startswith("file:")
    if local and not os.path.exists(path):
        raise InputError(f"{side}: file not found: {path}")
    if local and fmt in _MAGIC:
        _check_magic(path, fmt, side)
    # Schema inference reads the files (a Spark job for CSV and Parquet); the first
    # mistakes in them surface here. Spark's message is not passed on: past its first
    # words it may quote the file's content.
    try:
        with spark_error_logs_silenced():
            frame = spark.read.format(fmt).options(**options).load(path)
            _check_layout(frame.columns, fmt, options, path, side)
            if with_position:
                frame = _with_position(frame)
    except SPARK_ERRORS as exc:
        raise InputError(
            f"{side}: cannot read {path} as {fmt} ({spark_error_name(exc)}); is '{side}.format' right?"
        ) from None
    return frame


def _check_magic(path: str, fmt: str, side: str) -> None:
    """Refuse a local file that is not `fmt` before Spark tries to read it."""
    magic = _MAGIC[fmt]
    for file in _data_files(path):
        with open(file, "rb") as handle:
            if handle.read(len(magic)) != magic:
                raise InputError(
                    f"{side}: {file} is not a {fmt} file (it does not start as one); "
                    f"is '{side}.format' right?"
                )


def _data_files(path: str) -> list[str]:
    """The files Spark reads under `path`: hidden and `_`-prefixed ones are not data."""
    if not os.path.isdir(path):
        return [path]
    files = []
    for folder, subfolders, names in os.walk(path):
        subfolders[:] = sorted(d for d in subfolders if not d.startswith((".", "_")))
        files += [os.path.join(folder, n) for n in sorted(names) if not n.startswith((".", "_"))]
    return files


def _check_layout(columns: Sequence[str], fmt: str, options: dict[str, str], path: str, side: str) -> None:
    """Refuse what a reader makes of a file in the wrong format instead of failing."""
    if not columns:
        raise InputError(f"{side}: {path} has no columns (empty file?)")
    if fmt == "json" and list(columns) == ["_corrupt_record"]:
        raise InputError(f"{side}: {path} holds no JSON record; is '{side}.format' right?")
    if fmt == "csv" and len(columns) == 1:
        # A whole header line read as one name: the file uses another separator.
        sep = options.get("sep", options.get("delimiter", ","))
        if any(other != sep and other in columns[0] for other in _LIKELY_SEPARATORS):
            raise InputError(
                f"{side}: {path} reads as a single column whose name holds another separator "
                f"than {sep!r}; set '{side}.options.sep'"
            )


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
