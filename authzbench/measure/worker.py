"""The worker side of a phase: connect, warm up, run this worker's share of the ops, time every call with
measure/timing.py (perf_counter_ns into an HdrHistogram in µs per op kind, each answer compared with the
oracle's: the measurement the load test and the client experiment share), and ship the interval counters
to the parent every `interval_s` (measure/runner.py drives it). A worker runs in a forkserver process, a
thread (in-process engines) or on a load host (measure/distributed.py).

Open loop: op k starts at its intended time t_k from the schedule and its latency runs from t_k, not from when
the worker got to it, so queueing shows (no coordinated omission)."""

from __future__ import annotations

import contextlib
import functools
import multiprocessing as mp
import pickle
import signal
import threading
import time
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

from authzbench.measure.inflight import (
    CHURN_GAP_PER_PENDING_S,
    CHURN_IN_FLIGHT,
    CHURN_PROBE_GAP_S,
    Pipeline,
    churn_writer,
    run_pipelined,
)
from authzbench.measure.timing import OpCounters, timed
from authzbench.measure.visibility import run_write_op
from authzbench.workloads.spec import PhaseSpec, budget_end, schedule_times
from authzbench.workloads.writes import mixed_write

HEARTBEAT_S = 2.0  # how often a worker tells the parent how far it got (runner.HANG_S judges the silence)


class PhaseEvents(NamedTuple):
    """The four signals a phase's pool gives its workers, set in this order: `go` (connected: warm up),
    `start` (measure from the shared origin), `stop` (end the share now), `release` (the measured window is
    closed: clean up and disconnect). multiprocessing Events for processes, threading Events for threads."""

    go: Any
    start: Any
    stop: Any
    release: Any

    @classmethod
    def made_by(cls, event: Callable[[], Any]) -> PhaseEvents:
        return cls(go=event(), start=event(), stop=event(), release=event())

    def abort(self) -> None:
        """Never measure: every signal at once, stop first, so a worker let through go and start measures
        nothing."""
        for e in (self.stop, self.go, self.start, self.release):
            e.set()


class _WriteRecorder:
    """What a structural write op reports (workloads/writes.py), into the worker's interval counters:
    kind "write" (write latency, rows touched, stale reads/allows, checked reads) and kind "visibility"
    (the lag from a write's return until a check reflected it)."""

    def __init__(
        self, kinds: dict[str, OpCounters], max_examples: int, progress: list[int] | None = None) -> None:
        self.kinds, self.max_examples = kinds, max_examples
        # every step bumps it (the heartbeat's evidence)
        self.progress = progress if progress is not None else [0]

    def _kind(self, name: str) -> OpCounters:
        self.progress[0] += 1
        kd = self.kinds.get(name)
        if kd is None:
            kd = self.kinds[name] = OpCounters()
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
        self._kind("write").example(ex, self.max_examples)


def worker_main(wid: int, spec: PhaseSpec, factory: Callable, inputs: list, out: Any, events: PhaseEvents,
                t0_shared: Any) -> None:
    """One worker of one phase: connect, run the phase, disconnect. events: the phase's signals, as
    kept_worker_main takes them."""
    _ignore_sigint()
    try:
        backend = factory()
        backend.connect()
    except BaseException as e:  # noqa: BLE001 - reported to the parent, which decides
        out.put(("fatal", wid, f"{type(e).__name__}: {e}"))
        return
    try:
        _phase_body(wid, spec, backend, inputs, out, events, t0_shared)
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


def kept_worker_main(wid: int, commands: Any, out: Any, events: PhaseEvents, t0_shared: Any) -> None:
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


