"""Bad inputs through the real entry point: each exits 2 with exactly one `error:` line
naming the key, file or column at fault, no traceback, and results tables left byte for
byte as they were (docs/interface.md, "Exit codes"). And the odd inputs that must simply work.

The cases run the entry script in-process (tests/support/jobrun.py) against a warehouse seeded
by one successful run; one case goes through a real spark-submit.
"""

from __future__ import annotations

import json
import math
import os
import signal
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from tests.support import reference
from tests.support.casefiles import DELETE, merged, small_config, small_workspace, write_case
from tests.support.jobrun import error_lines, persisted_rdds, run_in_process, submit, tree_digest
from tests.support.tables import base_frames, to_csv

DATABASE = "bad_inputs"
@dataclass(frozen=True)
class Case:
    name: str
    says: tuple[str, ...]  # what the error line must name (key, file or column), and why
    config: dict[str, Any] = field(default_factory=dict)  # merged into the base config
    files: dict[str, str] = field(default_factory=dict)  # written beside the config
    args: tuple[str, ...] = ()  # extra command-line arguments; {case} is the case folder
    config_text: str | bytes | None = None  # the config file verbatim, instead
    fifos: tuple[str, ...] = ()  # named pipes made in the case folder
    within: float | None = None  # seconds the job may take at most (resource bombs, pipes)


# Two `metrics:` blocks: YAML's "last one wins" would silently drop row_direct_match.
DUPLICATE_METRICS = """dataset: bad_inputs
original: {path: ../data/original.csv}
synthetic: {path: ../data/synthetic.csv}
metrics:
  row_direct_match: {}
results: {warehouse: ../warehouse, database: bad_inputs}
row_key: id
metrics:
  column_direct_match: {}
"""
DUPLICATE_TARGET = """dataset: bad_inputs
original: {path: ../data/original.csv}
synthetic: {path: ../data/synthetic.csv}
metrics:
  row_direct_match:
    target: 90
    target: 10
"""
# 629 bytes that expand to 9^10 (3.5 billion) strings without a limit on aliases.
BILLION_LAUGHS = "dataset: bomb\noriginal:\n  path: o.csv\n  options:\n" + "".join(
    f"    l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 9) if i else ', '.join(['lol'] * 9)}]\n" for i in range(10)
)

O, S = base_frames()
HEADER_ONLY = ",".join(O.columns) + "\n"


def edited(frame: pd.DataFrame, **columns: Any) -> str:
    return to_csv(frame.assign(**columns))


def powered(values: Any, power: int) -> list[float]:
    """Each value times 2^power: exact, and far beyond (or below) what squares of doubles hold."""
    return [math.ldexp(float(v), power) for v in values]


METRICS = ("row_direct_match", "column_direct_match", "knowledge_protection", "linkage", "distance", "disclosure")


def only(metric: str, **settings: Any) -> dict[str, Any]:
    """The metrics change that runs `metric` alone, with `settings` over its own: a case
    about one metric need not pay for the others."""
    return {name: settings if name == metric else DELETE for name in METRICS}


