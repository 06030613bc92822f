"""The operating envelope in the report (issue 53), on fixture records: a churn sweep whose reads slow with
the churn rate, revocations at 8 writers that still allowed, each engine's consistency modes, and the workload
rows built from them; an older run without any of it renders none of it."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from authzbench.core.metrics import encode, new_histogram
from authzbench.report import (
    churn,
    decision,
    digest,
    dimensions,
    freshness,
    workloads,
)
from authzbench.report.document import render
from tests.unit.test_report_findings import CASS, CHDB, NET, Run, steady

SPICE = {"label": "SpiceDB 1.56.2 on PostgreSQL", "version": "1.56.2", "comparable": True, "notes": [],
         "consistency": "minimize_latency"}


def _hist(values_ms: list[float]) -> str:
    h = new_histogram()
    for ms in values_ms:
        h.record_value(max(1, int(ms * 1000)))
    return encode(h)


def _interval(pid: str, b: str, scenario: str, kind: str, lat: list[float], ts: float, **kw) -> dict:
    return {
        "type": "interval", "phase": pid, "backend": b, "scenario": scenario, "worker": 0, "kind": kind,
        "hist": _hist(lat), "ops": len(lat), "errors": kw.get("errors", {}), "timeouts": 0, "mismatches": 0,
        "examples": [], "results": 0, "duplicates": 0, "checked": len(lat), "late": kw.get("late", 0),
        "ts": ts, "extra": kw.get("extra")}


def _phase(run: Run, b: str, scenario: str, pid: str, start: dict, intervals: list[tuple]) -> Run:
    t0 = run.t
    run.t += 20
    run.recs.append({"type": "phase_start", "phase": pid, "backend": b, "scenario": scenario, "ts": t0,
                     "iterations": 0, "budget_s": None, "repeat": 0, **start})
    run.recs += [_interval(pid, b, scenario, kind, lat, t0 + 1, **kw) for kind, lat, kw in intervals]
    run.recs.append(
        {"type": "phase_end", "phase": pid, "backend": b, "scenario": scenario, "status": "complete",
         "reason": "", "wall_s": 6.0, "scheduled": None, "dropped": 0, "warmup_ops": 0, "ops": 1})
    return run


def churn_step(run: Run, b: str, rate: float, read_ms: float, late: int = 0, stale: int = 0,
               lag_ms: float = 50.0) -> Run:
    """One churn step: 600 checks at read_ms, rate x 6 s changes each visible after lag_ms."""
    changes = max(1, int(rate * 6))
    extra = {"scheduled": changes, "unissued": 0, "revocations": changes // 5, "stale_allows": stale,
             "stale_reads": 0, "rows": changes, "rows_counted": changes}
    start = {
        "mode": "open", "concurrency": 8, "stages": [[100.0, 6.0]], "churn_rate": rate, "churn_writers": 4}
    return _phase(run, b, "churn", f"{b}/churn/open8@100+churn{rate:g}/r0", start, [
        ("check", [read_ms * (1 + 0.01 * (i % 3 - 1)) for i in range(600)], {}),
        ("write", [5.0] * changes, {"late": late, "extra": extra}),
        ("visibility", [lag_ms] * changes, {})])


def skipped(run: Run, b: str, rate: float) -> Run:
    run.recs.append(
        {"type": "phase_skipped", "phase": f"{b}/churn/open8@100+churn{rate:g}/r0", "backend": b,
         "scenario": "churn", "concurrency": 8, "repeat": 0, "reason": "a lower step did not hold"})
    return run


def revocations(run: Run, b: str, mode: str, n: int, stale: int, recorded: bool = True) -> Run:
    extra = {"stale_allows": stale, **({"revocations": n} if recorded else {})}
    start = {"mode": "closed", "concurrency": 8, "stages": [], "consistency": mode}
    return _phase(run, b, "revoke_then_check", f"{b}/revoke_then_check@{mode}/c8/r0", start, [
        ("write", [8.0] * n, {"extra": extra}), ("visibility", [3.0] * n, {})])


def sweep(slowing: dict[str, float]) -> Run:
    """Each backend's check p95 = 2 ms + slope x churn rate; the sweep stops at the first step over the 25 ms
    SLO, as the run does, recording the steps above it as skipped."""
    run = Run()
    for b, info in (("postgres", NET), ("scylla", CASS), ("spicedb-pg", SPICE)):
        run.server(b, info)
    for b, slope in slowing.items():
        failed = False
        for rate in churn.CHURN_RATES:
            if failed:
                skipped(run, b, rate)
                continue
            churn_step(run, b, rate, 2.0 + slope * rate)
            failed = 2.0 + slope * rate > 25.0
    return run


SLOWING = {"postgres": 0.01, "scylla": 0.3, "spicedb-pg": 30.0}


def test_reads_that_slow_with_churn_give_the_highest_held_rate_and_the_first_failed_one():
    sus = churn.sustainable(sweep(SLOWING).data())
    assert sus["postgres"].text == "at least 100/s"
    assert (sus["scylla"].held, sus["scylla"].failed, sus["scylla"].text) == (
        10.0, 100.0, "10/s, below 100/s")
    assert "over the 25 ms SLO" in sus["scylla"].reason
    assert sus["spicedb-pg"].held is None and sus["spicedb-pg"].text == "under 1/s"


def test_a_step_skipped_after_a_failed_one_names_that_step_and_leaves_the_figure_to_its_row():
    df = churn.steps(sweep(SLOWING).data())
    spice = df[df["backend"] == "spicedb-pg"].set_index("rate")["verdict"]
    assert spice[1.0].startswith("check p95 ") and "over the 25 ms SLO" in spice[1.0]
    assert spice[10.0] == spice[100.0] == "not run: the 1/s step did not hold"
    assert churn.sustainable(sweep(SLOWING).data())["spicedb-pg"].reason == spice[1.0]


def test_a_steeper_slowdown_lowers_the_sustainable_churn():
    assert churn.sustainable(sweep({"scylla": 3.0}).data())["scylla"].text == "1/s, below 10/s"


def test_writers_falling_behind_fail_a_step_whose_reads_held():
    rd = churn_step(Run().server("postgres", NET), "postgres", 10.0, 2.0, late=30).data()
    step = churn.steps(rd).iloc[0]
    assert not step["held"] and step["verdict"].startswith("writes fell behind: 30 of 60")


def test_a_change_visible_after_the_freshness_bound_fails_the_step():
    rd = churn_step(Run().server("postgres", NET), "postgres", 1.0, 2.0, lag_ms=12_000).data()
    assert churn.steps(rd).iloc[0]["verdict"].startswith("visibility lag p95")


def test_sustainable_churn_is_in_the_summary_and_the_json(tmp_path):
    rd = sweep(SLOWING).data()
    text = "\n".join(churn.summary_lines(rd, tmp_path))
    assert text.index("postgres at least 100/s") < text.index("scylla 10/s, below 100/s") < \
        text.index("spicedb-pg under 1/s")
    assert "churn.png" in text
    digest.write_json(rd, tmp_path / "x.json")
    got = {r["backend"]: r for r in json.loads((tmp_path / "x.json").read_text())["sustainable_churn"]}
    assert got["scylla"]["held_per_s"] == 10.0 and got["scylla"]["failed_per_s"] == 100.0


def test_no_stale_allow_has_a_lower_bound_of_exactly_zero_and_all_stale_an_upper_bound_of_exactly_one():
    # in floats the Wilson lower bound at 0 of 94 came out 3.47e-15, printed "95% 3.47e-15-39.3"
    assert all(freshness.wilson(0, n)[0] == 0.0 and freshness.wilson(n, n)[1] == 1.0 for n in range(1, 2001))


def test_wilson_interval_matches_the_published_values():
    lo, hi = freshness.wilson(0, 10)
    assert lo == 0.0 and hi == pytest.approx(0.2775, abs=1e-4)
    assert freshness.wilson(5, 10) == pytest.approx((0.2366, 0.7634), abs=1e-4)
    assert all(math.isnan(x) for x in freshness.wilson(0, 0))


def test_allows_after_revocation_are_counted_per_thousand_with_their_interval():
    run = Run().server("spicedb-pg", SPICE)
    revocations(run, "spicedb-pg", "fully_consistent", 800, 9)
    revocations(run, "spicedb-pg", "", 800, 0)
    df = freshness.revocations(run.data()).set_index("mode")
    strict = df.loc["fully_consistent"]
    assert strict["per_1k"] == pytest.approx(11.25) and strict["lo_1k"] < 11.25 < strict["hi_1k"]
    assert df.loc["minimize_latency (session)"]["stale_allows"] == 0
    assert (1000 * freshness.wilson(9, 800)[1]) == pytest.approx(strict["hi_1k"])


def test_a_stale_allow_under_a_fully_consistent_mode_cites_the_reproduction_and_upstream():
    run = Run().server("spicedb-pg", SPICE)
    lines = "\n".join(
        freshness.summary_lines(revocations(run, "spicedb-pg", "fully_consistent", 800, 9).data()))
    assert "tools/newenemy_repro.py" in lines and "https://github.com/authzed/spicedb/issues/1215" in lines
    clean = Run().server("spicedb-pg", SPICE)
    assert "newenemy" not in "\n".join(freshness.summary_lines(
        revocations(clean, "spicedb-pg", "fully_consistent", 800, 0).data()))


def test_a_backend_whose_revocations_at_8_writers_were_not_run_is_named_with_the_reason():
    run = revocations(Run().server("postgres", NET).server("scylla", CASS), "postgres", "", 200, 0)
    run.recs.append({"type": "phase_skipped", "phase": "scylla/revoke_then_check/c8/r0", "backend": "scylla",
                     "scenario": "revoke_then_check", "concurrency": 8, "repeat": 0,
                     "reason": "at 1 writer the phase took 29 s for its 3 s budget"})
    lines = freshness.summary_lines(run.data())
    assert lines[0].startswith("**Stale allows per 1,000 revocations, 8 concurrent writers, per mode**")
    assert "scylla" not in lines[0]
    assert (lines[1].startswith("Not run at 8 writers, scylla")
            and ": at 1 writer the phase took 29 s" in lines[1])


def test_an_older_record_without_a_revocation_count_counts_every_op():
    run = revocations(Run().server("postgres", NET), "postgres", "", 40, 1, recorded=False)
    assert freshness.revocations(run.data()).iloc[0]["revocations"] == 40


def _rows(run: Run) -> dict[str, str]:
    rd = run.data()
    return {w: b for w, _, b in workloads.rows(rd, dimensions.compute(rd))}


def test_workload_rows_list_the_backends_that_meet_them_best_first():
    run = sweep(SLOWING)
    revocations(run, "postgres", "", 400, 0)
    revocations(run, "scylla", "", 4000, 0)
    revocations(run, "spicedb-pg", "fully_consistent", 800, 9)
    rows = _rows(run)
    assert rows["Membership churn of 10 changes/s"].startswith("postgres 2.12 ms (a), scylla 5.05 ms (b)")
    assert "spicedb" not in rows["Membership churn of 1 change/s"]
    assert rows["Membership churn of 100 changes/s"] == "postgres 3.03 ms (a)"
    # the larger sample bounds the rate tighter, so it comes first; a backend that allowed is absent
    stale = rows["No stale allow tolerated"]
    assert stale.index("scylla") < stale.index("postgres") and "spicedb" not in stale


def test_workload_rows_follow_the_data_when_the_backends_swap():
    rows = _rows(sweep({"postgres": 0.3, "scylla": 0.01}))
    assert rows["Membership churn of 10 changes/s"].startswith("scylla 2.12 ms (a), postgres 5.05 ms (b)")


def test_the_read_heavy_row_keeps_the_embedded_backends_lettered_apart():
    run = sweep({"postgres": 0.01}).server("clickhouse", CHDB)
    run.phase("postgres", "check_view_via_group_member", steady(3.0))
    run.phase("clickhouse", "check_view_via_group_member", steady(0.5))
    row = _rows(run)["Read-heavy, rare changes"]
    assert row.index("postgres") < row.index("clickhouse †") and "(†a)" in row


def test_each_engine_mode_shows_its_check_latency_beside_the_staleness_it_allowed(tmp_path):
    run = Run().server("spicedb-pg", SPICE)
    for mode, ms in (("", 1.0), ("fully_consistent", 4.0)):
        start = {"mode": "closed", "concurrency": 1, "stages": [], "consistency": mode}
        _phase(run, "spicedb-pg", "check_view_via_group_member", f"spicedb-pg/via@{mode}/c1/r0", start,
               [("check", [ms] * 400, {})])
    revocations(run, "spicedb-pg", "fully_consistent", 800, 9)
    df = freshness.freshness(run.data()).set_index("mode")
    assert df.loc["fully_consistent"]["p50_ms"] == pytest.approx(4.0, rel=0.01)
    assert (
        df.loc["fully_consistent"]["stale"]
        == "8 writers: 9 of 800 revocations, 11.3 per 1,000 (95% 5.93-21.2)"
    )  # 11.25: half up
    assert df.loc["minimize_latency (session)"]["stale"] == "—"  # no revocation in the session mode
    assert "freshness.png" in freshness.section(run.data(), tmp_path)
    assert "freshness.png" in freshness.section(run.data(), tmp_path)


def test_a_run_without_churn_or_revocations_renders_none_of_it(tmp_path):
    run = Run().server("postgres", NET).phase("postgres", "check_view_via_group_member", steady(1.0))
    rd = run.data()
    assert churn.section(rd, tmp_path) == "" and freshness.section(rd, tmp_path) == ""
    assert decision.envelope(rd, dimensions.compute(rd), tmp_path) == []
    main = render(run.write(tmp_path / "run"), tmp_path / "out")
    text = main.read_text() + (tmp_path / "out" / "fixture-appendix.md").read_text()
    # the run's path holds the test's name: the sections' own titles and lines are what must be absent
    assert not any(
        w in text for w in ("Sustainable churn", "Structural churn", "by workload", "Revocations under"))
    assert set(json.loads((tmp_path / "out" / "fixture.json").read_text())) == {"run_id", "figures"}


def test_a_run_with_the_envelope_renders_it_first_and_in_the_appendix(tmp_path):
    run = sweep(SLOWING).phase("postgres", "check_view_via_group_member", steady(1.0))
    revocations(run, "spicedb-pg", "fully_consistent", 800, 9)
    main = render(run.write(tmp_path / "run"), tmp_path / "out").read_text()
    summary = main[main.index("Decision summary"):]
    assert summary.index("by workload") < summary.index("| Need |")
    appendix = (tmp_path / "out" / "fixture-appendix.md").read_text()
    assert "## Structural churn" in appendix and "## Stale allows per 1,000 revocations" in appendix
    assert Path(tmp_path / "out" / "fixture-charts" / "churn.png").exists()
