"""The whole run's progress and estimate of the time left, shown while bench runs: phases done / total,
elapsed, time left. The estimate is the phases' planned seconds (their budgets) plus, for each phase left, the
wall time a phase has cost beyond its window so far in this run (warm-ups, starts, loads, restore checks): a
fixed cost a phase, not a share of its window, since a tiny run's 1.3-s windows cost as much around them as
longer ones.

And the run's timeline: `timed_step` records each step (a start, a load, a restore check) as it ends."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from rich.progress import BarColumn, Progress, TextColumn

from authzbench.core import records as rec
from authzbench.core.console import console
from authzbench.results.store import RunStore
from authzbench.workloads.spec import PhaseSpec

# Wall seconds a phase costs beyond its planned window (warm-up, workers, hand-off, restore checks, re-runs,
# and the starts and loads spread over the phases), before this run has its own figure. In make bench at
# baseline it was 2.15 s with 567 phases (20261127-154106) and 3.21 s with 255 (20261128-042657: fewer,
# longer phases carry the same loads and writes). With 228 phases it was 2.8 s on a fresh machine with 51
# re-runs (20261128-072536, before the restore and revoke cuts), then 2.10 s and 2.04 s back to back after
# them (20261128-075802, -081629; machine-speed index 0.92), where 3.2 s made the first estimate 22.2 minutes
# for 18-minute runs (23 % over). 2.3 s is 4 % over those and 13 % under 20261128-051009's 21.7 minutes on a
# slower day (index 0.73).
PRIOR_OVERHEAD_S = 2.3
# The prior counts as this many phases already run, so the first phases (which also carry the first backend's
# start and load) move the estimate gradually: after 10 phases the run's own overhead weighs half.
PRIOR_PHASES = 10


def planned_seconds(spec: PhaseSpec) -> float:
    """How long a phase is meant to measure: its schedule (open loop), else its budget, else its time cap."""
    if spec.mode == "open":
        return spec.duration_s
    return spec.budget_s or spec.max_seconds


@dataclass
class RunEta:
    """The arithmetic: plan = each backend's phases' planned seconds; clock = seconds (time.monotonic)."""

    plan: dict[str, list[float]]
    clock: Callable[[], float] = time.monotonic
    done: int = 0
    planned_done_s: float = 0.0
    left_n: dict[str, int] = field(init=False)
    left_s: dict[str, float] = field(init=False)
    t0: float = field(init=False)

    def __post_init__(self) -> None:
        self.left_n = {b: len(p) for b, p in self.plan.items()}
        self.left_s = {b: sum(p) for b, p in self.plan.items()}
        self.t0 = self.clock()

    @property
    def total(self) -> int:
        return self.done + sum(self.left_n.values())

    def finished(self, backend: str, planned_s: float) -> None:
        """A phase ran (or was skipped: then it took no time, and the rate says so)."""
        self.done += 1
        self.planned_done_s += planned_s
        self.left_n[backend] = max(0, self.left_n.get(backend, 0) - 1)
        self.left_s[backend] = max(0.0, self.left_s.get(backend, 0.0) - planned_s)

    def drop(self, backend: str) -> None:
        """A backend failed: its phases not run will not run."""
        self.left_n[backend], self.left_s[backend] = 0, 0.0

    def elapsed_s(self) -> float:
        return self.clock() - self.t0

    def overhead_s(self) -> float:
        """Wall seconds a phase costs beyond its window: the prior, then more and more this run's own."""
        return ((PRIOR_OVERHEAD_S * PRIOR_PHASES + self.elapsed_s() - self.planned_done_s)
                / (PRIOR_PHASES + self.done))

    def left_s_estimate(self) -> float:
        return max(0.0, sum(self.left_s.values()) + sum(self.left_n.values()) * self.overhead_s())

    def line(self) -> str:
        return (f"{self.done}/{self.total} phases, {_duration(self.elapsed_s())} elapsed, "
                f"~{_duration(self.left_s_estimate())} left")


def _duration(s: float) -> str:
    return f"{s:.0f} s" if s < 120 else f"{s / 60:.1f} min"


class RunProgress:
    """RunEta behind a rich progress bar (on the console `say` prints to, so its lines appear above it and the
    load's own bar nests under it)."""

    def __init__(self, eta: RunEta, prog: Progress) -> None:
        self.eta, self._prog = eta, prog
        self._task = prog.add_task(eta.line(), total=max(1, eta.total))

    def finished(self, backend: str, spec: PhaseSpec) -> None:
        self.eta.finished(backend, planned_seconds(spec))
        self.refresh()

    def drop(self, backend: str) -> None:
        self.eta.drop(backend)
        self.refresh()

    def refresh(self) -> None:
        self._prog.update(self._task, completed=self.eta.done, total=max(1, self.eta.total),
                          description=self.eta.line())


@contextmanager
def run_progress(plan: dict[str, list[float]]) -> Iterator[RunProgress]:
    with Progress(TextColumn("[bold]run[/] {task.description}"), BarColumn(), console=console,
                  transient=True) as prog:
        yield RunProgress(RunEta(plan), prog)


@contextmanager
def timed_step(store: RunStore | None, backend: str | None, step: str) -> Iterator[None]:
    """One step of the run's timeline (report/timeline.py), recorded when it ends, however it ends."""
    t0_wall, t0 = time.time(), time.perf_counter()
    try:
        yield
    finally:
        if store is not None:
            store.append(rec.Step(backend=backend, step=step, t0=t0_wall, seconds=time.perf_counter() - t0))