CASES = [
    # --- the configuration
    Case("config_missing_dataset", ("'dataset'",), {"dataset": DELETE}),
    Case("config_unknown_key", ("'exlude'",), {"exlude": ["city"]}),
    Case("config_unknown_metric", ("'metrics.row_direct_macth'",), {"metrics": {"row_direct_macth": {}}}),
    Case("config_wrong_type", ("'exclude'", "list"), {"exclude": "city"}),
    Case("config_no_metric", ("'metrics'",), {"metrics": DELETE}),
    Case("config_target_out_of_range", ("'metrics.row_direct_match.target'",),
         {"metrics": {"row_direct_match": {"target": 150}}}),
    Case("config_path_and_table", ("'original'", "path", "table"), {"original": {"table": "db.t"}}),
    Case("config_not_yaml", ("job.yaml", "not valid YAML"), config_text="dataset: [unclosed\n"),
    Case("config_not_utf8", ("job.yaml", "UTF-8"), config_text="dataset: caf\u00e9\n".encode("latin-1")),
    Case("config_file_missing", ("nope.yaml",), args=("--config", "{case}/nope.yaml")),
    Case("cli_unknown_option", ("--bogus",), args=("--bogus",)),
    Case("set_unknown_key", ("'results.wharehouse'",), args=("--set", "results.wharehouse=/tmp")),
    Case("set_without_value", ("--set", "dataset"), args=("--set", "dataset")),
    Case("bad_database_name", ("'results.database'",), {"results": {"database": "my-db"}}),
    Case("warehouse_not_writable", ("results.warehouse", "not writable"),
         args=("--set", "results.warehouse={case}/o.csv/wh"), files={"o.csv": to_csv(O)}),
    # --- reading the files
    Case("missing_file", ("original", "nope.csv"), {"original": {"path": "nope.csv"}}),
    Case("empty_file", ("original", "o.csv", "no columns"), {"original": {"path": "o.csv"}}, {"o.csv": ""}),
    Case("header_only", ("original", "no rows"), {"original": {"path": "o.csv"}}, {"o.csv": HEADER_ONLY}),
    Case("csv_declared_parquet", ("original", "o.csv", "parquet", "original.format"),
         {"original": {"path": "o.csv", "format": "parquet"}}, {"o.csv": to_csv(O)}),
    Case("csv_declared_json", ("original", "o.csv", "json", "original.format"),
         {"original": {"path": "o.csv", "format": "json"}}, {"o.csv": to_csv(O)}),
    Case("unknown_extension", ("original.format",), {"original": {"path": "o.txt"}}, {"o.txt": to_csv(O)}),
    Case("wrong_separator", ("original", "original.options.sep"),
         {"original": {"path": "o.csv"}}, {"o.csv": to_csv(O, sep=";")}),
    Case("malformed_record_under_failfast", ("original", "MALFORMED_CSV_RECORD", "original.options"),
         {"original": {"path": "o.csv", "options": {"mode": "FAILFAST"}}},
         {"o.csv": to_csv(O) + "13,30,70.0,Lyon,1,1,one field too many\n"}),
    Case("table_not_found", ("original", "nowhere.people"), {"original": {"table": "nowhere.people", "path": DELETE}}),
    # --- row keys and columns
    Case("row_key_absent_one_side", ("row_key", "'id'", "synthetic"),
         {"synthetic": {"path": "s.csv"}}, {"s.csv": to_csv(S.drop(columns="id"))}),
    Case("row_key_duplicated", ("row_key", "'id'", "original", "not unique"),
         {"original": {"path": "o.csv"}}, {"o.csv": edited(O, id=[1, 1, 1, 4, 5, 6, 7, 8, 9, 10, 11, 12])}),
    Case("row_key_null", ("row_key", "'id'", "null", "original"),
         {"original": {"path": "o.csv"}}, {"o.csv": edited(O, id=pd.array([None, *range(2, 13)], dtype="Int64"))}),
    Case("row_key_types_differ", ("row_key", "'id'"),
         {"synthetic": {"path": "s.csv"}}, {"s.csv": edited(S, id=[f"k{i}" for i in range(12)])}),
    Case("position_row_counts_differ", ("@position",),
         {"row_key": "@position", "exclude": ["id"], "synthetic": {"path": "s.csv"}}, {"s.csv": to_csv(S.iloc[:11])}),
    Case("position_with_a_table", ("original", "@position"),
         {"row_key": "@position", "original": {"table": "db.people", "path": DELETE}}),
    Case("nothing_left_to_compare", ("'exclude'",),
         {"exclude": ["age", "weight", "city", "group", "unit"], "metrics": {"row_direct_match": {}}}),
    Case("exclude_names_no_column", ("exclude", "'nope'"), {"exclude": ["nope"]}),
    Case("column_on_one_side_only", ("'secret'", "original"),
         {"original": {"path": "o.csv"}}, {"o.csv": edited(O, secret=range(12))}),
    Case("reserved_column_name", ("'__pe_key'",),
         {"original": {"path": "o.csv"}, "synthetic": {"path": "s.csv"}},
         {"o.csv": edited(O, __pe_key=1), "s.csv": edited(S, __pe_key=1)}),
    Case("number_vs_text", ("'age'", "string", "cast"),
         {"synthetic": {"path": "s.csv"}}, {"s.csv": edited(S, age=["old"] + list(S["age"][1:]))}),
    Case("cast_not_a_type", ("cast", "'age'", "numbr"), {"cast": {"age": "numbr"}}),
    Case("cast_impossible", ("cast", "'age'", "array<int>"), {"cast": {"age": "array<int>"}}),
    Case("cast_values_do_not_convert", ("cast", "'city'", "12 value(s)", "double"), {"cast": {"city": "double"}}),
    Case("categorical_not_compared", ("categorical", "'nope'"), {"categorical": ["nope"]}),
    # --- knowledge protection
    Case("known_variable_not_in_data", ("known variable", "'Age'"),
         {"metrics": {"knowledge_protection": {"known_variables": ["Age"]}}}),
    Case("known_variable_excluded", ("known variable", "'weight'"),
         {"exclude": ["weight"], "metrics": {"knowledge_protection": {"known_variables": ["weight"]},
                                             "linkage": DELETE}}),
    Case("zero_mean_known_variable", ("'balance'", "categorical", "bin_width.balance"),
         {"original": {"path": "o.csv"}, "synthetic": {"path": "s.csv"},
          "metrics": only("knowledge_protection", known_variables=["balance"])},
         {"o.csv": edited(O, balance=[-6, -5, -4, -3, -2, -1, 1, 2, 3, 4, 5, 6]),
          "s.csv": edited(S, balance=[0] * 12)}),
    Case("bin_width_of_a_category", ("'bin_width.group'", "categorical"),
         {"categorical": ["group"],
          "metrics": {"knowledge_protection": {"known_variables": ["group"], "bin_width": {"group": 1}}}}),
    Case("bin_width_not_known", ("'metrics.knowledge_protection.bin_width.weight'",),
         {"metrics": {"knowledge_protection": {"bin_width": {"weight": 1}}}}),
    # --- linkage
    Case("linkage_target_text", ("linkage", "'city'", "numeric"), {"metrics": {"linkage": {"targets": ["city"]}}}),
    Case("linkage_target_repeated", ("'metrics.linkage.targets'", "twice"),
         {"metrics": {"linkage": {"targets": ["age", "age"]}}}),
    Case("linkage_target_null", ("linkage", "'weight'", "null", "drop_incomplete"),
         {"original": {"path": "o.csv"}, "metrics": only("linkage")}, {"o.csv": edited(O, weight=[None] + list(O["weight"][1:]))}),
    Case("linkage_targets_constant", ("linkage", "'unit'", "constant"), {"metrics": only("linkage", targets=["unit"])}),
    Case("linkage_one_distinct_original", ("linkage", "2 distinct original records"),
         {"original": {"path": "o.csv"}, "metrics": only("linkage")}, {"o.csv": edited(O, age=40, weight=70.0)}),
    Case("linkage_one_original_row", ("linkage", "at least 2 original records"),
         {"original": {"path": "o.csv"}, "synthetic": {"path": "s.csv"}, "metrics": only("linkage")},
         {"o.csv": to_csv(O.iloc[:1]), "s.csv": to_csv(S.iloc[:1])}),
    Case("linkage_negative_ridge", ("'metrics.linkage.ridge'", "negative"), {"metrics": {"linkage": {"ridge": -0.5}}}),
    Case("linkage_ridge_not_a_number", ("'metrics.linkage.ridge'",), {"metrics": {"linkage": {"ridge": float("nan")}}}),
    Case("linkage_unknown_cov_from", ("'metrics.linkage.cov_from'", "raw, anon, pooled"),
         {"metrics": {"linkage": {"cov_from": "both"}}}),
    Case("linkage_blocking_missing", ("linkage", "blocking", "'Group'"), {"metrics": {"linkage": {"blocking": ["Group"]}}}),
    # --- distance metrics
    Case("distance_unknown_column", ("'metrics.distance.columns'", "'Age'"), {"metrics": only("distance", columns=["Age"])}),
    Case("distance_components_zero", ("'metrics.distance.components'", "got 0"),
         {"metrics": {"distance": {"components": 0}}}),
    Case("distance_cell_records_zero", ("'metrics.distance.cell_records'", "at least 1"),
         {"metrics": {"distance": {"cell_records": 0}}}),
    Case("distance_cell_records_negative", ("'metrics.distance.cell_records'", "at least 1"),
         {"metrics": {"distance": {"cell_records": -3}}}),
    Case("distance_cell_records_not_whole", ("'metrics.distance.cell_records'", "whole number"),
         {"metrics": {"distance": {"cell_records": 2.5}}}),
    Case("distance_space_too_wide_to_search", ("'metrics.distance.max_core_hours'", "36 coordinates", "core-hours"),
         {"original": {"path": "o.csv"}, "synthetic": {"path": "s.csv"},
          "metrics": only("distance", components="all", max_core_hours=1e-12, columns=["a", "b", "c"])},
         {name: edited(frame, **{c: [f"{c}{i}" for i in range(12)] for c in "abc"})
          for name, frame in (("o.csv", O), ("s.csv", S))}),
    Case("distance_cap_beyond_64_bits", ("'metrics.distance.local_cloaking.cap'", "64-bit integer"),
         args=("--set", f"metrics.distance.local_cloaking.cap={10**20}")),
    Case("linkage_ridge_beyond_a_double", ("'metrics.linkage.ridge'", "double"),
         args=("--set", f"metrics.linkage.ridge={10**400}")),
    Case("distance_holdout_share_without_holdout", ("'metrics.distance.holdout_distance_share'", "holdout"),
         {"metrics": {"distance": {"holdout_distance_share": {}}}}),
    Case("distance_holdout_missing_column", ("holdout", "'city'", "missing"),
         {"holdout": {"path": "h.csv"}, "metrics": only("distance")}, {"h.csv": to_csv(O.drop(columns=["id", "city"]))}),
    Case("distance_holdout_empty", ("holdout", "no rows"),
         {"holdout": {"path": "h.csv"}, "metrics": only("distance")}, {"h.csv": HEADER_ONLY}),
    Case("distance_holdout_text_in_numeric", ("holdout", "'age'", "string", "int", "cast"),
         {"holdout": {"path": "h.csv"}, "metrics": only("distance")}, {"h.csv": edited(O, age="old")}),
    # The holdout goes through the same `cast` as the two tables, with the same refusal.
    Case("distance_holdout_cast_does_not_convert", ("cast", "12 value(s)", "'age'", "holdout table", "double"),
         {"holdout": {"path": "h.csv"}, "cast": {"age": "double"}, "metrics": only("distance")},
         {"h.csv": edited(O, age="old")}),
    # Whole numbers in the two tables: a holdout's 23.5 must not become 23.
    Case("distance_holdout_fraction_in_a_whole_column",
         ("holdout", "1 value(s)", "'age'", "from double", "to int", "cast: {age: double}"),
         {"holdout": {"path": "h.csv"}, "metrics": only("distance")},
         {"h.csv": edited(O, age=[23.5] + [float(a) for a in O["age"][1:]])}),
    # --- values beyond what doubles hold in the attack's moments, the space's distances or the bins
    Case("linkage_variance_beyond_doubles", ("linkage", "'weight'", "too large", "covariance"),
         {"original": {"path": "o.csv"}, "synthetic": {"path": "s.csv"}, "metrics": only("linkage")},
         {"o.csv": edited(O, weight=powered(O["weight"], 664)), "s.csv": edited(S, weight=powered(S["weight"], 664))}),
    Case("linkage_variance_below_doubles", ("linkage", "'weight'", "too small", "covariance"),
         {"original": {"path": "o.csv"}, "synthetic": {"path": "s.csv"}, "metrics": only("linkage")},
         {"o.csv": edited(O, weight=powered(O["weight"], -664)), "s.csv": edited(S, weight=powered(S["weight"], -664))}),
    Case("linkage_span_beyond_doubles", ("linkage", "'weight'", "span", "largest double"),
         {"original": {"path": "o.csv"}, "metrics": only("linkage", methods=["weighted"])},
         {"o.csv": edited(O, weight=[-1.7e308, 1.7e308] * 6)}),
    Case("distance_value_too_far", ("metrics.distance", "'age'", "1 value(s)", "synthetic", "overflow"),
         {"synthetic": {"path": "s.csv"}, "metrics": only("distance")},
         {"s.csv": edited(S, age=[1e200] + list(S["age"][1:]))}),
    Case("kpr_bins_beyond_doubles", ("knowledge_protection", "'weight'", "bin widths", "bin_width.weight"),
         {"metrics": only("knowledge_protection", known_variables=["weight"], bin_width={"weight": 1e-307})}),
    Case("kpr_grid_origin_beyond_doubles", ("knowledge_protection", "'weight'", "largest double", "origin"),
         {"original": {"path": "o.csv"}, "metrics": only("knowledge_protection", known_variables=["weight"])},
         {"o.csv": edited(O, weight=[-1.7e308, 1.7e308, 1e308] * 4)}),
    # --- identity and attribute disclosure
    Case("disclosure_key_not_compared", ("'metrics.disclosure.keys'", "'Age'"),
         {"metrics": only("disclosure", keys=["Age"], targets=["city"])}),
    Case("disclosure_target_excluded", ("'metrics.disclosure.targets'", "'weight'"),
         {"exclude": ["weight"], "metrics": only("disclosure", keys=["age"], targets=["weight"])}),
    Case("disclosure_target_among_keys", ("'metrics.disclosure.targets'", "'city'", "also a key"),
         {"metrics": only("disclosure", keys=["age", "city"], targets=["city"])}),
    Case("disclosure_no_keys", ("'metrics.disclosure.keys'", "empty"),
         {"metrics": only("disclosure", keys=[], targets=["city"])}),
    Case("disclosure_no_targets", ("'metrics.disclosure.targets'", "empty"),
         {"metrics": only("disclosure", keys=["age"], targets=[])}),
    Case("disclosure_keys_missing", ("'metrics.disclosure.keys'",),
         {"metrics": only("disclosure", targets=["city"])}),
    Case("disclosure_bins_on_text", ("'metrics.disclosure.bins.city'", "not numeric"),
         {"metrics": only("disclosure", keys=["city", "group"], targets=["age"], bins={"city": 4})}),
    Case("disclosure_bins_on_a_category", ("'metrics.disclosure.bins.group'", "categorical"),
         {"categorical": ["group"], "metrics": only("disclosure", keys=["group"], targets=["age"], bins={"group": 4})}),
    Case("disclosure_bins_one_group", ("'metrics.disclosure.bins.age'", "at least 2"),
         {"metrics": only("disclosure", keys=["age"], targets=["city"], bins={"age": 1})}),
    Case("disclosure_bins_not_a_key", ("'metrics.disclosure.bins.weight'", "neither a key nor a target"),
         {"metrics": only("disclosure", keys=["age"], targets=["city"], bins={"weight": 4})}),
    Case("disclosure_target_over_100", ("'metrics.disclosure.target'", "0..100"),
         {"metrics": only("disclosure", keys=["age"], targets=["city"], target=120)}),
    # --- the config file's limits (hardening, round 2)
    Case("config_duplicate_key", ("job.yaml", "'metrics'", "twice", "lines 4 and 8"), config_text=DUPLICATE_METRICS),
    Case("config_duplicate_nested_key", ("job.yaml", "'metrics.row_direct_match.target'", "lines 6 and 7"),
         config_text=DUPLICATE_TARGET),
    Case("config_alias_bomb", ("job.yaml", "aliases", "not accepted"), config_text=BILLION_LAUGHS, within=10),
    Case("config_deep_nesting", ("job.yaml", "nested deeper than 32"),
         config_text="dataset: " + "[" * 5000 + "]" * 5000 + "\n", within=10),
    Case("config_too_large", ("huge.yaml", "larger than"), files={"huge.yaml": "#" * (1 << 20) + "\n"},
         args=("--config", "{case}/huge.yaml"), within=10),
    Case("config_is_a_fifo", ("pipe.yaml", "not a regular file"), fifos=("pipe.yaml",),
         args=("--config", "{case}/pipe.yaml"), within=10),
    Case("config_is_a_directory", ("{case}", "not a regular file"), args=("--config", "{case}"), within=10),
    Case("config_is_dev_zero", ("/dev/zero", "not a regular file"), args=("--config", "/dev/zero"), within=10),
    Case("config_number_too_long", ("job.yaml", "line 1"), config_text="dataset: " + "1" * 5000 + "\n"),
    Case("set_alias_bomb", ("--set original.options", "aliases"),
         args=("--set", "original.options={a: &a [x, x, x, x], b: [*a, *a, *a, *a]}"), within=10),
    Case("set_deep_nesting", ("--set original.options.x", "nested deeper than 32"),
         args=("--set", "original.options.x=" + "[" * 5000 + "]" * 5000), within=10),
    Case("set_duplicate_key", ("--set metrics", "'row_direct_match'", "twice"),
         args=("--set", "metrics={row_direct_match: {}, row_direct_match: {target: 1}}")),
    # --- run ids, checked before any work
    Case("run_id_too_long", ("--run-id", "too long"), args=("--run-id", "r" * 10_000), within=10),
    Case("run_id_too_long_once_escaped", ("--run-id", "too long", "312 bytes"), args=("--run-id", ":" * 100 + "x" * 5)),
    Case("run_id_with_newline", ("--run-id", "U+000A"), args=("--run-id", "a\nerror: injected")),
    Case("run_id_with_carriage_return", ("--run-id", "U+000D"), args=("--run-id", "run\r42")),
    Case("run_id_empty", ("--run-id", "empty"), args=("--run-id", "")),
    Case("run_id_spark_null_partition", ("--run-id", "__HIVE_DEFAULT_PARTITION__", "reserved"),
         args=("--run-id", "__HIVE_DEFAULT_PARTITION__")),
]



