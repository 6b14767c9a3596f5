"""The YAML configuration: strict keys, types, defaults, overrides, path resolution."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
import textwrap
import threading
import time
import typing
from pathlib import Path

import pytest
import yaml

from privacy_eval.config import (
    DEFAULT_TOLERANCE,
    DISTANCE_SUB_METRICS,
    MAX_CONFIG_BYTES,
    MAX_DEPTH,
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


def test_whole_numbers_up_to_64_bits_and_numbers_up_to_a_double_load(tmp_path):
    config = load_config(write(tmp_path, MINIMAL), [
        f"metrics.distance.local_cloaking.cap={2**63 - 1}", f"metrics.distance.components={2**63 - 1}",
        f"metrics.row_direct_match.target={10**2}", "metrics.linkage={targets: [a], ridge: 1.7976931348623157e+308}",
    ])
    assert config.metrics.distance.local_cloaking.cap == 2**63 - 1
    assert config.metrics.distance.components == 2**63 - 1
    assert config.metrics.linkage.ridge == 1.7976931348623157e308


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
        # YAML reads integers of any length: beyond a 64-bit integer or a double they would
        # fail late (Spark literals, numpy), or wrap.
        (lambda: LocalCloakingConfig(cap=2**63), {"metrics": {"distance": {"local_cloaking": {"cap": 2**63}}}},
         "key 'metrics.distance.local_cloaking.cap' must fit a 64-bit integer (at most 9223372036854775807 in size)"),
        (lambda: LinkageConfig(targets=["a"], top_k=[1, -(2**63) - 1]),
         {"metrics": {"linkage": {"targets": ["a"], "top_k": [1, -(2**63) - 1]}}},
         "key 'metrics.linkage.top_k[1]' must fit a 64-bit integer (at most 9223372036854775807 in size)"),
        (lambda: LinkageConfig(targets=["a"], ridge=10**400), {"metrics": {"linkage": {"targets": ["a"], "ridge": 10**400}}},
         "key 'metrics.linkage.ridge' must fit a double (at most about 1.8e308 in size)"),
        (lambda: DistanceConfig(components=2**63), {"metrics": {"distance": {"components": 2**63}}},
         "key 'metrics.distance.components' must be a whole number >= 1 or 'all', got 9223372036854775808"),
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


# --------------------------------------------------------------------------
# the distance-based metrics (metrics.distance) and the holdout table
# --------------------------------------------------------------------------

ALL_BUT_HOLDOUT = list(DISTANCE_SUB_METRICS[:-1])


def distance_yaml(tmp_path: Path, body: str = "", holdout: bool = False) -> Path:
    """MINIMAL with `distance:` (YAML lines of its body, indented by 4) and optionally a holdout."""
    text = MINIMAL + "  distance:\n" + textwrap.indent(textwrap.dedent(body), "    ")
    if holdout:
        text += "holdout: {path: data/h.csv}\n"
    return write(tmp_path, text)


def test_distance_defaults():
    config = DistanceConfig()
    assert config.columns is None and config.components == 5
    assert HiddenRateConfig().target == 90.0
    assert LocalCloakingConfig().target == 5.0 and LocalCloakingConfig().cap == 1000
    assert DistanceToClosestRecordConfig().target is None
    assert NearestNeighbourDistanceRatioConfig().target is None
    assert HoldoutDistanceShareConfig().target is None
    assert MetricsConfig(distance=config).distance is config
    assert DISTANCE_SUB_METRICS == ("hidden_rate", "local_cloaking", "distance_to_closest_record",
                                    "nearest_neighbour_distance_ratio", "holdout_distance_share")


def test_an_empty_distance_key_selects_every_sub_metric_the_inputs_allow(tmp_path):
    without = load_config(distance_yaml(tmp_path))
    assert without.holdout is None
    assert without.metrics.distance == DistanceConfig()
    selected = without.metrics.distance.selected(has_holdout=False)
    assert list(selected) == ALL_BUT_HOLDOUT
    assert selected == {
        "hidden_rate": HiddenRateConfig(), "local_cloaking": LocalCloakingConfig(),
        "distance_to_closest_record": DistanceToClosestRecordConfig(),
        "nearest_neighbour_distance_ratio": NearestNeighbourDistanceRatioConfig(),
    }
    with_holdout = load_config(distance_yaml(tmp_path, holdout=True))
    selected = with_holdout.metrics.distance.selected(has_holdout=with_holdout.holdout is not None)
    assert list(selected) == list(DISTANCE_SUB_METRICS)
    assert selected["holdout_distance_share"] == HoldoutDistanceShareConfig()


def test_an_explicit_subset_runs_only_those_in_order(tmp_path):
    path = distance_yaml(tmp_path, """\
        columns: [a, b]
        components: all
        nearest_neighbour_distance_ratio: {target: 0.5}
        hidden_rate:
        local_cloaking: {cap: 50}
        """, holdout=True)
    distance = load_config(path).metrics.distance
    assert distance.columns == ["a", "b"] and distance.components == "all"
    for has_holdout in (True, False):  # the holdout share is not added when not asked for
        assert distance.selected(has_holdout) == {
            "hidden_rate": HiddenRateConfig(target=90.0),
            "local_cloaking": LocalCloakingConfig(target=5.0, cap=50),
            "nearest_neighbour_distance_ratio": NearestNeighbourDistanceRatioConfig(target=0.5),
        }


def test_each_sub_metric_key_without_a_value_takes_its_defaults(tmp_path):
    body = "".join(f"{key}:\n" for key in DISTANCE_SUB_METRICS)
    distance = load_config(distance_yaml(tmp_path, body, holdout=True)).metrics.distance
    assert distance == DistanceConfig(
        hidden_rate=HiddenRateConfig(), local_cloaking=LocalCloakingConfig(),
        distance_to_closest_record=DistanceToClosestRecordConfig(),
        nearest_neighbour_distance_ratio=NearestNeighbourDistanceRatioConfig(),
        holdout_distance_share=HoldoutDistanceShareConfig(),
    )


def test_distance_alone_is_a_metric(tmp_path):
    config = load_config(write(tmp_path, MINIMAL.replace("row_direct_match:", "distance:")))
    assert config.metrics.row_direct_match is None and config.metrics.distance == DistanceConfig()


@pytest.mark.parametrize("value, expected", [("all", "all"), (7, 7), (1, 1), (10_000, 10_000)])
def test_components_takes_a_whole_number_or_all(tmp_path, value, expected):
    config = load_config(distance_yaml(tmp_path), [f"metrics.distance.components={value}"])
    assert config.metrics.distance.components == expected
    assert DistanceConfig(components=value).components == expected


@pytest.mark.parametrize("text, value, shown", [
    ("0", 0, "0"), ("-1", -1, "-1"), ("2.5", 2.5, "2.5"), ("five", "five", "'five'"), ("true", True, "a boolean"),
    ("ALL", "ALL", "'ALL'"), ("5.0", 5.0, "5.0"), ("[all]", ["all"], "a list"), ("", None, "nothing (null)"),
])
def test_components_mistakes_name_the_key(tmp_path, text, value, shown):
    message = f"key 'metrics.distance.components' must be a whole number >= 1 or 'all', got {shown}"
    with pytest.raises(ConfigError) as from_yaml:
        load_config(distance_yaml(tmp_path, f"components: {text}\n"))
    with pytest.raises(ConfigError) as by_hand:
        DistanceConfig(components=value)
    assert str(from_yaml.value) == str(by_hand.value) == message


D = "metrics.distance."


# Each rule of metrics.distance and holdout: the YAML file's error, the same for a
# configuration built by hand.
@pytest.mark.parametrize(
    "build, distance, message",
    [
        (lambda: DistanceConfig(columns=[]), {"columns": []},
         f"key '{D}columns' must not be empty (leave it out for every compared column)"),
        (lambda: DistanceConfig(columns=["a", "b", "a"]), {"columns": ["a", "b", "a"]}, f"key '{D}columns' lists a column twice"),
        (lambda: HiddenRateConfig(target=101.0), {"hidden_rate": {"target": 101}},
         f"key '{D}hidden_rate.target' must lie in 0..100 (percent)"),
        (lambda: HiddenRateConfig(target=-0.5), {"hidden_rate": {"target": -0.5}},
         f"key '{D}hidden_rate.target' must lie in 0..100 (percent)"),
        (lambda: LocalCloakingConfig(target=-1.0), {"local_cloaking": {"target": -1}},
         f"key '{D}local_cloaking.target' must be a finite number >= 0 (records)"),
        (lambda: LocalCloakingConfig(target=float("inf")), {"local_cloaking": {"target": float("inf")}},
         f"key '{D}local_cloaking.target' must be a finite number >= 0 (records)"),
        (lambda: LocalCloakingConfig(cap=0), {"local_cloaking": {"cap": 0}}, f"key '{D}local_cloaking.cap' must be at least 1"),
        (lambda: LocalCloakingConfig(cap=2.5), {"local_cloaking": {"cap": 2.5}},
         f"key '{D}local_cloaking.cap' must be a whole number, got a number"),
        (lambda: LocalCloakingConfig(cap=True), {"local_cloaking": {"cap": True}},
         f"key '{D}local_cloaking.cap' must be a whole number, got a boolean"),
        (lambda: DistanceToClosestRecordConfig(target=-0.1), {"distance_to_closest_record": {"target": -0.1}},
         f"key '{D}distance_to_closest_record.target' must be a finite number >= 0 (a distance)"),
        (lambda: DistanceToClosestRecordConfig(target=float("nan")), {"distance_to_closest_record": {"target": float("nan")}},
         f"key '{D}distance_to_closest_record.target' must be a finite number >= 0 (a distance)"),
        (lambda: NearestNeighbourDistanceRatioConfig(target=1.5), {"nearest_neighbour_distance_ratio": {"target": 1.5}},
         f"key '{D}nearest_neighbour_distance_ratio.target' must lie in 0..1 (a distance ratio)"),
        (lambda: HoldoutDistanceShareConfig(target=-1.5), {"holdout_distance_share": {"target": -1.5}},
         f"key '{D}holdout_distance_share.target' must lie in -1..1 (an upper bound on share - expected)"),
        (lambda: HoldoutDistanceShareConfig(target=2.0), {"holdout_distance_share": {"target": 2}},
         f"key '{D}holdout_distance_share.target' must lie in -1..1 (an upper bound on share - expected)"),
    ],
)
def test_distance_mistakes_name_the_key(tmp_path, build, distance, message):
    with pytest.raises(ConfigError) as by_hand:
        build()
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump({**BASE, "holdout": {"path": "h.csv"}, "metrics": {"distance": distance}}))
    with pytest.raises(ConfigError) as from_yaml:
        load_config(path)
    assert str(by_hand.value) == str(from_yaml.value) == message


@pytest.mark.parametrize(
    "distance, message",
    [
        ({"hidden_rate": {"target": "high"}}, f"key '{D}hidden_rate.target' must be a number, got a string"),
        ({"local_cloaking": {"capp": 10}}, f"unknown key '{D}local_cloaking.capp'"),
        ({"hiden_rate": {}}, f"unknown key '{D}hiden_rate'"),
        ({"columns": "a"}, f"key '{D}columns' must be a list, got a string"),
        ({"hidden_rate": 90}, f"{D}hidden_rate must be a mapping, got a number"),
        ({"distance_to_closest_record": {"target": True}},
         f"key '{D}distance_to_closest_record.target' must be a number, got a boolean"),
    ],
)
def test_distance_type_mistakes_name_the_key(tmp_path, distance, message):
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump({**BASE, "metrics": {"distance": distance}}))
    with pytest.raises(ConfigError, match=re.escape(message)):
        load_config(path)


def test_targets_within_their_ranges_and_null_load(tmp_path):
    path = distance_yaml(tmp_path, """\
        hidden_rate: {target: null}
        local_cloaking: {target: 0, cap: 1}
        distance_to_closest_record: {target: 0.25}
        nearest_neighbour_distance_ratio: {target: 1}
        holdout_distance_share: {target: -0.05}
        """, holdout=True)
    distance = load_config(path).metrics.distance
    assert distance.hidden_rate.target is None
    assert distance.local_cloaking == LocalCloakingConfig(target=0.0, cap=1)
    assert distance.distance_to_closest_record.target == 0.25
    assert distance.nearest_neighbour_distance_ratio.target == 1.0
    assert distance.holdout_distance_share.target == -0.05


def test_holdout_path_resolves_against_the_config_file(tmp_path):
    config = load_config(distance_yaml(tmp_path, holdout=True))
    assert config.holdout == Source(path=str(tmp_path / "conf" / "data" / "h.csv"))
    absolute = load_config(write(tmp_path, MINIMAL + "holdout: {path: /data/h.parquet, format: parquet}\n"))
    assert absolute.holdout == Source(path="/data/h.parquet", format="parquet")
    table = load_config(write(tmp_path, MINIMAL + "holdout: {table: db.holdout}\n"))
    assert table.holdout == Source(table="db.holdout")
    assert load_config(write(tmp_path, MINIMAL + "holdout:\n")).holdout is None


def test_holdout_path_can_be_set_on_the_command_line(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    config = load_config(distance_yaml(tmp_path), ["holdout.path=h.csv", "metrics.distance.holdout_distance_share.target=0.02"])
    assert config.holdout == Source(path=str(tmp_path / "h.csv"))
    assert config.metrics.distance.holdout_distance_share == HoldoutDistanceShareConfig(target=0.02)
    assert list(config.metrics.distance.selected(has_holdout=True)) == ["holdout_distance_share"]
    assert load_config(distance_yaml(tmp_path), ["holdout.table=db.h"]).holdout == Source(table="db.h")


@pytest.mark.parametrize("holdout, message", [
    ({"path": "h.csv", "table": "db.h"}, "key 'holdout' needs exactly one of 'path' or 'table'"),
    ({"format": "csv"}, "key 'holdout' needs exactly one of 'path' or 'table'"),
    ({"path": "h.csv", "format": "xlsx"}, "key 'holdout.format' must be one of csv, parquet, json, orc, got 'xlsx'"),
    ({"path": "h.csv", "colour": 1}, "unknown key 'holdout.colour'"),
    ("h.csv", "holdout must be a mapping, got a string"),
])
def test_holdout_mistakes_name_the_key(tmp_path, holdout, message):
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump({**BASE, "holdout": holdout}))
    with pytest.raises(ConfigError, match=re.escape(message)):
        load_config(path)


def test_the_holdout_share_needs_a_holdout_table(tmp_path):
    message = ("key 'metrics.distance.holdout_distance_share' needs a 'holdout' table "
               "(original records the generator never saw)")
    for body in ("holdout_distance_share:\n", "holdout_distance_share: {target: 0.02}\nhidden_rate:\n"):
        with pytest.raises(ConfigError) as refused:
            load_config(distance_yaml(tmp_path, body))
        assert str(refused.value) == message
    with pytest.raises(ConfigError, match=re.escape(message)):
        load_config(write(tmp_path, MINIMAL), ["metrics.distance.holdout_distance_share="])
    metrics = MetricsConfig(distance=DistanceConfig(holdout_distance_share=HoldoutDistanceShareConfig()))
    with pytest.raises(ConfigError) as by_hand:
        Config(dataset="d", original=Source(path="o.csv"), synthetic=Source(path="s.csv"), metrics=metrics)
    assert str(by_hand.value) == message
    # with a holdout it loads, and an empty `distance:` without one leaves the share out
    Config(dataset="d", original=Source(path="o.csv"), synthetic=Source(path="s.csv"), metrics=metrics,
           holdout=Source(table="db.h"))


def test_holdout_is_keyword_only_so_positional_construction_still_works():
    fields = ("d", Source(path="o.csv"), Source(path="s.csv"), MetricsConfig(row_direct_match=RowDirectMatchConfig()),
              "id", [], [], {}, ResultsConfig())
    config = Config(*fields)
    assert config.holdout is None and config.row_key == "id"
    assert Config(*fields, holdout=Source(table="db.h")).holdout == Source(table="db.h")
    with pytest.raises(TypeError):
        Config(*fields, Source(table="db.h"))


def test_config_hash_is_unchanged_for_configs_without_the_new_keys(tmp_path):
    config = load_config(write(tmp_path, MINIMAL))
    assert "holdout" not in config.to_dict() and "distance" not in config.to_dict()["metrics"]
    assert "disclosure" not in config.to_dict()["metrics"]
    # The hash of MINIMAL before holdout, metrics.distance and metrics.disclosure existed.
    old = {k: v for k, v in dataclasses.asdict(config).items() if k != "holdout"}
    del old["metrics"]["distance"], old["metrics"]["disclosure"]
    canonical = json.dumps(old, sort_keys=True, separators=(",", ":"))
    assert config.sha256() == hashlib.sha256(canonical.encode()).hexdigest()
    with_distance = load_config(write(tmp_path, MINIMAL + "  distance:\n"))
    assert with_distance.to_dict()["metrics"]["distance"]["components"] == 5
    assert with_distance.sha256() != config.sha256()
    with_holdout = load_config(write(tmp_path, MINIMAL + "holdout: {table: db.h}\n"))
    assert with_holdout.to_dict()["holdout"]["table"] == "db.h" and with_holdout.sha256() != config.sha256()
    with_disclosure = load_config(write(tmp_path, MINIMAL + "  disclosure: {keys: [a], targets: [b]}\n"))
    assert with_disclosure.to_dict()["metrics"]["disclosure"]["denom_lim"] == 5
    assert with_disclosure.sha256() != config.sha256()


@pytest.mark.parametrize("value, expected", [(1, 1), (2, 2), (250_000, 250_000)])
def test_cell_records_takes_a_whole_number_of_at_least_one(tmp_path, value, expected):
    config = load_config(distance_yaml(tmp_path), [f"metrics.distance.cell_records={value}"])
    assert config.metrics.distance.cell_records == expected == DistanceConfig(cell_records=value).cell_records


@pytest.mark.parametrize("text, message", [
    ("0", "must be at least 1"), ("-5", "must be at least 1"), ("2.5", "must be a whole number"),
    ("1e6", "must be a whole number"), ("many", "must be a whole number"), ("true", "must be a whole number"),
])
def test_cell_records_mistakes_name_the_key(tmp_path, text, message):
    with pytest.raises(ConfigError, match=f"^key 'metrics.distance.cell_records' {message}"):
        load_config(distance_yaml(tmp_path, f"cell_records: {text}\n"))


@pytest.mark.parametrize("key, value", [("cell_records", 1000), ("max_core_hours", 2.5)])
def test_what_a_run_may_cost_is_in_the_hash_only_when_set(tmp_path, key, value):
    default = load_config(write(tmp_path, MINIMAL + "  distance:\n"))
    assert key not in default.to_dict()["metrics"]["distance"]
    changed = load_config(write(tmp_path, MINIMAL + f"  distance: {{{key}: {value}}}\n"))
    assert changed.to_dict()["metrics"]["distance"][key] == value and changed.sha256() != default.sha256()


@pytest.mark.parametrize("text", ["0", "-1", ".inf", "many", "[1]"])
def test_max_core_hours_mistakes_name_the_key(tmp_path, text):
    with pytest.raises(ConfigError, match="^key 'metrics.distance.max_core_hours' must be a"):
        load_config(distance_yaml(tmp_path, f"max_core_hours: {text}\n"))


def test_every_distance_key_is_documented():
    text = (ROOT / "docs" / "interface.md").read_text(encoding="utf-8")
    keys = ["holdout", "metrics.distance.columns", "metrics.distance.components", "metrics.distance.cell_records",
            "metrics.distance.max_core_hours"]
    for sub in DISTANCE_SUB_METRICS:
        sub_config = typing.get_type_hints(DistanceConfig)[sub].__args__[0]
        keys += [f"metrics.distance.{sub}.{f.name}" for f in dataclasses.fields(sub_config)]
    for key in keys:
        assert f"| `{key}` |" in text, key
    assert "../" not in text  # the docs stand on their own


@pytest.mark.parametrize("changes, key, rule", [
    ({"keys": []}, "metrics.disclosure.keys", "must not be empty"),
    ({"targets": []}, "metrics.disclosure.targets", "must not be empty"),
    ({"keys": ["a", "a"]}, "metrics.disclosure.keys", "twice"),
    ({"targets": ["a"]}, "metrics.disclosure.targets", "'a', which is also a key"),
    ({"bins": {"c": 4}}, "metrics.disclosure.bins.c", "neither a key nor a target"),
    ({"bins": {"a": 1}}, "metrics.disclosure.bins.a", "at least 2"),
    ({"bins": {"b": 2.5}}, "metrics.disclosure.bins.b", "whole number"),
    ({"denom_lim": 0}, "metrics.disclosure.denom_lim", "at least 1"),
    ({"thresh_1way": [50]}, "metrics.disclosure.thresh_1way", "two finite numbers"),
    ({"thresh_2way": [4, float("inf")]}, "metrics.disclosure.thresh_2way", "two finite numbers"),
    ({"target": 101}, "metrics.disclosure.target", "0..100"),
])
def test_disclosure_rules_name_the_key(changes, key, rule):
    settings = {"keys": ["a"], "targets": ["b"], **changes}
    with pytest.raises(ConfigError, match=f"key '{re.escape(key)}' .*{re.escape(rule)}"):
        DisclosureConfig(**settings)


def test_disclosure_defaults_are_synthpops(tmp_path):
    config = load_config(write(tmp_path, MINIMAL + "  disclosure: {keys: [a, c], targets: [b], bins: {a: 10}}\n"))
    disclosure = config.metrics.disclosure
    assert (disclosure.denom_lim, disclosure.exclude_ov_denom_lim) == (5, False)
    assert (disclosure.thresh_1way, disclosure.thresh_2way, disclosure.target) == ([50.0, 90.0], [4.0, 80.0], None)
    with pytest.raises(ConfigError, match="unknown key 'metrics.disclosure.ngroups_keys'"):
        load_config(write(tmp_path, MINIMAL + "  disclosure: {keys: [a], targets: [b], ngroups_keys: 5}\n"))


def test_every_disclosure_key_is_documented():
    text = (ROOT / "docs" / "interface.md").read_text(encoding="utf-8")
    for f in dataclasses.fields(DisclosureConfig):
        assert f"| `metrics.disclosure.{f.name}` |" in text, f.name
