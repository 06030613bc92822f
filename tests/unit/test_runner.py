"""The runner counts every op, every wrong answer, every timeout and error."""

from __future__ import annotations

import numpy as np
import pytest

from authzbench.core.records import as_dict
from authzbench.generator import generate
from authzbench.measure.runner import BackendFactory, PhaseSpec, run_phase
from authzbench.report.core.data import phase_table
from authzbench.truth.oracle import Oracle
from authzbench.workloads.catalog import SCENARIOS
from authzbench.workloads.spec import cumulative_ops, schedule_times


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    ds = generate("tiny", tmp_path_factory.mktemp("d") / "tiny")
    return ds, Oracle(ds)


def _factory(ds, cls="authzbench.systems.reference.adapter:ReferenceBackend", **opts):
    return BackendFactory(cls, {}, {"dataset_path": str(ds.path), **opts})


def _run(spec, factory, inputs, model="thread"):
    recs: list[dict] = []
    res = run_phase(spec, factory, inputs, lambda r: recs.append(as_dict(r)), model)
    return res, phase_table(recs)


def test_every_measured_op_is_recorded_and_checked(tiny):
    ds, o = tiny
    inputs = SCENARIOS["check_view_via_group_member"].sampler(ds, o, 100)
    res, t = _run(PhaseSpec("reference", "s", concurrency=3, iterations=300, warmup=30), _factory(ds), inputs)
    row = t.iloc[0]
    assert res.status == "complete"
    assert row["ops"] == 300 and row["checked"] == 300 and row["mismatches"] == 0
    assert row["warmup_ops"] == 30
    assert sum(1 for _ in t["hists"].iloc[0]) >= 1


def test_wrong_answers_show_up_as_mismatches_with_examples(tiny):
    ds, o = tiny
    inputs = SCENARIOS["check_manage_direct_user"].sampler(ds, o, 200)
    flipped = sum(1 for _, (u, p, r), _e in inputs if r % 7 == 0)
    assert flipped > 0
    _, t = _run(PhaseSpec("flipping", "s", concurrency=2, iterations=200),
                _factory(ds, "tests.unit.fakes:FlippingBackend"), inputs)
    assert t.iloc[0]["mismatches"] == flipped
    assert t.iloc[0]["examples"][0]["args"][2] % 7 == 0


def test_lookup_missing_resources_is_a_mismatch(tiny):
    ds, o = tiny
    inputs = SCENARIOS["lookup_resources_manage_super"].sampler(ds, o, 1)
    assert any(r % 7 == 0 for r in inputs[0][2])
    _, t = _run(PhaseSpec("flipping", "s", concurrency=1, iterations=5),
                _factory(ds, "tests.unit.fakes:FlippingBackend"), inputs)
    assert t.iloc[0]["mismatches"] == 5


def test_lookup_results_streamed_twice_are_counted_as_duplicates_not_mismatches(tiny):
    """A backend's lookup answer reaches the runner as streamed: copies show in the Duplicates column."""
    ds, o = tiny
    inputs = SCENARIOS["lookup_resources_manage_super"].sampler(ds, o, 1)
    expected = len(inputs[0][2])
    assert expected > 0
    _, t = _run(PhaseSpec("duplicating", "s", concurrency=1, iterations=3),
                _factory(ds, "tests.unit.fakes:DuplicatingBackend"), inputs)
    row = t.iloc[0]
    assert row["mismatches"] == 0 and row["duplicates"] == 3 * expected and row["results"] == 6 * expected


def test_ops_slower_than_the_timeout_are_counted_as_timeouts_not_latency(tiny):
    ds, o = tiny
    inputs = SCENARIOS["check_negative"].sampler(ds, o, 50)
    spec = PhaseSpec("sleepy", "s", concurrency=1, iterations=50, timeout_s=0.1)
    _, t = _run(spec, _factory(ds, "tests.unit.fakes:SleepyBackend", sleep_s=0.15), inputs)
    row = t.iloc[0]
    assert row["timeouts"] == 5 and row["ops"] == 45
    assert row["max_ms"] < 100


def test_exceptions_are_counted_by_type_and_the_phase_goes_on(tiny):
    ds, o = tiny
    inputs = SCENARIOS["check_negative"].sampler(ds, o, 50)
    _, t = _run(PhaseSpec("failing", "s", concurrency=1, iterations=50),
                _factory(ds, "tests.unit.fakes:FailingBackend"), inputs)
    assert t.iloc[0]["error_types"] == {"ConnectionResetError": 10}
    assert t.iloc[0]["ops"] == 40


def test_a_backend_that_cannot_connect_fails_the_phase_without_raising(tiny):
    ds, o = tiny
    inputs = SCENARIOS["check_negative"].sampler(ds, o, 5)
    bad = BackendFactory("authzbench.systems.reference.adapter:ReferenceBackend", {}, {})  # no dataset_path
    res, t = _run(PhaseSpec("reference", "s", concurrency=2, iterations=10), bad, inputs)
    assert res.status == "failed" and "dataset_path" in res.reason


