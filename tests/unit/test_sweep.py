"""`bench --profiles`: the same scenarios at each size, and the report's "How cost grows with size"."""

from __future__ import annotations

import json
import math
import time
from types import SimpleNamespace

import numpy as np
import pytest

from authzbench.config import BenchConfig
from authzbench.core.records import Step
from authzbench.report import render
from authzbench.report.core.data import load_run, sweep_runs
from authzbench.report.sweep.runs import size_table, slope
from authzbench.run.loading import LoadBound, LoadTooSlow
from authzbench.run.sweep import SizeTime, approx_size, run_sweep, size_time, sweep_eta
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
    assert "answers, 0 mismatches)" in last and "Wrong answers" not in last  # every size checked, all right
    assert "two-point slope, no interval" in last  # two sizes: a slope without an interval
    assert "scaling-ingest_s.png" in last and list((tmp_path / "r").glob("*-charts/scaling-ingest_s.png"))
    for run in runs:  # each size starts its servers and stops them: the next size never drops a bigger load
        steps = [r.step for r in run.records if isinstance(r, Step) and r.backend == "reference"
                 and r.step != "speed index"]  # measured before the visit's servers start
        assert steps[0] == "start" and steps[-1] == "stop", steps


def test_a_size_row_without_a_note_leaves_the_note_cell_empty():
    import pandas as pd

    from authzbench.report.sweep.scaling import _note

    df = pd.DataFrame([{"backend": "a", "note": "load stopped at the bound (30 min)"}, {"backend": "b"}])
    assert [_note(r) for _, r in df.iterrows()] == ["load stopped at the bound (30 min)", ""]


def test_no_sweep_estimate_is_given_before_a_size_has_finished():
    assert (sweep_eta(["tiny", "baseline"], 0, [], [2_500, 400_000], 0.0, 600.0)
            == "size sweep: 1/2 sizes (tiny), 0 min elapsed")


def test_the_sweep_estimate_repeats_the_last_sizes_phases_and_grows_its_loads_by_the_sizes_ratio():
    last = SizeTime(wall_s=600.0, loads={"a": 20.0, "b": 40.0})  # 540 s of phases
    text = sweep_eta(["s", "m", "l"], 1, [last], [1_000, 10_000, 20_000], 900.0, 3_600.0)
    # m: 540 s of phases + (20 + 40) x 10 of loads; l: 540 s + 60 x 20: 1,080 s of phases, 1,800 s of loads
    assert text == (
        "size sweep: 2/3 sizes (m), 15 min elapsed, ~48 min left: ~18 min of phases as long as the "
        "last size's, ~30 min of loads at its rates")


def test_a_load_the_bound_will_stop_is_estimated_at_the_time_it_runs_before_it_is_stopped():
    assert LoadBound.expected_s(500.0, 600.0) == 500.0  # inside the bound: as projected
    assert LoadBound.expected_s(640.0, 600.0) == 600.0  # up to 1.1x: it runs until the bound
    assert LoadBound.expected_s(6_000.0, 600.0) == 30.0  # well past: stopped once its rate is known
    assert LoadBound.expected_s(6_000.0, 120.0) == 12.0  # a short bound judges sooner


def test_a_finished_size_counts_each_backends_load_steps_and_leaves_the_rest_to_phases():
    recs = [{"type": "step", "backend": "a", "step": "load", "seconds": 5.0},
            {"type": "step", "backend": "a", "step": "start", "seconds": 3.0},
            {"type": "step", "backend": "b", "step": "load", "seconds": 7.0},
            {"type": "check", "backend": "a"}]
    t = size_time(recs, 100.0)
    assert t.loads == {"a": 5.0, "b": 7.0} and t.phases_s == 88.0


@pytest.mark.parametrize("profile", ["tiny", "baseline"])
def test_the_approximate_size_is_within_five_percent_of_what_the_generator_emits(tmp_path, profile):
    from authzbench.generator import obtain

    ds = obtain("rebac", profile, {}, tmp_path)
    cfg = BenchConfig.of(backends=["reference"], provision="native", data_dir=tmp_path)
    assert approx_size(cfg, profile) == pytest.approx(ds.total_relationships, rel=0.05)


def test_a_wrong_answer_at_any_size_is_named_in_bold_in_the_sweeps_last_report():
    import pandas as pd

    from authzbench.report.sweep.runs import answers_line, mismatch_lines

    def run(profile, rows):
        return SimpleNamespace(manifest={"dataset": {"profile": profile}}, servers={"b": {}},
                               kind=lambda b: "embedded" if b == "b" else "server",
                               phases=pd.DataFrame(rows, columns=["backend", "checked", "mismatches"]))

    runs = [run("tiny", [("a", 100, 0), ("b", 50, 3)]), run("baseline", [("a", 80, 0), ("b", 40, 0)])]
    # marked
    assert mismatch_lines(runs)[0].startswith("**Wrong answers at some size of the sweep: `tiny` b † 3**")
    assert answers_line(runs[0]) == "150 answers, 3 mismatches"
    assert mismatch_lines(runs[1:]) == []
    # a shape sweep names its point
    assert mismatch_lines(runs, lambda r: "`depth=4`", "point")[0].startswith(
        "**Wrong answers at some point of the sweep: `depth=4` b † 3** (each in its point's run")


