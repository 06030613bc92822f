"""The runner: the only place that loops, times and counts.

A phase = one scenario on one backend at one concurrency (closed loop) or one arrival-rate
schedule (open loop). Workers run in separate processes (forkserver: no inherited driver threads)
or, for in-process engines, threads. Each worker times every call with perf_counter_ns, records
it in an HdrHistogram (µs), compares the answer with the oracle's, and ships its interval
histogram to the parent every `interval_s`, which appends it to the results store at once.

Open loop: op k is due at its intended time t_k from the schedule; latency is measured from
t_k, not from when the worker got to it, so queueing shows (no coordinated omission). Ops that
were due before the phase ended but never started are counted as dropped.
"""

from __future__ import annotations

import contextlib
import math
import multiprocessing as mp
import queue
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from authzbench.backends.registry import load_symbol
from authzbench.metrics import encode, new_histogram
from authzbench.model import Relationship
from authzbench.stopping import STOP, grace_deadline, signal_name

FAILED_SHARE_INCOMPLETE = 0.01  # a phase with >= 1% failed ops is reported incomplete


@dataclass
class PhaseSpec:
    backend: str
    scenario: str
    mode: str = "closed"  # closed | open
    concurrency: int = 1
    iterations: int = 1000  # closed loop: measured ops in total
    warmup: int = 0  # ops run before measuring, in total
    timeout_s: float = 2.0
    max_seconds: float = 60.0
    stages: list[tuple[float, float]] = field(default_factory=list)  # open loop: (target ops/s, seconds)
    start_rate: float = 0.0  # open loop: rate at t=0; each stage ramps linearly to its target
    write_share: float = 0.0  # mixed: share of ops that write/delete a relationship
    scratch_user: int = 0  # mixed: first user id not in the dataset (writes never touch real users)
    scratch_relation: str = "resource_viewer_user"  # mixed: relation written, object drawn from [0, n_resources)
    n_resources: int = 1
    repeat: int = 0
    interval_s: float = 1.0
    max_examples: int = 5

    @property
    def phase_id(self) -> str:
        load = f"c{self.concurrency}" if self.mode == "closed" else \
            f"open{self.concurrency}@{self.stages[-1][0]:g}" if self.stages else f"open{self.concurrency}"
        return f"{self.backend}/{self.scenario}/{load}/r{self.repeat}"

    def scheduled_ops(self) -> int:
        return int(math.floor(cumulative_ops(self.start_rate, self.stages, self.duration_s)))

    @property
    def duration_s(self) -> float:
        return sum(s for _, s in self.stages)


@dataclass
class BackendFactory:
    """Picklable recipe for a connected backend in a worker process."""

    impl: str  # "module:Class"
    endpoint: dict[str, Any]
    options: dict[str, Any]

    def __call__(self):
        return load_symbol(self.impl)(self.endpoint, self.options)


@dataclass
class PhaseResult:
    phase_id: str
    status: str  # complete | incomplete | failed
    wall_s: float
    reason: str = ""
    scheduled: int | None = None
    dropped: int = 0
    ops: int = 0


# open-loop schedule --------------------------------------------------------------------------

def cumulative_ops(start_rate: float, stages: list[tuple[float, float]], t: float) -> float:
    """Ops due by time t when the rate ramps linearly from stage to stage (k6 ramping-arrival-rate)."""
    total, r0, t0 = 0.0, start_rate, 0.0
    for target, dur in stages:
        if t <= t0:
            break
        dt = min(t, t0 + dur) - t0
        total += r0 * dt + (target - r0) * dt * dt / (2 * dur) if dur > 0 else 0.0
        r0, t0 = target, t0 + dur
    return total


def schedule_times(start_rate: float, stages: list[tuple[float, float]]) -> np.ndarray:
    """Intended start time (s from phase start) of every op: the inverse of cumulative_ops."""
    times, r0, t0, done = [], start_rate, 0.0, 0.0
    for target, dur in stages:
        n_total = done + r0 * dur + (target - r0) * dur / 2
        ks = np.arange(math.ceil(done) if done > 0 else 0, math.floor(n_total - 1e-9) + 1, dtype=np.float64)
        ks = ks[ks >= done]
        x = ks - done  # ops into this stage
        a = (target - r0) / (2 * dur) if dur > 0 else 0.0
        if abs(a) < 1e-12:
            dt = x / r0 if r0 > 0 else np.full_like(x, np.inf)
        else:  # a*dt^2 + r0*dt - x = 0
            dt = (-r0 + np.sqrt(r0 * r0 + 4 * a * x)) / (2 * a)
        times.append(t0 + dt[np.isfinite(dt)])
        done, r0, t0 = n_total, target, t0 + dur
    return np.concatenate(times) if times else np.empty(0)


