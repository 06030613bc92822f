"""A worker count whose every op would outlast its timeout is not run, and the report says so: Permify's
heaviest-user lookup took ~20 s an op at 1 worker and timed out at 8 workers in every round."""

from __future__ import annotations

from authzbench.config import BenchConfig
from authzbench.report.core.data import load_run
from authzbench.report.validity import _skip_cause, _stops
from authzbench.results.store import RunStore
from authzbench.run import orchestrate, phase
from authzbench.run.phase_plan import Pace
from authzbench.workloads.spec import PhaseResult, PhaseSpec


def _spec(c: int, **kw) -> PhaseSpec:
    return PhaseSpec(
        backend="permify", scenario="lookup_resources_manage_super", concurrency=c, timeout_s=60.0, **kw)


def test_eight_workers_are_skipped_when_one_workers_op_time_predicts_a_timeout():
    pace = Pace(cores=2)
    pace.note(_spec(1), "lookup", ops=1, wall_s=20.0)  # 20 s x 8 / 2 cores = 80 s > 60 s
    why = pace.too_slow(_spec(8), "lookup")
    assert "predicted 80 s an op, over its 60 s timeout" in why and "20.0 s an op at 1 worker" in why


def test_a_lower_op_time_that_fits_the_timeout_runs_the_higher_count():
    pace = Pace(cores=2)
    pace.note(_spec(1), "lookup", ops=2, wall_s=20.0)  # 10 s an op: 40 s predicted at 8 workers
    assert pace.too_slow(_spec(8), "lookup") == ""
    assert pace.too_slow(_spec(1), "lookup") == ""  # never from its own or a higher count


def test_above_the_core_count_the_prediction_scales_from_the_lower_worker_count():
    pace = Pace(cores=2)
    pace.note(_spec(8), "lookup", ops=8, wall_s=16.0)  # 16 s an op at 8 workers: x 32 / 8 = 64 s
    assert "predicted 64 s" in pace.too_slow(_spec(32), "lookup")
    pace = Pace(cores=2)
    pace.note(_spec(8), "lookup", ops=16, wall_s=16.0)  # 8 s an op: 32 s
    assert pace.too_slow(_spec(32), "lookup") == ""


def test_a_phase_whose_every_op_timed_out_counts_as_at_least_the_timeout():
    pace = Pace(cores=2)
    pace.note(_spec(8), "lookup", ops=0, wall_s=75.0)
    assert "predicted 240 s" in pace.too_slow(_spec(32), "lookup")
    empty = Pace(cores=2)
    empty.note(_spec(8), "lookup", ops=0, wall_s=0.5)  # no op and no time: an error or a stop, nothing learnt
    assert empty.too_slow(_spec(32), "lookup") == ""


def test_writes_mixed_and_extra_consistency_phases_teach_nothing():
    pace = Pace(cores=2)
    for kw in ({"write_share": 0.01}, {"consistency": "fully_consistent"}, {"mode": "open"}):
        pace.note(_spec(1, **kw), "lookup", ops=1, wall_s=600.0)
    pace.note(_spec(1), "write", ops=1, wall_s=600.0)
    assert pace.seen == {}
    assert pace.too_slow(_spec(8), "write") == ""


def test_bench_records_the_skipped_phase_and_the_report_names_it(tmp_path, monkeypatch):
    def slow(spec, *a, **k):  # every check takes 3 s at 1 worker: 12 s predicted at 8 (timeout 2 s)
        return PhaseResult(spec.phase_id, "complete", wall_s=3.0 * max(1, spec.concurrency), ops=1)

    monkeypatch.setattr(phase, "_run_phase", slow)
    monkeypatch.setattr(orchestrate.os, "cpu_count", lambda: 2)
    # at full scale a round's budget stretches to 5.3 s, past the 3 s op: the 1-worker rounds all run
    cfg = BenchConfig.of(
        backends=["reference"], provision="native", profile="tiny", concurrency=[1, 8], iterations_scale=1.0,
        data_dir=tmp_path / "data", scenarios=["check_view_via_group_member"], rounds=3)
    store = RunStore.create(tmp_path / "results", config={"profile": "tiny"})
    assert orchestrate.bench(cfg, store) == []
    recs = list(store.records())
    skipped = [r for r in recs if r["type"] == "phase_skipped"]
    started = [r["phase"] for r in recs if r["type"] == "phase_start"]
    assert [r["concurrency"] for r in skipped] == [8, 8, 8]  # every round's, once 1 worker was seen
    assert not any("/c8/" in p for p in started)
    text = "\n".join(_stops(load_run(store.path), str, lambda *a, **k: ""))
    assert text.count(" not run: a lower worker count's op time predicted every op past its timeout") == 3
    assert "reference/check_view_via_group_member/c8/r0" in text


def _round(c: int, **kw) -> PhaseSpec:
    return _spec(c, budget_s=4 / 3, max_seconds=60.0, **kw)


def test_a_later_round_is_bounded_by_op_count_when_an_op_outlasted_the_budgets_stretch():
    pace = Pace(cores=2)
    # 24 s an op, past the 5.3 s stretch of a 1.33 s budget
    pace.note(_round(1), "lookup", ops=1, wall_s=24.0)
    why = pace.too_slow(_round(1, repeat=1), "lookup")
    assert why.startswith("bounded by op count") and "24.0 s" in why and "5.3 s" in why


