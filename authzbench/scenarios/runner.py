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
import pickle
import queue
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

import numpy as np

from authzbench.backends.registry import load_symbol
from authzbench.metrics import encode, new_histogram
from authzbench.scenarios.writes import VISIBILITY_BOUND_S, mixed_write, run_write_op
from authzbench.stopping import STOP, grace_deadline, signal_name

FAILED_SHARE_INCOMPLETE = 0.01  # a phase with >= 1% failed ops is reported incomplete
# An op past its bound that still makes progress (rows written, checks answered) is running, not hung: the
# phase waits for it as long as some unfinished worker progressed within HANG_S, up to OVERRUN x the op
# timeout per 4 workers (at least once). At baseline 8 workers queue behind one group write lock, and one
# FerretDB hierarchy op (a grant and its revocation, 1,623 document updates each) took 177 s on the loaded
# machine: the 8th worker's op ends ~20 minutes after the budget, honestly.
HEARTBEAT_S, HANG_S, OVERRUN = 2.0, 60.0, 10.0
GRACE_S = 10.0  # past the op timeout, ops in flight get this long after a stop whatever their progress
# A budget stretches (at most 4x) until the phase has min_ops ops: a 540 ms lookup (SpiceDB's heaviest at
# baseline) has 7 ops after a 4 s budget, too few for a p95 (20), and 20 after 11 s.
BUDGET_STRETCH = 4.0


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
    budget_s: float | None = None  # closed loop: intended stop after this long even if ops remain (complete)
    min_ops: int = 0  # closed loop: the budget waits for this many ops (up to BUDGET_STRETCH x budget_s)
    stages: list[tuple[float, float]] = field(default_factory=list)  # open loop: (target ops/s, seconds)
    start_rate: float = 0.0  # open loop: rate at t=0; each stage ramps linearly to its target
    write_share: float = 0.0  # mixed: share of ops that write/delete a relationship
    scratch_user: int = 0  # mixed: first user id not in the dataset (writes never touch real users)
    scratch_relation: str = "resource_viewer_user"  # mixed: relation written, object drawn from [0, n_resources)
    n_resources: int = 1
    repeat: int = 0
    interval_s: float = 1.0
    max_examples: int = 5
    write_kind: str = "acl"  # mixed: which edge the writes change (see scenarios/writes.py MIXED_WRITES)
    write_targets: dict[str, list[int]] = field(default_factory=dict)  # mixed: object ids per write kind
    visibility_bound_s: float = VISIBILITY_BOUND_S  # write scenarios: never visible within this = an error
    consistency: str = ""  # a read consistency mode this phase runs under (backends with consistency_modes)
    input_offset: int = 0  # closed loop: the first input this phase measures (each round takes its own slice)
    attempt: int = 0  # > 0: a re-run of a phase that other processes disturbed (orchestrate._judge_disturbance)

    @property
    def phase_id(self) -> str:
        load = f"c{self.concurrency}" if self.mode == "closed" else \
            f"open{self.concurrency}@{self.stages[-1][0]:g}" if self.stages else f"open{self.concurrency}"
        mode = f"@{self.consistency}" if self.consistency else ""
        again = f"/a{self.attempt}" if self.attempt else ""
        return f"{self.backend}/{self.scenario}{mode}/{load}/r{self.repeat}{again}"

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
    stopped_workers: int = 0  # workers stopped mid-op (hung past the op timeout): their op may be half done
    hung_workers: int = 0  # ... of which made no progress for HANG_S (the rest were still running)


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


def schedule_times(start_rate: float, stages: list[tuple[float, float]], first: int = 0,
                   step: int = 1) -> np.ndarray:
    """Intended start time (s from phase start) of ops first, first + step, ...: the inverse of
    cumulative_ops. A worker asks for its own slice only (the whole schedule at 1M ops/s for 60 s is
    ~480 MB, in every worker process); `schedule_times(r, s, w, n)` equals `schedule_times(r, s)[w::n]`."""
    times, r0, t0, done = [], start_rate, 0.0, 0.0
    for target, dur in stages:
        n_total = done + r0 * dur + (target - r0) * dur / 2
        lo = math.ceil(done) if done > 0 else 0
        lo += (first - lo) % step  # the first op of this stage that belongs to the slice
        ks = np.arange(lo, math.floor(n_total - 1e-9) + 1, step, dtype=np.float64)
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
                 "checked", "late", "extra")

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
        self.extra: dict[str, int] = {}  # kind-specific counters (writes: rows touched, stale reads...)

    def payload(self) -> dict:
        return {"hist": encode(self.hist), "ops": self.ops, "errors": self.errors, "timeouts": self.timeouts,
                "mismatches": self.mismatches, "examples": self.examples, "results": self.results,
                "duplicates": self.duplicates, "checked": self.checked, "late": self.late, "extra": self.extra}


