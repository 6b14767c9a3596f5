"""Run ids are checked before any work: what Spark can store as a partition value and
read back unchanged, in a folder name the file system accepts (docs/interface.md,
"Command line"). Spark's escaping itself is compared with this copy of it in
tests/job/test_bad_inputs.py (test_run_id_escaping_matches_spark)."""

from __future__ import annotations

import re

import pytest

from privacy_eval.cli import main
from privacy_eval.errors import UserError
from privacy_eval.results import MAX_FOLDER_NAME_BYTES, check_run_id, partition_folder_name

AIRFLOW_RUN_ID = "manual__2026-11-29T12:34:15.676400+00:00"


def test_airflow_run_ids_escape_as_spark_names_their_folders():
    # the folder name test_results_atomicity reads back from a Spark-written table
    assert partition_folder_name(AIRFLOW_RUN_ID) == "run_id=manual__2026-11-29T12%3A34%3A15.676400+00%3A00"
    assert partition_folder_name("a/b=c%d 'e'") == "run_id=a%2Fb%3Dc%25d %27e%27"
    assert partition_folder_name("\u00e9t\u00e9") == "run_id=\u00e9t\u00e9"


@pytest.mark.parametrize(
    "run_id",
    [AIRFLOW_RUN_ID, "scheduled__2024-01-01T00:00:00+00:00", "r1", "a b", "\u00e9t\u00e9 \u4e2d", "x" * 248,
     ":" * 82 + "x", "null", "__HIVE_DEFAULT_PARTITION__x", "../etc"],
)
def test_accepted(run_id):
    check_run_id(run_id)


@pytest.mark.parametrize(
    "run_id, message",
    [
        ("", "--run-id must not be empty or blank (leave the option out for a new UUID)"),
        ("   ", "--run-id must not be empty or blank"),
        ("a\nb", "--run-id contains a control or invisible character (U+000A at position 2)"),
        ("a\rb", "U+000D at position 2"),
        ("\tab", "U+0009 at position 1"),
        ("a\x00", "U+0000 at position 2"),
        ("a\x1b[31m", "U+001B"),
        ("a\x7f", "U+007F"),
        ("a\x85", "U+0085"),  # NEL: str.splitlines() breaks on it
        ("a\u2028b", "U+2028"),  # line separator
        ("a\u202eb", "U+202E"),  # right-to-left override
        ("a\ufeff", "U+FEFF"),
        ("a\udcff", "U+DCFF"),  # an undecodable byte of the command line (surrogateescape)
        ("run\ufffd", "U+FFFD, the replacement character (position 4)"),  # the same byte after spark-submit
        ("__HIVE_DEFAULT_PARTITION__", "--run-id __HIVE_DEFAULT_PARTITION__ is reserved by Spark (it reads it back as null)"),
        ("x" * 249, "--run-id is too long: its partition folder name (run_id=<id>, UTF-8, with Spark's %XX escapes) "
                    "would be 256 bytes, at most 255"),
        ("x" * 10_000, "would be 10007 bytes"),
        (":" * 83, "would be 256 bytes"),  # 83 characters, 249 once escaped
        ("\u00e9" * 125, "would be 257 bytes"),  # 125 characters, 250 bytes in UTF-8
    ],
)
def test_refused(run_id, message):
    with pytest.raises(UserError, match=re.escape(message)):
        check_run_id(run_id, "--run-id")


def test_the_limit_is_the_folder_name_in_bytes():
    longest = "x" * (MAX_FOLDER_NAME_BYTES - len("run_id="))
    check_run_id(longest)
    with pytest.raises(UserError):
        check_run_id(longest + "x")


@pytest.mark.parametrize("run_id", ["", "a\nerror: injected", "y" * 10_000, "__HIVE_DEFAULT_PARTITION__"])
def test_the_command_line_refuses_before_reading_the_config(run_id, capsys, tmp_path):
    # The config does not exist: the run id is refused first, without Spark.
    code = main(["--config", str(tmp_path / "absent.yaml"), "--run-id", run_id])
    err = capsys.readouterr().err
    assert code == 2
    assert err.count("error:") == 1 and err.startswith("error: --run-id ")
    assert len(err.splitlines()) == 1 and "injected" not in err and "yyyy" not in err
