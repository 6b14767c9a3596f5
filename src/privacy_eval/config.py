"""The job's configuration: a YAML file checked strictly against typed dataclasses.

Strict because a typo in a key (say `row_direct_macth`) must not silently disable a
metric: unknown keys, wrong types and missing required keys are errors naming the key.
The schema is documented in docs/interface.md ("Configuration keys"); each dataclass
below is one mapping of it.

Each rule is checked once, where it belongs: the types by the loader (`_coerce`); a
rule about the keys of one mapping in that dataclass's `__post_init__`, so that a
notebook building `LinkageConfig(targets=[])` by hand gets the error a YAML file gets;
and rules that span mappings in `Config.__post_init__`. Checks against the data are the
metrics' own (`privacy_eval.metrics`, each metric's `check`).

The YAML itself, of the file and of every `--set` value, goes through a loader with
limits (yamlfile.py: `MAX_CONFIG_BYTES`, `MAX_DEPTH`): a key given twice, anchors and
aliases, deep nesting and oversized or special files are refused before any work.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
import re
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Union

import yaml

from privacy_eval.errors import ConfigError
from privacy_eval.yamlfile import MAX_CONFIG_BYTES, MAX_DEPTH, Refused, join_key, load_yaml, nesting, read_config_bytes

POSITION_KEY = "@position"
DEFAULT_TOLERANCE = 1.4901161193847656e-08  # sqrt(double eps), as the reference package
FORMATS = ("csv", "parquet", "json", "orc")
_DATABASE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")



@dataclass(frozen=True)
class Source:
    """Where one input table comes from: a file or folder (`path`) or a catalog `table`."""

    path: str | None = None
    table: str | None = None
    format: Literal["csv", "parquet", "json", "orc"] | None = None
    options: dict[str, Any] = field(default_factory=dict)


def _fail_unless(condition: bool, key: str, rule: str) -> None:
    if not condition:
        raise ConfigError(f"key '{key}' {rule}")


def _is_number(value: Any) -> bool:
    # Hand-built configurations skip the loader's type checks; a rule on a number
    # leaves a value of another type to the check that reads it.
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _check_percent_target(metric: str, target: float | None) -> None:
    if _is_number(target):
        _fail_unless(0 <= target <= 100, f"metrics.{metric}.target", "must lie in 0..100 (percent)")


def _check_distinct(key: str, names: Any) -> None:
    _fail_unless(len(set(names)) == len(names), key, "lists a column twice")


def _choices(cls: type, name: str) -> tuple[Any, ...]:
    """The values a Literal field (or a list of them) allows."""
    tp = typing.get_type_hints(cls)[name]
    if typing.get_origin(tp) is list:
        tp = typing.get_args(tp)[0]
    return typing.get_args(tp)


def _check_choice(key: str, value: Any, choices: tuple[Any, ...]) -> None:
    allowed = ", ".join(str(c) for c in choices)
    _fail_unless(value in choices, key, f"must be one of {allowed}, got '{value}'")


# Whole numbers reach Spark and numpy as 64-bit integers, other numbers as doubles: a
# value beyond them (YAML reads integers of any length) would fail late, or wrap.
_LONG_MAX = 2**63 - 1


def _fits_long(value: Any) -> bool:
    return -_LONG_MAX - 1 <= value <= _LONG_MAX


def _fits_double(value: Any) -> bool:
    try:
        float(value)
    except OverflowError:
        return False
    return True


def _check_number(key: str, value: Any, whole: bool = False) -> None:
    if whole:
        _fail_unless(_is_number(value) and isinstance(value, int), key, f"must be a whole number, got {_type_name(value)}")
        _fail_unless(_fits_long(value), key, f"must fit a 64-bit integer (at most {_LONG_MAX} in size)")
    else:
        _fail_unless(_is_number(value), key, f"must be a number, got {_type_name(value)}")
        _fail_unless(_fits_double(value), key, "must fit a double (at most about 1.8e308 in size)")


@dataclass(frozen=True)
class RowDirectMatchConfig:
    target: float | None = 90.0

    def __post_init__(self) -> None:
        _check_percent_target("row_direct_match", self.target)


@dataclass(frozen=True)
class ColumnDirectMatchConfig:
    target: float | None = 50.0

    def __post_init__(self) -> None:
        _check_percent_target("column_direct_match", self.target)


@dataclass(frozen=True)
class KnowledgeProtectionConfig:
    known_variables: list[str]
    target: float | None = 95.0
    bin_width: dict[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        _check_percent_target("knowledge_protection", self.target)
        key = "metrics.knowledge_protection.known_variables"
        _fail_unless(bool(self.known_variables), key, "must not be empty")
        _check_distinct(key, self.known_variables)
        for name, width in self.bin_width.items():
            key = f"metrics.knowledge_protection.bin_width.{name}"
            _fail_unless(name in self.known_variables, key, "names a column that is not a known variable")
            if _is_number(width):
                _fail_unless(0 < width < float("inf"), key, "must be a positive number")


@dataclass(frozen=True)
class LinkageConfig:
    targets: list[str]
    blocking: list[str] = field(default_factory=list)
    methods: list[Literal["mahalanobis", "weighted"]] = field(
        default_factory=lambda: ["mahalanobis", "weighted"]
    )
    cov_from: Literal["raw", "anon", "pooled"] = "raw"
    ridge: float = 1.0e-6
    squared: bool = False
    tolerance: float = DEFAULT_TOLERANCE
    top_k: list[int] = field(default_factory=lambda: [1, 5, 10])
    drop_incomplete: bool = False
    target: float | None = None

    def __post_init__(self) -> None:
        key = "metrics.linkage."
        _fail_unless(bool(self.targets), key + "targets", "must not be empty")
        _check_distinct(key + "targets", self.targets)
        # The choices and numbers again for a configuration built by hand (the loader
        # has checked them for a YAML file, with these same words), so that the attack
        # can take them as given.
        for i, method in enumerate(self.methods or ()):
            _check_choice(f"{key}methods[{i}]", method, _choices(LinkageConfig, "methods"))
        _check_choice(key + "cov_from", self.cov_from, _choices(LinkageConfig, "cov_from"))
        _check_number(key + "ridge", self.ridge)
        _fail_unless(0 <= self.ridge < float("inf"), key + "ridge", "must not be negative, and must be finite")
        _check_number(key + "tolerance", self.tolerance)
        _fail_unless(0 <= self.tolerance < float("inf"), key + "tolerance", "must be a finite non-negative number")
        _fail_unless(bool(self.methods), key + "methods", "must not be empty")
        for i, k in enumerate(self.top_k or ()):
            _check_number(f"{key}top_k[{i}]", k, whole=True)
        _fail_unless(all(k >= 1 for k in self.top_k or ()), key + "top_k", "values must be at least 1")
        if _is_number(self.target):
            _fail_unless(0 <= self.target <= 1, key + "target", "must lie in 0..1 (a success rate)")


def _check_target(key: str, target: Any, low: float, high: float, rule: str) -> None:
    """A target, when it is a number, is finite and lies in low..high."""
    if _is_number(target):
        _fail_unless(math.isfinite(target) and low <= target <= high, key, rule)


@dataclass(frozen=True)
class HiddenRateConfig:
    target: float | None = 90.0     # percent: passes at value >= target

    def __post_init__(self) -> None:
        _check_percent_target("distance.hidden_rate", self.target)


@dataclass(frozen=True)
class LocalCloakingConfig:
    target: float | None = 5.0      # records: passes at value >= target
    cap: int = 1000                 # each record's count is exact up to this many

    def __post_init__(self) -> None:
        key = "metrics.distance.local_cloaking."
        _check_target(key + "target", self.target, 0, math.inf, "must be a finite number >= 0 (records)")
        _check_number(key + "cap", self.cap, whole=True)
        _fail_unless(self.cap >= 1, key + "cap", "must be at least 1")


@dataclass(frozen=True)
class DistanceToClosestRecordConfig:
    target: float | None = None     # a distance in the projected space: passes at value >= target

    def __post_init__(self) -> None:
        _check_target("metrics.distance.distance_to_closest_record.target", self.target, 0, math.inf,
                      "must be a finite number >= 0 (a distance)")


@dataclass(frozen=True)
class NearestNeighbourDistanceRatioConfig:
    target: float | None = None     # a ratio d1/d2: passes at value >= target

    def __post_init__(self) -> None:
        _check_target("metrics.distance.nearest_neighbour_distance_ratio.target", self.target, 0, 1,
                      "must lie in 0..1 (a distance ratio)")


@dataclass(frozen=True)
class HoldoutDistanceShareConfig:
    target: float | None = None     # upper bound on share - expected: passes at share - expected <= target

    def __post_init__(self) -> None:
        _check_target("metrics.distance.holdout_distance_share.target", self.target, -1, 1,
                      "must lie in -1..1 (an upper bound on share - expected)")


#: The sub-metrics of `metrics.distance`, in the order of their results rows.
DISTANCE_SUB_METRICS = (
    "hidden_rate", "local_cloaking", "distance_to_closest_record", "nearest_neighbour_distance_ratio",
    "holdout_distance_share",
)
_COMPONENTS_RULE = "a whole number >= 1 or 'all'"


@dataclass(frozen=True)
class DistanceConfig:
    """The distance-based metrics. A sub-metric runs when its key is present; when none
    is (an empty `distance:`), every one the inputs allow runs with its defaults."""

    columns: list[str] | None = None                # None: every compared column
    components: int | Literal["all"] = field(default=5, metadata={"expects": _COMPONENTS_RULE})
    # Records of the searched side per cell of the exact searches: what one task holds.
    cell_records: int = 1_000_000
    # In a space too wide for a k-d tree to prune, searches estimated above this are refused.
    max_core_hours: float = 24.0
    hidden_rate: HiddenRateConfig | None = None
    local_cloaking: LocalCloakingConfig | None = None
    distance_to_closest_record: DistanceToClosestRecordConfig | None = None
    nearest_neighbour_distance_ratio: NearestNeighbourDistanceRatioConfig | None = None
    holdout_distance_share: HoldoutDistanceShareConfig | None = None

    def __post_init__(self) -> None:
        key = "metrics.distance."
        if self.columns is not None:
            _fail_unless(bool(self.columns), key + "columns", "must not be empty (leave it out for every compared column)")
            _check_distinct(key + "columns", self.columns)
        components = self.components
        whole = _is_number(components) and isinstance(components, int) and 1 <= components <= _LONG_MAX
        _fail_unless(whole or components == "all", key + "components",
                     f"must be {_COMPONENTS_RULE}, got {_shown(components)}")
        _check_number(key + "cell_records", self.cell_records, whole=True)
        _fail_unless(self.cell_records >= 1, key + "cell_records", "must be at least 1")
        _check_number(key + "max_core_hours", self.max_core_hours)
        _fail_unless(0 < self.max_core_hours < math.inf, key + "max_core_hours", "must be a finite number > 0")

    def selected(self, has_holdout: bool) -> dict[str, Any]:
        """Sub-metric key -> its configuration, in DISTANCE_SUB_METRICS order: the ones
        given; when none is, every sub-metric with its defaults, holdout_distance_share
        only when `has_holdout` (a configuration with a `holdout` table)."""
        given = {key: getattr(self, key) for key in DISTANCE_SUB_METRICS if getattr(self, key) is not None}
        if given:
            return given
        hints = typing.get_type_hints(DistanceConfig)
        return {
            key: _optional_member(hints[key])()
            for key in DISTANCE_SUB_METRICS
            if has_holdout or key != "holdout_distance_share"
        }


@dataclass(frozen=True)
class DisclosureConfig:
    """synthpop's identity and attribute disclosure measures (docs/metrics.md, "Identity
    and attribute disclosure"); the thresholds and denom_lim have synthpop's defaults."""

    keys: list[str]                                   # what the attacker knows
    targets: list[str]                                # the sensitive columns, one figure each
    bins: dict[str, int] = field(default_factory=dict)  # numeric key or target -> quantile groups
    denom_lim: int = 5
    exclude_ov_denom_lim: bool = False                # true: cells over denom_lim count 0
    thresh_1way: list[float] = field(default_factory=lambda: [50.0, 90.0])
    thresh_2way: list[float] = field(default_factory=lambda: [4.0, 80.0])
    target: float | None = None                       # percent: passes at value <= target

    def __post_init__(self) -> None:
        key = "metrics.disclosure."
        for name in ("keys", "targets"):
            _fail_unless(bool(getattr(self, name)), key + name, "must not be empty")
            _check_distinct(key + name, getattr(self, name))
        both = [t for t in self.targets if t in self.keys]
        _fail_unless(not both, key + "targets", f"lists '{both[0] if both else ''}', which is also a key")
        for name, groups in self.bins.items():
            where = f"{key}bins.{name}"
            _fail_unless(name in self.keys or name in self.targets, where,
                         "names a column that is neither a key nor a target")
            _check_number(where, groups, whole=True)
            _fail_unless(groups >= 2, where, "must be at least 2 (groups)")
        _check_number(key + "denom_lim", self.denom_lim, whole=True)
        _fail_unless(self.denom_lim >= 1, key + "denom_lim", "must be at least 1")
        for name in ("thresh_1way", "thresh_2way"):
            values = getattr(self, name)
            _fail_unless(len(values) == 2 and all(_is_number(v) and math.isfinite(v) for v in values),
                         key + name, "must be two finite numbers: a count and a percent")
        _check_percent_target("disclosure", self.target)


