"""A churn step's check p95 judged by its interval (issue 67, item 8): within the SLO the step holds, over
it it fails, across it it is undecided; the sustainable churn names the undecided steps with their
interval, and the steps that held are ranked figures in the JSON and the appendix's ranked-figure list. On
fixture records."""

from __future__ import annotations

import json
import re

import numpy as np

from authzbench.report import churn, digest, dimensions, workloads
from authzbench.workloads.churn import FAILED, HELD, UNDECIDED, Step, judged
from tests.unit.test_report_churn import _phase, skipped
from tests.unit.test_report_findings import NET, Run

SLO = 25.0
P95 = r"check p95 [0-9.]+ ms \[[0-9.]+-[0-9.]+\]"  # a figure and its interval as num prints them


def _step(**kw) -> Step:
    return Step(**{**dict(read_p95_ms=24.0, scheduled=60, late=0, never_visible=0, lag_p95_s=0.01), **kw})


def test_a_step_whose_p95_interval_lies_across_the_slo_is_undecided():
    state, why = judged(_step(), SLO, (20.5, 27.5))
    assert state == UNDECIDED and why == "check p95 24 ms [20.5-27.5] against the 25 ms SLO"
    # the p95 alone over the SLO (the sweep stopped there) decides no more than one under it
    assert judged(_step(read_p95_ms=26.0), SLO, (22.0, 31.0))[0] == UNDECIDED


def test_a_step_whose_p95_interval_is_entirely_within_the_slo_holds():
    assert judged(_step(), SLO, (21.0, 24.9)) == (HELD, "")
    # a p95 at the SLO meets it (the rule fails over it)
    assert judged(_step(), SLO, (21.0, 25.0)) == (HELD, "")


def test_a_step_whose_p95_interval_is_entirely_over_the_slo_fails_and_says_so_with_the_interval():
    assert judged(_step(read_p95_ms=30.0), SLO, (25.1, 36.0)) == (
        FAILED, "check p95 30 ms [25.1-36] over the 25 ms SLO")


def test_an_undecided_read_does_not_save_a_step_whose_writers_fell_behind():
    state, why = judged(_step(late=7), SLO, (20.5, 27.5))
    assert state == FAILED and why.startswith("writes fell behind: 7 of 60")


def test_without_an_interval_the_p95_alone_decides_as_the_sweep_does():
    assert judged(_step(), SLO, None) == (HELD, "")
    assert judged(_step(read_p95_ms=26.0), SLO, None)[0] == FAILED


# fixture runs -----------------------------------------------------------------------------------------

def _tailed(p95_ms: float) -> list[float]:
    """600 checks: 540 at 5 ms and 60 spread evenly over p95_ms ± 10 ms, so the p95 (rank 570) is within 0.2
    ms of p95_ms and its order-statistics interval (ranks 570 ± 10.4) spans about ±3.5 ms: at 24 or 26 ms it
    lies across a 25 ms SLO, at 12 or 40 ms it does not."""
    return [5.0] * 540 + list(np.linspace(p95_ms - 10.0, p95_ms + 10.0, 60))


def _step_of(run: Run, b: str, rate: float, checks: list[float]) -> Run:
    changes = max(1, int(rate * 6))
    extra = {"scheduled": changes, "unissued": 0, "revocations": 0, "stale_allows": 0}
    start = {
        "mode": "open", "concurrency": 8, "stages": [[100.0, 6.0]], "churn_rate": rate, "churn_writers": 2}
    return _phase(run, b, "churn", f"{b}/churn/open8@100+churn{rate:g}/r0", start,
                  [("check", checks, {}), ("write", [5.0] * changes, {"extra": extra}),
                   ("visibility", [1.0] * changes, {})])


