"""Loading the job's configuration: the YAML file, its relative paths resolved against
its folder, the `--set key=value` overrides, then the dataclasses of schema.py built
from the result (coerce.py).

The YAML itself, of the file and of every `--set` value, goes through a loader with
limits (yamlfile.py: `MAX_CONFIG_BYTES`, `MAX_DEPTH`): a key given twice, anchors and
aliases, deep nesting and oversized or special files are refused before any work.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Any

import yaml

from privacy_eval.config.coerce import build
from privacy_eval.config.schema import DISTANCE_SUB_METRICS, Config, MetricsConfig, ResultsConfig
from privacy_eval.config.yamlfile import MAX_CONFIG_BYTES, MAX_DEPTH, Refused, load_yaml, nesting, read_config_bytes
from privacy_eval.errors import ConfigError

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
    return build(Config, raw, "")


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
