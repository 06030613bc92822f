"""`bench --profiles`: the same scenarios at each size, and the report's "How cost grows with size"."""

from __future__ import annotations

import numpy as np
import pytest

from authzbench.config import BenchConfig
from authzbench.report import render
from authzbench.report.data import load_run
from authzbench.report.sweep import size_table, slope, sweep_runs
from authzbench.run.sweep import run_sweep
from tests.unit.test_cli import authzbench


@pytest.mark.parametrize("args,message", [
    (["--profiles", "tiny"], "two or more distinct profiles"),
    (["--profiles", "tiny,huge"], "unknown profile 'huge'"),
    (["--scale", "1,7"], "--scale '7' is not a known multiple"),
    (["--scale", "1,10", "--profiles", "tiny,baseline"], "not both"),
])
def test_bad_sweep_sizes_are_one_line_and_exit_code_2(tmp_path, args, message):
    r = authzbench("bench", "--backend", "reference", *args, "--no-report", cwd=tmp_path)
    assert r.returncode == 2 and message in r.stderr.strip().splitlines()[-1] and "Traceback" not in r.stderr


def test_slope_is_the_exponent_of_a_power_law():
    sizes = np.array([1e3, 1e4, 1e5])
    assert slope(sizes, 3 * sizes ** 1.5) == pytest.approx(1.5)
    assert slope(sizes, np.array([2.0, 2.0, 2.0])) == pytest.approx(0.0)
    assert slope(sizes[:1], np.array([1.0])) is None  # one size: no slope


def test_a_sweep_runs_each_size_and_the_last_report_shows_growth_with_size(tmp_path):
    cfg = BenchConfig.of(backends=["reference"], provision="native", concurrency=[1], iterations_scale=0.05,
                         scenarios=["check_manage_direct_user", "lookup_resources_manage_super"],
                         data_dir=tmp_path / "data")
    reports = []
    failures = run_sweep(cfg, ["tiny", "baseline"], tmp_path / "results",
                         lambda run: reports.append(render(run, tmp_path / "r")) or reports[-1])
    assert failures == [] and len(reports) == 2
    first, last = (r.read_text() for r in reports)
    assert "How cost grows with size" not in first  # one size so far: nothing to fit
    assert "## How cost grows with size" in last
    runs = sweep_runs(load_run(sorted((tmp_path / "results").iterdir())[-1]))
    assert [r.manifest["dataset"]["profile"] for r in runs] == ["tiny", "baseline"]
    df = size_table(runs)
    assert len(df) == 2 and (df["check_p95_ms"] > 0).all() and (df["lookup_p95_ms"] > 0).all()
    assert (df["ingest_s"] > 0).all() and "reference" in last and "size^" in last
    assert "two-point slope, no interval" in last  # two sizes: a slope without an interval
    assert "scaling-ingest_s.png" in last and list((tmp_path / "r").glob("*-charts/scaling-ingest_s.png"))
    for run in runs:  # each size starts its servers and stops them: the next size never drops a bigger load
        steps = [r["step"] for r in run.records if r["type"] == "step" and r["backend"] == "reference"
                 and r["step"] != "speed index"]  # measured before the visit's servers start
        assert steps[0] == "start" and steps[-1] == "stop", steps


def test_a_size_row_without_a_note_leaves_the_note_cell_empty():
    import pandas as pd

    from authzbench.report.scaling import _note

    df = pd.DataFrame([{"backend": "a", "note": "load stopped at the bound (30 min)"}, {"backend": "b"}])
    assert [_note(r) for _, r in df.iterrows()] == ["load stopped at the bound (30 min)", ""]
