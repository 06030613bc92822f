"""k6's ramping-arrival-rate executor for a load test plan (workloads/loadtest.py).

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

from authzbench.core.metrics import encode
from authzbench.measure.timing import OpCounters, timed
from authzbench.workloads.loadtest import LoadTestPlan
from authzbench.workloads.spec import schedule_times

MAX_EXAMPLES = 5  # wrong answers and errors kept with their arguments in the record


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
    # latency from the intended start; answers not compared
    intended: OpCounters = field(default_factory=OpCounters)

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
        # busy = requesting or thinking (k6 `vus`)
        self.n, self.free, self.asleep, self.max_busy = n, n, [], 0
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
        # a thread the pool started late connects here
        t = timed(lambda: adapter().check(user, perm, content))
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

