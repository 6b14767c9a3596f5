"""Text of the report: only numbers and names reach it.

`numeric_items` reads a details dict through a whitelist of keys and keeps the values
that are numbers; `code` and `line` make names safe inside Markdown tables. No
matplotlib here: the figures are plots.py.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any


def is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def numeric_items(details: Any, keys: Iterable[str]) -> list[tuple[str, str]]:
    """(key, formatted value) for the whitelisted keys whose value is a number; the rest is skipped."""
    if not isinstance(details, Mapping):
        return []
    return [(k, fmt(details[k])) for k in keys if is_number(details.get(k))]


def fmt(value: float | int, decimals: int | None = None) -> str:
    if isinstance(value, int):
        return str(value)
    if decimals is not None:
        return f"{value:.{decimals}f}"
    # Tiny random baselines and huge condition numbers stay readable in scientific notation.
    if value != 0 and not 1e-3 <= abs(value) < 1e6:
        return f"{value:.3e}"
    return f"{value:.4f}"


def line(text: str) -> str:
    """One line of Markdown table-safe text."""
    return " ".join(str(text).split()).replace("|", "\\|")


def code(name: str) -> str:
    """A name as a Markdown code span, whatever backticks or pipes it holds."""
    text = line(name)
    fence = "`" * (max((len(run) for run in re.findall("`+", text)), default=0) + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"