def test_worker_processes_give_the_same_counts_as_threads(tiny):
    ds, o = tiny
    inputs = SCENARIOS["check_manage_org_admin"].sampler(ds, o, 100)
    res, t = _run(PhaseSpec("reference", "s", concurrency=2, iterations=200), _factory(ds), inputs, "process")
    assert res.status == "complete" and t.iloc[0]["ops"] == 200 and t.iloc[0]["mismatches"] == 0


def test_open_loop_schedule_follows_a_linear_ramp():
    stages = [(100.0, 2.0), (100.0, 1.0)]  # ramp 0 -> 100/s over 2 s, then hold 1 s
    times = schedule_times(0.0, stages)
    assert len(times) == pytest.approx(cumulative_ops(0.0, stages, 3.0), abs=1)  # 100 + 100
    assert np.all(np.diff(times) > 0)
    assert (times < 1.0).sum() == pytest.approx(25, abs=1)  # integral of the ramp over the first second


def test_open_loop_measures_from_the_intended_start_and_counts_drops(tiny):
    ds, o = tiny
    inputs = SCENARIOS["check_negative"].sampler(ds, o, 50)
    # One worker, 200 ops/s, but every op takes 20 ms: the backlog grows, latency must show it.
    spec = PhaseSpec("reference", "s", mode="open", concurrency=1, stages=[(200.0, 1.0)], start_rate=200.0)
    res, t = _run(spec, _factory(ds, delay_s=0.02), inputs)
    row = t.iloc[0]
    assert res.scheduled == 200
    assert res.dropped > 100  # only ~50 fit in the second
    assert row["p95_ms"] > 200  # queueing delay is in the latency, not hidden


def test_a_phase_stopped_by_its_time_budget_is_complete_and_one_stopped_by_the_cap_is_not(tiny):
    ds, o = tiny
    inputs = SCENARIOS["check_negative"].sampler(ds, o, 50)
    factory = _factory(ds, "tests.unit.fakes:SleepyBackend", sleep_s=0.05)
    budget, t = _run(
        PhaseSpec("sleepy", "s", iterations=100_000, budget_s=0.5, max_seconds=5), factory, inputs)
    assert budget.status == "complete" and "time budget" in budget.reason
    assert 0 < t.iloc[0]["ops"] < 100_000
    cap, _ = _run(PhaseSpec("sleepy", "s", iterations=100_000, max_seconds=0.5), factory, inputs)
    assert cap.status == "incomplete" and "cap" in cap.reason


def test_a_server_gone_mid_phase_is_incomplete_though_its_failed_ops_are_under_one_percent(tiny):
    ds, o = tiny
    inputs = SCENARIOS["check_negative"].sampler(ds, o, 50)
    factory = _factory(ds, "tests.unit.fakes:GoneBackend", answers=3000, fail_after_s=0.1)
    spec = PhaseSpec("gone", "s", concurrency=2, iterations=100_000, budget_s=1.5, interval_s=0.1, warmup=0)
    res, t = _run(spec, factory, inputs)
    failed = t.iloc[0]["timeouts"] + t.iloc[0]["errors"]
    assert 0 < failed < 0.01 * (t.iloc[0]["ops"] + failed)  # the share rule alone would call it complete
    assert res.status == "incomplete" and "stopped answering" in res.reason


def test_a_time_budget_waits_for_the_ops_a_percentile_needs_but_not_forever(tiny):
    ds, o = tiny
    inputs = SCENARIOS["check_negative"].sampler(ds, o, 50)
    factory = _factory(ds, "tests.unit.fakes:SleepyBackend", sleep_s=0.1)
    waited, t = _run(PhaseSpec("sleepy", "s", iterations=100_000, budget_s=0.2, min_ops=8, interval_s=0.05,
                               max_seconds=5), factory, inputs)
    assert waited.status == "complete" and "time budget" in waited.reason
    assert t.iloc[0]["ops"] >= 8  # the budget alone would have stopped it near 2 ops
    stretched, t = _run(PhaseSpec("sleepy", "s", iterations=100_000, budget_s=0.2, min_ops=10_000,
                                  interval_s=0.05, max_seconds=5), factory, inputs)
    assert stretched.status == "complete" and stretched.wall_s < 2.0  # BUDGET_STRETCH x 0.2 s, not the cap
    assert t.iloc[0]["ops"] < 10_000


def test_a_workers_schedule_slice_equals_its_stride_of_the_whole_schedule():
    stages = [(300.0, 1.5), (50.0, 0.7), (1000.0, 0.3)]  # ramp up, down, up: slices cross stage ends
    whole = schedule_times(10.0, stages)
    for n in (1, 3, 7):
        for w in range(n):
            assert np.array_equal(schedule_times(10.0, stages, w, n), whole[w::n])