def test_a_load_is_stopped_when_the_machines_memory_falls_under_the_floor_even_during_its_set_up():
    left = [(8 * 2**30, 16 * 2**30), (2 * 2**30, 16 * 2**30)]  # half free, then 12.5% (under the 15% floor)
    bound = LoadBound("es", 1_000, 600.0, memory=lambda: left.pop(0))
    bound(0)  # a set-up heartbeat, memory fine: no rate yet, nothing stopped
    assert bound.first is None
    bound.memory_at = -1e9  # the next read is due
    with pytest.raises(
        LoadTooSlow, match=r"2\.0 of 16\.0 GiB of memory left, under the 15% floor") as stopped:
        bound(0)
    assert stopped.value.figures["memory_left_bytes"] == 2 * 2**30 and stopped.value.figures["loaded"] == 0


def test_a_set_up_heartbeat_does_not_start_the_rate_and_the_time_bound_still_stops_it():
    bound = LoadBound("es", 1_000, 0.05, memory=lambda: (1, 1))
    bound(0)
    time.sleep(0.06)
    with pytest.raises(LoadTooSlow, match="load stopped after 0 s at 0 of 1,000"):
        bound(0)
    assert bound.first is None


def test_a_load_stopped_by_memory_is_named_so_in_the_sweep_table():
    from dataclasses import replace

    from authzbench.core.records import IngestBounded
    from authzbench.report.sweep.runs import _bounded_note

    x = IngestBounded(backend="mongo", variant=None, dataset_hash="h", loaded=0, relationships=10**6,
                      seconds=240.0, rels_per_s=0.0, projected_seconds=math.inf, bound_seconds=600.0,
                      memory_left_bytes=3 * 2**30)
    assert _bounded_note(x) == ("load stopped after 4.0 min with 3.0 GiB of the machine's memory left: "
                                "before its first relationship")
    assert (_bounded_note(replace(x, memory_left_bytes=None, rels_per_s=46_000.0, projected_seconds=858.0))
            == "load stopped at the bound (10 min): 46,000/s, projected 14.3 min")


def test_a_sweep_extended_by_one_more_run_reports_the_backends_that_run_added_beside_the_earlier_sizes(
    tmp_path):
    from authzbench.run.sweep import extend_sweep

    results, scen = tmp_path / "results", ["check_manage_direct_user", "lookup_resources_manage_super"]
    cfg = BenchConfig.of(backends=["reference"], provision="native", concurrency=[1], iterations_scale=0.05,
                         scenarios=scen, data_dir=tmp_path / "data")
    assert run_sweep(cfg, ["tiny", "baseline"], results, None) == []
    last = sorted(results.iterdir())[-1]
    more = BenchConfig.of(backends=["clickhouse"], provision="native", concurrency=[1], iterations_scale=0.05,
                          scenarios=scen, data_dir=tmp_path / "data", profile="baseline")
    report = []
    assert (
        extend_sweep(more, last, lambda run: report.append(render(run, tmp_path / "r")) or report[-1]) == [])
    added = sorted(results.iterdir())[-1]
    runs = sweep_runs(load_run(added))
    assert [r.path.name for r in runs] == [*load_run(last).manifest["sweep"]["runs"], added.name]
    df = size_table(runs)
    assert sorted(zip(df["backend"], df["profile"], strict=True)) == [
        ("clickhouse", "baseline"), ("reference", "baseline"), ("reference", "tiny")]
    assert "## How cost grows with size" in report[0].read_text()


@pytest.mark.parametrize("make, message", [
    (lambda d: None, "no run manifest there"),
    (lambda d: (d / "manifest.json").write_text('{"run_id": "x"}'), "not the last run of a size sweep"),
    (lambda d: (d / "manifest.json").write_text(json.dumps({"sweep": {"runs": ["gone", d.name]}})),
     "the sweep's run gone is not beside it"),
])
def test_extending_what_is_not_a_sweeps_last_run_is_one_line_and_exit_code_2(tmp_path, make, message):
    run = tmp_path / "results" / "20260101-000000"
    run.mkdir(parents=True)
    make(run)
    r = authzbench("bench", "--backend", "reference", "--extend-sweep", str(run), "--no-report", cwd=tmp_path)
    assert r.returncode == 2 and message in r.stderr.strip().splitlines()[-1] and "Traceback" not in r.stderr
