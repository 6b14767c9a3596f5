"""A bundled example (conf/examples/*.yaml) narrowed to some of its metrics and written
elsewhere: for tests and benchmarks that need its data and settings, not every metric."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from tests.support.paths import ROOT

EXAMPLES = ROOT / "conf" / "examples"


def example_config(name: str, path: Path, metrics: Sequence[str], warehouse: Path) -> dict[str, Any]:
    """conf/examples/`name` with only the entries of `metrics` (as the example configures
    them), its inputs' paths made absolute (the example's are relative to its folder) and
    its results in `warehouse`; written to `path`, and returned."""
    config = yaml.safe_load((EXAMPLES / name).read_text())
    unknown = set(metrics) - set(config["metrics"])
    if unknown:
        raise ValueError(f"{name} configures no {sorted(unknown)}")
    config["metrics"] = {key: entry for key, entry in config["metrics"].items() if key in metrics}
    for side in ("original", "synthetic", "holdout"):
        if side in config:
            config[side]["path"] = str((EXAMPLES / config[side]["path"]).resolve())
    config["results"]["warehouse"] = str(warehouse)
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return config