# worker ----------------------------------------------------------------------------------------

class _Kind:
    """Per op kind (check, lookup, write, ...) interval counters."""

    __slots__ = ("hist", "ops", "errors", "timeouts", "mismatches", "examples", "results", "duplicates",
                 "checked", "late")

    def __init__(self) -> None:
        self.hist = new_histogram()
        self.ops = 0
        self.errors: dict[str, int] = {}
        self.timeouts = 0
        self.mismatches = 0
        self.examples: list[dict] = []
        self.results = 0
        self.duplicates = 0
        self.checked = 0
        self.late = 0

    def payload(self) -> dict:
        return {"hist": encode(self.hist), "ops": self.ops, "errors": self.errors, "timeouts": self.timeouts,
                "mismatches": self.mismatches, "examples": self.examples, "results": self.results,
                "duplicates": self.duplicates, "checked": self.checked, "late": self.late}


def _is_timeout(e: BaseException) -> bool:
    name = type(e).__name__.lower()  # ConnectionTimeout, ExecutionTimeout, OperationTimedOut (Cassandra)
    return isinstance(e, TimeoutError) or "timeout" in name or "timedout" in name or \
        "deadline" in str(e).lower()[:200]


def worker_main(wid: int, spec: PhaseSpec, factory: Callable, inputs: list, out: Any, go: Any, start: Any,
                stop: Any, t0_shared: Any, release: Any) -> None:
    """One worker: connect, warm up, then run its share of the measured ops."""
    if mp.parent_process() is not None:  # a worker process: Ctrl-C hits the whole group; the parent decides
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        backend = factory()
        backend.connect()
    except BaseException as e:  # noqa: BLE001 - reported to the parent, which decides
        out.put(("fatal", wid, f"{type(e).__name__}: {e}"))
        return
    try:
        out.put(("ready", wid, None))
        go.wait()
        rng = np.random.default_rng([wid, spec.repeat, 7])
        pending: list[Relationship] = []
        state = {"rng": rng, "pending": pending, "scratch": spec.scratch_user + wid}
        n = spec.concurrency
        for k in range(wid, spec.warmup, n):  # warm-up ops: run, not recorded
            if stop.is_set():
                break
            with contextlib.suppress(Exception):
                _call(backend, inputs[k % len(inputs)], spec, state)
        out.put(("warm", wid, spec.warmup // n + (1 if wid < spec.warmup % n else 0)))
        start.wait()
        kinds: dict[str, _Kind] = {}
        timeout_ns = int(spec.timeout_s * 1e9)
        next_flush = time.perf_counter() + spec.interval_s
        t0 = t0_shared.value
        if t0 - time.perf_counter() > 0:  # one origin for all workers: the parent measures wall time from it
            time.sleep(t0 - time.perf_counter())
        due = schedule_times(spec.start_rate, spec.stages)[wid::n] if spec.mode == "open" else None
        i = 0
        for k in range(wid, spec.iterations if due is None else len(due) * n, n):
            if stop.is_set():
                break
            inp = inputs[k % len(inputs)]
            if due is not None:
                intended = t0 + float(due[i])
                i += 1
                delay = intended - time.perf_counter()
                if delay > 0:
                    time.sleep(delay)
                if stop.is_set():
                    break
                begin_ns = int(intended * 1e9)
                late = time.perf_counter() - intended > 0.001
            else:
                begin_ns = time.perf_counter_ns()
                late = False
            kind_name, answer, exc = _timed_call(backend, inp, spec, state)
            end_ns = time.perf_counter_ns()
            kd = kinds.get(kind_name)
            if kd is None:
                kd = kinds[kind_name] = _Kind()
            kd.late += int(late)
            lat_ns = end_ns - begin_ns
            if exc is not None:
                if _is_timeout(exc):
                    kd.timeouts += 1
                else:
                    name = type(exc).__name__
                    kd.errors[name] = kd.errors.get(name, 0) + 1
                    if len(kd.examples) < spec.max_examples:
                        kd.examples.append({"error": f"{name}: {str(exc)[:200]}"})
            elif lat_ns > timeout_ns:
                kd.timeouts += 1
            else:
                kd.ops += 1
                kd.hist.record_value(max(1, lat_ns // 1000))
                _compare(kd, inp, answer, kind_name, spec)
            if time.perf_counter() >= next_flush:
                out.put(("interval", wid, {k_: v.payload() for k_, v in kinds.items()}))
                kinds = {}
                next_flush = time.perf_counter() + spec.interval_s
        out.put(("interval", wid, {k_: v.payload() for k_, v in kinds.items()}))
        # Stay connected until the parent closed the measured window: the monitor's last sample must
        # still see the server processes serving us (PostgreSQL forks one per connection).
        out.put(("measured", wid, None))
        release.wait(60)
        # Leave the dataset as we found it: delete the scratch relationships still written.
        for rel in pending:
            with contextlib.suppress(Exception):
                backend.delete(rel)
    except BaseException as e:  # noqa: BLE001
        out.put(("fatal", wid, f"{type(e).__name__}: {e}"))
    finally:
        with contextlib.suppress(Exception):
            backend.close()
        out.put(("done", wid, None))


def _call(backend, inp, spec: PhaseSpec, state: dict):
    return _timed_call(backend, inp, spec, state)


def _timed_call(backend, inp, spec: PhaseSpec, state: dict) -> tuple[str, Any, BaseException | None]:
    """Run one op; returns (kind, answer, exception). Mixed phases turn a share of ops into writes."""
    if spec.write_share > 0 and state["rng"].random() < spec.write_share:
        pending = state["pending"]
        try:
            if pending and state["rng"].random() < 0.5:
                backend.delete(pending.pop())
            else:
                rel = Relationship(spec.scratch_relation, int(state["rng"].integers(0, spec.n_resources)),
                                   state["scratch"])
                backend.write(rel)
                pending.append(rel)
            return "write", None, None
        except Exception as e:  # noqa: BLE001
            return "write", None, e
    op, args, _expected = inp
    try:
        if op == "check":
            return "check", backend.check(*args), None
        if op == "lookup":
            return "lookup", list(backend.lookup_resources(*args)), None
        if op == "roundtrip":
            backend.baseline_roundtrip()
            return "roundtrip", None, None
        raise ValueError(f"unknown op {op!r}")
    except Exception as e:  # noqa: BLE001
        return op, None, e


def _compare(kd: _Kind, inp, answer, kind: str, spec: PhaseSpec) -> None:
    op, args, expected = inp
    if kind != op or op == "roundtrip":
        return
    kd.checked += 1
    if op == "check":
        ok = bool(answer) == expected
        got_repr: Any = bool(answer)
    else:
        got = set(answer)
        kd.results += len(answer)
        kd.duplicates += len(answer) - len(got)
        ok = got == set(expected)
        got_repr = {"count": len(got), "missing": len(set(expected) - got), "extra": len(got - set(expected))}
    if not ok:
        kd.mismatches += 1
        if len(kd.examples) < spec.max_examples:
            kd.examples.append({"args": list(args), "expected": expected if op == "check" else len(expected),
                                "got": got_repr})


# parent ----------------------------------------------------------------------------------------

def run_phase(spec: PhaseSpec, factory: Callable, inputs: list, sink: Callable[[dict], None],
              concurrency_model: str = "process", on_window: Callable[[bool], None] | None = None) -> PhaseResult:
    """Run one phase; every interval is handed to `sink` as it arrives. Never raises on backend trouble."""
    if concurrency_model == "thread":
        out: Any = queue.Queue()
        go, start, stop, release = threading.Event(), threading.Event(), threading.Event(), threading.Event()

        class _V:
            value = 0.0

        t0 = _V()
        workers = [threading.Thread(target=worker_main, daemon=True,
                                    args=(w, spec, factory, inputs, out, go, start, stop, t0, release))
                   for w in range(spec.concurrency)]
    else:
        ctx = mp.get_context("forkserver")
        out = ctx.Queue()
        go, start, stop, release = ctx.Event(), ctx.Event(), ctx.Event(), ctx.Event()
        t0 = ctx.Value("d", 0.0)
        workers = [ctx.Process(target=worker_main, daemon=True,
                               args=(w, spec, factory, inputs, out, go, start, stop, t0, release))
                   for w in range(spec.concurrency)]
    base = {"phase": spec.phase_id, **{k: v for k, v in asdict(spec).items() if k not in ("stages",)},
            "stages": spec.stages}
    sink({"type": "phase_start", **base})
    wall0 = time.perf_counter()
    for w in workers:
        w.start()

    state = {"ready": 0, "warm": 0, "done": 0, "measured": 0, "fatal": [], "ops": 0, "issued": 0, "warmup_ops": 0, "failed_ops": 0}

    def pump(until: Callable[[], bool], deadline: float) -> bool:
        while not until():
            if STOP.is_set():  # a signal: workers stop now, what they measured is still drained
                for ev in (stop, go, start, release):
                    ev.set()
                deadline = min(deadline, grace_deadline())
            if time.perf_counter() > deadline:
                return False
            try:
                msg, wid, payload = out.get(timeout=0.2)
            except queue.Empty:
                if not any(_alive(w) for w in workers) and not until():
                    # Workers are gone: drain what they sent, then give up waiting.
                    with contextlib.suppress(queue.Empty):
                        while True:
                            _handle(*out.get(timeout=0.5))
                    return until()
                continue
            _handle(msg, wid, payload)
        return True

    def _handle(msg: str, wid: int, payload: Any) -> None:
        if msg == "interval":
            for kind, p in payload.items():
                state["ops"] += p["ops"]
                state["issued"] += p["ops"] + p["timeouts"] + sum(p["errors"].values())
                state["failed_ops"] += p["timeouts"] + sum(p["errors"].values())
                sink({"type": "interval", "phase": spec.phase_id, "backend": spec.backend,
                      "scenario": spec.scenario, "worker": wid, "kind": kind, **p})
        elif msg in ("ready", "done", "measured"):
            state[msg] += 1
        elif msg == "warm":
            state["warm"] += 1
            state["warmup_ops"] += payload
        elif msg == "fatal":
            state["fatal"].append(payload)

    n = spec.concurrency
    status, reason = "complete", ""
    connect_ok = pump(lambda: state["ready"] + len(state["fatal"]) >= n, time.perf_counter() + 60)
    if state["fatal"] or not connect_ok:
        stop.set()
        go.set()
        start.set()
        release.set()
        reason = state["fatal"][0] if state["fatal"] else "workers did not connect within 60 s"
        status = "failed"
    else:
        go.set()
        pump(lambda: state["warm"] + len(state["fatal"]) >= n,
             time.perf_counter() + spec.max_seconds + spec.timeout_s + 30)
        t0.value = time.perf_counter() + 0.05  # every worker shares one schedule origin
        if on_window:
            on_window(True)
        start.set()
        measured0 = t0.value
        # Open loop: ops due before the end may start a moment late; 0.25 s grace, then the rest is dropped.
        limit = spec.max_seconds if spec.mode == "closed" else spec.duration_s + 0.25
        def measured() -> bool:
            return state["measured"] + len(state["fatal"]) >= n

        finished = pump(measured, measured0 + limit)
        if not finished:
            stop.set()
            if spec.mode == "closed":
                reason = f"stopped at the {spec.max_seconds:.0f} s cap before all {spec.iterations} ops ran"
                status = "incomplete"
            finished = pump(measured, time.perf_counter() + spec.timeout_s + 10)
        wall = time.perf_counter() - measured0
        if on_window:
            on_window(False)
        release.set()
        if finished:
            pump(lambda: state["done"] >= n, time.perf_counter() + 30)
        if not finished:
            status = "incomplete"
            reason = (reason + "; " if reason else "") + \
                f"{n - state['done']} worker(s) hung past the {spec.timeout_s:g} s op timeout and were stopped"
        if state["fatal"]:
            status = "incomplete"
            reason = (reason + "; " if reason else "") + state["fatal"][0]
        if state["issued"] and state["failed_ops"] / state["issued"] >= FAILED_SHARE_INCOMPLETE:
            # The figures no longer describe a working server (it died, or the network did).
            status = "incomplete"
            reason = (reason + "; " if reason else "") + \
                f"{state['failed_ops']:,} of {state['issued']:,} ops failed or timed out"
    for w in workers:
        if isinstance(w, threading.Thread):
            w.join(timeout=0.5)
        else:
            w.join(timeout=0.2 if STOP.is_set() else 2)
            if w.is_alive():
                w.kill()
                w.join(timeout=2)
    if status == "failed":
        wall = time.perf_counter() - wall0
    if STOP.is_set():
        status, reason = "interrupted", f"interrupted by {signal_name()}; the ops recorded so far are kept"
    scheduled = spec.scheduled_ops() if spec.mode == "open" and status != "failed" else None
    result = PhaseResult(spec.phase_id, status, wall, reason, scheduled,
                         max(0, (scheduled or 0) - state["issued"]) if scheduled is not None else 0, state["ops"])
    sink({"type": "phase_end", "phase": spec.phase_id, "backend": spec.backend, "scenario": spec.scenario,
          "status": status, "reason": reason, "wall_s": wall, "scheduled": scheduled, "dropped": result.dropped,
          "warmup_ops": state["warmup_ops"], "ops": state["ops"]})
    return result


def _alive(w: Any) -> bool:
    return w.is_alive()
