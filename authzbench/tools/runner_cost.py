"""The runner's own cost per op (issue 56): the bench's measured loop (measure/worker._measure_share: the
schedule, `timed`, OpCounters.add with the answer compared with the oracle's, the interval's bookkeeping)
around a check that does nothing, against the same no-op call alone in a bare loop. The difference is what the
runner adds to every op whatever the backend: with the breakdown's bare driver call and adapter call (tools/
crosscheck_client.breakdown) it splits our 1-worker op into driver + adapter + runner.

    python -m authzbench.tools.runner_cost [--ops N] [--repeats R]
"""

from __future__ import annotations

import argparse
import threading
import time
from typing import Any

from authzbench.measure.worker import _measure_share
from authzbench.workloads.spec import PhaseSpec


class NoopBackend:
    """A backend whose check answers True at once: only the runner's work is left in the loop's time."""

    def check(self, user: int, perm: str, resource: int, mode: str | None = None) -> bool:
        return True


class _Sink:
    """The worker's result queue, kept in memory: what it ships is counted, not sent to another process."""

    def __init__(self) -> None:
        self.items: list[Any] = []

    def put(self, item: Any) -> None:
        self.items.append(item)


def _inputs(n: int) -> list[tuple]:
    # the oracle's answer True and False alternately: half the no-op's answers are mismatches, so the loop
    # pays for the comparison and for counting a wrong answer, as a run's worst case
    return [("check", (k, "view", k), k % 2 == 0) for k in range(n)]


def runner_loop_us(ops: int) -> tuple[float, _Sink]:
    """µs per op of one closed-loop worker's measured loop around the no-op check (1 worker, no budget)."""
    spec = PhaseSpec(backend="noop", scenario="noop", iterations=ops, max_seconds=3600.0)
    sink = _Sink()
    t0 = time.perf_counter()
    _measure_share(NoopBackend(), _inputs(1000), spec, {"progress": [0]}, 0, threading.Event(), t0, sink)
    return (time.perf_counter() - t0) / ops * 1e6, sink


def bare_call_us(ops: int) -> float:
    """µs per op of the same no-op check called in a bare loop over the same inputs."""
    b, inputs = NoopBackend(), _inputs(1000)
    t0 = time.perf_counter()
    for k in range(ops):
        b.check(*inputs[k % 1000][1])
    return (time.perf_counter() - t0) / ops * 1e6


def runner_cost(ops: int = 200_000, repeats: int = 3) -> dict[str, float]:
    """The least of `repeats` alternated measurements of each (a noisy machine only adds): the loop per op,
    the bare call per op and their difference, the runner's own µs per op."""
    loop, bare = [], []
    for _ in range(repeats):
        loop.append(runner_loop_us(ops)[0])
        bare.append(bare_call_us(ops))
    return {"loop_us": min(loop), "bare_us": min(bare), "runner_us": min(loop) - min(bare)}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ops", type=int, default=200_000)
    ap.add_argument("--repeats", type=int, default=3)
    a = ap.parse_args(argv)
    got = runner_cost(a.ops, a.repeats)
    print(f"runner loop around a no-op check {got['loop_us']:.2f} µs/op; the no-op call alone "
          f"{got['bare_us']:.2f} µs/op; the runner's own cost {got['runner_us']:.2f} µs/op")


if __name__ == "__main__":
    main()
