"""The churn sweep: checks at a fixed offered rate while structural changes (membership, hierarchy,
revocation) arrive at increasing rates, one open-loop phase per rate. This module holds what the run and the
report share: the defaults, the mix of changes and the one rule that says whether a step held.

A change is one timed structural write: a grant, or its revocation once the grant was seen. A step holds when
the reads meet the check SLO, the writers kept to their schedule and the changes became visible within the
freshness bound; the sweep stops at the first step that does not hold (no higher rate can hold better).

The report judges a step's check p95 by its interval too (judged): one 6 s step is one sample, and OpenFGA's
100/s step read 20.8 ms in one make bench and 25.7 ms [23.1-28.4] in the previous (20261129-201802) against a
25 ms SLO. A step whose interval lies across the SLO is undecided, neither held nor failed."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from authzbench.core.numbers import num
from authzbench.core.records import Interval

# Changes per second, one step each. A step of CHURN_STEP_S at 0.1/s would hold no change, so the sweep starts
# at 1/s; x10 a step spans a group-sync job (1/s) to an identity provider's bulk import (100/s).
CHURN_RATES = (1.0, 10.0, 100.0)
CHURN_STEP_S = 6.0
# Checks per second during every step: the same offered rate for every backend, so read latency is compared
# at equal load. Every default backend's best closed-loop check throughput exceeds it (lowest: Permify's
# 129 checks/s in 20261128-183514), but Permify's and FerretDB's via-group check p95 already exceeds the 25 ms
# SLO at 1 worker with no change arriving, so their sweep ends at the first step: the report's read-heavy
# row shows the reads alone.
CHURN_READ_RATE = 100.0
# Structural changes are realistic when group membership dominates and hierarchy changes are rare; the
# revocations are the ones a review asks about (is access gone when the write returns?).
CHURN_MIX = (("membership", 0.75), ("revoke", 0.20), ("hierarchy", 0.05))
# A change visible within this counts as fresh: the longest default cache window among the engines is 5 s
# (SpiceDB's quantization), so 10 s separates an engine's stated window from one that falls behind.
CHURN_FRESHNESS_S = 10.0
# Writers fall behind when more than this share of the scheduled changes started over CHURN_LATE_S late or
# were never issued in the step.
CHURN_LATE_SHARE, CHURN_LATE_S = 0.10, 1.0


@dataclass(frozen=True)
class Step:
    """What a churn step measured, as the rule needs it."""

    read_p95_ms: float | None  # None: no read completed
    scheduled: int  # changes due in the step
    late: int  # changes started over CHURN_LATE_S late, or never issued
    never_visible: int  # changes not visible within the phase's visibility bound
    lag_p95_s: float | None  # visibility lag p95 of the changes seen; None: none seen
    read_errors: int = 0
    write_errors: int = 0  # changes whose write (or probe) failed, NeverVisible aside


def why_not_held(step: Step, slo_ms: float, freshness_s: float = CHURN_FRESHNESS_S,
                 read_iv: tuple[float, float] | None = None) -> str:
    """'' when the step held, else the first reason it did not (the report prints it). With read_iv (the check
    p95's interval, ms) the reads fail the step only when the whole interval is over the SLO (see judged)."""
    if step.read_p95_ms is None:
        return "no check completed"
    if step.read_errors:
        return f"{step.read_errors} checks failed"
    if step.write_errors:
        return f"{step.write_errors} changes failed"
    if step.read_p95_ms > slo_ms and (read_iv is None or read_iv[0] > slo_ms):
        return f"check p95 {num(step.read_p95_ms)} ms{interval_text(read_iv)} over the {slo_ms:g} ms SLO"
    if step.scheduled and step.late > CHURN_LATE_SHARE * step.scheduled:
        return f"writes fell behind: {step.late} of {step.scheduled} changes over {CHURN_LATE_S:g} s late"
    if step.never_visible:
        return f"{step.never_visible} changes never visible"
    if step.lag_p95_s is None and step.scheduled:
        return "no change became visible"
    if step.lag_p95_s is not None and step.lag_p95_s > freshness_s:
        return f"visibility lag p95 {step.lag_p95_s:.3g} s over {freshness_s:g} s"
    return ""


HELD, UNDECIDED, FAILED = "held", "undecided", "failed"


def judged(step: Step, slo_ms: float, read_iv: tuple[float, float] | None,
           freshness_s: float = CHURN_FRESHNESS_S) -> tuple[str, str]:
    """(HELD, UNDECIDED or FAILED; why): why_not_held with the check p95 judged by its interval read_iv (ms).
    Within the SLO it holds, over it it fails; lying across the SLO it decides nothing, and the step is
    undecided unless another condition fails it (writers behind, changes unseen: then it failed whatever its
    reads). No interval: the p95 alone decides, as the sweep does when it chooses to go on."""
    if why := why_not_held(step, slo_ms, freshness_s, read_iv):
        return FAILED, why
    p = step.read_p95_ms
    if read_iv is not None and p is not None and read_iv[0] <= slo_ms < read_iv[1]:
        return UNDECIDED, f"check p95 {num(p)} ms{interval_text(read_iv)} against the {slo_ms:g} ms SLO"
    return HELD, ""


def interval_text(iv: tuple[float, float] | None) -> str:
    """' [23.1-28.4]' (ms, as num prints them; '' without an interval)."""
    return "" if iv is None else f" [{num(iv[0])}-{num(iv[1])}]"


def step_of(intervals: Iterable[Interval]) -> Step:
    """A churn step's Step from its phase's Interval records: "check" (the reads), "write" (one
    op a change; late, extras scheduled and unissued, errors with NeverVisible) and "visibility" (the lag,
    µs)."""
    from authzbench.core.metrics import merge, summarize

    hists: dict[str, list[str]] = {"check": [], "visibility": []}
    sums = {"scheduled": 0, "late": 0, "never_visible": 0, "read_errors": 0, "write_errors": 0}
    for iv in intervals:
        kind, extra, errors = iv.kind, iv.extra or {}, iv.errors or {}
        if kind in hists and iv.ops:
            hists[kind].append(iv.hist)
        if kind == "check":
            sums["read_errors"] += iv.timeouts + sum(errors.values())
        elif kind == "write":
            sums["scheduled"] += extra.get("scheduled", 0)
            sums["late"] += iv.late + extra.get("unissued", 0)
            sums["never_visible"] += errors.get("NeverVisible", 0)
            sums["write_errors"] += iv.timeouts + sum(n for e, n in errors.items() if e != "NeverVisible")
    read, lag = (summarize(merge(hists[k])) if hists[k] else None for k in ("check", "visibility"))
    return Step(
        read_p95_ms=read.p95_ms if read else None, lag_p95_s=lag.p95_ms / 1000 if lag else None, **sums)


# The check SLO a churn step is judged by when the run gave none (the CLI's --slo-check-p95 default).
SLO_CHECK_P95_MS = 25.0


# The phases before the sweep that foretell a step that cannot hold (ChurnSweep.foreseen): the 1-writer write
# phases. Reads foretell nothing certain: FerretDB's via-group check p95 at 1 worker was 107 ms in one round
# and 14.6 ms in the next (20261128-183514), so one round over the SLO could skip a step that holds.
WRITE_PHASES = ("write_membership", "write_hierarchy", "revoke_then_check")


@dataclass
class ChurnSweep:
    """One backend's churn sweep (orchestrate._Visit.run_phases): its steps (workloads/spec.PhaseSpec) run in
    ascending rate until one does not hold (why_not_held on the step's own intervals); the higher steps are
    skipped with that reason: no higher rate can hold better. A step the backend's write phases show cannot
    hold is not run either (foreseen): FerretDB's 1 change/s step took 103 s for two ~20 s writes and their
    undoing."""

    slo_ms: float
    freshness_s: float
    reason: str = ""
    fastest_write_s: float | None = None  # the quickest structural write at 1 writer, any kind
    _open: str = ""  # what the phase being run is tapped for: "step", "writes" or ""

    def stopped(self, spec: Any) -> str:
        if not spec.churn_writers:
            return ""
        if not self.reason and (why := self.foreseen(spec)):
            self.reason = f"foreseen: {why}"
        return self.reason

    def foreseen(self, spec: Any) -> str:
        """Why this step cannot hold, from the write phases before it ('' when they do not tell): a writer
        issues one change at a time, so when even the quickest write outlasts a writer's share of the schedule
        by over CHURN_LATE_S, every change after each writer's first starts later still."""
        slot_s, due = spec.churn_writers / spec.churn_rate, spec.churn_rate * spec.duration_s
        late = due - spec.churn_writers  # the changes after each writer's first
        if (self.fastest_write_s is not None and self.fastest_write_s > slot_s + CHURN_LATE_S
                and late > CHURN_LATE_SHARE * due):
            return (
                f"its quickest write took {num(self.fastest_write_s)} s at 1 writer, over the {slot_s:g} s "
                f"each of {spec.churn_writers} writers has per change at {spec.churn_rate:g}/s by more than "
                f"{CHURN_LATE_S:g} s: at least {late:g} of {due:g} changes would start late")
        return ""

    def tap(self, spec: Any) -> list[Interval] | None:
        """Where a phase's interval records are collected for the sweep (None: the sweep does not read it)."""
        one_writer = spec.concurrency == 1 and not spec.consistency and spec.scenario in WRITE_PHASES
        self._open = "step" if spec.churn_writers else "writes" if one_writer else ""
        return [] if self._open else None

    def judge(self, tap: list[Interval] | None) -> None:
        kind, self._open = self._open, ""
        if tap is None:
            return
        if kind == "step" and not self.reason:
            self.reason = why_not_held(step_of(tap), self.slo_ms, self.freshness_s)
        elif kind == "writes" and (quickest := _quickest_write_s(tap)) is not None:
            self.fastest_write_s = min(quickest, self.fastest_write_s or quickest)


def _quickest_write_s(intervals: list[Interval]) -> float | None:
    from authzbench.core.metrics import merge, summarize

    hists = [iv.hist for iv in intervals if iv.kind == "write" and iv.ops]
    return summarize(merge(hists)).min_ms / 1000 if hists else None