class _WriteRecorder:
    """What a structural write op reports (scenarios/writes.py), into the worker's interval counters:
    kind "write" (write latency, rows touched, stale reads/allows, checked reads) and kind "visibility"
    (the lag from a write's return until a check reflected it)."""

    def __init__(self, kinds: dict[str, _Kind], max_examples: int, progress: list[int] | None = None) -> None:
        self.kinds, self.max_examples = kinds, max_examples
        self.progress = progress if progress is not None else [0]  # every step bumps it (the heartbeat's evidence)

    def _kind(self, name: str) -> _Kind:
        self.progress[0] += 1
        kd = self.kinds.get(name)
        if kd is None:
            kd = self.kinds[name] = _Kind()
        return kd

    def write(self, ns: int, rows: int | None) -> None:
        kd = self._kind("write")
        kd.ops += 1
        kd.hist.record_value(max(1, ns // 1000))
        if rows is not None:
            self.count("rows", rows)
            self.count("rows_counted")
            kd.extra["rows_max"] = max(kd.extra.get("rows_max", 0), rows)

    def visible(self, ns: int) -> None:
        kd = self._kind("visibility")
        kd.ops += 1
        kd.hist.record_value(max(1, ns // 1000))

    def count(self, name: str, n: int = 1) -> None:
        extra = self._kind("write").extra
        extra[name] = extra.get(name, 0) + n

    def read(self, ok: bool, example: dict | None = None) -> None:
        kd = self._kind("write")
        kd.checked += 1
        if not ok:
            kd.mismatches += 1
            self.example(example or {})

    def never_visible(self, example: dict) -> None:
        kd = self._kind("write")
        kd.errors["NeverVisible"] = kd.errors.get("NeverVisible", 0) + 1
        self.example(example)

    def example(self, ex: dict) -> None:
        kd = self._kind("write")
        if len(kd.examples) < self.max_examples:
            kd.examples.append(ex)


def _is_timeout(e: BaseException) -> bool:
    name = type(e).__name__.lower()  # ConnectionTimeout, ExecutionTimeout, OperationTimedOut (Cassandra)
    return isinstance(e, TimeoutError) or "timeout" in name or "timedout" in name or \
        "deadline" in str(e).lower()[:200]


def worker_main(wid: int, spec: PhaseSpec, factory: Callable, inputs: list, out: Any, go: Any, start: Any,
                stop: Any, t0_shared: Any, release: Any) -> None:
    """One worker of one phase: connect, run the phase, disconnect."""
    _ignore_sigint()
    try:
        backend = factory()
        backend.connect()
    except BaseException as e:  # noqa: BLE001 - reported to the parent, which decides
        out.put(("fatal", wid, f"{type(e).__name__}: {e}"))
        return
    try:
        _phase_body(wid, spec, backend, inputs, out, (go, start, stop, release), t0_shared)
    except BaseException as e:  # noqa: BLE001
        out.put(("fatal", wid, f"{type(e).__name__}: {e}"))
    finally:
        with contextlib.suppress(Exception):
            backend.close()
        out.put(("done", wid, None))


# A kept worker holds up to this many connections, one per factory, least recently used closed first: a round
# switches between the checks' 2 s and the lookups' 60 s timeout, and each switch reconnected all 32 workers
# (Cassandra: ~0.5 s more a 32-worker phase, twice a round).
KEPT_CONNECTIONS = 2


def kept_worker_main(wid: int, commands: Any, out: Any, events: tuple, t0_shared: Any) -> None:
    """One worker kept across the phases of a backend's visit (KeptWorkers): each command is a phase. Its
    connections are kept per factory (same timeout and consistency mode), its inputs per key: the parent sends
    a phase's inputs to a worker once a visit (KeptWorkers.payload)."""
    _ignore_sigint()
    conns: list[tuple[Any, Any]] = []  # (factory, connected backend), least recently used first
    held: dict[int, list] = {}
    while (cmd := commands.get()) is not None:
        spec, factory, key, blob = cmd
        backend = None
        try:
            if blob is not None:
                held[key] = pickle.loads(blob)
            backend = _connection(conns, factory)
            _phase_body(wid, spec, backend, held[key], out, events, t0_shared)
        except BaseException as e:  # noqa: BLE001 - reported to the parent; the next phase reconnects
            out.put(("fatal", wid, f"{type(e).__name__}: {e}"))
            conns[:] = [(f, b) for f, b in conns if b is not backend]
            _close(backend)
        out.put(("done", wid, None))
    for _, b in conns:
        _close(b)


def _connection(conns: list[tuple[Any, Any]], factory: Callable) -> Any:
    """The kept connection made by an equal factory (now the most recently used), else a new one."""
    for i, (f, b) in enumerate(conns):
        if f == factory:
            conns.append(conns.pop(i))
            return b
    backend = factory()
    backend.connect()
    conns.append((factory, backend))
    while len(conns) > KEPT_CONNECTIONS:
        _close(conns.pop(0)[1])
    return backend


def _ignore_sigint() -> None:
    if mp.parent_process() is not None:  # a worker process: Ctrl-C hits the whole group; the parent decides
        signal.signal(signal.SIGINT, signal.SIG_IGN)


def _close(backend) -> None:
    if backend is not None:
        with contextlib.suppress(Exception):
            backend.close()


def _phase_body(wid: int, spec: PhaseSpec, backend, inputs: list, out: Any, events: tuple, t0_shared: Any) -> None:
    """One phase on a connected backend: ready, warm up, run this worker's share, clean up after itself."""
    go, start, stop, release = events
    state = {"rng": np.random.default_rng([wid, spec.repeat, 7]), "pending": [], "scratch": spec.scratch_user + wid,
             "progress": [0]}
    beating = threading.Event()
    beat = threading.Thread(target=_heartbeat, args=(out, wid, backend, state["progress"], beating), daemon=True)
    beat.start()
    try:
        out.put(("ready", wid, None))
        go.wait()
        out.put(("warm", wid, _warm_up(backend, inputs, spec, state, wid, stop)))
        start.wait()
        _measure_share(backend, inputs, spec, state, wid, stop, t0_shared.value, out)
        # Stay connected until the parent closed the measured window: the monitor's last sample must
        # still see the server processes serving us (PostgreSQL forks one per connection).
        out.put(("measured", wid, None))
        release.wait(60)
        # Leave the dataset as we found it: delete the scratch relationships still written.
        for rel in state["pending"]:
            with contextlib.suppress(Exception):
                backend.delete(rel)
    finally:
        beating.set()
        beat.join(HEARTBEAT_S + 1)  # no heartbeat may follow "done" into the next phase's messages


def _heartbeat(out: Any, wid: int, backend, progress: list[int], done: Any) -> None:
    """Every HEARTBEAT_S: how far this worker got (its op steps plus the rows its backend wrote), so the
    parent can tell an op still running past its bound from a hung one."""
    while not done.wait(HEARTBEAT_S):
        with contextlib.suppress(Exception):
            out.put(("alive", wid, progress[0] + int(getattr(backend, "rows_touched", 0))))


def _warm_up(backend, inputs: list, spec: PhaseSpec, state: dict, wid: int, stop: Any) -> int:
    """This worker's share of the warm-up ops: run, not recorded. Returns how many it ran."""
    n = spec.concurrency
    for k in range(wid, spec.warmup, n):
        if stop.is_set():
            break
        with contextlib.suppress(Exception):
            inp = inputs[k % len(inputs)]
            if inp[0] == "structural":  # its warm-up op (catalog._write_sampler), else the op itself
                run_write_op(backend, inp[2] or inp[1], _WriteRecorder({}, 0), spec.visibility_bound_s)
            else:
                _call(backend, inp, spec, state)
    return spec.warmup // n + (1 if wid < spec.warmup % n else 0)


def _measure_share(backend, inputs: list, spec: PhaseSpec, state: dict, wid: int, stop: Any, t0: float,
                   out: Any) -> None:
    """This worker's measured ops (every n-th from wid), each timed and checked; intervals shipped as they
    fill. Open loop: op k starts at its intended time and its latency runs from that time."""
    n = spec.concurrency
    kinds: dict[str, _Kind] = {}
    timeout_ns = int(spec.timeout_s * 1e9)
    next_flush = time.perf_counter() + spec.interval_s
    if t0 - time.perf_counter() > 0:  # one origin for all workers: the parent measures wall time from it
        time.sleep(t0 - time.perf_counter())
    due = schedule_times(spec.start_rate, spec.stages, wid, n) if spec.mode == "open" else None
    last_start = budget_end(spec, t0)
    for i, k in enumerate(range(wid, spec.iterations if due is None else len(due) * n, n)):
        if stop.is_set() or time.perf_counter() >= last_start:
            break
        inp = inputs[(k + spec.input_offset) % len(inputs)]
        state["progress"][0] += 1
        if inp[0] == "structural":  # times its own steps: write, visibility, undo
            _structural(backend, inp[1], spec, kinds, state["progress"])
        else:
            if due is not None:
                intended = t0 + float(due[i])
                if (delay := intended - time.perf_counter()) > 0:
                    time.sleep(delay)
                if stop.is_set():
                    break
                begin_ns, late = int(intended * 1e9), time.perf_counter() - intended > 0.001
            else:
                begin_ns, late = time.perf_counter_ns(), False
            kind_name, answer, exc = _timed_call(backend, inp, spec, state)
            _record(kinds, kind_name, inp, answer, exc, time.perf_counter_ns() - begin_ns, late, timeout_ns, spec)
        if time.perf_counter() >= next_flush:
            out.put(("interval", wid, {k_: v.payload() for k_, v in kinds.items()}))
            kinds = {}
            next_flush = time.perf_counter() + spec.interval_s
    out.put(("interval", wid, {k_: v.payload() for k_, v in kinds.items()}))


def budget_end(spec: PhaseSpec, t0: float) -> float:
    """When a closed-loop worker starts no further op: at the budget's longest stretch, where the parent stops
    the phase whatever it has. Before, Permify's heaviest lookup (22-24 s an op) began a second op after its
    first ended past the 5.3 s stretch and the phase waited for it: 12-24 s a round (20261127-154106)."""
    if spec.mode != "closed" or not spec.budget_s or spec.budget_s >= spec.max_seconds:
        return math.inf
    return t0 + spec.budget_s * BUDGET_STRETCH


def _structural(backend, op, spec: PhaseSpec, kinds: dict[str, _Kind], progress: list[int]) -> None:
    rec = _WriteRecorder(kinds, spec.max_examples, progress)
    try:
        run_write_op(backend, op, rec, spec.visibility_bound_s)
    except Exception as e:  # noqa: BLE001 - counted like any failed op
        errs = rec._kind("write").errors
        errs[type(e).__name__] = errs.get(type(e).__name__, 0) + 1


def _record(kinds: dict[str, _Kind], kind_name: str, inp, answer, exc: BaseException | None, lat_ns: int,
            late: bool, timeout_ns: int, spec: PhaseSpec) -> None:
    """One timed op into its kind's interval counters: a timeout, an error by type, or a latency + check."""
    kd = kinds.get(kind_name)
    if kd is None:
        kd = kinds[kind_name] = _Kind()
    kd.late += int(late)
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
                rel = mixed_write(spec, state["rng"], state["scratch"])
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
#
# One state machine (PhaseState) drives every phase through its stages: spawn -> ready -> warm ->
# measured -> done -> verdict. Where the workers run is a pool: _LocalPool (this host's processes or
# threads) here, the Dask pool of scenarios/distributed.py for many hosts. Both feed the same messages.


class WorkerPool(Protocol):
    def start(self) -> dict[int, str]: ...  # spawn the workers; worker id -> host label ({} when local)
    def messages(self, timeout: float) -> list[tuple[str, int, Any]]: ...  # [] when none came in time
    def alive(self) -> bool: ...
    def go(self) -> None: ...  # connected: warm up
    def begin(self) -> float: ...  # start measuring at one instant; returns it on this host's perf_counter
    def window(self, observed_s: float) -> float: ...  # the measured window's length, best known
    def stop(self) -> None: ...
    def release(self) -> None: ...  # the measured window is closed: clean up and disconnect
    def abort(self) -> None: ...  # never measure: let every worker run to its end at once
    def join(self) -> None: ...


@dataclass
class PhaseState:
    """Counts what the workers report, hands every interval to the sink, and holds the verdict."""

    spec: PhaseSpec
    sink: Callable[[dict], None]
    hosts: dict[int, str] = field(default_factory=dict)  # worker id -> load host, when spread over hosts
    ready: int = 0
    warm: int = 0
    measured: int = 0
    done: int = 0
    fatal: list[str] = field(default_factory=list)
    ops: int = 0
    issued: int = 0
    warmup_ops: int = 0
    failed_ops: int = 0
    status: str = "complete"
    reason: str = ""
    wall: float = 0.0
    stopped_workers: int = 0
    hung_workers: int = 0
    progress: dict[int, tuple[int, float]] = field(default_factory=dict)  # worker -> (heartbeat value, when it moved)
    finished: set[int] = field(default_factory=set)  # workers that measured their share
    last_finish: float = 0.0  # when a worker last measured its share

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
            for kind, p in payload.items():
                self.ops += p["ops"]
                self.issued += p["ops"] + p["timeouts"] + sum(p["errors"].values())
                self.failed_ops += p["timeouts"] + sum(p["errors"].values())
                self.sink({"type": "interval", "phase": spec.phase_id, "backend": spec.backend,
                           "scenario": spec.scenario, "worker": wid, **host, "kind": kind, **p})
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


def preload_worker_modules(classes: list[type]) -> None:
    """Import the harness and the backends' drivers once, into the forkserver every worker forks from.

    Each worker otherwise imported them itself: 32 workers importing numpy and cassandra-driver at once
    were ready after 33 s (two cores, under load), and make bench spent 565 s of its 41 min starting
    32-worker phases; preloaded, 32 workers were up in 1.5 s. A no-op once
    the forkserver runs; a module that fails to import is skipped by the forkserver (ImportError)."""
    mods = ["authzbench.scenarios.runner"]
    for cls in classes:
        if cls.concurrency == "process":
            mods += [cls.__module__, *cls.worker_modules]
    mp.get_context("forkserver").set_forkserver_preload(list(dict.fromkeys(mods)))


class _LocalPool:
    """This host's workers: forkserver processes (no inherited driver threads), or threads for in-process
    engines."""

    def __init__(self, spec: PhaseSpec, factory: Callable, inputs: list, concurrency_model: str):
        if concurrency_model == "thread":
            self.out: Any = queue.Queue()
            self.ev = [threading.Event() for _ in range(4)]  # go, start, stop, release

            class _V:
                value = 0.0

            self.t0: Any = _V()
            make: Callable[..., Any] = lambda **kw: threading.Thread(daemon=True, **kw)  # noqa: E731
        else:
            ctx = mp.get_context("forkserver")
            self.out = ctx.Queue()
            self.ev = [ctx.Event() for _ in range(4)]
            self.t0 = ctx.Value("d", 0.0)
            make = lambda **kw: ctx.Process(daemon=True, **kw)  # noqa: E731
        go, start, stop, release = self.ev
        self.workers = [make(target=worker_main, args=(w, spec, factory, inputs, self.out, go, start, stop,
                                                        self.t0, release)) for w in range(spec.concurrency)]

    def start(self) -> dict[int, str]:
        for w in self.workers:
            w.start()
        return {}

    def messages(self, timeout: float) -> list[tuple[str, int, Any]]:
        try:
            return [self.out.get(timeout=timeout)]
        except queue.Empty:
            return []

    def alive(self) -> bool:
        return any(_alive(w) for w in self.workers)

    def go(self) -> None:
        self.ev[0].set()

    def begin(self) -> float:
        self.t0.value = time.perf_counter() + 0.05  # every worker shares one schedule origin
        self.ev[1].set()
        return self.t0.value

    def window(self, observed_s: float) -> float:
        return observed_s

    def stop(self) -> None:
        self.ev[2].set()

    def release(self) -> None:
        self.ev[3].set()

    def abort(self) -> None:
        for e in (self.ev[2], self.ev[0], self.ev[1], self.ev[3]):  # stop first: nobody measures
            e.set()

    def join(self) -> None:
        for w in self.workers:
            if isinstance(w, threading.Thread):
                w.join(timeout=0.5)
            else:
                w.join(timeout=0.2 if STOP.is_set() else 2)
                if w.is_alive():
                    w.kill()
                    w.join(timeout=2)


class KeptWorkers:
    """Worker processes kept for the phases of one backend's visit, so a phase does not start its own.

    Starting 32 forkserver workers took 1.3-2.7 s per 32-worker phase (the no-op backend: 1.6-1.9 s), and
    make bench ran 144 such phases: 398 s of its 893 s of phases went to starting and stopping workers.
    A phase uses the first N of them; a phase that ends with a worker stopped, hung or gone, or that did not
    complete, leaves them all to be replaced before the next one (a process stopped mid-op may hold the
    queue's lock; a connection that saw its server go is not trusted)."""

    def __init__(self) -> None:
        self.ctx = mp.get_context("forkserver")
        self.procs: list[Any] = []
        # inputs pickled once, by id (the list is kept, so its id is not reused while it is here)
        self._blobs: dict[int, tuple[list, bytes]] = {}
        self._fresh()

    def _fresh(self) -> None:
        self.out: Any = self.ctx.Queue()
        self.events = tuple(self.ctx.Event() for _ in range(4))  # go, start, stop, release
        self.t0: Any = self.ctx.Value("d", 0.0)
        self.commands: list[Any] = []
        self.held: list[set[int]] = []  # per worker: the keys of the inputs it already holds
        self.broken = False

    def payload(self, w: int, inputs: list) -> tuple[int, bytes | None]:
        """(key, pickled inputs, or None when worker w holds them). Sending a check phase's 8,000 inputs to
        each of 32 workers took 2.6 s of a 1.3 s phase on Cassandra; now they go to a worker once a visit."""
        key = id(inputs)
        if key not in self._blobs:
            self._blobs[key] = (inputs, pickle.dumps(inputs, protocol=pickle.HIGHEST_PROTOCOL))
        if key in self.held[w]:
            return key, None
        self.held[w].add(key)
        return key, self._blobs[key][1]

    def ensure(self, n: int) -> None:
        """At least n live workers, idle, their events cleared and their queue empty."""
        if self.broken or any(not p.is_alive() for p in self.procs):
            self.close()
            self._fresh()
        while len(self.procs) < n:
            cmd = self.ctx.SimpleQueue()
            p = self.ctx.Process(daemon=True, target=kept_worker_main,
                                 args=(len(self.procs), cmd, self.out, self.events, self.t0))
            p.start()
            self.procs.append(p)
            self.commands.append(cmd)
            self.held.append(set())
        for e in self.events:
            e.clear()
        with contextlib.suppress(queue.Empty):
            while True:
                self.out.get_nowait()

    def close(self) -> None:
        for cmd, p in zip(self.commands, self.procs, strict=True):
            if p.is_alive() and not self.broken:
                with contextlib.suppress(Exception):
                    cmd.put(None)
        for p in self.procs:
            p.join(timeout=0.2 if (STOP.is_set() or self.broken) else 2)
            if p.is_alive():
                p.kill()
                p.join(timeout=2)
        self.procs = []

    def __enter__(self) -> KeptWorkers:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class _KeptPool(_LocalPool):
    """One phase on KeptWorkers: the first `concurrency` of them, told what to run instead of started."""

    def __init__(self, kept: KeptWorkers, spec: PhaseSpec, factory: Callable, inputs: list):
        self.kept, self.n, self.cmd = kept, spec.concurrency, (spec, factory, inputs)
        self.out, self.ev, self.t0 = kept.out, kept.events, kept.t0
        self.finished: set[int] = set()

    def start(self) -> dict[int, str]:
        self.kept.ensure(self.n)
        self.out, self.ev, self.t0 = self.kept.out, self.kept.events, self.kept.t0
        self.t0.value = 0.0
        spec, factory, inputs = self.cmd
        for w in range(self.n):
            self.kept.commands[w].put((spec, factory, *self.kept.payload(w, inputs)))
        return {}

    def messages(self, timeout: float) -> list[tuple[str, int, Any]]:
        msgs = super().messages(timeout)
        self.finished |= {wid for m, wid, _ in msgs if m == "done"}
        return msgs

    def alive(self) -> bool:
        return any(self.kept.procs[w].is_alive() for w in range(self.n) if w not in self.finished)

    def join(self) -> None:
        """Every worker back to idle ("done"), else the pool is replaced before the next phase."""
        deadline = time.perf_counter() + (0.2 if STOP.is_set() else 2)
        while len(self.finished) < self.n and time.perf_counter() < deadline and self.alive():
            self.messages(0.1)
        if len(self.finished) < self.n:
            self.kept.broken = True


def run_phase(spec: PhaseSpec, factory: Callable, inputs: list, sink: Callable[[dict], None],
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


def drive_phase(spec: PhaseSpec, pool: WorkerPool, sink: Callable[[dict], None],
                on_window: Callable[[bool], None] | None = None) -> PhaseResult:
    """The stages of a phase over any pool of workers: spawn, ready/warm, measure, verdict."""
    state = PhaseState(spec, sink)
    sink({"type": "phase_start", "phase": spec.phase_id,
          **{k: v for k, v in asdict(spec).items() if k not in ("stages",)}, "stages": spec.stages})
    wall0 = time.perf_counter()
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
    _await_progressing(state, pool, lambda: state.warm + len(state.fatal) >= n, spec.max_seconds + spec.timeout_s + 30)
    return True


def _await_progressing(state: PhaseState, pool: WorkerPool, until: Callable[[], bool], floor_s: float) -> bool:
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
    closed = spec.mode == "closed"
    # Open loop: ops due before the end may start a moment late; 0.25 s grace, then the rest is dropped.
    limit = spec.max_seconds if closed else spec.duration_s + 0.25

    def measured() -> bool:
        return state.measured + len(state.fatal) >= n

    def budget_spent() -> bool:  # the intended stop: time is up and the percentiles have their ops
        if not closed or not spec.budget_s or spec.budget_s >= spec.max_seconds:
            return False
        spent = time.perf_counter() - measured0
        return spent >= spec.budget_s and (state.issued >= spec.min_ops or spent >= spec.budget_s * BUDGET_STRETCH)

    finished = _pump(state, pool, lambda: measured() or budget_spent(), measured0 + limit)
    if not measured():
        pool.stop()
        if budget_spent():
            state.reason = (f"time budget: stopped as intended after {time.perf_counter() - measured0:.1f} s "
                            f"(budget {spec.budget_s:g} s, {state.issued:,} ops)")  # status stays complete
        elif closed:
            state.flag("incomplete", f"stopped at the {spec.max_seconds:.0f} s cap before all {spec.iterations} "
                                     "ops ran")
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
        state.flag("incomplete", f"{stopped} worker(s) still running (last progress {idle:.0f} s before) at the "
                                 "wait's bound; stopped")


def _verdict(state: PhaseState) -> PhaseResult:
    spec = state.spec
    if STOP.is_set():
        state.status, state.reason = "interrupted", f"interrupted by {signal_name()}; the ops recorded so far are kept"
    scheduled = spec.scheduled_ops() if spec.mode == "open" and state.status != "failed" else None
    dropped = max(0, scheduled - state.issued) if scheduled is not None else 0
    result = PhaseResult(spec.phase_id, state.status, state.wall, state.reason, scheduled, dropped, state.ops,
                         state.stopped_workers, state.hung_workers)
    state.sink({"type": "phase_end", "phase": spec.phase_id, "backend": spec.backend, "scenario": spec.scenario,
                "status": state.status, "reason": state.reason, "wall_s": state.wall, "scheduled": scheduled,
                "dropped": dropped, "warmup_ops": state.warmup_ops, "ops": state.ops,
                "stopped_workers": state.stopped_workers, "hung_workers": state.hung_workers})
    return result


def _alive(w: Any) -> bool:
    return w.is_alive()