@dataclass(frozen=True)
class MetricsConfig:
    """A metric runs when its key is present (an empty mapping takes the defaults)."""

    row_direct_match: RowDirectMatchConfig | None = None
    column_direct_match: ColumnDirectMatchConfig | None = None
    knowledge_protection: KnowledgeProtectionConfig | None = None
    linkage: LinkageConfig | None = None
    distance: DistanceConfig | None = None
    disclosure: DisclosureConfig | None = None

    def __post_init__(self) -> None:
        configured = any(getattr(self, f.name) is not None for f in dataclasses.fields(self))
        _fail_unless(configured, "metrics", "must name at least one metric")


@dataclass(frozen=True)
class ResultsConfig:
    warehouse: str = "spark-warehouse"
    database: str = "privacy_eval"

    def __post_init__(self) -> None:
        # The name is also a folder (<database>.db) and a metastore identifier.
        _fail_unless(
            bool(_DATABASE_NAME.fullmatch(self.database)), "results.database",
            "must be letters, digits and underscores, not starting with a digit",
        )


@dataclass(frozen=True)
class Config:
    dataset: str
    original: Source
    synthetic: Source
    metrics: MetricsConfig
    row_key: str = POSITION_KEY
    exclude: list[str] = field(default_factory=list)
    categorical: list[str] = field(default_factory=list)
    # This project's extension of the configuration: Spark type names (e.g. "double",
    # "string") to cast a column to on both sides, for columns whose types differ.
    cast: dict[str, str] = field(default_factory=dict)
    results: ResultsConfig = field(default_factory=ResultsConfig)
    # Original records the generator never saw (for metrics.distance.holdout_distance_share).
    # Last, so that positional construction written before it still works.
    holdout: Source | None = None

    def __post_init__(self) -> None:
        """The rules on the top-level keys, and those that span mappings."""
        _fail_unless(bool(self.dataset.strip()), "dataset", "must not be empty")
        for side in ("original", "synthetic", "holdout"):
            source: Source | None = getattr(self, side)
            if source is None and side == "holdout":
                continue
            one = (source.path is None) != (source.table is None)
            _fail_unless(one, side, "needs exactly one of 'path' or 'table'")
        _fail_unless(bool(self.row_key), "row_key", "must not be empty")
        for key in ("exclude", "categorical"):
            _check_distinct(key, getattr(self, key))
        distance = getattr(self.metrics, "distance", None)
        if getattr(distance, "holdout_distance_share", None) is not None:
            _fail_unless(self.holdout is not None, "metrics.distance.holdout_distance_share",
                         "needs a 'holdout' table (original records the generator never saw)")

    def to_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        # Keys added after the first release are left out while unset, so that a
        # configuration that does not use them keeps its config_sha256.
        if data["holdout"] is None:
            del data["holdout"]
        for metric in ("distance", "disclosure"):
            if data["metrics"][metric] is None:
                del data["metrics"][metric]
        distance = data["metrics"].get("distance")
        for name in ("cell_records", "max_core_hours") if distance else ():
            if distance[name] == getattr(DistanceConfig, name):  # what a run may cost, never a figure
                del distance[name]
        return data

    def sha256(self) -> str:
        """Hash of the effective configuration, recorded with every result row."""
        canonical = json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(canonical.encode()).hexdigest()


