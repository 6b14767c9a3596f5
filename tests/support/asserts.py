"""Comparisons shared by tests."""

from __future__ import annotations

import pytest


def assert_same(a, b, path="details"):
    """Recursive equality: ints, strings and bools exactly, floats to 1e-12 relative."""
    if isinstance(a, dict):
        assert isinstance(b, dict) and a.keys() == b.keys(), path
        for k in a:
            assert_same(a[k], b[k], f"{path}.{k}")
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b)):
            assert_same(x, y, f"{path}[{i}]")
    elif isinstance(a, float) and isinstance(b, float):
        assert a == pytest.approx(b, rel=1e-12, abs=1e-300), path
    else:
        assert a == b, path
