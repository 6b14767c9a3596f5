"""Reading one input table: from a file, a folder or the catalog, with the format's
defaults, checks that name the file and the key to fix, and, for `row_key: "@position"`,
each row's exact position in its file(s)."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence

from py4j.protocol import Py4JJavaError
from pyspark.errors import PySparkException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from privacy_eval.columns import INTERNAL_PREFIX
from privacy_eval.config import FORMATS, Source
from privacy_eval.errors import InputError, spark_error_logs_silenced, spark_error_name
from privacy_eval.frames import local_frame

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
# What Hadoop's path globbing treats as a pattern (Spark's reader globs every path).
_GLOB_CHARACTERS = re.compile(r"([\\\[\]{}*?])")


#: File formats read again by each pass instead of cached. Their columnar scan costs
#: what a scan of Spark's in-memory cache does, while filling the cache costs several
#: scans (docs/benchmarks.md, "Where the time goes").
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
    options = read_options(fmt, source.options)
    local = "://" not in path and not path.startswith("file:")
    if local:
        _check_local_files(path, fmt, side)
    # Schema inference reads the files (a Spark job for CSV and Parquet); the first
    # mistakes in them surface here. Spark's message is not passed on: past its first
    # words it may quote the file's content.
    try:
        with spark_error_logs_silenced():
            frame = spark.read.format(fmt).options(**options).load(literal_path(path))
            _check_layout(frame.columns, fmt, options, path, side)
            if fmt == "csv":
                _check_renamed_header(spark, frame.columns, options, path, side)
                _check_line_breaks_in_fields(spark, options, path, side)
            _check_distinct_names(frame.columns, path, side)
            if with_position:
                frame = _with_position(frame)
    except SPARK_ERRORS as exc:
        if spark_error_name(exc).startswith("COLUMN_ALREADY_EXISTS"):
            _name_columns_alike(spark, fmt, options, path, side)
        raise InputError(f"{side}: cannot read {path} as {fmt} ({spark_error_name(exc)}){_hint(exc, side)}") from None
    return frame


def literal_path(path: str) -> str:
    """`path` for Spark's reader, naming that file or folder literally.

    Spark globs every path it reads: `orig[1].csv` would read `orig1.csv`, `data*.csv`
    every matching file. A backslash before each glob character makes Hadoop's globbing
    match it literally (for files and folders, local or remote).
    """
    return _GLOB_CHARACTERS.sub(r"\\\1", path)


def _check_local_files(path: str, fmt: str, side: str) -> None:
    """Refuse, naming the path, what Spark would fail on with a traceback or loop over:
    a missing path, a symbolic link loop, a file that cannot be opened, a binary file
    of another format."""
    if not os.path.exists(path):
        if os.path.islink(path):
            raise InputError(f"{side}: {path} is a symbolic link to nothing (or a link loop)")
        raise InputError(f"{side}: file not found: {path}")
    magic = _MAGIC.get(fmt)
    for file in _data_files(path, side):
        try:
            with open(file, "rb") as handle:
                start = handle.read(len(magic) if magic else 1)
        except OSError as exc:
            raise InputError(f"{side}: cannot open {file} ({_os_reason(exc)})") from None
        if magic and start != magic:
            raise InputError(
                f"{side}: {file} is not a {fmt} file (it does not start as one); "
                f"is '{side}.format' right?"
            )


def _os_reason(exc: OSError) -> str:
    return exc.strerror or type(exc).__name__


def _data_files(path: str, side: str = "input") -> list[str]:
    """The files Spark reads under `path`: hidden and `_`-prefixed ones are not data.

    Follows symbolic links to folders, as Hadoop's listing does, and refuses a link
    back to a folder it is in (Spark would list it until the path grows too long).
    """
    if not os.path.isdir(path):
        return [path]
    files: list[str] = []

    def walk(folder: str, ancestors: frozenset[str]) -> None:
        try:
            names = sorted(n for n in os.listdir(folder) if not n.startswith((".", "_")))
        except OSError as exc:
            raise InputError(f"{side}: cannot list {folder} ({_os_reason(exc)})") from None
        for name in names:
            entry = os.path.join(folder, name)
            if os.path.islink(entry) and not os.path.exists(entry):
                raise InputError(f"{side}: {entry} is a symbolic link to nothing (or a link loop)")
            if os.path.isdir(entry):
                real = os.path.realpath(entry)
                if real in ancestors:
                    raise InputError(
                        f"{side}: {entry} is a symbolic link to a folder that contains it (a loop); "
                        "remove it or point the path elsewhere"
                    )
                walk(entry, ancestors | {real})
            else:
                files.append(entry)

    walk(path, frozenset({os.path.realpath(path)}))
    return files


def _hint(exc: BaseException, side: str) -> str:
    """What to check after a failed read: the format only when Spark says the content
    is not what it expected."""
    name = spark_error_name(exc)
    if name.startswith(("PATH_NOT_FOUND", "FILE_NOT_EXIST")):
        return "; check that the path exists and is readable"
    if name.startswith(("MALFORMED_", "CANNOT_READ_FILE_FOOTER", "FAILED_READ_FILE", "UNABLE_TO_INFER_SCHEMA")):
        return f"; is '{side}.format' right?"
    return f"; check the file and '{side}.options'"


def _check_renamed_header(
    spark: SparkSession, columns: Sequence[str], options: dict[str, str], path: str, side: str
) -> None:
    """Refuse a CSV header naming one column twice (or twice up to case).

    Spark renames such columns to name + position (`Age0`, `age1`), names that are not
    in the file. Confirmed against the raw header line, read as data: a header that
    really says `x0,x1` is left alone.
    """
    if options.get("header", "false").lower() != "true":
        return
    suspects: dict[str, list[int]] = {}
    for i, name in enumerate(columns):  # Spark appends the column's position
        if name.endswith(str(i)) and len(name) > len(str(i)):
            suspects.setdefault(name[: -len(str(i))].lower(), []).append(i)
    suspects = {base: at for base, at in suspects.items() if len(at) > 1}
    if not suspects:
        return
    raw = spark.read.format("csv").options(**{**options, "header": "false", "inferSchema": "false"})
    first = raw.load(literal_path(path)).first()
    if first is None:
        return
    for at in suspects.values():
        names = [first[i] for i in at]
        renamed = [columns[i] for i in at]
        if all(n is not None and renamed[j] == f"{n}{at[j]}" for j, n in enumerate(names)):
            listed = " and ".join(f"'{n}'" for n in names)
            raise InputError(
                f"{side}: the header of {path} names columns {listed}, the same name "
                f"{'up to case' if len(set(names)) > 1 else 'twice'} (Spark would rename them "
                f"{', '.join(renamed)}); give each column its own name"
            )


def _check_line_breaks_in_fields(spark: SparkSession, options: dict[str, str], path: str, side: str) -> None:
    """Refuse a CSV file with a quoted field spanning lines, unless read with multiLine.

    Spark reads CSV line by line by default: such a record becomes two broken rows,
    whose symptoms (a text value in a number column, a null key) would be reported
    instead. A line that opens a quoted field (a quote at its start or after a
    separator) and does not close it is the sign. One scan of the text.
    """
    if options.get("multiLine", options.get("multiline", "false")).lower() == "true":
        return
    quote, sep = options.get("quote", '"'), options.get("sep", options.get("delimiter", ","))
    escape = options.get("escape", "\\")
    if len(quote) != 1 or len(sep) != 1 or len(escape) != 1 or quote == "\u0000":
        return  # no quoting, or separators this check does not model
    q, s, e = (re.escape(c) for c in (quote, sep, escape))
    inside = f"(?:[^{q}]|{q}{q})" if quote == escape else f"(?:[^{q}{e}]|{e}.|{q}{q})"
    unclosed = f"(?:^|{s}){q}{inside}*+$"
    text = spark.read.options(**({"lineSep": options["lineSep"]} if "lineSep" in options else {}))
    lines = text.text(literal_path(path)).filter(F.col("value").rlike(unclosed))
    # A file read as one partition (a small file): isEmpty gives the answer in one Spark
    # job, limit(1).count() in two (the count adds a job over the limit's output), a
    # visible part of the "read inputs" phase on small files. More partitions: the
    # count's one job scans them all at once, where isEmpty (take(1)) would scan them in
    # rounds of growing size when no line matches, the usual case. Planning only here.
    if lines.rdd.getNumPartitions() == 1:
        broken = not lines.isEmpty()
    else:
        broken = lines.limit(1).count() > 0
    if broken:
        raise InputError(
            f"{side}: {path} has a quoted field that spans lines (a line break inside quotes); "
            f"set '{side}.options.multiLine: true' to read it"
        )


def _name_columns_alike(spark: SparkSession, fmt: str, options: dict[str, str], path: str, side: str) -> None:
    """After Spark refused a schema with two columns of one name up to case (Parquet,
    ORC, JSON): read the schema again, case-sensitively, to name them."""
    key = "spark.sql.caseSensitive"
    saved = spark.conf.get(key)
    try:
        spark.conf.set(key, "true")
        with spark_error_logs_silenced():
            columns = spark.read.format(fmt).options(**options).load(literal_path(path)).columns
    except SPARK_ERRORS:
        return
    finally:
        spark.conf.set(key, saved)
    _check_distinct_names(columns, path, side)


def _check_distinct_names(columns: Sequence[str], path: str, side: str) -> None:
    """Refuse two columns whose names differ only in case: Spark resolves names
    ignoring case, so neither could be compared."""
    seen: dict[str, str] = {}
    for name in columns:
        other = seen.get(name.lower())
        seen[name.lower()] = name
        if other is not None:
            how = "twice" if other == name else "the same name up to case"
            raise InputError(
                f"{side}: {path} has columns '{other}' and '{name}' ({how}); Spark cannot tell "
                "them apart: rename one"
            )


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


def read_options(fmt: str, configured: Mapping[str, object]) -> dict[str, str]:
    """The reader options the job passes to Spark for a `fmt` source: its defaults, then
    the configured ones as text."""
    return {**_DEFAULT_OPTIONS.get(fmt, {}), **{k: _option_text(v) for k, v in configured.items()}}


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

    One file read as one partition is read from byte 0 in file order: it is one split,
    or (only when spark.sql.files.maxPartitionNum re-packs) several splits that Spark
    lists longest first with a stable sort, all of one length but the last, i.e. in file
    order. Its ids are 0..n-1 in file order, every shift of the general case would be 0,
    and the positions are the ids themselves. That case skips the two Spark jobs of the
    split collect and the broadcast join (each bundled example side is one small file).
    Both tests below plan the scan only; neither runs a job.
    """
    if len(frame.inputFiles()) == 1 and frame.rdd.getNumPartitions() == 1:
        return frame.withColumn(POSITION, F.monotonically_increasing_id())
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
    shift_frame = local_frame(
        spark, shifts, T.StructType([
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


def unreadable_table(side: str, exc: BaseException) -> InputError:
    """The error for a table a pass could not read to its end (the reason named, never quoted)."""
    return InputError(
        f"the {side} table cannot be read to its end ({spark_error_name(exc)}); check the "
        f"file and '{side}.options'"
    )
