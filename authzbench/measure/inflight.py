"""A worker's pipeline of structural write ops in flight (workloads/writes.py WriteOp): the next op's timed
change is issued without waiting for the previous op's visibility, so a cache window no longer sets how many
ops fit in a phase (issue 53: one op per ~10 s under a 5 s window, 1-4 ops a phase).

Each timed change (a grant, or a revocation) is probed once right after its write returns, then once per round
while it is pending; the rounds run between the worker's writes. The lag is the send time of the first probe
that reflects the change minus the write's return, as before; its resolution is one probe round (one check per
pending change, at most MAX_IN_FLIGHT, plus any write issued in between; in a churn step the gap below
CHURN_IN_FLIGHT), where one op at a time polled every POLL_S. A probe that does not reflect the change answers
the state before it: a stale read; a revocation's first probe that still allows is a stale allow. Once a grant
is seen its control is checked and its revocation is ready; once a revocation is seen, its control is checked
and the op's setup removed. A change not seen within the bound is NeverVisible and its op is cleaned up
(visibility.clean_up)."""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass

from authzbench.measure.timing import timed
from authzbench.measure.visibility import clean_up
from authzbench.workloads.writes import POLL_S, WriteOp

# At most this many ops in flight per worker. Under a 5 s snapshot window (SpiceDB's quantization; OpenFGA's
# cache showed the same 5 s lag in 20261128-160246) a change shows 0-5 s after its write, so an op holds its
# place ~5-10 s (a revoke op: its grant shown, then its revocation). revoke_then_check's one writer thus
# starts about one place's worth of ops in its 3 s budget (catalog._WRITE): 32 places give 32 timed
# revocations (>= 20 for a p95), 16 gave 16. A round of 32 probes at the engines' 1-2 ms check keeps the lag's
# resolution near 30-60 ms, ~1% of such a window.
MAX_IN_FLIGHT = 32
# A churn writer's changes are scheduled: at r changes/s over 2 writers and a 5 s window an op holds its place
# ~10 s (its grant, then its revocation, each up to 5 s to show), so ~r/2 / 1.8 x 10 ops are in flight a
# writer (1.8 changes an op in the mix): 28 at 10/s, 280 at 100/s. 400 places (and catalog.CHURN_OPS, 400 ops
# a writer) hold them, so the writers fall behind by the engine, not by the client. Each pending change is
# probed every CHURN_PROBE_GAP_S, or every CHURN_GAP_PER_PENDING_S x the pending changes when more: probes
# compete with the step's checks for the server (back to back, one worker probed ~500-1,000 times a second,
# beside 100 checks/s), so a writer probes at most ~250 times a second. The lag's resolution in a churn step
# is that gap: 0.25 s (5% of such a window) up to ~1.1 s at 100/s on it (280 pending).
CHURN_IN_FLIGHT, CHURN_PROBE_GAP_S, CHURN_GAP_PER_PENDING_S = 400, 0.25, 0.004


@dataclass
class _Pending:
    op: WriteOp
    # "arm": a revoke op's untimed grant not yet seen | "grant" | "revoke": a timed change not yet seen
    stage: str
    t1: int  # perf_counter_ns when the change's write returned (arm: when the setup was written)
    probed: int = 0  # perf_counter_ns of its last probe


