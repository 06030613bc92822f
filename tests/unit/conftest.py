"""Unit-suite fixtures."""

from __future__ import annotations

from functools import partial
from types import SimpleNamespace

import pytest

from authzbench.core import speed
from authzbench.run import orchestrate


@pytest.fixture(autouse=True)
def quick_speed_index(monkeypatch):
    """bench measures the machine-speed index at every backend visit (2.2-2.9 s); the harness tests need only
    its record, so bench runs the same workload cut to one CPU unit and 20 round trips
    (tests/unit/test_speed_index.py measures the full one)."""
    monkeypatch.setattr(
        orchestrate, "speed", SimpleNamespace(measure=partial(speed.measure, repeats=1, samples=20)))