# Keys whose values lie in a metric mapping: `row_direct_match:` with no value means
# "run with defaults", which YAML reads as None.
_METRIC_KEYS = {f.name for f in dataclasses.fields(MetricsConfig)}


def load_config(path: str | os.PathLike[str], overrides: list[str] | None = None) -> Config:
    """Read a YAML config, apply `--set key=value` overrides, validate, resolve paths.

    Relative paths in the file are resolved against the file's folder, so a config
    travels with its data; relative paths given by `--set` are resolved against the
    current directory, like any other command-line path.
    """
    config_path = Path(path)
    data = read_config_bytes(config_path)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(
            f"config file {config_path} is not UTF-8 text (byte offset {exc.start})"
        ) from None
    try:
        raw = load_yaml(text)
    except Refused as exc:
        raise ConfigError(f"config file {config_path}: {exc}") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        raise ConfigError(f"config file {config_path} is not valid YAML{where}") from None
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise ConfigError(f"config file {config_path} must hold a mapping at the top level")

    base = config_path.resolve().parent
    _resolve_paths(raw, base)
    for override in overrides or []:
        _apply_override(raw, override)

    metrics = raw.get("metrics")
    if isinstance(metrics, dict):
        _none_to_mapping(metrics, _METRIC_KEYS)
        if isinstance(metrics.get("distance"), dict):
            _none_to_mapping(metrics["distance"], DISTANCE_SUB_METRICS)
    return _build(Config, raw, "")


