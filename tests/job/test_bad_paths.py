"""Paths, file systems and column layouts through the real entry point.

A bad one exits 2 within seconds, with exactly one `error:` line naming the path or
column at fault, no traceback, and the results tables byte for byte as they were
(docs/interface.md, "Exit codes"). A path names its file or folder literally: glob
characters in it are never patterns.

The cases run the entry script in-process (tests/support/jobrun.py) against a warehouse
seeded by one successful run. Tests run as root, so a file that cannot be opened is
simulated by making the job's `open` refuse it.
"""

from __future__ import annotations

import builtins
import io
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from privacy_eval import reading
from tests.support.casefiles import DELETE, merged, small_config, small_workspace, write_case
from tests.support.jobrun import error_lines, persisted_rdds, run_in_process, submit, tree_digest
from tests.support.paths import ROOT
from tests.support.tables import base_frames, to_csv

DATABASE = "bad_paths"
WITHIN_SECONDS = 30  # a refusal comes before any pass over the data
O, S = base_frames()
NO_LINKAGE = {"metrics": {"linkage": DELETE}}


def parquet(frame: pd.DataFrame, **extra: pa.Array) -> bytes:
    table = pa.Table.from_pandas(frame, preserve_index=False)
    for name, values in extra.items():
        table = table.append_column(name, values)
    out = io.BytesIO()
    pq.write_table(table, out)
    return out.getvalue()


TAGS = pa.array([[("k", i)] for i in range(12)], type=pa.map_(pa.string(), pa.int64()))
CITY_WITH_LINE_BREAK = to_csv(O).replace("Nantes", '"Nan\ntes"', 1)
REPEATED_HEADER = to_csv(O).replace("id,age,weight", "id,age,age", 1)


def refuse_opening(name: str) -> Callable[[Any], None]:
    """Make the job's `open` fail on files called `name`, as for a file it may not read."""
    def arm(monkeypatch: pytest.MonkeyPatch) -> None:
        def guarded(file: Any, *args: Any, **kwargs: Any) -> Any:
            if os.path.basename(str(file)) == name:
                raise PermissionError(13, "Permission denied", str(file))
            return builtins.open(file, *args, **kwargs)
        monkeypatch.setattr(reading, "open", guarded, raising=False)
    return arm


@dataclass(frozen=True)
class Case:
    name: str
    says: tuple[str, ...]  # what the error line must name, and why
    config: dict[str, Any] = field(default_factory=dict)  # merged into the base config
    files: dict[str, str | bytes] = field(default_factory=dict)  # written in the case folder
    links: dict[str, str] = field(default_factory=dict)  # symbolic link -> its target, in the case folder
    arm: Callable[[pytest.MonkeyPatch], None] | None = None


CASES = [
    # --- types the job cannot compare
    Case("map_column", ("'tags'", "map<string,bigint>", "original", "exclude"),
         {"original": {"path": "o.parquet"}, "synthetic": {"path": "s.parquet"}},
         {"o.parquet": parquet(O, tags=TAGS), "s.parquet": parquet(S, tags=TAGS)}),
    # --- file-system faults
    Case("unreadable_parquet_file", ("original", "part-0.parquet", "Permission denied"),
         {"original": {"path": "o", "format": "parquet"}}, {"o/part-0.parquet": parquet(O)},
         arm=refuse_opening("part-0.parquet")),
    Case("unreadable_csv_file", ("original", "o.csv", "cannot open", "Permission denied"),
         {"original": {"path": "o.csv"}}, {"o.csv": to_csv(O)}, arm=refuse_opening("o.csv")),
    Case("link_loop_in_a_parquet_folder", ("original", "o/x", "link"),
         {"original": {"path": "o", "format": "parquet"}}, {"o/part-0.parquet": parquet(O)},
         links={"o/x": "y", "o/y": "x"}),
    Case("folder_link_loop_in_a_csv_folder", ("original", "o/self", "loop"),
         {"original": {"path": "o", "format": "csv"}}, {"o/part-0.csv": to_csv(O)},
         links={"o/self": "."}),
    Case("folder_link_loop_in_a_parquet_folder", ("synthetic", "s/sub/up", "loop"),
         {"synthetic": {"path": "s", "format": "parquet"}}, {"s/sub/part-0.parquet": parquet(S)},
         links={"s/sub/up": ".."}),
    # (the configuration's paths are resolved, links included: the error names the target)
    Case("path_is_a_link_to_nothing", ("original", "gone.csv", "not found"),
         {"original": {"path": "o.csv"}}, links={"o.csv": "gone.csv"}),
    Case("missing_file_by_url", ("original", "file:/nonexistent/o.csv", "PATH_NOT_FOUND", "exists"),
         {"original": {"path": "file:/nonexistent/o.csv"}}),
    # --- layouts that used to be reported as something else
    Case("line_break_in_a_quoted_field", ("original", "o.csv", "spans lines", "'original.options.multiLine: true'"),
         {"original": {"path": "o.csv"}}, {"o.csv": CITY_WITH_LINE_BREAK}),
    Case("header_names_differ_in_case_only", ("original", "'age'", "'Age'", "up to case"),
         {"original": {"path": "o.csv"}}, {"o.csv": to_csv(O.assign(Age=O["age"]))}),
    Case("header_name_repeated", ("original", "'age'", "twice"),
         {"original": {"path": "o.csv"}}, {"o.csv": REPEATED_HEADER}),
    Case("parquet_names_differ_in_case_only", ("synthetic", "'age'", "'Age'", "up to case"),
         {"synthetic": {"path": "s.parquet"}}, {"s.parquet": parquet(S.assign(Age=S["age"]))}),
]