class Pipeline:
    """The ops in flight of one worker. `rec` is the worker's recorder (worker._WriteRecorder)."""

    def __init__(self, backend, rec, bound_s: float, cap: int = MAX_IN_FLIGHT, tick=lambda: None,
                 probe_gap_s: float = 0.0, gap_per_pending_s: float = 0.0) -> None:
        self.backend, self.rec, self.bound_ns, self.cap = backend, rec, int(bound_s * 1e9), cap
        # a pending change is probed again no sooner than the larger of these
        self.gap_ns, self.gap_per_pending_ns = int(probe_gap_s * 1e9), int(gap_per_pending_s * 1e9)
        self.tick = tick  # called between steps: the worker ships its interval counters when one is due
        self.pending: list[_Pending] = []
        self.ready: list[WriteOp] = []  # ops whose next change is a revocation that may be issued now
        self.live: set[int] = set()  # id() of every op from its start until its teardown or clean-up

    @property
    def in_flight(self) -> int:
        return len(self.pending) + len(self.ready)

    def busy(self, op: WriteOp) -> bool:
        """The op is in flight (its scratch ids may not be reused yet)."""
        return id(op) in self.live

    def can_start(self) -> bool:
        return self.in_flight < self.cap

    def start(self, op: WriteOp) -> bool:
        """Untimed setup, then the timed grant; a revoke op's grant is its setup, seen before it is revoked
        (armed). False when the op failed (counted, cleaned up)."""
        self.live.add(id(op))
        try:
            for rel in op.setup:
                self.backend.write(rel)
        except Exception as e:  # noqa: BLE001 - counted like any failed op
            return self._fail(op, e)
        if op.revoke_first:
            self.pending.append(_Pending(op, "arm", time.perf_counter_ns()))
            return True
        return self._change(op, insert=True)

    def revoke(self, op: WriteOp) -> bool:
        """The op's timed revocation (its grant was seen); False when it failed."""
        self.ready = [o for o in self.ready if o is not op]
        return self._change(op, insert=False)

    def _change(self, op: WriteOp, *, insert: bool) -> bool:
        rows0 = self.backend.rows_touched
        change = timed(lambda: (self.backend.write if insert else self.backend.delete)(op.change))
        if change.error is not None:
            return self._fail(op, change.error)
        rows = self.backend.rows_touched - rows0 if self.backend.counts_rows else None
        self.rec.write(change.end_ns - change.sent_ns, rows)
        if not insert:
            self.rec.count("revocations")
        p = _Pending(op, "grant" if insert else "revoke", change.end_ns)
        self.pending.append(p)
        # right after the write returns: a revocation still allowed is a stale allow
        self._probe(p, first=True)
        return True

    def probe_round(self) -> None:
        """One probe of every pending change not probed within the gap (a change seen leaves the list)."""
        now, gap = time.perf_counter_ns(), max(self.gap_ns, len(self.pending) * self.gap_per_pending_ns)
        for p in list(self.pending):
            if now - p.probed >= gap:
                self._probe(p, first=False)

    def _probe(self, p: _Pending, first: bool) -> None:
        want = p.stage != "revoke"
        asked = timed(lambda: bool(self.backend.check(*p.op.probe)))
        p.probed = asked.sent_ns
        if asked.error is not None:
            self._drop(p)
            self._fail(p.op, asked.error)
            return
        if asked.answer == want:
            self._drop(p)
            try:
                self._seen(p, asked.sent_ns)
            except Exception as e:  # noqa: BLE001 - the control check failed: the op fails, counted
                self._fail(p.op, e)
            return
        if p.stage != "arm":  # the answer of the state before the write: stale, not wrong
            self.rec.count("stale_reads")
            if first and not want:
                self.rec.count("stale_allows")
        if time.perf_counter_ns() - p.t1 > self.bound_ns:
            self._drop(p)
            if p.stage != "arm":
                self.rec.never_visible({"probe": list(p.op.probe), "want": want,
                                        "never_visible_within_s": self.bound_ns / 1e9})
            self._clean(p.op)

    def _seen(self, p: _Pending, sent_ns: int) -> None:
        if p.stage == "arm":
            self.ready.append(p.op)
            return
        self.rec.read(True)
        self.rec.visible(max(0, sent_ns - p.t1))
        self._control(p.op, p.stage)
        if p.stage == "grant":
            self.ready.append(p.op)
        else:
            # The revoked change is not deleted again: on the closure stores a delete of an absent edge still
            # recomputes its reach (see visibility.run_write_op).
            self._teardown(p.op)

    def _control(self, op: WriteOp, stage: str) -> None:
        """The control's answer once the change is seen: right, stale (the state before it) or wrong. A revoke
        op's change is its revocation: its control_applied is the answer once revoked."""
        applied = (stage == "grant") != op.revoke_first
        want, before = (
            (op.control_applied, op.control_base) if applied else (op.control_base, op.control_applied))
        got = self.backend.check(*op.control)
        if got != want and got == before:
            self.rec.count("stale_reads")
            return
        self.rec.read(got == want, {"op": op.kind, "control": list(op.control), "expected": want,
                                    "after": stage})

    def _teardown(self, op: WriteOp) -> None:
        self.live.discard(id(op))
        # what is left is repaired after the phase (restore.repair_scratch)
        with contextlib.suppress(Exception):
            for rel in reversed(op.setup):
                if not (op.revoke_first and rel == op.change):
                    self.backend.delete(rel)

    def _drop(self, p: _Pending) -> None:
        self.pending = [q for q in self.pending if q is not p]

    def _fail(self, op: WriteOp, e: BaseException) -> bool:
        errs = self.rec._kind("write").errors
        errs[type(e).__name__] = errs.get(type(e).__name__, 0) + 1
        self._clean(op)
        return False

    def _clean(self, op: WriteOp) -> None:
        self.live.discard(id(op))
        with contextlib.suppress(Exception):
            clean_up(self.backend, op)

    def wait(self) -> None:
        """Between writes with nothing to issue: a probe round, then a poll interval."""
        self.tick()
        if self.pending:
            self.probe_round()
        time.sleep(POLL_S)

    def drain(self, finish: bool) -> None:
        """No new op starts: the pending changes are probed until seen or past the bound; with `finish` the
        revocations that become ready are issued too (a write phase's ops end whole), else (a churn step,
        whose changes are scheduled) they are not. Whatever is still in flight is then cleaned up."""
        while self.pending or (finish and self.ready):
            if finish and self.ready:
                self.revoke(self.ready[0])
                continue
            self.wait()
        self.close()

    def close(self) -> None:
        """Clean up every op still in flight (a stopped phase)."""
        for op in [p.op for p in self.pending] + self.ready:
            self._clean(op)
        self.pending, self.ready = [], []


