"""A phase as data: what to run (PhaseSpec, BackendFactory), what came of it (PhaseResult), and the open
loop's schedule (cumulative_ops, schedule_times) and the closed loop's last start (budget_end). Read by the
workers (measure/worker.py), the driver (measure/runner.py), the phase plan and the report."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from authzbench.backends.registry import load_symbol
from authzbench.workloads.writes import VISIBILITY_BOUND_S

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
    # mixed: relation written, object drawn from [0, n_resources)
    scratch_relation: str = "resource_viewer_user"
    n_resources: int = 1
    repeat: int = 0
    interval_s: float = 1.0
    max_examples: int = 5
    write_kind: str = "acl"  # mixed: which edge the writes change (see workloads/writes.py MIXED_WRITES)
    write_targets: dict[str, list[int]] = field(default_factory=dict)  # mixed: object ids per write kind
    visibility_bound_s: float = VISIBILITY_BOUND_S  # write scenarios: never visible within this = an error
    consistency: str = ""  # a read consistency mode this phase runs under (backends with consistency_modes)
    input_offset: int = 0  # closed loop: the first input this phase measures (each round takes its own slice)
    attempt: int = 0  # > 0: a re-run of a phase that other processes disturbed (phase._judge_disturbance)
    # churn: structural changes/s over the writer workers (the stages are the checks')
    churn_rate: float = 0.0
    churn_writers: int = 0  # churn: the last this many workers write; the others read

    @property
    def phase_id(self) -> str:
        load = f"c{self.concurrency}" if self.mode == "closed" else \
            f"open{self.concurrency}@{self.stages[-1][0]:g}" if self.stages else f"open{self.concurrency}"
        mode = f"@{self.consistency}" if self.consistency else ""
        again = f"/a{self.attempt}" if self.attempt else ""
        if self.churn_writers:
            return (f"{self.backend}/{self.scenario}{mode}/open{self.concurrency}@{self.stages[0][0]:g}"
                    f"+churn{self.churn_rate:g}/r{self.repeat}{again}")
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


def budget_end(spec: PhaseSpec, t0: float) -> float:
    """When a closed-loop worker starts no further op: at the budget's longest stretch, where the parent stops
    the phase whatever it has. Before, Permify's heaviest lookup (22-24 s an op) began a second op after its
    first ended past the 5.3 s stretch and the phase waited for it: 12-24 s a round (20261127-154106)."""
    if spec.mode != "closed" or not spec.budget_s or spec.budget_s >= spec.max_seconds:
        return math.inf
    return t0 + spec.budget_s * BUDGET_STRETCH