def _phase_body(wid: int, spec: PhaseSpec, backend, inputs: list, out: Any, events: PhaseEvents,
                t0_shared: Any) -> None:
    """One phase on a connected backend: ready, warm up, run this worker's share, clean up after itself."""
    stop = events.stop
    state = {"rng": np.random.default_rng([wid, spec.repeat, 7]), "pending": [],
             "scratch": spec.scratch_user + wid, "progress": [0]}
    beating = threading.Event()
    beat = threading.Thread(
        target=_heartbeat, args=(out, wid, backend, state["progress"], beating), daemon=True)
    beat.start()
    try:
        out.put(("ready", wid, None))
        events.go.wait()
        out.put(("warm", wid, _warm_up(backend, inputs, spec, state, wid, stop)))
        events.start.wait()
        _measure_share(backend, inputs, spec, state, wid, stop, t0_shared.value, out)
        # Stay connected until the parent closed the measured window: the monitor's last sample must
        # still see the server processes serving us (PostgreSQL forks one per connection).
        out.put(("measured", wid, None))
        events.release.wait(60)
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


# A worker stops warming up after this long, once it ran an op: an op that slow is warm after one. Permify's
# heaviest lookup (20 s an op) warmed up for 2 ops, 40 s of a 63 s hand-off (20261128-042657).
WARMUP_MAX_S = 1.0


def _warm_up(backend, inputs: list, spec: PhaseSpec, state: dict, wid: int, stop: Any) -> int:
    """This worker's share of the warm-up ops (at most WARMUP_MAX_S of them): run, not recorded. Returns how
    many it ran."""
    n, ran, t0 = spec.concurrency, 0, time.perf_counter()
    for k in range(wid, spec.warmup, n):
        if stop.is_set() or (ran and time.perf_counter() - t0 > WARMUP_MAX_S):
            break
        ran += 1
        with contextlib.suppress(Exception):
            inp = inputs[k % len(inputs)]
            # a read warms up on its own first inputs, as round 0 (offset 0) always did
            if inp[0] != "structural":
                inp = inputs[(k + spec.input_offset) % len(inputs)]
            if inp[0] == "structural":  # its warm-up op (catalog._write_sampler), else the op itself
                # checked once, not polled until visible: under a 5 s snapshot window the polling made
                # SpiceDB's two warm-up ops 18 s of each write phase (20261128-013743) and warmed nothing more
                run_write_op(backend, inp[2] or inp[1], _WriteRecorder({}, 0), 0.0)
            else:
                _op(backend, inp, spec, state)[1]()
    return ran


# A worker looks at the stop event after the op that ends this long after it last looked, not before every op:
# a multiprocessing Event's is_set() takes a lock, ~0.5 µs of an op's bookkeeping (issue 56). The budget's end
# and the interval's shipping are among the times it looks, so only a stop from the parent can wait this long.
POLL_S = 0.002


class _Share:
    """The bookkeeping around one worker's measured ops: its op kinds' counters, when the interval is shipped,
    and when the worker looks whether to stop."""

    def __init__(self, spec: PhaseSpec, t0: float, stop: Any, out: Any, wid: int) -> None:
        self.spec, self.stop, self.out, self.wid = spec, stop, out, wid
        self.origin_ns = int(t0 * 1e9)  # the phase's measured origin: the longest op's time counts from it
        self.kinds: dict[str, OpCounters] = {}
        self.last_start = budget_end(spec, t0)
        now = time.perf_counter()
        self.next_flush, self.look_at = now + spec.interval_s, now

    def kind(self, name: str) -> OpCounters:
        kd = self.kinds.get(name)
        if kd is None:
            kd = self.kinds[name] = OpCounters()
        return kd

    def over(self, now: float) -> bool:
        """Before the first op and after each: ship the interval when due; True when no further op may
        start."""
        if now < self.look_at:
            return False
        if now >= self.next_flush:
            self.flush()
            self.next_flush = now + self.spec.interval_s
        if self.stop.is_set() or now >= self.last_start:
            return True
        self.look_at = min(now + POLL_S, self.next_flush, self.last_start)
        return False

    def flush(self) -> None:
        self.out.put(("interval", self.wid, {k: v.payload(self.origin_ns) for k, v in self.kinds.items()}))
        self.kinds = {}


