"""The YAML configuration: strict keys, types, defaults, overrides, path resolution."""

from __future__ import annotations

import os
import re
import textwrap
import threading
import time
from pathlib import Path

import pytest
import yaml

from privacy_eval.config import (
    DEFAULT_TOLERANCE,
    MAX_CONFIG_BYTES,
    MAX_DEPTH,
    KnowledgeProtectionConfig,
    LinkageConfig,
    MetricsConfig,
    ResultsConfig,
    RowDirectMatchConfig,
    load_config,
)
from privacy_eval.errors import ConfigError
from tests.support.paths import ROOT

MINIMAL = """
dataset: demo
original: {path: data/o.csv}
synthetic: {path: data/s.csv}
metrics:
  row_direct_match:
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "conf" / "job.yaml"
    path.parent.mkdir(exist_ok=True)
    path.write_text(textwrap.dedent(text))
    return path


def test_minimal_config_takes_defaults_and_resolves_paths(tmp_path):
    config = load_config(write(tmp_path, MINIMAL))
    assert config.row_key == "@position"
    assert config.metrics.row_direct_match.target == 90.0
    assert config.metrics.column_direct_match is None
    assert config.original.path == str(tmp_path / "conf" / "data" / "o.csv")
    assert config.results.warehouse == str(tmp_path / "conf" / "spark-warehouse")
    assert config.results.database == "privacy_eval"


def test_example_configs_load():
    for name in ("wbcd", "aids"):
        config = load_config(ROOT / "conf" / "examples" / f"{name}.yaml")
        assert Path(config.original.path).is_file()
        assert Path(config.synthetic.path).is_file()


def test_linkage_defaults_follow_the_contract(tmp_path):
    config = load_config(write(tmp_path, MINIMAL + "  linkage: {targets: [a, b]}\n"))
    link = config.metrics.linkage
    assert link.methods == ["mahalanobis", "weighted"] and link.cov_from == "raw"
    assert link.ridge == 1e-6 and link.tolerance == DEFAULT_TOLERANCE and link.top_k == [1, 5, 10]


BASE = {
    "dataset": "demo",
    "original": {"path": "o.csv"},
    "synthetic": {"path": "s.csv"},
    "metrics": {"row_direct_match": {}},
}


@pytest.mark.parametrize(
    "change, message",
    [
        ({"colour": "red"}, "unknown key 'colour'"),
        ({"metrics": {"row_direct_macth": {}}}, "unknown key 'metrics.row_direct_macth'"),
        ({"exclude": "id"}, "key 'exclude' must be a list"),
        ({"results": {"warehouse": [1]}}, "key 'results.warehouse' must be a string"),
        ({"metrics": {"row_direct_match": {"target": "high"}}}, "'metrics.row_direct_match.target' must be a number"),
        ({"metrics": {"row_direct_match": {"target": 120}}}, "'metrics.row_direct_match.target' must lie in 0..100"),
        ({"metrics": {"linkage": {"targets": ["a"], "cov_from": "sample"}}},
         "'metrics.linkage.cov_from' must be one of raw, anon, pooled"),
        ({"metrics": {"linkage": {"targets": ["a", "a"]}}}, "'metrics.linkage.targets' lists a column twice"),
        ({"metrics": {"linkage": {"targets": ["a"], "ridge": -1}}}, "'metrics.linkage.ridge' must not be negative"),
        ({"metrics": {"linkage": {"targets": ["a"], "squared": "no"}}}, "'metrics.linkage.squared' must be true or false"),
        ({"metrics": {"knowledge_protection": {"target": 95}}},
         "missing required key 'metrics.knowledge_protection.known_variables'"),
        ({"metrics": {"knowledge_protection": {"known_variables": ["a"], "bin_width": {"a": 0}}}},
         "bin_width.a' must be a positive number"),
        ({"metrics": {}}, "at least one metric"),
        ({"original": {"path": "a.csv", "table": "db.t"}}, "'original' needs exactly one of 'path' or 'table'"),
        ({"original": {"path": "a.csv", "format": "xlsx"}}, "'original.format' must be one of csv"),
        ({"dataset": None}, "key 'dataset' must be a string"),
    ],
)
def test_mistakes_name_the_key(tmp_path, change, message):
    config = {**BASE, **change}
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(config))
    with pytest.raises(ConfigError, match=re.escape(message)):
        load_config(path)


def test_missing_dataset(tmp_path):
    with pytest.raises(ConfigError, match="missing required key 'dataset'"):
        load_config(write(tmp_path, MINIMAL.replace("dataset: demo\n", "")))


def test_overrides_are_yaml_and_strict(tmp_path):
    path = write(tmp_path, MINIMAL)
    config = load_config(path, ["metrics.row_direct_match.target=99.5", "results.warehouse=/tmp/wh",
                                "metrics.linkage.targets=[x, y]", "exclude=[id]"])
    assert config.metrics.row_direct_match.target == 99.5
    assert config.results.warehouse == "/tmp/wh"
    assert config.metrics.linkage.targets == ["x", "y"]
    assert config.exclude == ["id"]
    with pytest.raises(ConfigError, match="unknown key 'metrics.row_direct_match.taget'"):
        load_config(path, ["metrics.row_direct_match.taget=5"])
    with pytest.raises(ConfigError, match="--set expects"):
        load_config(path, ["novalue"])


def test_relative_override_paths_resolve_against_the_working_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    config = load_config(write(tmp_path, MINIMAL), ["results.warehouse=wh"])
    assert config.results.warehouse == str(tmp_path / "wh")


def test_config_hash_changes_with_content(tmp_path):
    path = write(tmp_path, MINIMAL)
    assert load_config(path).sha256() == load_config(path).sha256()
    assert load_config(path).sha256() != load_config(path, ["metrics.row_direct_match.target=1"]).sha256()


def test_unreadable_and_invalid_files(tmp_path):
    with pytest.raises(ConfigError, match="cannot read config file"):
        load_config(tmp_path / "absent.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("dataset: [unclosed\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_config(bad)


# A notebook building a configuration by hand gets the error a YAML file gets.
@pytest.mark.parametrize(
    "build, change, message",
    [
        (lambda: LinkageConfig(targets=[]), {"metrics": {"linkage": {"targets": []}}},
         "key 'metrics.linkage.targets' must not be empty"),
        (lambda: LinkageConfig(targets=["a", "a"]), {"metrics": {"linkage": {"targets": ["a", "a"]}}},
         "key 'metrics.linkage.targets' lists a column twice"),
        (lambda: LinkageConfig(targets=["a"], ridge=-1.0), {"metrics": {"linkage": {"targets": ["a"], "ridge": -1}}},
         "key 'metrics.linkage.ridge' must not be negative, and must be finite"),
        (lambda: LinkageConfig(targets=["a"], target=2.0), {"metrics": {"linkage": {"targets": ["a"], "target": 2}}},
         "key 'metrics.linkage.target' must lie in 0..1 (a success rate)"),
        (lambda: LinkageConfig(targets=["a"], methods=["mahalanobis", "cosine"]),
         {"metrics": {"linkage": {"targets": ["a"], "methods": ["mahalanobis", "cosine"]}}},
         "key 'metrics.linkage.methods[1]' must be one of mahalanobis, weighted, got 'cosine'"),
        (lambda: LinkageConfig(targets=["a"], cov_from="both"), {"metrics": {"linkage": {"targets": ["a"], "cov_from": "both"}}},
         "key 'metrics.linkage.cov_from' must be one of raw, anon, pooled, got 'both'"),
        (lambda: LinkageConfig(targets=["a"], ridge="small"), {"metrics": {"linkage": {"targets": ["a"], "ridge": "small"}}},
         "key 'metrics.linkage.ridge' must be a number, got a string"),
        (lambda: LinkageConfig(targets=["a"], tolerance=float("inf")),
         {"metrics": {"linkage": {"targets": ["a"], "tolerance": float("inf")}}},
         "key 'metrics.linkage.tolerance' must be a finite non-negative number"),
        (lambda: LinkageConfig(targets=["a"], top_k=[1, 2.5]), {"metrics": {"linkage": {"targets": ["a"], "top_k": [1, 2.5]}}},
         "key 'metrics.linkage.top_k[1]' must be a whole number, got a number"),
        (lambda: LinkageConfig(targets=["a"], top_k=[0]), {"metrics": {"linkage": {"targets": ["a"], "top_k": [0]}}},
         "key 'metrics.linkage.top_k' values must be at least 1"),
        (lambda: LinkageConfig(targets=["a"], methods=[]), {"metrics": {"linkage": {"targets": ["a"], "methods": []}}},
         "key 'metrics.linkage.methods' must not be empty"),
        (lambda: KnowledgeProtectionConfig(known_variables=[]),
         {"metrics": {"knowledge_protection": {"known_variables": []}}},
         "key 'metrics.knowledge_protection.known_variables' must not be empty"),
        (lambda: KnowledgeProtectionConfig(known_variables=["a"], bin_width={"b": 1.0}),
         {"metrics": {"knowledge_protection": {"known_variables": ["a"], "bin_width": {"b": 1.0}}}},
         "key 'metrics.knowledge_protection.bin_width.b' names a column that is not a known variable"),
        (lambda: RowDirectMatchConfig(target=120.0), {"metrics": {"row_direct_match": {"target": 120}}},
         "key 'metrics.row_direct_match.target' must lie in 0..100 (percent)"),
        (lambda: MetricsConfig(), {"metrics": {}}, "key 'metrics' must name at least one metric"),
        (lambda: ResultsConfig(database="my-db"), {"results": {"database": "my-db"}},
         "key 'results.database' must be letters, digits and underscores, not starting with a digit"),
    ],
)
def test_hand_built_configs_fail_as_yaml_does(tmp_path, build, change, message):
    with pytest.raises(ConfigError) as by_hand:
        build()
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump({**BASE, **change}))
    with pytest.raises(ConfigError) as from_yaml:
        load_config(path)
    assert str(by_hand.value) == str(from_yaml.value) == message


# --------------------------------------------------------------------------
# the loader's limits: duplicate keys, anchors and aliases, depth, size, file kind
# --------------------------------------------------------------------------


def with_options(options: str) -> str:
    """MINIMAL, with `options` (YAML text) as original.options."""
    return MINIMAL.replace("original: {path: data/o.csv}", f"original: {{path: data/o.csv, options: {options}}}")


@pytest.mark.parametrize(
    "text, message",
    [
        (MINIMAL + "metrics:\n  column_direct_match:\n", "key 'metrics' appears twice (lines 5 and 7)"),
        (MINIMAL + "    target: 90\n    target: 10\n",
         "key 'metrics.row_direct_match.target' appears twice (lines 7 and 8)"),
        (MINIMAL + "exclude: [a]\noriginal: {path: x.csv}\n", "key 'original' appears twice (lines 3 and 8)"),
        (MINIMAL + "cast: {a: int, a: double}\n", "key 'cast.a' appears twice (lines 7 and 7)"),
        (MINIMAL + "  linkage: {targets: [a], top_k: [1], top_k: [2]}\n",
         "key 'metrics.linkage.top_k' appears twice (lines 7 and 7)"),
        (with_options("{sep: ',', sep: ';'}"), "key 'original.options.sep' appears twice (lines 3 and 3)"),
        (MINIMAL + "categorical: [{a: 1, a: 2}]\n", "key 'categorical[0].a' appears twice"),
    ],
)
def test_duplicate_keys_are_refused_at_any_level(tmp_path, text, message):
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as refused:
        load_config(path)
    assert str(refused.value).startswith(f"config file {path}: ")
    assert message in str(refused.value)


def test_keys_equal_once_read_are_duplicates(tmp_path):
    # `yes` and `true` are both the boolean true to YAML 1.1.
    with pytest.raises(ConfigError, match=r"key 'original.options.True' appears twice \(lines 3 and 3\)"):
        load_config(write(tmp_path, with_options("{yes: 1, true: 2}")))


def test_a_merge_key_is_not_a_duplicate(tmp_path):
    config = load_config(write(tmp_path, MINIMAL + "results: {<<: {database: a}, database: b}\n"))
    assert config.results.database == "b"


@pytest.mark.parametrize(
    "text",
    [
        with_options("{a: &p x, b: *p}"),
        MINIMAL + "exclude: &x [a]\n",
        # "billion laughs": a few hundred bytes that expand to 9^10 strings
        "dataset: bomb\noriginal:\n  options:\n" + "".join(
            f"    l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 9) if i else ', '.join(['lol'] * 9)}]\n"
            for i in range(10)),
    ],
)
def test_anchors_and_aliases_are_refused(tmp_path, text):
    started = time.monotonic()
    with pytest.raises(ConfigError, match=r"config file .*job\.yaml: YAML anchors and aliases .* are not accepted \(line \d+\)"):
        load_config(write(tmp_path, text))
    assert time.monotonic() - started < 5


def test_nesting_is_bounded(tmp_path):
    # 32 levels (the top-level mapping is the first) load; 33 do not, nor 5000.
    deep = with_options("{a: " + "[" * 29 + "]" * 29 + "}")
    assert load_config(write(tmp_path, deep)).original.options == {"a": eval("[" * 29 + "]" * 29)}
    for levels in (30, 5000):
        deeper = with_options("{a: " + "[" * levels + "]" * levels + "}")
        with pytest.raises(ConfigError, match=rf"job\.yaml: mappings and lists nested deeper than {MAX_DEPTH} levels \(line 3\)"):
            load_config(write(tmp_path, deeper))


def test_size_is_bounded(tmp_path):
    path = write(tmp_path, MINIMAL + "#" * MAX_CONFIG_BYTES + "\n")
    with pytest.raises(ConfigError, match=rf"config file .*job\.yaml is larger than {MAX_CONFIG_BYTES} bytes"):
        load_config(path)
    # just below the limit still loads
    load_config(write(tmp_path, MINIMAL + "#" * (MAX_CONFIG_BYTES - len(MINIMAL) - 10) + "\n"))


def test_values_python_cannot_convert_are_errors_with_a_line(tmp_path):
    with pytest.raises(ConfigError, match=r"job\.yaml: number too long \(line 7\)"):
        load_config(write(tmp_path, MINIMAL + "    target: " + "9" * 5000 + "\n"))
    with pytest.raises(ConfigError, match=r"job\.yaml: not a valid date or time \(line 1\)"):
        load_config(write(tmp_path, "dataset: 2024-13-45\n" + MINIMAL.replace("dataset: demo\n", "")))


def test_only_regular_files_are_read(tmp_path):
    with pytest.raises(ConfigError, match=r"config file .* is a directory, not a regular file"):
        load_config(tmp_path)
    with pytest.raises(ConfigError, match=r"config file /dev/zero is a device, not a regular file"):
        load_config("/dev/zero")
    # The existing messages for a missing file are unchanged.
    with pytest.raises(ConfigError, match=r"cannot read config file .*absent\.yaml: No such file or directory"):
        load_config(tmp_path / "absent.yaml")


def test_a_fifo_is_refused_without_blocking(tmp_path):
    fifo = tmp_path / "pipe.yaml"
    os.mkfifo(fifo)
    outcome: list[BaseException] = []

    def load() -> None:
        try:
            load_config(fifo)
        except BaseException as exc:  # noqa: BLE001 - handed to the test's thread
            outcome.append(exc)

    worker = threading.Thread(target=load, daemon=True)
    worker.start()
    worker.join(10)
    if worker.is_alive():  # unblock the reader before failing
        with open(fifo, "w"):
            pass
        pytest.fail("load_config blocked on a FIFO")
    assert len(outcome) == 1 and isinstance(outcome[0], ConfigError)
    assert str(outcome[0]) == f"config file {fifo} is a named pipe, not a regular file"


@pytest.mark.parametrize(
    "override, message",
    [
        ("metrics={row_direct_match: {}, row_direct_match: {target: 1}}",
         "--set metrics: key 'row_direct_match' appears twice (lines 1 and 1)"),
        ("original.options={a: &a [x, x], b: [*a, *a]}",
         "--set original.options: YAML anchors and aliases (&name, *name) are not accepted (line 1)"),
        ("original.options.x=" + "[" * 5000 + "]" * 5000,
         "--set original.options.x: mappings and lists nested deeper than 32 levels (line 1)"),
        # the dotted key counts: 3 levels of key (top level included) + 30 of value
        ("original.options.x=" + "[" * 30 + "]" * 30,
         "--set original.options.x: mappings and lists nested deeper than 32 levels"),
        ("original." + ".".join(["a"] * 40) + "=1", "the key is nested deeper than 32 levels"),
        ("original.options.x=" + "a" * (MAX_CONFIG_BYTES + 1), f"the value is larger than {MAX_CONFIG_BYTES} bytes"),
        ("metrics.row_direct_match.target=" + "9" * 5000, "--set metrics.row_direct_match.target: number too long"),
    ],
)
def test_overrides_have_the_same_limits(tmp_path, override, message):
    path = write(tmp_path, MINIMAL)
    with pytest.raises(ConfigError, match=re.escape(message)):
        load_config(path, [override])


def test_overrides_within_the_limits_load(tmp_path):
    path = write(tmp_path, MINIMAL)
    config = load_config(path, ["original.options.x=" + "[" * 29 + "]" * 29])
    assert config.original.options["x"] == eval("[" * 29 + "]" * 29)
