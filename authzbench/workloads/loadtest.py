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

The executor is k6's model in one process: VUs are counters (a sleeping VU needs no thread); requests run
on `threads` client threads, each with its own connected adapter. Each request is timed, counted and its
answer compared with the oracle's by the bench's own measurement (measure/timing.py, as a worker's op):
its duration from the moment a thread sends it (k6's http_req_duration) and, separately, from its intended
start (what the arrival schedule promised: includes waiting for a client thread, so coordinated omission is
visible). As in every bench phase, a failed request is counted, not timed.
"""

from __future__ import annotations

import heapq
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np

from authzbench.core.metrics import encode
from authzbench.measure.timing import OpCounters, timed
from authzbench.workloads.spec import cumulative_ops, schedule_times

PUBLISHED_STAGES = [(100.0, 10.0), (1000.0, 30.0), (10000.0, 60.0)]  # k6 `stages`: (target/s, seconds)
PUBLISHED_START_RATE = 10.0
MAX_EXAMPLES = 5  # wrong answers and errors kept with their arguments in the record


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
    return [(int(u), int(c), expect(int(u), int(c))) for c, u in k6_ids(n, users, content, plan.reuse, plan.seed)]


@dataclass
class LoadTestResult:
    """k6's summary fields, computed from what the executor recorded through the bench's own measurement
    (measure/timing.py): every request timed, counted and its answer compared as a worker's op is."""

    scheduled: int = 0
    dropped: int = 0  # due while every VU was busy
    allowed: int = 0  # answers that allowed (how much of the work was trivial denials)
    wall_s: float = 0.0
    max_busy_vus: int = 0
    sent: OpCounters = field(default_factory=OpCounters)  # latency from send (k6 http_req_duration)
    intended: OpCounters = field(default_factory=OpCounters)  # latency from the intended start; answers not compared

    @property
    def iterations(self) -> int:  # requests sent (k6 `iterations` / `http_reqs`)
        return self.sent.ops + self.errors

    @property
    def errors(self) -> int:  # requests that failed (k6 `http_req_failed`)
        return self.sent.timeouts + sum(self.sent.errors.values())

    @property
    def mismatches(self) -> int:  # answered, but not the oracle's answer
        return self.sent.mismatches

    @property
    def error_types(self) -> dict[str, int]:
        return {**self.sent.errors, **({"timeout": self.sent.timeouts} if self.sent.timeouts else {})}

    def record(self) -> dict:
        return {"scheduled": self.scheduled, "iterations": self.iterations, "dropped": self.dropped,
                "errors": self.errors, "mismatches": self.mismatches, "allowed": self.allowed,
                "checked": self.sent.checked, "examples": self.sent.examples,
                "wall_s": self.wall_s, "max_busy_vus": self.max_busy_vus, "error_types": self.error_types,
                "duration_hist": encode(self.sent.hist), "from_intended_hist": encode(self.intended.hist)}


class _VUs:
    """k6's VU pool as counters: free now, or asleep until a time (the think time after a request)."""

    def __init__(self, n: int):
        self.n, self.free, self.asleep, self.max_busy = n, n, [], 0  # busy = requesting or thinking (k6 `vus`)
        self.lock = threading.Lock()

    def take(self, now: float) -> bool:
        with self.lock:
            while self.asleep and self.asleep[0] <= now:
                heapq.heappop(self.asleep)
                self.free += 1
            if not self.free:
                return False
            self.free -= 1
            self.max_busy = max(self.max_busy, self.n - self.free)
            return True

    def release(self, wake: float, now: float) -> None:
        with self.lock:
            if wake <= now:
                self.free += 1
            else:
                heapq.heappush(self.asleep, wake)


def run_plan(plan: LoadTestPlan, connect: Callable[[], object], inputs: list[tuple[int, int, bool]],
             perm: str = "view_content") -> LoadTestResult:
    """Run the arrival schedule: each due iteration takes a VU or is dropped; its check runs on a client
    thread (one connected adapter per thread); the VU sleeps think_s after the answer."""
    res = LoadTestResult(scheduled=plan.scheduled())
    due = schedule_times(plan.start_rate, list(plan.stages))
    vus, lock, local = _VUs(plan.max_vus), threading.Lock(), threading.local()
    adapters: list = []

    def adapter():
        if not hasattr(local, "b"):
            local.b = connect()
            with lock:
                adapters.append(local.b)
        return local.b

    def one(k: int, intended: float) -> None:
        user, content, want = inputs[k % len(inputs)]
        t = timed(lambda: adapter().check(user, perm, content))  # a thread the pool started late connects here
        end = t.end_ns / 1e9  # perf_counter's clock, as the schedule's
        vus.release(end + plan.think_s, end)
        with lock:  # the request counted as a bench worker counts an op; a failed one is counted, not timed
            if res.sent.add(("check", (user, perm, content), want), t, max_examples=MAX_EXAMPLES):
                res.allowed += bool(t.answer)
            res.intended.add(None, t, begin_ns=int(intended * 1e9))

    with ThreadPoolExecutor(plan.threads) as pool:
        list(pool.map(lambda _: adapter(), range(plan.threads)))  # connect every thread before t0
        t0 = time.perf_counter()
        for k, t in enumerate(due):
            if (wait := t0 + float(t) - time.perf_counter()) > 0:
                time.sleep(wait)
            if vus.take(time.perf_counter()):
                pool.submit(one, k, t0 + float(t))
            else:
                res.dropped += 1
    res.wall_s = time.perf_counter() - t0
    res.max_busy_vus = vus.max_busy
    for b in adapters:
        b.close()
    return res