@pytest.fixture(scope="module")
def seeded(spark, tmp_path_factory) -> dict[str, Path]:
    """A workspace whose results tables hold one run, "seed", of the plain files."""
    workspace = small_workspace(tmp_path_factory.mktemp("bad_paths"))
    config = write_case(workspace["root"] / "seed", small_config(workspace, DATABASE, linkage=False))
    code, output = run_in_process(spark, ["--config", str(config), "--run-id", "seed"])
    assert code == 0, output
    return workspace


def make_case(seeded: dict[str, Path], name: str, changes: dict[str, Any], files: dict[str, str | bytes],
              links: dict[str, str] | None = None) -> Path:
    case_dir = seeded["root"] / name
    config = write_case(case_dir, merged(small_config(seeded, DATABASE, linkage=False), changes), files)
    for link, target in (links or {}).items():
        (case_dir / link).parent.mkdir(parents=True, exist_ok=True)
        os.symlink(target, case_dir / link)
    return config


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_bad_path_or_layout_exits_2_within_seconds(spark, seeded, monkeypatch, case: Case):
    config = make_case(seeded, case.name, case.config, case.files, case.links)
    if case.arm is not None:
        case.arm(monkeypatch)
    warehouse = seeded["warehouse"]
    before, cached_before = tree_digest(warehouse), persisted_rdds(spark)

    started = time.monotonic()
    code, output = run_in_process(spark, ["--config", str(config), "--run-id", case.name])
    took = time.monotonic() - started

    errors = error_lines(output)
    assert code == 2, output
    assert len(errors) == 1, output
    for part in case.says:
        assert part in errors[0], f"{part!r} not in {errors[0]!r}"
    assert "Traceback" not in output, output
    assert took < WITHIN_SECONDS, f"took {took:.1f} s"
    assert tree_digest(warehouse) == before
    assert persisted_rdds(spark) == cached_before, "a failed run left data cached"


# --------------------------------------------------------------------------
# what must work
# --------------------------------------------------------------------------


def run_rows(spark, warehouse: Path, run_id: str) -> dict[str, dict]:
    """The run's metric rows, without what differs between runs of the same inputs."""
    rows = spark.read.parquet(str(warehouse / f"{DATABASE}.db" / "metric_results")).filter(f"run_id = '{run_id}'")
    varying = ("run_id", "started_at", "finished_at", "config_sha256")
    return {r["metric"]: {k: v for k, v in r.asDict().items() if k not in varying} for r in rows.collect()}


# (where the original is, the look-alike beside it that Spark's globbing would read instead or too)
LITERAL_PATHS = [
    ("orig[1].csv", "orig1.csv"),
    ("data*.csv", "data1.csv"),
    ("a{b,c}.csv", "ab.csv"),
    ("what?.csv", "whatX.csv"),
    ("fold[1]/part-0.csv", "fold1/part-0.csv"),
]


@pytest.mark.parametrize("real, look_alike", LITERAL_PATHS, ids=[p for p, _ in LITERAL_PATHS])
def test_glob_characters_in_a_path_name_it_literally(spark, seeded, real: str, look_alike: str):
    name = "literal_" + str(LITERAL_PATHS.index((real, look_alike)))
    path = real.split("/")[0]
    decoy = to_csv(S)  # the synthetic table as the original: every row reproduced, RDMP 0
    config = make_case(seeded, name, {"original": {"path": path, "format": "csv"}},
                       {real: to_csv(O), look_alike: decoy})
    code, output = run_in_process(spark, ["--config", str(config), "--run-id", name])
    assert code == 0, output
    assert run_rows(spark, seeded["warehouse"], name) == run_rows(spark, seeded["warehouse"], "seed")


@pytest.mark.slow
def test_a_literal_path_logs_no_stack_trace_through_spark_submit(seeded, monkeypatch):
    """Spark looks for a streaming sink's metadata under the escaped path taken literally
    and, not finding it, logged a warning with a ~90-line stack trace; the job's log
    configuration drops that warning for escaped paths (and the run reads the right file)."""
    config = make_case(seeded, "literal_submitted", {"original": {"path": "fold[1]/o[1].csv", "format": "csv"}},
                       {"fold[1]/o[1].csv": to_csv(O), "fold1/o1.csv": to_csv(S)})
    monkeypatch.chdir(ROOT)
    code, output = submit(["--config", str(config), "--run-id", "literal_submitted"],
                          spark_options=["--properties-file", "conf/spark/local.conf"])
    assert code == 0, output[-5000:]
    assert "FileStreamSink" not in output and "Exception" not in output, output[-5000:]
    assert "row_direct_match_protection" in output


def test_arrays_and_structs_are_compared(spark, seeded):
    """Nested types Spark can hash and group are compared like any column (a map is not:
    see map_column)."""
    scores = pa.array([[i, i + 1] for i in range(12)], type=pa.list_(pa.int64()))
    place = pa.array([{"zip": 1000 + i, "floor": i % 3} for i in range(12)])
    config = make_case(seeded, "nested", {"original": {"path": "o.parquet"}, "synthetic": {"path": "s.parquet"}},
                       {"o.parquet": parquet(O, scores=scores, place=place),
                        "s.parquet": parquet(S, scores=scores, place=place)})
    code, output = run_in_process(spark, ["--config", str(config), "--run-id", "nested"])
    assert code == 0, output
    columns = spark.read.parquet(str(seeded["warehouse"] / f"{DATABASE}.db" / "column_protection"))
    nested = {r["column_name"]: r["matches"] for r in columns.filter("run_id = 'nested'").collect()}
    assert nested["scores"] == 12 and nested["place"] == 12