def _measure_share(backend, inputs: list, spec: PhaseSpec, state: dict, wid: int, stop: Any, t0: float,
                   out: Any) -> None:
    """This worker's measured ops (every n-th from wid), each timed and checked; intervals shipped as they
    fill. Open loop: op k starts at its intended time and its latency runs from that time."""
    n, m, offset, progress = spec.concurrency, len(inputs), spec.input_offset, state["progress"]
    timeout_ns = int(spec.timeout_s * 1e9)
    # No gc.freeze() after the set-up: measured side by side (fresh processes alternating, this loop on a fake
    # backend over 32,000 checks or 2,000 lookups, the drivers imported: 190,000 tracked objects), the cyclic
    # collector took 0.002 µs of an op's 3.1 µs without it, nothing to save.
    prepared = _prepared(backend, inputs)
    if t0 - time.perf_counter() > 0:  # one origin for all workers: the parent measures wall time from it
        time.sleep(t0 - time.perf_counter())
    if spec.churn_writers:  # a churn step: the last churn_writers workers write, the others read
        n = spec.concurrency - spec.churn_writers
        if wid >= n:
            return _churn_writes(backend, [i[1] for i in inputs if i[0] == "structural"], spec, (wid - n, t0),
                                 (stop, out, progress))
        inputs = [i for i in inputs if i[0] != "structural"]
        prepared, m = _prepared(backend, inputs), len(inputs)
    if inputs and inputs[0][0] == "structural":  # a write phase: its ops pipelined (measure/inflight.py)
        last_start = budget_end(spec, t0)
        return _measure_writes(backend, inputs, spec, (wid, n), lambda: stop.is_set() or
                               time.perf_counter() >= last_start, (out, progress))
    # The open loop's ops are dealt out in fixed slices (every n-th to this worker), not from a shared queue:
    # one slow op delays its own worker's next ones while others idle. Kept: a shared dispatch needs one queue
    # across processes and load hosts; what it costs shows as the gap between the latency from the intended
    # start and the service time from the send (both recorded: OpCounters' hist and service_hist).
    due = schedule_times(spec.start_rate, spec.stages, wid, n) if spec.mode == "open" else None
    share = _Share(spec, t0, stop, out, wid)
    ks = range(wid, spec.iterations if due is None else len(due) * n, n)
    for i, k in enumerate(ks if not share.over(time.perf_counter()) else ()):
        kind_name, call, inp = prepared[(k + offset) % m]
        progress[0] += 1
        begin_ns, late = None, False
        if due is not None:
            intended = t0 + float(due[i])
            if (delay := intended - time.perf_counter()) > 0:
                time.sleep(delay)
            if stop.is_set():
                break
            begin_ns, late = int(intended * 1e9), time.perf_counter() - intended > 0.001
        if spec.write_share > 0 and (write := _drawn_write(backend, spec, state)):
            kind_name, call = write  # in place of the read, drawn before the clock starts
        share.kind(kind_name).add(inp if kind_name == inp[0] else None, timed(call), begin_ns=begin_ns,
                                  late=late, timeout_ns=timeout_ns, max_examples=spec.max_examples)
        if share.over(time.perf_counter()):
            break
    share.flush()


def _prepared(backend, inputs: list) -> list[tuple[str, Callable[[], Any] | None, tuple]]:
    """Each input's (kind, call, input), made once before the measured window: the per-op dispatch and
    closure of _read cost ~0.3 µs an op. A lookup's expected answer is made a frozenset here, once, not an
    op: OpCounters compares a set with it (a set of the oracle's 8,280 resources was ~1.4 ms of client CPU
    an op)."""
    return [("structural", None, inp) if inp[0] == "structural" else (*_read(backend, inp), _oracle_set(inp))
            for inp in inputs]


def _oracle_set(inp: tuple) -> tuple:
    op, args, expected = inp
    return (op, args, frozenset(expected)) if op == "lookup" and expected is not None else inp