def test_workers_fork_from_a_server_that_imported_the_process_backends_drivers(monkeypatch):
    import multiprocessing as mp

    from authzbench.measure import pools
    from authzbench.systems.clickhouse.adapter import ClickHouseBackend
    from authzbench.systems.scylla.adapter import ScyllaBackend

    seen: list[list[str]] = []
    ctx = mp.get_context("forkserver")
    monkeypatch.setattr(type(ctx), "set_forkserver_preload", lambda self, mods: seen.append(mods))
    pools.preload_worker_modules([ScyllaBackend, ClickHouseBackend])
    assert seen and "cassandra.cluster" in seen[0] and "authzbench.systems.scylla.adapter" in seen[0]
    assert not any("clickhouse" in m or "chdb" in m for m in seen[0])  # in-process engine: threads, no fork


def _slow_write_phase(monkeypatch, ds, n_ops: int, overrun: float) -> list:
    """Heartbeats every 50 ms, hung after 0.5 s without progress, the wait bounded at overrun x the 0.2 s op
    timeout; the inputs: n_ops ACL write ops."""
    from authzbench.measure import runner, worker
    from authzbench.workloads.writes import sample_write_ops

    monkeypatch.setattr(worker, "HEARTBEAT_S", 0.05)  # the worker's; the rest are the driver's
    for name, value in (("HANG_S", 0.5), ("GRACE_S", 0.1), ("OVERRUN", overrun)):
        monkeypatch.setattr(runner, name, value)
    return [("structural", op, None) for op in sample_write_ops(ds, "acl", n_ops)]


@pytest.mark.parametrize(("write_s", "progresses", "status", "said"), [
    (1.0, True, "complete", ""),  # past its bound but progressing: waited for
    (30.0, True, "incomplete", "still running"),  # progressing at the overrun bound: stopped, not hung
    (30.0, False, "incomplete", "hung"),  # no progress for HANG_S: hung
])
def test_an_op_past_its_bound_is_waited_for_while_it_progresses_and_only_a_silent_one_is_hung(
        tiny, monkeypatch, write_s, progresses, status, said):
    ds, _ = tiny
    inputs = _slow_write_phase(monkeypatch, ds, 4, overrun=12.0)  # the wait: 2.4 s
    factory = _factory(ds, "tests.unit.fakes:SlowWriteBackend", write_s=write_s, progresses=progresses)
    spec = PhaseSpec("slow-write", "write_acl", iterations=4, timeout_s=0.2, budget_s=0.05, max_seconds=5)
    res, t = _run(spec, factory, inputs)
    assert res.status == status and said in res.reason, res.reason
    assert (res.stopped_workers, res.hung_workers) == ((0, 0) if status == "complete" else
                                                       (1, 0) if progresses else (1, 1))
    if status == "complete":
        # the one op the budget let start: grant and revoke
        assert t.set_index("kind").loc["write", "ops"] == 2


def test_workers_queued_behind_a_lock_are_not_hung_when_the_holders_op_ends(tiny, monkeypatch):
    """Waiters show no progress of their own; the holder finishing its op is progress. Counted only while
    running, the queue was called hung the moment the holder's worker finished."""
    ds, _ = tiny
    inputs = _slow_write_phase(monkeypatch, ds, 6, overrun=50.0)  # the wait: 10 s
    factory = _factory(ds, "tests.unit.fakes:LockedSlowWriteBackend", write_s=0.4)
    spec = PhaseSpec("locked", "write_acl", concurrency=3, iterations=6, timeout_s=0.2, budget_s=0.05,
                     max_seconds=5)
    res, t = _run(spec, factory, inputs)
    assert res.status == "complete" and (res.stopped_workers, res.hung_workers) == (0, 0), res.reason
    assert t.set_index("kind").loc["write", "ops"] == 6  # each worker's one op: grant and revoke



def test_a_worker_whose_pool_aborted_before_it_started_measures_no_op(tiny):
    """PhaseEvents.abort sets every signal, stop first: the worker runs to its end at once, measuring
    nothing."""
    import queue
    import threading
    from types import SimpleNamespace

    from authzbench.measure.worker import PhaseEvents, worker_main

    ds, o = tiny
    inputs = SCENARIOS["check_view_via_group_member"].sampler(ds, o, 20)
    events, out = PhaseEvents.made_by(threading.Event), queue.Queue()
    events.abort()
    worker_main(0, PhaseSpec("reference", "s", iterations=20), _factory(ds), inputs, out, events,
                SimpleNamespace(value=0.0))
    msgs = [out.get_nowait() for _ in range(out.qsize())]
    assert [m for m, _, _ in msgs if m != "interval"] == ["ready", "warm", "measured", "done"]
    assert sum(k["ops"] for m, _, kinds in msgs if m == "interval" for k in kinds.values()) == 0