@pytest.fixture(scope="module")
def workspace(tmp_path_factory) -> dict[str, Path]:
    return small_workspace(tmp_path_factory.mktemp("bad_inputs"))



@pytest.fixture(scope="module")
def seeded(spark, workspace) -> dict[str, Path]:
    """The workspace after one successful run: the results tables exist and hold a run."""
    seed = small_config(workspace, DATABASE, linkage=False)
    config = write_case(workspace["root"] / "seed", seed)
    code, output = run_in_process(spark, ["--config", str(config), "--run-id", "seed"])
    assert code == 0, output
    tables = workspace["warehouse"] / f"{DATABASE}.db"
    assert (tables / "metric_results" / "run_id=seed").is_dir()
    assert (tables / "column_protection" / "run_id=seed").is_dir()
    return workspace


class Hung(BaseException):  # not an Exception: the job's last line of defence must not catch it
    pass


@contextmanager
def deadline(seconds: float | None) -> Iterator[None]:
    """Interrupt the job (a blocking open, a runaway parse) after `seconds`, so that a
    case that would hang fails instead."""
    if seconds is None:
        yield
        return

    def interrupt(signum, frame):
        raise Hung(f"still running after {seconds} s")

    previous = signal.signal(signal.SIGALRM, interrupt)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def case_of(entry: Case | Any) -> Case:
    return entry if isinstance(entry, Case) else entry.values[0]