def _none_to_mapping(mapping: dict[str, Any], keys: Any) -> None:
    """A (sub-)metric key without a value (`hidden_rate:`) runs it with its defaults."""
    for key in keys:
        if key in mapping and mapping[key] is None:
            mapping[key] = {}


def _resolve_paths(raw: dict[str, Any], base: Path) -> None:
    for side in ("original", "synthetic", "holdout"):
        source = raw.get(side)
        if isinstance(source, dict) and isinstance(source.get("path"), str):
            source["path"] = _resolve(source["path"], base)
    results = raw.setdefault("results", {})
    if isinstance(results, dict):
        # The default warehouse lives beside the config, like every other relative path.
        warehouse = results.get("warehouse", ResultsConfig.warehouse)
        if isinstance(warehouse, str):
            results["warehouse"] = _resolve(warehouse, base)


def _resolve(value: str, base: Path) -> str:
    if "://" in value or value.startswith("file:") or os.path.isabs(value):
        return value
    return str((base / value).resolve())


def _apply_override(raw: dict[str, Any], override: str) -> None:
    key, sep, value_text = override.partition("=")
    if not sep or not key:
        raise ConfigError(f"--set expects dotted.key=value, got '{key}'")
    parts = key.split(".")
    shown = key if len(key) <= 80 else key[:80] + "..."
    if len(parts) > MAX_DEPTH:
        raise ConfigError(f"--set {shown}: the key is nested deeper than {MAX_DEPTH} levels")
    if len(value_text.encode("utf-8", "surrogatepass")) > MAX_CONFIG_BYTES:
        raise ConfigError(f"--set {shown}: the value is larger than {MAX_CONFIG_BYTES} bytes")
    try:
        value = load_yaml(value_text) if value_text else None
    except Refused as exc:
        raise ConfigError(f"--set {shown}: {exc}") from None
    except yaml.YAMLError:
        raise ConfigError(f"--set {key}: the value is not valid YAML") from None
    if len(parts) + nesting(value) > MAX_DEPTH:
        raise ConfigError(f"--set {shown}: mappings and lists nested deeper than {MAX_DEPTH} levels")
    node = raw
    for depth, part in enumerate(parts[:-1]):
        child = node.get(part)
        if child is None:
            child = node[part] = {}
        if not isinstance(child, dict):
            raise ConfigError(f"--set {key}: '{'.'.join(parts[: depth + 1])}' is not a mapping")
        node = child
    if parts[-1] in ("path", "warehouse") and isinstance(value, str):
        value = _resolve(value, Path.cwd())
    node[parts[-1]] = value