def run_pipelined(pipe: Pipeline, ops: list[WriteOp], stop_at) -> None:
    """A write phase's share of ops through the pipeline: each op starts once there is room, the revocations
    are issued as soon as their grants are seen. `stop_at()` is True when no further op may start (the stop
    event, the budget's end); the ops in flight are then drained up to the bound and cleaned up."""
    try:
        for op in ops:
            while not stop_at() and (pipe.ready or not pipe.can_start()):
                if pipe.ready:
                    pipe.revoke(pipe.ready[0])
                else:
                    pipe.wait()
            if stop_at():
                break
            pipe.rec.count("started")  # the restore check repairs only the ops started (restore.touched_ops)
            pipe.start(op)
            pipe.probe_round()  # between writes: an earlier op's change may show by now
            pipe.tick()
        pipe.drain(finish=True)
    finally:
        pipe.close()


# The "write" kind's extras of a churn step, as the report reads them (rows: only where the backend counts
# them).
CHURN_EXTRAS = ("scheduled", "unissued", "revocations", "stale_allows", "stale_reads", "rows", "rows_counted")


class _Sequence:
    """A writer's ops in a fixed cyclic order: an op is taken again once it is done (no longer in flight)."""

    def __init__(self, ops: list[WriteOp]) -> None:
        self.ops, self.at = ops, 0

    def take(self, pipe: Pipeline) -> WriteOp | None:
        """The next op not in flight, or None."""
        for i in range(len(self.ops)):
            op = self.ops[(self.at + i) % len(self.ops)]
            if pipe.busy(op):
                continue
            self.at = (self.at + i + 1) % len(self.ops)
            return op
        return None


def _issue(pipe: Pipeline, seq: _Sequence) -> bool:
    """The slot's change, when one can be issued now: a ready revocation (a seen grant's, or an armed revoke
    op's) first, else the next op's grant. Revoke ops met on the way are armed (their grant written untimed),
    so their revocation is ready by a later slot instead of making this one wait for the grant to show."""
    if pipe.ready:
        pipe.revoke(pipe.ready[0])
        return True
    while pipe.can_start() and (op := seq.take(pipe)) is not None:
        pipe.start(op)
        if not op.revoke_first:
            return True
    return False


def churn_writer(pipe: Pipeline, ops: list[WriteOp], spec, widx: int, t0: float, stop) -> None:
    """A churn step's writer `widx` of spec.churn_writers: its share of the changes scheduled at
    spec.churn_rate in total, each started at its intended time or as soon after as the pipeline has one to
    issue (late: over CHURN_LATE_S after it). At the step's end no change starts; the pending ones are probed
    up to the bound and everything in flight is cleaned up. Counted in the "write" kind: late, and the extras
    scheduled (changes due) and unissued (due, never started)."""
    from authzbench.workloads.churn import CHURN_LATE_S
    from authzbench.workloads.spec import schedule_times

    due = schedule_times(spec.churn_rate, [(spec.churn_rate, spec.duration_s)], widx, spec.churn_writers)
    seq, issued = _Sequence(ops), 0
    try:
        for t in due:
            intended = t0 + float(t)
            while time.perf_counter() < intended and not stop.is_set():
                pipe.wait()
            while not stop.is_set() and not _issue(pipe, seq):
                pipe.wait()
            if stop.is_set():
                break
            issued += 1
            kd = pipe.rec._kind("write")  # the tick may have shipped the last one
            kd.late += int(time.perf_counter() - intended > CHURN_LATE_S)
        for name in CHURN_EXTRAS:  # every extra of the contract present, zero or not
            pipe.rec.count(name, 0)
        pipe.rec.count("scheduled", len(due))
        pipe.rec.count("unissued", len(due) - issued)
        pipe.drain(finish=False)
    finally:
        pipe.close()