def test_there_are_enough_distinct_cases():
    names = [case_of(entry).name for entry in CASES]
    assert len(set(names)) == len(names) >= 30


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_bad_input_exits_2_with_one_error_line(spark, seeded, case: Case):
    refused(spark, seeded, case)


def test_a_search_in_a_space_too_wide_for_a_tree_is_refused_before_it_starts(spark, seeded):
    """`components: all` over a categorical of 1,000 values on 200,000 records per side:
    1,001 coordinates, where a k-d tree scores every pair (hundreds of core-hours)."""
    rows = 200_000
    frame = pd.DataFrame({"id": range(rows), "code": [f"c{i % 1000}" for i in range(rows)],
                          "x": [float(i % 97) for i in range(rows)]})
    case = Case("distance_1001_coordinates", ("1001 coordinates", "200,000 original", "core-hours",
                                              "'metrics.distance.max_core_hours' (24)", "'metrics.distance.components'"),
                {"original": {"path": "o.csv"}, "synthetic": {"path": "s.csv"},
                 "metrics": only("distance", components="all", columns=["code", "x"])},
                {"o.csv": to_csv(frame), "s.csv": to_csv(frame)}, within=90)
    refused(spark, seeded, case)


def refused(spark, seeded, case: Case) -> None:
    """Run `case`: exit 2, one error line saying what the case says, nothing written or
    left cached."""
    warehouse = seeded["warehouse"]
    case_dir = seeded["root"] / case.name
    config = write_case(case_dir, merged(small_config(seeded, DATABASE), case.config),
                        case.files, case.config_text)
    for name in case.fifos:
        os.mkfifo(case_dir / name)
    args = [a.replace("{case}", str(case_dir)) for a in case.args]
    if "--config" not in args:
        args = ["--config", str(config), *args]
    if "--run-id" not in args:
        args = [*args, "--run-id", case.name]
    before, cached_before = tree_digest(warehouse), persisted_rdds(spark)

    started = time.monotonic()
    with deadline(case.within):
        code, output = run_in_process(spark, args)
    took = time.monotonic() - started

    errors = error_lines(output)
    assert code == 2, output[-5000:]
    assert len(errors) == 1, output[-5000:]
    for part in case.says:
        part = part.replace("{case}", str(case_dir))
        assert part in errors[0], f"{part!r} not in {errors[0]!r}"
    if case.within is not None:
        assert took < case.within, f"took {took:.1f} s"
    assert "Traceback" not in output, output
    assert tree_digest(warehouse) == before
    assert persisted_rdds(spark) == cached_before, "a failed run left data cached"


