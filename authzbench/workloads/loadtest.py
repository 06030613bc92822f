"""Permify's published k6 load test (SCALE-REFERENCE.md, part B) as a named workload, and a corrected variant.

The document's scenario: a ramping arrival rate 10 -> 100 iterations/s over 10 s, -> 1,000/s over 30 s,
-> 10,000/s over 1 min (347,050 iterations due); each iteration is one check of `content#view` for a
random content and user id among 100,000 (each id reuses the previous one with probability 0.3), then
`sleep(1)`; at most 1,000 VUs. An iteration due while every VU is busy is dropped (k6's
ramping-arrival-rate executor). So the published script caps itself: a VU is busy for the request plus
one second, and 1,000 VUs finish at most ~1,000 iterations/s, whatever the server could do; and ids drawn
from 100,000 mostly name users that do not exist, so most answers never touch a relationship.

The corrected variant keeps the arrival ramp and the VU cap and removes the think time (a VU is busy only
while its request is), and draws ids from the dataset's own users and content (30% reuse kept), so every
check has a subject the graph knows.

The executor that runs a plan is measure/k6.py.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from authzbench.workloads.spec import cumulative_ops

PUBLISHED_STAGES = [(100.0, 10.0), (1000.0, 30.0), (10000.0, 60.0)]  # k6 `stages`: (target/s, seconds)
PUBLISHED_START_RATE = 10.0


@dataclass(frozen=True)
class LoadTestPlan:
    name: str  # published | corrected
    start_rate: float = PUBLISHED_START_RATE
    stages: tuple[tuple[float, float], ...] = tuple(PUBLISHED_STAGES)
    max_vus: int = 1000  # the published run's VU cap (its summary: vus max=1000)
    think_s: float = 1.0  # sleep(1) after each request
    id_space: int = 100_000  # ids drawn from [0, id_space) (published); 0 = the dataset's own ids
    reuse: float = 0.3  # probability an id repeats the previous one
    threads: int = 32  # client threads sending requests (each its own connection)
    seed: int = 6

    def scheduled(self) -> int:
        return int(cumulative_ops(self.start_rate, list(self.stages), sum(s for _, s in self.stages)))

    def scaled(self, factor: float) -> LoadTestPlan:
        """The same shape with every rate multiplied by factor (for a quick or a CI run)."""
        return LoadTestPlan(**{**self.__dict__, "start_rate": self.start_rate * factor,
                               "stages": tuple((r * factor, s) for r, s in self.stages)})


PLANS = {"published": LoadTestPlan("published"),
         "corrected": LoadTestPlan("corrected", think_s=0.0, id_space=0)}


def k6_ids(n: int, users: int, content: int, reuse: float, seed: int) -> np.ndarray:
    """(content, user) pairs as the script draws them: one `currentId` chain shared by both draws, each
    reusing the previous id with probability `reuse`. users/content: the ranges ids are drawn from."""
    rng = np.random.default_rng(seed)
    out = np.empty((n, 2), dtype=np.int64)
    current = int(rng.integers(0, content))
    fresh_c, fresh_u = rng.integers(0, content, n), rng.integers(0, users, n)
    keep = rng.random((n, 2)) < reuse
    for i in range(n):
        c = current if keep[i, 0] else int(fresh_c[i])
        current = c
        u = current if keep[i, 1] else int(fresh_u[i])
        current = u
        out[i] = (c, u)
    return out


def plan_inputs(plan: LoadTestPlan, n_users: int, n_content: int, expect: Callable[[int, int], bool],
                n: int) -> list[tuple[int, int, bool]]:
    """(user, content, oracle's answer) for the first n iterations of the plan."""
    users, content = (plan.id_space, plan.id_space) if plan.id_space else (n_users, n_content)
    return [
        (int(u), int(c), expect(int(u), int(c))) for c, u in k6_ids(n, users, content, plan.reuse, plan.seed)]
