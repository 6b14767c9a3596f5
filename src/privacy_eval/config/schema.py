"""The job's configuration, one frozen dataclass per mapping of docs/interface.md
("Configuration keys").

Each rule is checked once, where it belongs: the types by the loader (coerce.py); a
rule about the keys of one mapping in that dataclass's `__post_init__`, so that a
notebook building `LinkageConfig(targets=[])` by hand gets the error a YAML file gets;
and rules that span mappings in `Config.__post_init__`. Checks against the data are the
metrics' own (`privacy_eval.metrics`, each metric's `check`).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import re
import typing
from dataclasses import dataclass, field
from typing import Any, Literal

from privacy_eval.config.coerce import (
    LONG_MAX,
    check_choice,
    check_number,
    fail_unless,
    is_number,
    literal_choices,
    optional_member,
    shown,
)

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


def _check_percent_target(metric: str, target: float | None) -> None:
    if is_number(target):
        fail_unless(0 <= target <= 100, f"metrics.{metric}.target", "must lie in 0..100 (percent)")


def _check_distinct(key: str, names: Any) -> None:
    fail_unless(len(set(names)) == len(names), key, "lists a column twice")


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
        fail_unless(bool(self.known_variables), key, "must not be empty")
        _check_distinct(key, self.known_variables)
        for name, width in self.bin_width.items():
            key = f"metrics.knowledge_protection.bin_width.{name}"
            fail_unless(name in self.known_variables, key, "names a column that is not a known variable")
            if is_number(width):
                fail_unless(0 < width < float("inf"), key, "must be a positive number")


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
        fail_unless(bool(self.targets), key + "targets", "must not be empty")
        _check_distinct(key + "targets", self.targets)
        # The choices and numbers again for a configuration built by hand (the loader
        # has checked them for a YAML file, with these same words), so that the attack
        # can take them as given.
        for i, method in enumerate(self.methods or ()):
            check_choice(f"{key}methods[{i}]", method, literal_choices(LinkageConfig, "methods"))
        check_choice(key + "cov_from", self.cov_from, literal_choices(LinkageConfig, "cov_from"))
        check_number(key + "ridge", self.ridge)
        fail_unless(0 <= self.ridge < float("inf"), key + "ridge", "must not be negative, and must be finite")
        check_number(key + "tolerance", self.tolerance)
        fail_unless(0 <= self.tolerance < float("inf"), key + "tolerance", "must be a finite non-negative number")
        fail_unless(bool(self.methods), key + "methods", "must not be empty")
        for i, k in enumerate(self.top_k or ()):
            check_number(f"{key}top_k[{i}]", k, whole=True)
        fail_unless(all(k >= 1 for k in self.top_k or ()), key + "top_k", "values must be at least 1")
        if is_number(self.target):
            fail_unless(0 <= self.target <= 1, key + "target", "must lie in 0..1 (a success rate)")


def _check_target(key: str, target: Any, low: float, high: float, rule: str) -> None:
    """A target, when it is a number, is finite and lies in low..high."""
    if is_number(target):
        fail_unless(math.isfinite(target) and low <= target <= high, key, rule)


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
        check_number(key + "cap", self.cap, whole=True)
        fail_unless(self.cap >= 1, key + "cap", "must be at least 1")


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
            fail_unless(bool(self.columns), key + "columns", "must not be empty (leave it out for every compared column)")
            _check_distinct(key + "columns", self.columns)
        components = self.components
        whole = is_number(components) and isinstance(components, int) and 1 <= components <= LONG_MAX
        fail_unless(whole or components == "all", key + "components",
                     f"must be {_COMPONENTS_RULE}, got {shown(components)}")
        check_number(key + "cell_records", self.cell_records, whole=True)
        fail_unless(self.cell_records >= 1, key + "cell_records", "must be at least 1")
        check_number(key + "max_core_hours", self.max_core_hours)
        fail_unless(0 < self.max_core_hours < math.inf, key + "max_core_hours", "must be a finite number > 0")

    def selected(self, has_holdout: bool) -> dict[str, Any]:
        """Sub-metric key -> its configuration, in DISTANCE_SUB_METRICS order: the ones
        given; when none is, every sub-metric with its defaults, holdout_distance_share
        only when `has_holdout` (a configuration with a `holdout` table)."""
        given = {key: getattr(self, key) for key in DISTANCE_SUB_METRICS if getattr(self, key) is not None}
        if given:
            return given
        hints = typing.get_type_hints(DistanceConfig)
        return {
            key: optional_member(hints[key])()
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
            fail_unless(bool(getattr(self, name)), key + name, "must not be empty")
            _check_distinct(key + name, getattr(self, name))
        both = [t for t in self.targets if t in self.keys]
        fail_unless(not both, key + "targets", f"lists '{both[0] if both else ''}', which is also a key")
        for name, groups in self.bins.items():
            where = f"{key}bins.{name}"
            fail_unless(name in self.keys or name in self.targets, where,
                         "names a column that is neither a key nor a target")
            check_number(where, groups, whole=True)
            fail_unless(groups >= 2, where, "must be at least 2 (groups)")
        check_number(key + "denom_lim", self.denom_lim, whole=True)
        fail_unless(self.denom_lim >= 1, key + "denom_lim", "must be at least 1")
        for name in ("thresh_1way", "thresh_2way"):
            values = getattr(self, name)
            fail_unless(len(values) == 2 and all(is_number(v) and math.isfinite(v) for v in values),
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
        fail_unless(configured, "metrics", "must name at least one metric")


@dataclass(frozen=True)
class ResultsConfig:
    warehouse: str = "spark-warehouse"
    database: str = "privacy_eval"

    def __post_init__(self) -> None:
        # The name is also a folder (<database>.db) and a metastore identifier.
        fail_unless(
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
    holdout: Source | None = field(default=None, kw_only=True)

    def __post_init__(self) -> None:
        """The rules on the top-level keys, and those that span mappings."""
        fail_unless(bool(self.dataset.strip()), "dataset", "must not be empty")
        for side in ("original", "synthetic", "holdout"):
            source: Source | None = getattr(self, side)
            if source is None and side == "holdout":
                continue
            one = (source.path is None) != (source.table is None)
            fail_unless(one, side, "needs exactly one of 'path' or 'table'")
        fail_unless(bool(self.row_key), "row_key", "must not be empty")
        for key in ("exclude", "categorical"):
            _check_distinct(key, getattr(self, key))
        distance = getattr(self.metrics, "distance", None)
        if getattr(distance, "holdout_distance_share", None) is not None:
            fail_unless(self.holdout is not None, "metrics.distance.holdout_distance_share",
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