@pytest.mark.slow
def test_bad_input_through_spark_submit(seeded, tmp_path):
    """The same contract from a real driver: Spark's own log is on this output too."""
    warehouse = seeded["warehouse"]
    config = write_case(tmp_path / "case",
                        merged(small_config(seeded, DATABASE), {"original": {"path": "o.csv", "format": "parquet"}}),
                        {"o.csv": to_csv(O)})
    before = tree_digest(warehouse)
    code, output = submit(["--config", str(config), "--run-id", "submitted"])
    errors = error_lines(output)
    assert code == 2, output[-5000:]
    assert len(errors) == 1 and "o.csv" in errors[0] and "parquet" in errors[0], output[-5000:]
    assert "Traceback" not in output, output[-5000:]
    assert tree_digest(warehouse) == before


def unwritable_folder(root: Path) -> Path:
    """A folder this process cannot create entries in: one without write permission, or,
    as root (who may write anywhere), /proc/sys, which refuses even root."""
    if os.geteuid() != 0:
        folder = root / "read_only"
        folder.mkdir()
        folder.chmod(0o500)
        return folder
    return Path("/proc/sys")


@pytest.mark.parametrize("where", ["a_file", "under_a_file", "unwritable_folder"])
def test_a_bad_report_folder_exits_2_before_any_work(spark, seeded, monkeypatch, where):
    """--report is checked up front like the warehouse: no metric runs for a report that
    could not be written."""
    case_dir = seeded["root"] / f"report_{where}"
    config = write_case(case_dir, merged(small_config(seeded, DATABASE), {"metrics": only("row_direct_match")}),
                        {"taken": "a file"})
    report = {"a_file": case_dir / "taken", "under_a_file": case_dir / "taken" / "report",
              "unwritable_folder": unwritable_folder(case_dir) / "report"}[where]
    with pytest.raises(OSError):  # the folder really cannot be made
        report.mkdir(parents=True)
    import privacy_eval.evaluation

    evaluated = []
    real = privacy_eval.evaluation.evaluate
    monkeypatch.setattr(privacy_eval.evaluation, "evaluate", lambda *a: evaluated.append(a) or real(*a))
    before = tree_digest(seeded["warehouse"])
    code, output = run_in_process(spark, ["--config", str(config), "--run-id", f"report_{where}",
                                          "--report", str(report)])
    assert code == 2, output[-5000:]
    (line,) = error_lines(output)
    assert line.startswith(f"error: --report: {report} is not writable"), line
    assert not evaluated, "the metrics ran before the report folder was checked"
    assert tree_digest(seeded["warehouse"]) == before


