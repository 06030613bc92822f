"""A structural write op run against a backend (workloads/writes.py WriteOp, sampled there): setup, the timed
change through the one measurement (measure/timing.py), its visibility probed until it shows (the lag, stale
reads and stale allows), the timed undo, teardown; and the checks for ops left behind."""

from __future__ import annotations

import time

from authzbench.measure.timing import timed
from authzbench.workloads.writes import POLL_S, VISIBILITY_BOUND_S, WriteOp


def run_write_op(backend, op: WriteOp, rec, bound_s: float = VISIBILITY_BOUND_S) -> None:
    """Setup, the timed change, visibility, the timed undo (grants only), visibility again, teardown.
    `rec` is the worker's recorder (worker._WriteRecorder): rec.write(ns, rows), rec.visible(ns),
    rec.read(ok, example), rec.count(name), rec.never_visible(example)."""
    for rel in op.setup:
        backend.write(rel)
    revoked = False
    try:
        if op.revoke_first:
            _await(backend, op.probe, True, bound_s, None, rec)  # the grant is visible before it is revoked
            _timed_change(backend, op, insert=False, rec=rec, bound_s=bound_s)
            revoked = True
        else:
            _timed_change(backend, op, insert=True, rec=rec, bound_s=bound_s)
            _timed_change(backend, op, insert=False, rec=rec, bound_s=bound_s)
    finally:
        for rel in reversed(op.setup):
            # A revoked grant is not deleted again: on the closure stores a delete of an absent edge still
            # recomputes its reach (FerretDB: ~20 s of revoke_then_check's 62 s, 20261128-053218). After a
            # failed revocation it is: that cleans up.
            if not (revoked and rel == op.change):
                backend.delete(rel)


def _timed_change(backend, op: WriteOp, *, insert: bool, rec, bound_s: float) -> None:
    rows0 = backend.rows_touched
    change = timed(lambda: (backend.write if insert else backend.delete)(op.change))
    if change.error is not None:  # the op fails; the worker counts it (worker._structural)
        raise change.error
    t1 = change.end_ns
    rec.write(t1 - change.sent_ns, backend.rows_touched - rows0 if backend.counts_rows else None)
    _await(backend, op.probe, insert, bound_s, t1, rec)
    applied = insert != op.revoke_first
    want, before = (op.control_applied, op.control_base) if applied else (op.control_base, op.control_applied)
    got = backend.check(*op.control)
    if got != want and got == before:  # right for the state before this write: stale, not wrong
        rec.count("stale_reads")
        return
    rec.read(got == want, {"op": op.kind, "control": list(op.control), "expected": want,
                           "after": "grant" if insert else "revoke"})


def _await(backend, probe: tuple[int, str, int], want: bool, bound_s: float, t1: int | None, rec) -> None:
    """Check until the probe answers `want`. With t1 (the write's return): the lag from t1 to the start of
    the first check that reflects the write is recorded; earlier answers are stale reads (the state
    before the write), and a revocation whose first check still allows is a stale allow."""
    start = time.perf_counter_ns()  # the bound on the polling, not an op's latency
    first = True
    while True:
        asked = timed(lambda: bool(backend.check(*probe)))
        if asked.error is not None:
            raise asked.error
        if asked.answer == want:
            if t1 is not None:
                rec.read(True)
                rec.visible(max(0, asked.sent_ns - t1))
            return
        if t1 is not None:  # the answer of the state before the write: stale, not wrong
            rec.count("stale_reads")
            if first and not want:
                rec.count("stale_allows")
        first = False
        if time.perf_counter_ns() - start > bound_s * 1e9:
            rec.never_visible({"probe": list(probe), "want": want, "never_visible_within_s": bound_s})
            return
        time.sleep(POLL_S)


def left_behind(backend, ops: list[WriteOp]) -> list[WriteOp]:
    """Ops whose probe or control still allows: both are False on the loaded dataset (their subject is
    scratch), so a True means an op stopped midway (a worker stopped at the phase's time limit) left its
    grant in place, and a later op reusing its scratch ids would see it."""
    return [op for op in ops if backend.check(*op.probe) or backend.check(*op.control)]


def clean_up(backend, op: WriteOp) -> None:
    """Delete every edge an op writes (deleting an absent edge is a no-op on every backend)."""
    for rel in (op.change, *reversed(op.setup)):
        backend.delete(rel)
