"""Canary values planted in inputs, and the scanner that finds them in any output."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pyarrow.parquet as pq

CANARY_TEXT = "Zq7Canary-Vx31"
CANARY_NUMBER = 73.918273645
# What would betray the number in any rendering with 6 or more significant digits
# (73.918273645, 7.3918273645E1, 73.9183 would not: 6 digits at least).
CANARY_MARKS = (CANARY_TEXT, "918273")


def leaks(text: str, marks: Sequence[str] = CANARY_MARKS) -> list[str]:
    return [mark for mark in marks if mark in text]


def leaks_in_files(folder: Path, marks: Sequence[str] = CANARY_MARKS) -> dict[str, list[str]]:
    """Canaries in any file under `folder`: raw bytes, and Parquet read back as text
    (its pages may be compressed)."""
    found = {}
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        text = path.read_bytes().decode("utf-8", errors="replace")
        if path.suffix == ".parquet":
            text += str(pq.read_table(path).to_pylist())
        if leaks(text, marks):
            found[str(path.relative_to(folder))] = leaks(text, marks)
    return found
