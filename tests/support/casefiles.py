"""Case folders for runs of the entry point: a configuration merged over a base one,
written beside the case's files (tests/job/test_bad_inputs.py, test_bad_paths.py)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml


class _PlainDumper(yaml.SafeDumper):
    """Writes a value used twice twice: the job refuses YAML anchors and aliases."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


DELETE = object()  # in a change: remove this key from the base configuration


def merged(base: dict[str, Any], changes: dict[str, Any]) -> dict[str, Any]:
    """`base` with `changes` merged in, mapping by mapping; DELETE removes a key."""
    out = copy.deepcopy(base)
    for key, value in changes.items():
        if value is DELETE:
            out.pop(key, None)
        elif isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merged(out[key], value)
        else:
            out[key] = value
    return out


def write_case(case_dir: Path, config: dict[str, Any] | None = None, files: dict[str, str | bytes] | None = None,
               config_text: str | bytes | None = None) -> Path:
    """The case's folder: its files (text or bytes; names may hold '/') and its config
    (dumped, or `config_text` verbatim). Returns the config's path."""
    case_dir.mkdir(parents=True)
    for name, content in (files or {}).items():
        target = case_dir / name
        target.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            target.write_bytes(content)
        else:
            target.write_text(content)
    path = case_dir / "job.yaml"
    if config_text is None:
        config_text = yaml.dump(config, Dumper=_PlainDumper, allow_unicode=True, sort_keys=False)
    if isinstance(config_text, bytes):
        path.write_bytes(config_text)
    else:
        path.write_text(config_text, encoding="utf-8")
    return path


def small_workspace(root: Path) -> dict[str, Path]:
    """root/data/original.csv and synthetic.csv (tables.base_frames()); root/warehouse."""
    from tests.support.tables import base_frames, to_csv

    original, synthetic = base_frames()
    data = root / "data"
    data.mkdir()
    (data / "original.csv").write_text(to_csv(original))
    (data / "synthetic.csv").write_text(to_csv(synthetic))
    return {"root": root, "data": data, "warehouse": root / "warehouse"}


def small_config(workspace: dict[str, Path], database: str, linkage: bool = True) -> dict[str, Any]:
    """RDMP, CDMP, KPR and (with `linkage`) the linkage attack on small_workspace's files,
    results in `database`."""
    metrics: dict[str, Any] = {
        "row_direct_match": {},
        "column_direct_match": {},
        "knowledge_protection": {"known_variables": ["age", "city"]},
    }
    if linkage:
        metrics["linkage"] = {"targets": ["age", "weight"], "blocking": ["group"]}
    data = workspace["data"]
    return {
        "dataset": database,
        "original": {"path": str(data / "original.csv")},
        "synthetic": {"path": str(data / "synthetic.csv")},
        "row_key": "id",
        "metrics": metrics,
        "results": {"warehouse": str(workspace["warehouse"]), "database": database},
    }
