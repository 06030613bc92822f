"""The whole run's estimate of the time left (progress.py), on a fake clock: the planned windows left plus, a
phase, the wall time phases have cost beyond their windows so far, starting from the prior."""

from __future__ import annotations

import pytest

from authzbench.measure.runner import PhaseSpec
from authzbench.run.progress import PRIOR_OVERHEAD_S, PRIOR_PHASES, RunEta, planned_seconds


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def test_before_any_phase_the_estimate_is_the_plan_plus_the_prior_overhead_a_phase():
    eta = RunEta({"postgres": [4.0, 4.0], "clickhouse": [10.0]}, clock=Clock())
    assert eta.total == 3 and eta.done == 0
    assert eta.left_s_estimate() == pytest.approx(18.0 + 3 * PRIOR_OVERHEAD_S)


def test_the_overhead_moves_from_the_prior_to_what_the_run_spent_around_its_windows():
    clock = Clock()
    eta = RunEta({"postgres": [4.0] * 100}, clock=clock)
    clock.t += 20.0
    eta.finished("postgres", 4.0)  # one phase: a 4-s window took 20 s (with the start and the load)
    over = (PRIOR_OVERHEAD_S * PRIOR_PHASES + 16.0) / (PRIOR_PHASES + 1)
    assert eta.overhead_s() == pytest.approx(over)
    assert eta.left_s_estimate() == pytest.approx(99 * (4.0 + over))
    for _ in range(89):  # then every phase took 6 s for its 4-s window: the overhead approaches 2 s
        clock.t += 6.0
        eta.finished("postgres", 4.0)
    want = (PRIOR_OVERHEAD_S * PRIOR_PHASES + 16.0 + 89 * 2.0) / (PRIOR_PHASES + 90)
    assert eta.overhead_s() == pytest.approx(want) and 2.0 < eta.overhead_s() < 2.4
    assert (
        eta.line() == f"90/100 phases, {(20 + 89 * 6) / 60:.1f} min elapsed, ~{10 * (4.0 + want):.0f} s left")


def test_a_failed_backend_takes_its_remaining_phases_out_of_the_total_and_the_time_left():
    clock = Clock()
    eta = RunEta({"postgres": [4.0, 4.0], "openfga": [4.0, 4.0, 60.0]}, clock=clock)
    clock.t += 8.0
    eta.finished("openfga", 4.0)
    eta.drop("openfga")
    assert eta.total == 3 and eta.done == 1
    assert eta.left_s_estimate() == pytest.approx(8.0 + 2 * eta.overhead_s())


def test_a_phase_plans_its_budget_its_schedule_or_its_cap():
    common = dict(backend="postgres", scenario="check_negative", concurrency=1)
    assert planned_seconds(PhaseSpec(mode="closed", iterations=10, budget_s=1.5, **common)) == 1.5
    assert planned_seconds(PhaseSpec(mode="closed", iterations=10, max_seconds=30.0, **common)) == 30.0
    assert planned_seconds(PhaseSpec(mode="open", stages=[(100.0, 5.0), (200.0, 7.0)], **common)) == 12.0


def test_bench_records_its_estimate_at_the_start_and_after_each_visit_and_ends_with_every_phase_done(
    tmp_path):
    from authzbench.config import BenchConfig
    from authzbench.results.store import RunStore
    from authzbench.run import orchestrate

    cfg = BenchConfig.of(
        backends=["reference"], provision="native", profile="tiny", concurrency=[1], rounds=2, visits=2,
        iterations_scale=0.05, data_dir=tmp_path / "data", scenarios=["check_negative"], max_reruns=0)
    store = RunStore.create(tmp_path / "results", config={"profile": "tiny"})
    assert orchestrate.bench(cfg, store) == []
    etas = [r for r in store.records() if r["type"] == "eta"]
    assert len(etas) == 3  # the start, then each of the two visits
    assert (etas[0]["done"] == 0
            and etas[0]["left_s"] > 0
            and etas[0]["overhead_s"] == pytest.approx(PRIOR_OVERHEAD_S, rel=0.05))
    assert etas[-1]["done"] == etas[-1]["total"] == 2 and etas[-1]["left_s"] == 0
