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
limits (`_StrictLoader`, `MAX_CONFIG_BYTES`, `MAX_DEPTH`): a key given twice, anchors and
aliases, deep nesting and oversized or special files are refused before any work.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
import stat
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Union

import yaml

from privacy_eval.errors import ConfigError

POSITION_KEY = "@position"
DEFAULT_TOLERANCE = 1.4901161193847656e-08  # sqrt(double eps), as the reference package
FORMATS = ("csv", "parquet", "json", "orc")
_DATABASE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")

# What the loader accepts (docs/interface.md, "Configuration keys"): a job configuration
# is a few kilobytes of plain mappings and lists, so anything far beyond is refused
# before it can cost time or memory.
MAX_CONFIG_BYTES = 128 * 1024  # the file, and each `--set` value (parsing 128 KiB takes ~1 s)
MAX_DEPTH = 32  # nested mappings and lists, the top-level mapping counting as 1


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


def _check_number(key: str, value: Any, whole: bool = False) -> None:
    if whole:
        _fail_unless(_is_number(value) and isinstance(value, int), key, f"must be a whole number, got {_type_name(value)}")
    else:
        _fail_unless(_is_number(value), key, f"must be a number, got {_type_name(value)}")


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


@dataclass(frozen=True)
class MetricsConfig:
    """A metric runs when its key is present (an empty mapping takes the defaults)."""

    row_direct_match: RowDirectMatchConfig | None = None
    column_direct_match: ColumnDirectMatchConfig | None = None
    knowledge_protection: KnowledgeProtectionConfig | None = None
    linkage: LinkageConfig | None = None

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

    def __post_init__(self) -> None:
        """The rules on the top-level keys, and those that span mappings."""
        _fail_unless(bool(self.dataset.strip()), "dataset", "must not be empty")
        for side in ("original", "synthetic"):
            source: Source = getattr(self, side)
            one = (source.path is None) != (source.table is None)
            _fail_unless(one, side, "needs exactly one of 'path' or 'table'")
        _fail_unless(bool(self.row_key), "row_key", "must not be empty")
        for key in ("exclude", "categorical"):
            _check_distinct(key, getattr(self, key))

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

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
    data = _read_config_bytes(config_path)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(
            f"config file {config_path} is not UTF-8 text (byte offset {exc.start})"
        ) from None
    try:
        raw = _load_yaml(text)
    except _Refused as exc:
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

    for key in _METRIC_KEYS:
        metrics = raw.get("metrics")
        if isinstance(metrics, dict) and key in metrics and metrics[key] is None:
            metrics[key] = {}
    return _build(Config, raw, "")


def _read_config_bytes(path: Path) -> bytes:
    """The config file's bytes: a regular file of at most MAX_CONFIG_BYTES, read without
    ever blocking (a FIFO, a terminal or /dev/zero is refused before it is opened)."""
    try:
        info = os.stat(path)
    except OSError as exc:
        raise ConfigError(f"cannot read config file {path}: {exc.strerror}") from None
    _check_regular_file(path, info)
    try:
        # Non-blocking, in case the path was swapped for a FIFO since the stat above.
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError as exc:
        raise ConfigError(f"cannot read config file {path}: {exc.strerror}") from None
    try:
        _check_regular_file(path, os.fstat(fd))
        chunks, size = [], 0
        while size <= MAX_CONFIG_BYTES:
            chunk = os.read(fd, MAX_CONFIG_BYTES + 1 - size)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    except OSError as exc:
        raise ConfigError(f"cannot read config file {path}: {exc.strerror}") from None
    finally:
        os.close(fd)
    if size > MAX_CONFIG_BYTES:  # grew since the stat
        raise ConfigError(f"config file {path} is larger than {MAX_CONFIG_BYTES} bytes")
    return b"".join(chunks)


def _check_regular_file(path: Path, info: os.stat_result) -> None:
    if not stat.S_ISREG(info.st_mode):
        kind = ("a directory" if stat.S_ISDIR(info.st_mode) else "a named pipe" if stat.S_ISFIFO(info.st_mode)
                else "a device" if stat.S_ISCHR(info.st_mode) or stat.S_ISBLK(info.st_mode)
                else "a socket" if stat.S_ISSOCK(info.st_mode) else "a special file")
        raise ConfigError(f"config file {path} is {kind}, not a regular file")
    if info.st_size > MAX_CONFIG_BYTES:
        raise ConfigError(
            f"config file {path} is larger than {MAX_CONFIG_BYTES} bytes ({info.st_size} bytes)"
        )


class _Refused(yaml.YAMLError):
    """YAML that is valid but that the job refuses: the message says what and where."""


