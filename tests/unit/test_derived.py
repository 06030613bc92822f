"""report.data.derived: a table derived from a run is computed once, and again when the run's frames
change."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from authzbench.report.core.data import RunData, derived


def test_a_derived_table_is_computed_once_per_run_and_again_for_a_view_with_other_phases():
    rd = RunData(Path("fixture"), {}, [])
    calls: list[int] = []

    def make() -> int:
        calls.append(1)
        return len(calls)

    assert derived(rd, "t", make) == 1 == derived(rd, "t", make)
    rd.phases = pd.DataFrame({"x": [1]})  # a view of the run: its own table
    assert derived(rd, "t", make) == 2 and derived(rd, "other", make) == 3 and len(calls) == 3
