"""The job's configuration: a YAML file checked strictly against typed dataclasses.

Strict because a typo in a key (say `row_direct_macth`) must not silently disable a
metric: unknown keys, wrong types and missing required keys are errors naming the key.

- schema.py: the dataclasses, one per mapping, and the rules on their keys;
- loader.py: `load_config`, the file, its paths and the `--set` overrides;
- coerce.py: typed dataclasses from parsed YAML, generically;
- yamlfile.py: reading the file and parsing YAML within limits.
"""

from privacy_eval.config.loader import load_config
from privacy_eval.config.schema import (
    DEFAULT_TOLERANCE,
    DISTANCE_SUB_METRICS,
    FORMATS,
    POSITION_KEY,
    ColumnDirectMatchConfig,
    Config,
    DisclosureConfig,
    DistanceConfig,
    DistanceToClosestRecordConfig,
    HiddenRateConfig,
    HoldoutDistanceShareConfig,
    KnowledgeProtectionConfig,
    LinkageConfig,
    LocalCloakingConfig,
    MetricsConfig,
    NearestNeighbourDistanceRatioConfig,
    ResultsConfig,
    RowDirectMatchConfig,
    Source,
)
from privacy_eval.config.yamlfile import MAX_CONFIG_BYTES, MAX_DEPTH

__all__ = [
    "DEFAULT_TOLERANCE",
    "DISTANCE_SUB_METRICS",
    "FORMATS",
    "MAX_CONFIG_BYTES",
    "MAX_DEPTH",
    "POSITION_KEY",
    "ColumnDirectMatchConfig",
    "Config",
    "DisclosureConfig",
    "DistanceConfig",
    "DistanceToClosestRecordConfig",
    "HiddenRateConfig",
    "HoldoutDistanceShareConfig",
    "KnowledgeProtectionConfig",
    "LinkageConfig",
    "LocalCloakingConfig",
    "MetricsConfig",
    "NearestNeighbourDistanceRatioConfig",
    "ResultsConfig",
    "RowDirectMatchConfig",
    "Source",
    "load_config",
]