class _StrictLoader(yaml.SafeLoader):
    """yaml.SafeLoader that refuses duplicate keys, anchors and aliases, and nesting
    deeper than MAX_DEPTH.

    Duplicate keys: YAML loaders silently keep the last one, which can drop a whole
    `metrics:` block. Aliases: a few hundred bytes of nested aliases expand to billions
    of nodes ("billion laughs"), and a job configuration has no need for them. Depth:
    the composer recurses once per level.
    """

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._depth = 0
        self._paths: dict[int, str] = {}

    def compose_node(self, parent: Any, index: Any) -> Any:
        event = self.peek_event()
        if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None) is not None:
            raise _Refused(
                f"YAML anchors and aliases (&name, *name) are not accepted (line {event.start_mark.line + 1})"
            )
        if not isinstance(event, (yaml.MappingStartEvent, yaml.SequenceStartEvent)):
            return super().compose_node(parent, index)
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                raise _Refused(
                    f"mappings and lists nested deeper than {MAX_DEPTH} levels (line {event.start_mark.line + 1})"
                )
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def construct_document(self, node: Any) -> Any:
        self._record_paths(node, "")
        return super().construct_document(node)

    def _record_paths(self, node: Any, path: str) -> None:
        """The dotted key of every mapping, for the duplicate-key message (a tree: no aliases)."""
        if isinstance(node, yaml.MappingNode):
            self._paths[id(node)] = path
            for key, value in node.value:
                if key.tag == "tag:yaml.org,2002:merge":
                    self._record_paths(value, path)
                else:
                    name = str(key.value) if isinstance(key, yaml.ScalarNode) else "?"
                    self._record_paths(value, _join(path, name))
        elif isinstance(node, yaml.SequenceNode):
            for i, item in enumerate(node.value):
                self._record_paths(item, f"{path}[{i}]")

    def construct_mapping(self, node: Any, deep: bool = False) -> Any:
        if isinstance(node, yaml.MappingNode):
            seen: dict[Any, int] = {}
            for key_node, _ in node.value:
                if not isinstance(key_node, yaml.ScalarNode) or key_node.tag == "tag:yaml.org,2002:merge":
                    continue  # a complex key is refused by the constructor itself
                key = self.construct_object(key_node)
                line = key_node.start_mark.line + 1
                if key in seen:
                    name = _join(self._paths.get(id(node), ""), str(key))
                    raise _Refused(f"key '{name}' appears twice (lines {seen[key]} and {line})")
                seen[key] = line
        return super().construct_mapping(node, deep=deep)

    def construct_yaml_int(self, node: Any) -> Any:
        try:
            return super().construct_yaml_int(node)
        except ValueError:  # more digits than Python converts
            raise _Refused(f"number too long (line {node.start_mark.line + 1})") from None

    def construct_yaml_timestamp(self, node: Any) -> Any:
        try:
            return super().construct_yaml_timestamp(node)
        except (ValueError, OverflowError):  # 2024-13-45
            raise _Refused(f"not a valid date or time (line {node.start_mark.line + 1})") from None


_StrictLoader.add_constructor("tag:yaml.org,2002:int", _StrictLoader.construct_yaml_int)
_StrictLoader.add_constructor("tag:yaml.org,2002:timestamp", _StrictLoader.construct_yaml_timestamp)


def _load_yaml(text: str) -> Any:
    """yaml.safe_load with the loader's limits (_StrictLoader)."""
    loader = _StrictLoader(text)
    try:
        return loader.get_single_data()
    finally:
        loader.dispose()


def _depth(value: Any) -> int:
    """How deeply mappings and lists nest in a loaded value (within MAX_DEPTH: no recursion risk)."""
    if isinstance(value, dict):
        return 1 + max((_depth(v) for v in value.values()), default=0)
    if isinstance(value, list):
        return 1 + max((_depth(v) for v in value), default=0)
    return 0


def _resolve_paths(raw: dict[str, Any], base: Path) -> None:
    for side in ("original", "synthetic"):
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
        value = _load_yaml(value_text) if value_text else None
    except _Refused as exc:
        raise ConfigError(f"--set {shown}: {exc}") from None
    except yaml.YAMLError:
        raise ConfigError(f"--set {key}: the value is not valid YAML") from None
    if len(parts) + _depth(value) > MAX_DEPTH:
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
        values[name] = _coerce(hints[name], data[name], key)
    return cls(**values)


def _coerce(tp: Any, value: Any, key: str) -> Any:
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin in (Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        inner = [a for a in args if a is not type(None)]
        return _coerce(inner[0], value, key)
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


def _join(where: str, name: str) -> str:
    return f"{where}.{name}" if where else name


def _type_name(value: Any) -> str:
    if value is None:
        return "nothing (null)"
    return {dict: "a mapping", list: "a list", str: "a string", bool: "a boolean"}.get(
        type(value), "a number" if isinstance(value, (int, float)) else type(value).__name__
    )