# spark-submit's launcher deletes carriage returns from every argument and decodes the
# arguments with the locale's charset before the job sees them (docs/interface.md,
# "What spark-submit does to arguments"): what the job can still detect, it refuses.
LAUNCHER_REWRITES = [
    # '\r' alone arrives empty: without the launcher it is refused as U+000D.
    ("carriage_return", "\r", {}, "--run-id must not be empty or blank"),
    # A byte that is not UTF-8 arrives as U+FFFD (a bare `python` sees U+DCFF).
    ("invalid_utf8", "run\udcff", {}, "U+FFFD, the replacement character"),
    # Under the C locale every non-ASCII character arrives as '?': 'é' and 'à' would meet.
    ("c_locale", "run\u00e9", {"LC_ALL": "C"}, "decoded the job's arguments as ANSI_X3.4-1968"),
]


@pytest.mark.slow
@pytest.mark.parametrize("name, run_id, env, says", LAUNCHER_REWRITES, ids=[c[0] for c in LAUNCHER_REWRITES])
def test_run_ids_the_launcher_rewrote_are_refused(seeded, name, run_id, env, says):
    warehouse = seeded["warehouse"]
    config = write_case(seeded["root"] / f"launcher_{name}", merged(small_config(seeded, DATABASE),
                                                                   {"metrics": only("row_direct_match")}))
    before = tree_digest(warehouse)
    code, output = submit(["--config", str(config), "--run-id", run_id], env=env)
    errors = error_lines(output)
    assert code == 2, output[-5000:]
    assert len(errors) == 1 and errors[0].startswith("error: --run-id ") and says in errors[0], output[-5000:]
    assert tree_digest(warehouse) == before