def _build(cls: type, data: Any, where: str) -> Any:
    """Build dataclass `cls` from `data`, naming the dotted key of any mistake."""
    label = where or "the configuration"
    if not isinstance(data, dict):
        raise ConfigError(f"{label} must be a mapping, got {_type_name(data)}")
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls)}
    unknown = sorted(set(data) - set(fields))
    if unknown:
        known = ", ".join(sorted(fields))
        raise ConfigError(f"unknown key '{_join(where, unknown[0])}' (allowed here: {known})")
    values = {}
    for name, f in fields.items():
        key = _join(where, name)
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
        raise ConfigError(f"key '{key}' must be {wanted}, got {_shown(value)}")
    if origin is Literal:
        _check_choice(key, value, args)
        return value
    if dataclasses.is_dataclass(tp):
        return _build(tp, value, key)
    if origin is list:
        if not isinstance(value, list):
            raise ConfigError(f"key '{key}' must be a list, got {_type_name(value)}")
        return [_coerce(args[0], item, f"{key}[{i}]") for i, item in enumerate(value)]
    if origin is dict:
        if not isinstance(value, dict):
            raise ConfigError(f"key '{key}' must be a mapping, got {_type_name(value)}")
        return {
            _coerce(args[0], k, key): _coerce(args[1], v, _join(key, str(k)))
            for k, v in value.items()
        }
    if tp is Any:
        return value
    if tp is bool:
        if not isinstance(value, bool):
            raise ConfigError(f"key '{key}' must be true or false, got {_type_name(value)}")
        return value
    if tp is float:
        _check_number(key, value)
        return float(value)
    if tp is int:
        _check_number(key, value, whole=True)
        return value
    if tp is str:
        # YAML reads `dataset: 2024` as a number; a name is still meant.
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return str(value)
        if not isinstance(value, str):
            raise ConfigError(f"key '{key}' must be a string, got {_type_name(value)}")
        return value
    raise TypeError(f"unsupported config type {tp!r} for {key}")  # a bug in this module


def _optional_member(tp: Any) -> Any:
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


def _shown(value: Any) -> str:
    """A wrong scalar value as the message shows it; other values by their kind."""
    if isinstance(value, str):
        return f"'{value}'" if len(value) <= 40 else "a string"
    if _is_number(value):
        shown = repr(value)
        return shown if len(shown) <= 40 else f"a number of {len(shown)} characters"
    return _type_name(value)


def _join(where: str, name: str) -> str:
    return join_key(where, name)


def _type_name(value: Any) -> str:
    if value is None:
        return "nothing (null)"
    return {dict: "a mapping", list: "a list", str: "a string", bool: "a boolean"}.get(
        type(value), "a number" if isinstance(value, (int, float)) else type(value).__name__
    )
