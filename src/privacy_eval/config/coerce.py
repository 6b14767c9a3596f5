"""Typed dataclasses from parsed YAML, field by field against the type hints: unions
(the first type that fits), Literal choices, nested dataclasses, lists and mappings,
whole numbers that fit 64-bit integers and numbers that fit doubles. Every mistake is a
ConfigError naming the dotted key and what it expects.

Generic: nothing here knows the job's keys (schema.py). The checks the schema's own
rules share with it (`check_number`, `check_choice`) live here, so that a configuration
built by hand gets the words a YAML file gets.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from typing import Any, Literal, Union

from privacy_eval.config.yamlfile import join_key
from privacy_eval.errors import ConfigError


def fail_unless(condition: bool, key: str, rule: str) -> None:
    if not condition:
        raise ConfigError(f"key '{key}' {rule}")


def is_number(value: Any) -> bool:
    # Hand-built configurations skip the loader's type checks; a rule on a number
    # leaves a value of another type to the check that reads it.
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def literal_choices(cls: type, name: str) -> tuple[Any, ...]:
    """The values a Literal field (or a list of them) allows."""
    tp = typing.get_type_hints(cls)[name]
    if typing.get_origin(tp) is list:
        tp = typing.get_args(tp)[0]
    return typing.get_args(tp)


def check_choice(key: str, value: Any, choices: tuple[Any, ...]) -> None:
    allowed = ", ".join(str(c) for c in choices)
    fail_unless(value in choices, key, f"must be one of {allowed}, got '{value}'")


# Whole numbers reach Spark and numpy as 64-bit integers, other numbers as doubles: a
# value beyond them (YAML reads integers of any length) would fail late, or wrap.
LONG_MAX = 2**63 - 1


def _fits_long(value: Any) -> bool:
    return -LONG_MAX - 1 <= value <= LONG_MAX


def _fits_double(value: Any) -> bool:
    try:
        float(value)
    except OverflowError:
        return False
    return True


def check_number(key: str, value: Any, whole: bool = False) -> None:
    if whole:
        fail_unless(is_number(value) and isinstance(value, int), key, f"must be a whole number, got {_type_name(value)}")
        fail_unless(_fits_long(value), key, f"must fit a 64-bit integer (at most {LONG_MAX} in size)")
    else:
        fail_unless(is_number(value), key, f"must be a number, got {_type_name(value)}")
        fail_unless(_fits_double(value), key, "must fit a double (at most about 1.8e308 in size)")


def build(cls: type, data: Any, where: str) -> Any:
    """Build dataclass `cls` from `data`, naming the dotted key of any mistake."""
    label = where or "the configuration"
    if not isinstance(data, dict):
        raise ConfigError(f"{label} must be a mapping, got {_type_name(data)}")
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls)}
    unknown = sorted(set(data) - set(fields))
    if unknown:
        known = ", ".join(sorted(fields))
        raise ConfigError(f"unknown key '{join_key(where, unknown[0])}' (allowed here: {known})")
    values = {}
    for name, f in fields.items():
        key = join_key(where, name)
        if name not in data:
            no_default = (
                f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
            )
            if no_default:
                raise ConfigError(f"missing required key '{key}'")
            continue
        values[name] = _coerce(hints[name], data[name], key, f.metadata.get("expects"))
    return cls(**values)


def _coerce(tp: Any, value: Any, key: str, expects: str | None = None) -> Any:
    """`value` as type `tp`, or a ConfigError naming `key`. A union takes the first of
    its types that fits; when none does, the message says what the key expects (the
    field's metadata "expects", or its types)."""
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin in (Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        inner = [a for a in args if a is not type(None)]
        if len(inner) == 1:
            return _coerce(inner[0], value, key)
        for member in inner:
            try:
                return _coerce(member, value, key)
            except ConfigError:
                continue
        wanted = expects or " or ".join(_describe(member) for member in inner)
        raise ConfigError(f"key '{key}' must be {wanted}, got {shown(value)}")
    if origin is Literal:
        check_choice(key, value, args)
        return value
    if dataclasses.is_dataclass(tp):
        return build(tp, value, key)
    if origin is list:
        if not isinstance(value, list):
            raise ConfigError(f"key '{key}' must be a list, got {_type_name(value)}")
        return [_coerce(args[0], item, f"{key}[{i}]") for i, item in enumerate(value)]
    if origin is dict:
        if not isinstance(value, dict):
            raise ConfigError(f"key '{key}' must be a mapping, got {_type_name(value)}")
        return {
            _coerce(args[0], k, key): _coerce(args[1], v, join_key(key, str(k)))
            for k, v in value.items()
        }
    if tp is Any:
        return value
    if tp is bool:
        if not isinstance(value, bool):
            raise ConfigError(f"key '{key}' must be true or false, got {_type_name(value)}")
        return value
    if tp is float:
        check_number(key, value)
        return float(value)
    if tp is int:
        check_number(key, value, whole=True)
        return value
    if tp is str:
        # YAML reads `dataset: 2024` as a number; a name is still meant.
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return str(value)
        if not isinstance(value, str):
            raise ConfigError(f"key '{key}' must be a string, got {_type_name(value)}")
        return value
    raise TypeError(f"unsupported config type {tp!r} for {key}")  # a bug in this module


def optional_member(tp: Any) -> Any:
    """X of `X | None`."""
    return next(a for a in typing.get_args(tp) if a is not type(None))


def _describe(tp: Any) -> str:
    """What a value of type `tp` looks like, for the message of a union none of whose types fits."""
    if typing.get_origin(tp) is Literal:
        return " or ".join(f"'{a}'" for a in typing.get_args(tp))
    if dataclasses.is_dataclass(tp) or typing.get_origin(tp) is dict:
        return "a mapping"
    return {int: "a whole number", float: "a number", str: "a string", bool: "true or false"}.get(
        tp, "a list" if typing.get_origin(tp) is list else str(tp)
    )


def shown(value: Any) -> str:
    """A wrong scalar value as the message shows it; other values by their kind."""
    if isinstance(value, str):
        return f"'{value}'" if len(value) <= 40 else "a string"
    if is_number(value):
        shown = repr(value)
        return shown if len(shown) <= 40 else f"a number of {len(shown)} characters"
    return _type_name(value)


def _type_name(value: Any) -> str:
    if value is None:
        return "nothing (null)"
    return {dict: "a mapping", list: "a list", str: "a string", bool: "a boolean"}.get(
        type(value), "a number" if isinstance(value, (int, float)) else type(value).__name__
    )