def _measure_writes(
    backend, inputs: list, spec: PhaseSpec, slot: tuple[int, int], stop_at: Callable[[], bool],
    channel: tuple[Any, list[int]]) -> None:
    """A write phase's share of ops (every n-th from wid), in flight together (inflight.run_pipelined) until
    stop_at(); the counters are shipped every interval_s and at the end."""
    (wid, n), (out, progress) = slot, channel
    ops = [inputs[(k + spec.input_offset) % len(inputs)][1] for k in range(wid, spec.iterations, n)]
    rec = _WriteRecorder({}, spec.max_examples, progress)
    pipe = Pipeline(
        backend, rec, spec.visibility_bound_s, tick=_flusher(out, wid, rec.kinds, spec.interval_s))
    run_pipelined(pipe, ops, stop_at)
    out.put(("interval", wid, {k: v.payload() for k, v in rec.kinds.items()}))


def _churn_writes(
    backend, ops: list, spec: PhaseSpec, at: tuple[int, float], channel: tuple[Any, Any, list[int]]) -> None:
    """A churn step's writer (inflight.churn_writer); the counters shipped every interval_s and at the end."""
    (widx, t0), (stop, out, progress) = at, channel
    wid = spec.concurrency - spec.churn_writers + widx
    rec = _WriteRecorder({}, spec.max_examples, progress)
    pipe = Pipeline(backend, rec, spec.visibility_bound_s, CHURN_IN_FLIGHT,
                    tick=_flusher(out, wid, rec.kinds, spec.interval_s), probe_gap_s=CHURN_PROBE_GAP_S,
                    gap_per_pending_s=CHURN_GAP_PER_PENDING_S)
    churn_writer(pipe, ops[widx::spec.churn_writers], spec, widx, t0, stop)
    out.put(("interval", wid, {k: v.payload() for k, v in rec.kinds.items()}))


def _flusher(out: Any, wid: int, kinds: dict[str, OpCounters], interval_s: float) -> Callable[[], None]:
    """A tick that ships the counters (and starts them afresh) once interval_s passed since the last."""
    next_flush = [time.perf_counter() + interval_s]

    def tick() -> None:
        if time.perf_counter() >= next_flush[0]:
            out.put(("interval", wid, {k: v.payload() for k, v in kinds.items()}))
            kinds.clear()
            next_flush[0] = time.perf_counter() + interval_s

    return tick


def _op(backend, inp, spec: PhaseSpec, state: dict) -> tuple[str, Callable[[], Any]]:
    """What one op runs, as (kind, call) for measure/timing.timed: a drawn write, else the input's read."""
    return _drawn_write(backend, spec, state) or _read(backend, inp)


def _drawn_write(backend, spec: PhaseSpec, state: dict) -> tuple[str, Callable[[], Any]] | None:
    """A mixed phase turns a share of ops into a write or a delete of a scratch relationship, drawn here,
    before the clock starts; None: this op is the input's read."""
    if spec.write_share > 0 and state["rng"].random() < spec.write_share:
        pending = state["pending"]
        if pending and state["rng"].random() < 0.5:
            gone = pending.pop()
            return "write", lambda: backend.delete(gone)
        rel = mixed_write(spec, state["rng"], state["scratch"])

        def write() -> None:
            backend.write(rel)
            pending.append(rel)  # written: deleted by a later op or after the phase

        return "write", write
    return None


def _read(backend, inp: tuple) -> tuple[str, Callable[[], Any]]:
    """An input's own op as (kind, call)."""
    op, args, _expected = inp
    if op == "check":
        return "check", functools.partial(backend.check, *args)
    if op == "lookup":
        return "lookup", lambda: list(backend.lookup_resources(*args))
    if op == "roundtrip":
        return "roundtrip", backend.baseline_roundtrip

    def unknown() -> None:  # counted as the op's error, as a backend's failure is
        raise ValueError(f"unknown op {op!r}")

    return op, unknown
