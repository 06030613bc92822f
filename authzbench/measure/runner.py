"""The runner: the only place that loops, times and counts (with the workers of measure/worker.py).

A phase = one scenario on one backend at one concurrency (closed loop) or one arrival-rate
schedule (open loop). Workers run in separate processes (forkserver: no inherited driver threads)
or, for in-process engines, threads. Each worker times every call (measure/timing.py: perf_counter_ns
around it, an HdrHistogram in µs), compares the answer with the oracle's, and ships its interval
histogram to the parent every `interval_s`, which appends it to the results store at once.

Open loop: op k is due at its intended time t_k from the schedule; latency is measured from
t_k, not from when the worker got to it, so queueing shows (no coordinated omission). Ops that
were due before the phase ended but never started are counted as dropped.

This module drives a phase (PhaseState, drive_phase, the verdict); the phase as data and the schedule are in
workloads/spec.py, the worker side in measure/worker.py, the pools of workers in measure/pools.py.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from authzbench.core.records import Interval, PhaseEnd, PhaseStart, Record
from authzbench.core.stopping import STOP, grace_deadline, signal_name
from authzbench.measure.pools import KeptWorkers, WorkerPool, _KeptPool, _LocalPool
from authzbench.workloads.spec import BUDGET_STRETCH, BackendFactory, PhaseResult, PhaseSpec

# The phase's vocabulary, kept importable from here: most callers build a PhaseSpec and a BackendFactory
# and hand them to run_phase.
__all__ = ["BackendFactory", "KeptWorkers", "PhaseResult", "PhaseSpec", "drive_phase", "run_phase"]

FAILED_SHARE_INCOMPLETE = 0.01  # a phase with >= 1% failed ops is reported incomplete
# An op past its bound that still makes progress (rows written, checks answered) is running, not hung: the
# phase waits for it as long as some unfinished worker progressed within HANG_S, up to OVERRUN x the op
# timeout per 4 workers (at least once). At baseline 8 workers queue behind one group write lock, and one
# FerretDB hierarchy op (a grant and its revocation, 1,623 document updates each) took 177 s on the loaded
# machine: the 8th worker's op ends ~20 minutes after the budget, honestly.
HANG_S, OVERRUN = 60.0, 10.0
GRACE_S = 10.0  # past the op timeout, ops in flight get this long after a stop whatever their progress


# parent ----------------------------------------------------------------------------------------
#
# One state machine (PhaseState) drives every phase through its stages: spawn -> ready -> warm ->
# measured -> done -> verdict. Where the workers run is a pool (measure/pools.py): _LocalPool (this
# host's processes or threads), _KeptPool (KeptWorkers), or the Dask pool of measure/distributed.py for
# many hosts. All feed the same messages.


@dataclass
class PhaseState:
    """Counts what the workers report, hands every interval to the sink, and holds the verdict."""

    spec: PhaseSpec
    sink: Callable[[Record], None]
    hosts: dict[int, str] = field(default_factory=dict)  # worker id -> load host, when spread over hosts
    ready: int = 0
    warm: int = 0
    measured: int = 0
    done: int = 0
    fatal: list[str] = field(default_factory=list)
    ops: int = 0
    issued: int = 0
    off_schedule: int = 0  # of `issued`, a churn step's changes and probes: not ops of its checks' schedule
    warmup_ops: int = 0
    failed_ops: int = 0
    status: str = "complete"
    reason: str = ""
    wall: float = 0.0
    began: float = 0.0  # perf_counter when the phase_start record was written
    window_start_s: float | None = None  # from then to the measured window's origin
    stopped_workers: int = 0
    hung_workers: int = 0
    # worker -> (heartbeat value, when it moved)
    progress: dict[int, tuple[int, float]] = field(default_factory=dict)
    finished: set[int] = field(default_factory=set)  # workers that measured their share
    last_finish: float = 0.0  # when a worker last measured its share
    failing: dict[int, bool] = field(default_factory=dict)  # worker -> its last interval with ops all failed

    def idle_s(self, since: float) -> float:
        """Seconds since a worker still measuring last progressed, or one finished (not before `since`). A
        finish counts: workers queued behind a group lock show no progress of their own while they wait, and
        the holder's op ending is what lets the next one start. Counted only while running, 8 FerretDB
        hierarchy workers were called hung 3 s after the holder's op ended (idle 90 s: the queue's wait)."""
        moved = [t for w, (_, t) in self.progress.items() if w not in self.finished]
        return time.perf_counter() - max([since, self.last_finish, *moved])

    def handle(self, msg: str, wid: int, payload: Any) -> None:
        if msg == "alive":
            if self.progress.get(wid, (None, 0.0))[0] != payload:
                self.progress[wid] = (payload, time.perf_counter())
        elif msg == "interval":
            spec = self.spec
            host = {"host": self.hosts[wid]} if wid in self.hosts else {}
            answered = sum(p["ops"] for p in payload.values())
            failed = sum(p["timeouts"] + sum(p["errors"].values()) for p in payload.values())
            if answered or failed:
                self.failing[wid] = not answered
            for kind, p in payload.items():
                self.ops += p["ops"]
                self.issued += p["ops"] + p["timeouts"] + sum(p["errors"].values())
                self.failed_ops += p["timeouts"] + sum(p["errors"].values())
                if spec.churn_writers and kind in ("write", "visibility"):
                    self.off_schedule += p["ops"] + p["timeouts"] + sum(p["errors"].values())
                self.sink(
                    Interval(
                        phase=spec.phase_id, backend=spec.backend, scenario=spec.scenario, worker=wid, **host,
                        kind=kind, **p))
        elif msg in ("ready", "done", "measured"):
            setattr(self, msg, getattr(self, msg) + 1)
            if msg == "measured":
                self.finished.add(wid)
                self.last_finish = time.perf_counter()
        elif msg == "warm":
            self.warm += 1
            self.warmup_ops += payload
        elif msg == "fatal":
            self.fatal.append(payload)

    def flag(self, status: str, why: str) -> None:
        self.status = status
        self.reason = (self.reason + "; " if self.reason else "") + why


def run_phase(spec: PhaseSpec, factory: Callable, inputs: list, sink: Callable[[Record], None],
              concurrency_model: str = "process", on_window: Callable[[bool], None] | None = None,
              kept: KeptWorkers | None = None) -> PhaseResult:
    """Run one phase; every interval is handed to `sink` as it arrives. Never raises on backend trouble.
    With `kept` (process workers only), the phase runs on those workers instead of starting its own."""
    use_kept = kept is not None and concurrency_model == "process"
    pool = _KeptPool(kept, spec, factory, inputs) if use_kept else _LocalPool(spec, factory, inputs,
                                                                                 concurrency_model)
    result = drive_phase(spec, pool, sink, on_window)
    if use_kept and result.status != "complete":
        # Connections that saw a phase fail (a server killed, a network gone) are not trusted with the next
        # one: fresh workers connect again, and a server still gone fails that phase at its connect.
        kept.broken = True  # type: ignore[union-attr]
    return result


def drive_phase(spec: PhaseSpec, pool: WorkerPool, sink: Callable[[Record], None],
                on_window: Callable[[bool], None] | None = None) -> PhaseResult:
    """The stages of a phase over any pool of workers: spawn, ready/warm, measure, verdict."""
    state = PhaseState(spec, sink)
    sink(PhaseStart(phase=spec.phase_id, **asdict(spec)))
    wall0 = state.began = time.perf_counter()
    state.hosts = pool.start()
    if _ready_and_warm(state, pool):
        _measure(state, pool, on_window)
    pool.join()
    if state.status == "failed":
        state.wall = time.perf_counter() - wall0
    return _verdict(state)


def _pump(state: PhaseState, pool: WorkerPool, until: Callable[[], bool], deadline: float) -> bool:
    """Feed worker messages to the state until `until()` holds (True) or the deadline passes (False)."""
    while not until():
        if STOP.is_set():  # a signal: workers stop now, what they measured is still drained
            pool.abort()
            deadline = min(deadline, grace_deadline())
        if time.perf_counter() > deadline:
            return False
        msgs = pool.messages(0.2)
        if not msgs and not pool.alive() and not until():
            # Workers are gone: drain what they sent, then give up waiting.
            while msgs := pool.messages(0.5):
                for m in msgs:
                    state.handle(*m)
            return until()
        for m in msgs:
            state.handle(*m)
    return True


def _ready_and_warm(state: PhaseState, pool: WorkerPool) -> bool:
    """Every worker connected (else the phase failed), then every worker warmed up."""
    spec, n = state.spec, state.spec.concurrency
    connect_ok = _pump(state, pool, lambda: state.ready + len(state.fatal) >= n, time.perf_counter() + 60)
    if state.fatal or not connect_ok:
        pool.abort()
        state.flag("failed", state.fatal[0] if state.fatal else "workers did not connect within 60 s")
        return False
    pool.go()
    _await_progressing(
        state, pool, lambda: state.warm + len(state.fatal) >= n, spec.max_seconds + spec.timeout_s + 30)
    return True


def _await_progressing(
    state: PhaseState, pool: WorkerPool, until: Callable[[], bool], floor_s: float) -> bool:
    """Pump until `until()`: for floor_s in any case, then as long as a worker progressed within HANG_S (an op
    still running past its bound, or workers queued behind it), up to OVERRUN x the op timeout. False when
    given up: hung (idle for HANG_S) or still running at the bound (PhaseState.idle_s tells which)."""
    t0 = time.perf_counter()
    hard = t0 + max(floor_s, OVERRUN * state.spec.timeout_s * max(1.0, state.spec.concurrency / 4))

    def stalled() -> bool:
        return time.perf_counter() - t0 > floor_s and state.idle_s(t0) > HANG_S

    return _pump(state, pool, lambda: until() or stalled(), hard) and until()


def _measure(state: PhaseState, pool: WorkerPool, on_window: Callable[[bool], None] | None) -> None:
    """The measured window, from one shared origin until every worker measured its share (or the cap)."""
    spec, n = state.spec, state.spec.concurrency
    if on_window:
        on_window(True)
    measured0 = pool.begin()
    # where the window sits in the phase: a longest op's time, from the window's origin, is placed in the run
    state.window_start_s = measured0 - state.began
    closed = spec.mode == "closed"
    # Open loop: ops due before the end may start a moment late; 0.25 s grace, then the rest is dropped.
    limit = spec.max_seconds if closed else spec.duration_s + 0.25

    def measured() -> bool:
        return state.measured + len(state.fatal) >= n

    def budget_spent() -> bool:  # the intended stop: time is up and the percentiles have their ops
        if not closed or not spec.budget_s or spec.budget_s >= spec.max_seconds:
            return False
        spent = time.perf_counter() - measured0
        return spent >= spec.budget_s and (
            state.issued >= spec.min_ops or spent >= spec.budget_s * BUDGET_STRETCH)

    finished = _pump(state, pool, lambda: measured() or budget_spent(), measured0 + limit)
    if not measured():
        pool.stop()
        if budget_spent():
            state.reason = (f"time budget: stopped as intended after {time.perf_counter() - measured0:.1f} s "
                            f"(budget {spec.budget_s:g} s, {state.issued:,} ops)")  # status stays complete
        elif closed:
            state.flag("incomplete",
                       f"stopped at the {spec.max_seconds:.0f} s cap before all {spec.iterations} ops ran")
        finished = _await_progressing(state, pool, measured, spec.timeout_s + GRACE_S)
    state.wall = pool.window(time.perf_counter() - measured0)
    if on_window:
        on_window(False)
    pool.release()
    if finished:
        _pump(state, pool, lambda: state.done >= n, time.perf_counter() + 30)
    else:
        _flag_stopped(state, n - state.done, measured0)
    if state.fatal:
        state.flag("incomplete", state.fatal[0])
    if state.issued and state.failed_ops / state.issued >= FAILED_SHARE_INCOMPLETE:
        # The figures no longer describe a working server (it died, or the network did).
        state.flag("incomplete", f"{state.failed_ops:,} of {state.issued:,} ops failed or timed out")
    elif state.failing and all(state.failing.values()):
        # A server that died after a fast first second: its 858 good ops hid 4 failed ones (under 1%), yet
        # the phase's last 5 of 6 s went to ops that could not be answered.
        state.flag("incomplete", f"the server stopped answering: every worker's last ops failed "
                                 f"({state.failed_ops:,} of {state.issued:,} ops failed or timed out)")


def _flag_stopped(state: PhaseState, stopped: int, since: float) -> None:
    """Workers given up on: hung when none of those still measuring progressed for HANG_S, else still running
    (an op that was honestly working, or queued behind one) when the wait reached its bound."""
    idle = state.idle_s(since)
    state.stopped_workers = stopped
    if idle > HANG_S:
        state.hung_workers = stopped
        state.flag("incomplete", f"{stopped} worker(s) hung: no progress for {idle:.0f} s past the "
                                 f"{state.spec.timeout_s:g} s op timeout; stopped")
    else:
        state.flag("incomplete",
                   f"{stopped} worker(s) still running (last progress {idle:.0f} s before) at the "
                   "wait's bound; stopped")


def _verdict(state: PhaseState) -> PhaseResult:
    spec = state.spec
    if STOP.is_set():
        state.status, state.reason = (
            "interrupted", f"interrupted by {signal_name()}; the ops recorded so far are kept")
    scheduled = spec.scheduled_ops() if spec.mode == "open" and state.status != "failed" else None
    dropped = max(0, scheduled - state.issued + state.off_schedule) if scheduled is not None else 0
    result = PhaseResult(spec.phase_id, state.status, state.wall, state.reason, scheduled, dropped, state.ops,
                         state.stopped_workers, state.hung_workers)
    state.sink(
        PhaseEnd(phase=spec.phase_id, backend=spec.backend, scenario=spec.scenario, status=state.status,
                 reason=state.reason, wall_s=state.wall, scheduled=scheduled, dropped=dropped,
                 warmup_ops=state.warmup_ops, ops=state.ops, stopped_workers=state.stopped_workers,
                 hung_workers=state.hung_workers, window_start_s=state.window_start_s))
    return result