# --------------------------------------------------------------------------
# odd inputs that must work
# --------------------------------------------------------------------------

ODD_NAMES = ["a b", "c.d", "e`f", "g'h", 'q"r', "ünïcødé"]


def read_run(spark, warehouse: Path, run_id: str) -> tuple[dict[str, dict], dict[str, dict]]:
    """This run's rows of both tables, read straight from the Parquet files."""
    tables = warehouse / f"{DATABASE}.db"
    metrics = spark.read.parquet(str(tables / "metric_results")).filter(f"run_id = '{run_id}'").collect()
    columns = spark.read.parquet(str(tables / "column_protection")).filter(f"run_id = '{run_id}'").collect()
    return ({r["metric"]: r.asDict() for r in metrics}, {r["column_name"]: r.asDict() for r in columns})


def run_ok(spark, seeded, name: str, config: dict[str, Any], files: dict[str, str]):
    path = write_case(seeded["root"] / name, merged(small_config(seeded, DATABASE), config), files)
    code, output = run_in_process(spark, ["--config", str(path), "--run-id", name])
    assert code == 0, output
    assert not error_lines(output)
    return read_run(spark, seeded["warehouse"], name)


def check_against_reference(metrics: dict, columns: dict, original: pd.DataFrame, synthetic: pd.DataFrame,
                            compared: list[str], key: str, known: list[str], numeric: list[str]) -> None:
    rdm = reference.row_direct_match(original, synthetic, compared)
    cdm = reference.column_direct_match(original, synthetic, compared, key)
    kpr = reference.knowledge_protection(original, synthetic, compared, known, numeric)
    assert metrics["row_direct_match_protection"]["value"] == pytest.approx(rdm["protection"], abs=1e-9)
    assert metrics["row_direct_match_protection"]["numerator"] == rdm["reproduced"]
    assert metrics["column_direct_match_protection"]["value"] == pytest.approx(cdm["protection"], abs=1e-9)
    assert {c: (r["matches"], r["distinct_synthetic"]) for c, r in columns.items()} == {
        c: (p["matches"], p["distinct"]) for c, p in cdm["per_column"].items()}
    assert metrics["knowledge_protection_rate"]["numerator"] == kpr["exposed"]
    assert metrics["knowledge_protection_rate"]["value"] == pytest.approx(kpr["protection"], abs=1e-9)


def test_odd_column_names_work_everywhere(spark, seeded):
    """Space, dot, backtick, both quotes and non-ASCII letters, in every role: compared,
    row key, known variable, linkage target and blocking column."""
    rename = dict(zip(["age", "weight", "city", "group", "unit"], ODD_NAMES[:5])) | {"id": "k" + ODD_NAMES[5]}
    original, synthetic = O.rename(columns=rename), S.rename(columns=rename)
    synthetic[ODD_NAMES[5]] = original[ODD_NAMES[5]] = range(12)  # an identifier copied verbatim
    key = rename["id"]
    quoted = {"escape": '"'}  # pandas doubles a quote inside a quoted field (RFC 4180)
    metrics, columns = run_ok(spark, seeded, "odd_names", {
        "original": {"path": "o.csv", "options": quoted}, "synthetic": {"path": "s.csv", "options": quoted},
        "row_key": key,
        "metrics": {"knowledge_protection": {"known_variables": [rename["age"], rename["city"]]},
                    "linkage": {"targets": [rename["age"], rename["weight"]], "blocking": [rename["group"]]}},
    }, {"o.csv": to_csv(original), "s.csv": to_csv(synthetic)})
    assert set(columns) == set(ODD_NAMES)
    assert columns[ODD_NAMES[5]]["protection"] == 0.0 and columns[ODD_NAMES[5]]["risk_rank"] == 1
    check_against_reference(metrics, columns, original, synthetic, ODD_NAMES, key,
                            [rename["age"], rename["city"]], [rename["age"]])
    details = json.loads(metrics["linkage_success_rate"]["details"])
    assert details["shared"]["targets"] == [rename["age"], rename["weight"]]
    assert details["shared"]["blocking"] == [rename["group"]]


def test_column_entirely_null_on_one_side_takes_the_other_sides_type(spark, seeded):
    """CSV infers a column without any value as text; against numbers on the other side
    that must not be a type error. Also a column null on both sides."""
    original = O.assign(score=float("nan"), blank=float("nan"))
    synthetic = S.assign(score=[3.5, 1.0] * 6, blank=float("nan"))
    metrics, columns = run_ok(spark, seeded, "all_null", {
        "original": {"path": "o.csv"}, "synthetic": {"path": "s.csv"},
        "metrics": {"linkage": DELETE},
    }, {"o.csv": to_csv(original), "s.csv": to_csv(synthetic)})
    compared = ["age", "weight", "city", "group", "unit", "score", "blank"]
    assert columns["score"]["matches"] == 0 and columns["score"]["distinct_synthetic"] == 2
    assert columns["blank"]["matches"] == 12 and columns["blank"]["distinct_synthetic"] == 1
    check_against_reference(metrics, columns, original, synthetic, compared, "id", ["age", "city"], ["age"])


