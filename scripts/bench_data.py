"""The seeded original/synthetic pair the exact-metrics benchmarks read: the property
test's generator (tests/support/datagen.py), so that both measure the same data,
written as Parquet and kept in the data folder for the next run."""

from __future__ import annotations

import argparse
from pathlib import Path

from measure import timed

from tests.support import datagen

COLUMNS = datagen.COLUMNS
KNOWN = datagen.KNOWN
NUMERIC = datagen.NUMERIC


# Above this many rows per side the data is generated and written in parts of this size
# (seed + part number, keys offset), so that 1e8 rows never sit in pandas at once.
PART_ROWS = 10_000_000


def generate(rows: int, seed: int, folder: Path) -> tuple[Path, Path]:
    """Parquet files of `rows` rows per side; above PART_ROWS, a folder of part files
    per side (duplicates and leaks then fall within a part: the counts differ from a
    one-piece generation, and every engine reads the same parts)."""
    folder.mkdir(parents=True, exist_ok=True)
    original_path, synthetic_path = folder / f"original-{rows}-{seed}.parquet", folder / f"synthetic-{rows}-{seed}.parquet"
    if original_path.exists() and synthetic_path.exists():
        return original_path, synthetic_path
    if rows <= PART_ROWS:
        original, synthetic = datagen.generate(rows, seed)
        original.to_parquet(original_path, index=False)
        synthetic.to_parquet(synthetic_path, index=False)
        return original_path, synthetic_path
    for path in (original_path, synthetic_path):
        path.mkdir()
    for part, start in enumerate(range(0, rows, PART_ROWS)):
        original, synthetic = datagen.generate(min(PART_ROWS, rows - start), seed + part)
        for frame, path in ((original, original_path), (synthetic, synthetic_path)):
            frame["id"] += start
            frame.to_parquet(path / f"part-{part:05d}.parquet", index=False)
    return original_path, synthetic_path


def parquet_glob(path: Path) -> str:
    """What DuckDB's read_parquet needs for a file or a folder of parts."""
    return str(path / "*.parquet") if path.is_dir() else str(path)


def generated(args: argparse.Namespace) -> tuple[Path, Path]:
    """The pair of `--rows`, `--seed` in `--data` (generated unless already there), with
    a line saying so."""
    paths, seconds = timed(lambda: generate(args.rows, args.seed, Path(args.data)))
    print(f"data: {args.rows:,} rows per side, seed {args.seed}, generated/cached in {seconds:.1f} s")
    return paths