def _sweep(last_p95: float, at: float = 100.0) -> Run:
    """postgres holds every step clearly; openfga holds clearly below `at`, whose checks' p95 is last_p95 with
    an interval about ±3.5 ms wide; steps above a p95 over the SLO are skipped, as the sweep does."""
    run = Run().server("postgres", NET).server("openfga", NET)
    for rate in churn.CHURN_RATES:
        _step_of(run, "postgres", rate, [1.0] * 600)
        if rate < at:
            _step_of(run, "openfga", rate, [8.0] * 600)
        elif rate == at:
            _step_of(run, "openfga", rate, _tailed(last_p95))
        elif last_p95 > SLO:
            skipped(run, "openfga", rate)
    return run


def test_the_sustainable_churn_names_the_undecided_step_with_its_interval():
    rd = _sweep(24.0).data()
    df = churn.steps(rd)
    step = df[(df["backend"] == "openfga") & (df["rate"] == 100.0)].iloc[0]
    lo, hi = step["read_iv"]
    assert step["state"] == UNDECIDED and not step["held"] and lo <= SLO < hi
    sus = churn.sustainable(rd, df)["openfga"]
    assert (sus.held, sus.failed, [r for r, _ in sus.undecided]) == (10.0, None, [100.0])
    assert re.fullmatch(rf"held 10/s, 100/s undecided \({P95} against the 25 ms SLO\)", sus.text)
    assert churn.sustainable(rd, df)["postgres"].text == "at least 100/s"


def test_the_same_step_entirely_under_or_over_the_slo_holds_or_fails():
    assert churn.sustainable(_sweep(12.0).data())["openfga"].text == "at least 100/s"
    over = churn.sustainable(_sweep(40.0).data())["openfga"]
    assert over.text == "10/s, below 100/s" and re.fullmatch(rf"{P95} over the 25 ms SLO", over.reason)


def test_a_step_skipped_after_an_undecided_stop_is_not_counted_as_failed():
    rd = _sweep(26.0, at=10.0).data()
    df = churn.steps(rd).set_index(["backend", "rate"])
    assert df.loc[("openfga", 10.0), "state"] == UNDECIDED
    assert df.loc[("openfga", 100.0), "verdict"].startswith("not run: the sweep stopped at the 10/s step")
    sus = churn.sustainable(rd)["openfga"]
    assert (sus.held, sus.failed) == (1.0, None)
    assert re.fullmatch(rf"held 1/s, 10/s undecided \({P95} against the 25 ms SLO\)", sus.text)


def test_the_workload_row_lists_an_undecided_backend_apart_from_those_that_met_it():
    rd = _sweep(24.0).data()
    row = {w: b for w, _, b in workloads.rows(rd, dimensions.compute(rd))}[
        "Membership churn of 100 changes/s"]
    assert re.fullmatch(r"postgres 1 ms \(a\); undecided \(check p95 interval across the SLO\): "
                        r"openfga [0-9.]+ ms \[[0-9.]+-[0-9.]+\]", row)


def test_the_held_steps_are_ranked_figures_with_their_interval_and_the_json_gives_the_deciding_steps(
    tmp_path):
    rd = _sweep(24.0).data()
    figs = [f for f in digest.figure_records(rd) if f["dimension"] == "churn_p95/100"]
    assert [f["backend"] for f in figs] == ["postgres"]  # the undecided step meets nothing: not ranked
    assert figs[0]["letters"] == "a" and figs[0]["interval"][0] <= figs[0]["value"] <= figs[0]["interval"][1]
    assert {f["backend"] for f in digest.figure_records(rd) if f["dimension"] == "churn_p95/10"} == {
        "postgres", "openfga"}
    digest.write_json(rd, tmp_path / "x.json")
    got = {r["backend"]: r for r in json.loads((tmp_path / "x.json").read_text())["sustainable_churn"]}
    steps = got["openfga"]["deciding_steps"]
    assert got["openfga"]["undecided_per_s"] == [100.0] and [s["state"] for s in steps] == [HELD, UNDECIDED]
    lo, hi = steps[1]["interval_ms"]
    assert lo <= SLO < hi and steps[1]["checks"] == 600