def test_one_row_tables(spark, seeded):
    """n = 1: the one original row occurs once. The synthetic row differs in age only:
    not reproduced (RDMP 100), every other column matches with u_c = 1 (P_c = 0), and
    the known variables (city, and age binned by 5 % of itself) single it out (KPR 0).
    The linkage attack needs 2 originals: see linkage_one_original_row."""
    original, synthetic = O.iloc[:1], O.iloc[:1].assign(age=24)
    metrics, columns = run_ok(spark, seeded, "one_row", {
        "original": {"path": "o.csv"}, "synthetic": {"path": "s.csv"}, "metrics": {"linkage": DELETE},
    }, {"o.csv": to_csv(original), "s.csv": to_csv(synthetic)})
    assert metrics["row_direct_match_protection"]["value"] == 100.0
    assert metrics["column_direct_match_protection"]["value"] == 0.0
    assert columns["age"]["protection"] == 100.0 and columns["weight"]["protection"] == 0.0
    kpr = metrics["knowledge_protection_rate"]
    assert kpr["value"] == 0.0 and kpr["numerator"] == 1


def test_fail_on_target_stops_an_undefined_figure(spark, seeded):
    """The NNDR of a one-row original does not exist (no second-nearest original): with a
    target, --fail-on-target must fail the gate (exit 3) as on any other status without a
    measurable value, write nothing, and name the metric with its status."""
    one = {"original": {"path": "o.csv"}, "synthetic": {"path": "s.csv"},
           "metrics": only("distance", nearest_neighbour_distance_ratio={"target": 0.5},
                           distance_to_closest_record={})}
    path = write_case(seeded["root"] / "undefined_gate", merged(small_config(seeded, DATABASE), one),
                      {"o.csv": to_csv(O.iloc[:1]), "s.csv": to_csv(S.iloc[:1])})
    before = tree_digest(seeded["warehouse"])
    code, output = run_in_process(spark, ["--config", str(path), "--run-id", "undefined_gate", "--fail-on-target"])
    assert code == 3, output[-5000:]
    (line,) = error_lines(output)
    assert "nearest_neighbour_distance_ratio (undefined)" in line and "distance_to_closest_record" not in line
    assert "UNDEFINED" in output
    assert tree_digest(seeded["warehouse"]) == before


def test_run_id_escaping_matches_spark(spark):
    """The job checks a run id's folder name before Spark starts, with its own copy of
    Spark's escaping: it must agree with Spark's, character for character."""
    from privacy_eval.results import partition_folder_name

    utils = spark.sparkContext._jvm.org.apache.spark.sql.catalyst.catalog.ExternalCatalogUtils
    odd = [chr(c) for c in range(1, 0x80)] + ["\u00e9", "\u00a0", "\u20ac", "\u4e2d", "\U0001f600", "\u0085"]
    for value in [*odd, "".join(odd), "manual__2026-11-29T12:34:15.676400+00:00", "a b/c=d%e"]:
        assert partition_folder_name(value) == str(utils.getPartitionPathString("run_id", value)), repr(value)


def test_longest_run_id_works(spark, seeded):
    """A run id whose escaped folder name is exactly 255 bytes is written and read back."""
    from privacy_eval.results import check_run_id, partition_folder_name

    run_id = "manual__" + ":" * 78 + "\u00e9\u00e9+x"  # run_id=, 8, 78 x %3A, 2 x 2 bytes, 2: 255 bytes
    assert len(partition_folder_name(run_id).encode()) == 255
    check_run_id(run_id)
    with pytest.raises(Exception, match="too long"):
        check_run_id(run_id + "x")
    path = write_case(seeded["root"] / "longest_run_id",
                      merged(small_config(seeded, DATABASE),
                             {"metrics": only("row_direct_match")}))
    code, output = run_in_process(spark, ["--config", str(path), "--run-id", run_id])
    assert code == 0, output[-5000:]
    assert not error_lines(output)
    metrics, _ = read_run(spark, seeded["warehouse"], run_id)
    assert set(metrics) == {"row_direct_match_protection"}


def test_in_process_runs_leave_the_shared_session_intact(spark, seeded):
    """The job's session factory hands the job this very session; what the job sets on
    it (log level, required confs, its results database) must not change what the other
    tests rely on. Runs after this module's in-process runs."""
    from privacy_eval.session import build_session

    assert build_session("privacy-eval") is spark
    assert spark.conf.get("spark.sql.shuffle.partitions") == "2"
    assert spark.conf.get("spark.sql.adaptive.enabled") == "false"
    assert spark.catalog.currentDatabase() == "default"
    root = spark.sparkContext._jvm.org.apache.logging.log4j.LogManager.getRootLogger()
    assert str(root.getLevel()) == "ERROR"
    assert spark.range(5).selectExpr("sum(id)").collect()[0][0] == 10
