"""Unit tests run without a JVM: asking for the Spark session here is a mistake."""

import pytest


@pytest.fixture
def spark():
    pytest.fail("tests/unit runs without Spark; move a test that needs a session to tests/spark")
