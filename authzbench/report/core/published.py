"""Published figures: the reference report's (reference_figures.json), which the reference and validity
sections read, and the published load tests' (published_figures.json), which the tiers, capacity and load-test
sections read. Data files, not code: they quote documents, not the systems this suite runs. A helper, so that
no section imports another."""

from __future__ import annotations

import json
from functools import cache
from importlib import resources


@cache
def load_reference() -> dict:
    return json.loads(
        resources.files("authzbench.report.core").joinpath("reference_figures.json").read_text())


@cache
def load_published() -> dict:
    """The published load tests' figures (published_figures.json): "scale", the scale load test's tiers
    (its engine and datastore nodes, cache hit, T1/T2's results), and "loadtest", the Permify load test's
    summary."""
    return json.loads(
        resources.files("authzbench.report.core").joinpath("published_figures.json").read_text())
