"""Small original/synthetic tables for tests through the entry point."""

from __future__ import annotations

import pandas as pd


def base_frames() -> tuple[pd.DataFrame, pd.DataFrame]:
    """Twelve people and a noisy synthetic copy; every metric runs on them."""
    original = pd.DataFrame({
        "id": range(1, 13),
        "age": [23, 35, 47, 52, 61, 29, 33, 41, 58, 66, 38, 44],
        "weight": [61.5, 72.0, 80.25, 55.0, 90.5, 68.0, 77.75, 59.0, 83.0, 71.5, 64.0, 88.0],
        "city": ["Lyon", "Nantes", "Paris", "Lille", "Lyon", "Brest",
                 "Paris", "Nice", "Metz", "Lyon", "Caen", "Dijon"],
        "group": [1, 2] * 6,
        "unit": [1] * 12,
    })
    synthetic = original.copy()
    synthetic["age"] = original["age"] + [1, 0, -2, 0, 3, 0, -1, 0, 2, 0, 1, 0]
    synthetic["weight"] = original["weight"] + [0.5, 0.0, -1.0, 2.0, 0.0, -0.5, 1.5, 0.0, 0.0, 1.0, -2.0, 0.25]
    return original, synthetic


def to_csv(frame: pd.DataFrame, sep: str = ",") -> str:
    return frame.to_csv(index=False, sep=sep)
