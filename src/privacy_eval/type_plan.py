"""One type per compared column on both sides (the type plan), and the holdout brought
to those types. inputs.py makes the two tables comparable with it.

The plan takes each column's common type; what only the data can tell (a text column
with no value on one side, values a configured cast cannot convert) it leaves to checks
that the profile pass counts (`TypePlan.checks`, `TypePlan.verify`), so that they cost
no pass of their own.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from privacy_eval.columns import KEY
from privacy_eval.errors import InputError, is_read_error, spark_error_logs_silenced
from privacy_eval.frames import qcol
from privacy_eval.reading import SPARK_ERRORS, unreadable_table


@dataclass(frozen=True)
class TypePlan:
    """One type for the key (KEY) and each compared column, and what the data must
    confirm before the plan holds.

    Two cases are left to the profile pass, so that they cost no pass of their own:
    - text on one side only: CSV and JSON readers infer a column without any value as
      string (every column of a header-only file, say), so a column entirely null on one
      side takes the other side's type; text with values is the spec's type error;
    - a configured cast: values that do not convert are counted and refused. A plain
      (ANSI) cast would fail inside Spark with a message quoting the value.
    """

    row_key: str
    types: dict[str, T.DataType]
    raw_types: dict[str, tuple[T.DataType, T.DataType]]  # (original, synthetic) as read
    configured: frozenset[str]
    must_be_null: dict[str, str]  # column -> the side whose text column must be all null

    def converted(self, name: str, side: str) -> Column:
        target = self.types[name]
        if self.must_be_null.get(name) == side:
            return F.lit(None).cast(target).alias(name)  # verified: no value to convert
        if name in self.configured:
            return qcol(name).try_cast(target).alias(name)  # verified: nothing turns null
        return qcol(name).cast(target).alias(name)  # between numbers of different kinds

    def checks(self, side: str) -> dict[str, Column]:
        """Conditions on the rows of `side` as read, by label; the profile pass counts
        the rows meeting each."""
        out = {}
        for name, null_side in self.must_be_null.items():
            if null_side == side:
                out[f"values:{name}"] = qcol(name).isNotNull()
        for name in self.configured:
            raw = qcol(name)
            out[f"unconverted:{name}"] = raw.isNotNull() & raw.try_cast(self.types[name]).isNull()
        return out

    def verify(self, counts: dict[str, dict[str, int]]) -> None:
        """Refuse what the profile pass found against the plan: `counts`, per side, the
        rows meeting each of `checks(side)`."""
        for name, side in self.must_be_null.items():
            if counts[side][f"values:{name}"]:
                raise self.mismatch(name)
        for name in sorted(self.configured):
            for side, side_counts in counts.items():
                failed = side_counts[f"unconverted:{name}"]
                if failed:
                    raise InputError(
                        f"cast: {failed} value(s) of column '{name}' in the {side} table cannot be "
                        f"cast to {self.types[name].simpleString()}"
                    )

    def mismatch(self, name: str) -> InputError:
        a, b = (t.simpleString() for t in self.raw_types[name])
        if name == KEY:
            return InputError(
                f"row_key '{self.row_key}' is {a} in the original and {b} in the synthetic "
                "table; the keys must have one type"
            )
        return InputError(
            f"column '{name}' is {a} in the original and {b} in the synthetic table; "
            f"add `cast: {{{name}: <type>}}` to the configuration to compare it"
        )


def typed_holdout(
    holdout: DataFrame, types: dict[str, T.DataType], configured: frozenset[str]
) -> tuple[DataFrame, int]:
    """`EvaluationInputs.typed_holdout`: the columns of `types` converted to them, checked
    in one pass that also counts the rows."""
    fields = {f.name: f.dataType for f in holdout.schema.fields}
    converted, checks = [], {}
    for name, target in types.items():
        if name not in fields:
            raise InputError(f"holdout: column '{name}' (compared by metrics.distance) is missing from the holdout table")
        kind, raw = fields[name], qcol(name)
        if name in configured:
            _check_castable(holdout, name, target, "holdout")
            converted.append(raw.try_cast(target).alias(name))
            checks[name] = raw.isNotNull() & raw.try_cast(target).isNull()
        elif kind == target or isinstance(kind, T.NullType):
            converted.append(raw.cast(target).alias(name))
        elif isinstance(kind, T.StringType):  # no value (a column CSV found empty), or the spec's type error
            converted.append(F.lit(None).cast(target).alias(name))
            checks[name] = raw.isNotNull()
        elif isinstance(kind, T.NumericType) and isinstance(target, T.NumericType):
            converted.append(raw.try_cast(target).alias(name))
            if _common_type(kind, target) != target:  # narrower: every value must convert unchanged
                back = raw.try_cast(target)
                checks[name] = raw.isNotNull() & (back.isNull() | (back.cast(kind) != raw))
        elif _common_type(kind, target) == target:
            converted.append(raw.cast(target).alias(name))
        else:
            raise _holdout_mismatch(name, kind, target)
    labels = list(checks)
    counts = holdout.agg(
        F.count(F.lit(1)).alias("n"), *(F.count(F.when(checks[c], 1)).alias(f"c{i}") for i, c in enumerate(labels))
    )
    try:
        with spark_error_logs_silenced():
            row = counts.collect()[0]
    except SPARK_ERRORS as exc:
        if is_read_error(exc):
            raise unreadable_table("holdout", exc) from None
        raise
    for i, name in enumerate(labels):
        failed = int(row[f"c{i}"])
        if not failed:
            continue
        if name in configured:
            raise InputError(
                f"cast: {failed} value(s) of column '{name}' in the holdout table cannot be cast to "
                f"{types[name].simpleString()}"
            )
        if isinstance(fields[name], T.StringType):
            raise _holdout_mismatch(name, fields[name], types[name])
        raise InputError(
            f"holdout: {failed} value(s) of column '{name}' would change if converted from "
            f"{fields[name].simpleString()} (in the holdout table) to {types[name].simpleString()} (in the original "
            f"and synthetic tables); add `cast: {{{name}: {fields[name].simpleString()}}}` to the configuration to "
            "compare it"
        )
    return holdout.select(*converted), int(row["n"])


def _holdout_mismatch(name: str, kind: T.DataType, target: T.DataType) -> InputError:
    return InputError(
        f"holdout: column '{name}' is {kind.simpleString()} in the holdout table but {target.simpleString()} in the "
        f"original and synthetic tables; add `cast: {{{name}: <type>}}` to the configuration to compare it"
    )


def plan_types(
    original: DataFrame, synthetic: DataFrame, row_key: str, columns: Sequence[str], cast: dict[str, str]
) -> TypePlan:
    plan = TypePlan(row_key, {}, {}, frozenset(cast), {})
    for name in (KEY, *columns):
        source = row_key if name == KEY else name
        a, b = original.schema[source].dataType, synthetic.schema[source].dataType
        plan.raw_types[name] = (a, b)
        for side, kind in (("original", a), ("synthetic", b)):
            if _holds_map(kind):
                raise _not_comparable(name, source, side, kind)
        if name in cast:
            plan.types[name] = _configured_type(original, synthetic, name, cast[name])
            continue
        common = _common_type(a, b)
        if common is None and isinstance(a, T.StringType) != isinstance(b, T.StringType):
            text_side = "original" if isinstance(a, T.StringType) else "synthetic"
            common = b if text_side == "original" else a
            plan.must_be_null[name] = text_side
        if common is None:
            raise plan.mismatch(name)
        plan.types[name] = common
    return plan


# Types Spark neither hashes nor groups by (two equal maps need not even compare equal):
# a column holding one anywhere cannot be compared.
_UNCOMPARABLE = tuple(t for t in (T.MapType, getattr(T, "VariantType", None)) if t is not None)


def _holds_map(kind: T.DataType) -> bool:
    """Whether a type is or contains a map (or a variant): see _UNCOMPARABLE."""
    if isinstance(kind, _UNCOMPARABLE):
        return True
    if isinstance(kind, T.ArrayType):
        return _holds_map(kind.elementType)
    if isinstance(kind, T.StructType):
        return any(_holds_map(f.dataType) for f in kind.fields)
    return False


def _not_comparable(name: str, source: str, side: str, kind: T.DataType) -> InputError:
    if name == KEY:
        return InputError(
            f"row_key '{source}' is {kind.simpleString()} in the {side} table; a row key cannot hold "
            "a map; name another key column"
        )
    return InputError(
        f"column '{source}' is {kind.simpleString()} in the {side} table, which this tool cannot "
        f"compare (Spark can neither hash nor group maps and variants); list it under 'exclude' to leave it out"
    )


def _configured_type(original: DataFrame, synthetic: DataFrame, name: str, type_name: str) -> T.DataType:
    """The Spark type of `cast: {name: type_name}`, checked to be reachable from both sides."""
    try:
        with spark_error_logs_silenced():
            target = T.DataType.fromDDL(type_name)
    except (*SPARK_ERRORS, ValueError):
        raise InputError(f"cast: '{type_name}' for column '{name}' is not a Spark type") from None
    for side, frame in (("original", original), ("synthetic", synthetic)):
        _check_castable(frame, name, target, side)
    return target


def _check_castable(frame: DataFrame, name: str, target: T.DataType, side: str) -> None:
    """Refuse a configured cast Spark cannot make from the column's type at all."""
    try:
        with spark_error_logs_silenced():
            frame.select(qcol(name).try_cast(target))  # analysed now, nothing runs
    except SPARK_ERRORS:
        source = frame.schema[name].dataType.simpleString()
        raise InputError(
            f"cast: column '{name}' is {source} in the {side} table and cannot be cast to {target.simpleString()}"
        ) from None


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