def test_a_later_round_runs_when_its_ops_fit_the_budgets_stretch():
    pace = Pace(cores=2)
    pace.note(_round(1), "lookup", ops=9, wall_s=5.3)  # 0.6 s an op: 9 ops a round, enough to keep measuring
    assert pace.too_slow(_round(1, repeat=1), "lookup") == ""
    assert pace.too_slow(_round(8), "lookup") == ""  # a higher count is judged by its own first round


def test_a_higher_count_whose_predicted_op_outlasts_the_stretch_is_skipped_under_its_op_floor():
    pace = Pace(cores=2)
    # x 8 / 2 = 53 s an op, under the 60 s timeout
    pace.note(_round(1, min_ops=10), "lookup", ops=1, wall_s=13.3)
    why = pace.too_slow(_round(8, min_ops=10), "lookup")
    assert why.startswith("under its op floor") and "predicted 53 s" in why and "8 ops" in why
    assert "floor of 10" in why and "5.3 s budget" in why
    assert "fewer than the round's op floor" in _skip_cause(why)


def test_a_higher_count_runs_when_its_workers_reach_the_op_floor_or_its_op_fits_the_stretch():
    slow = Pace(cores=2)
    slow.note(_round(1, min_ops=8), "lookup", ops=1, wall_s=13.3)
    assert slow.too_slow(_round(8, min_ops=8), "lookup") == ""  # 8 workers make the 8-op floor in one op each
    quick = Pace(cores=2)
    quick.note(_round(1, min_ops=10), "lookup", ops=11, wall_s=5.6)  # SpiceDB's 0.5 s an op: 2 s at 8 workers
    assert quick.too_slow(_round(8, min_ops=10), "lookup") == ""


def test_the_budget_end_stops_a_worker_from_starting_an_op_past_the_stretch():
    from authzbench.workloads.spec import BUDGET_STRETCH, budget_end
    assert budget_end(_round(1), t0=100.0) == 100.0 + 4 / 3 * BUDGET_STRETCH
    assert budget_end(_round(1, mode="open"), t0=100.0) == float("inf")  # an open loop runs its schedule
    assert budget_end(_spec(1), t0=100.0) == float("inf")  # no budget: the op count ends it


def test_bench_bounds_the_later_rounds_of_a_phase_whose_op_outlasted_the_budget(tmp_path, monkeypatch):
    def slow(spec, *a, **k):  # one 24 s op a round at 1 worker, as Permify's heaviest lookup
        return PhaseResult(spec.phase_id, "complete", wall_s=24.0, ops=1)

    monkeypatch.setattr(phase, "_run_phase", slow)
    cfg = BenchConfig.of(
        backends=["reference"], provision="native", profile="tiny", concurrency=[1], iterations_scale=1.0,
        data_dir=tmp_path / "data", scenarios=["check_negative"], rounds=3)
    store = RunStore.create(tmp_path / "results", config={"profile": "tiny"})
    assert orchestrate.bench(cfg, store) == []
    recs = list(store.records())
    assert [r["phase"] for r in recs if r["type"] == "phase_skipped"] == [
        "reference/check_negative/c1/r1", "reference/check_negative/c1/r2"]  # round 0 ran
    text = "\n".join(_stops(load_run(store.path), str, lambda *a, **k: ""))
    assert text.count("not run: an earlier round measured its op count") == 2


def test_the_final_restore_asks_the_heaviest_user_by_checks_when_the_run_measured_the_lookup_slow():
    pace = Pace(cores=2)
    assert orchestrate._heavy(True, pace, "permify") == "lookup"  # not measured yet: the lookup
    pace.note(_spec(1), "lookup", ops=1, wall_s=18.6)
    assert orchestrate._heavy(True, pace, "permify") == "checks"
    assert orchestrate._heavy(False, pace, "permify") == ""  # only after the backend's last writing phase
    fast = Pace(cores=2)
    fast.note(_spec(1), "lookup", ops=40, wall_s=2.0)
    assert orchestrate._heavy(True, fast, "permify") == "lookup"


def test_the_heaviest_users_checks_cover_resources_they_hold_and_do_not_as_the_oracle_says(tmp_path):
    from authzbench.generator import generate
    from authzbench.run.restore import HEAVY_LOOKUP, as_checks
    from authzbench.truth.oracle import shared
    from authzbench.workloads.catalog import scenario

    ds = generate("tiny", tmp_path / "tiny")
    oracle = shared(ds)
    lookup = scenario(HEAVY_LOOKUP).sampler(ds, oracle, 1)[0]
    checks = as_checks(lookup, ds.entities["resource"], n=10)
    held = set(lookup[2])
    assert [c[2] for c in checks].count(True) == min(10, len(held)) and [c[2] for c in checks].count(
        False) == 10
    assert all(oracle.check(*args) == expected for _, args, expected in checks)
    assert checks == as_checks(lookup, ds.entities["resource"], n=10)  # the same in every run
