"""The per-op bookkeeping cut to its floor (issue 56) keeps every answer compared and every figure's meaning:
latencies batched into the histogram give the same histogram, a wrong answer is still counted on every op,
and a stop from the parent is still seen within the poll interval."""

from __future__ import annotations

import threading
import time

import numpy as np

from authzbench.core.metrics import encode, new_histogram, record_all
from authzbench.measure import worker
from authzbench.measure.timing import OpCounters, Timed
from authzbench.workloads.spec import PhaseSpec


class _Out:
    def __init__(self) -> None:
        self.items: list[tuple] = []

    def put(self, item: tuple) -> None:
        self.items.append(item)

    def total(self, field: str) -> int:
        return sum(p[field] for kind, _, d in self.items if kind == "interval" for p in d.values())


class _WrongOnSevens:
    """Answers every check with the oracle's answer, except for resources divisible by 7."""

    def __init__(self, answers: dict[tuple[int, int], bool], stop_after: int = 0,
                 stop: threading.Event | None = None) -> None:
        self.answers, self.calls, self.stop_after, self.stop = answers, [], stop_after, stop
        self.stopped_at = 0.0

    def check(self, user: int, perm: str, resource: int) -> bool:
        self.calls.append(time.perf_counter())
        if self.stop is not None and len(self.calls) == self.stop_after:
            self.stopped_at = time.perf_counter()
            self.stop.set()
        ans = self.answers[(user, resource)]
        return (not ans) if resource % 7 == 0 else ans


def _inputs(n: int) -> list[tuple]:
    rng = np.random.default_rng(1)
    return [
        ("check", (u, "view", int(r)), bool(rng.random() < 0.5)) for u, r in enumerate(rng.integers(0, 50, n))
    ]


def _run(backend, inputs: list, iterations: int, stop: threading.Event, interval_s: float = 1.0) -> _Out:
    spec = PhaseSpec(backend="fake", scenario="s", iterations=iterations, budget_s=600, max_seconds=1200,
                     interval_s=interval_s)
    state = {"rng": None, "pending": [], "scratch": 0, "progress": [0]}
    out = _Out()
    worker._measure_share(backend, inputs, spec, state, 0, stop, time.perf_counter(), out)
    return out


def test_latencies_batched_into_the_histogram_give_the_same_histogram_as_one_record_per_op():
    values = [int(v) for v in np.random.default_rng(3).lognormal(5, 1, 20_000).astype(int) + 1]
    one_by_one, batched = new_histogram(), new_histogram()
    for v in values:
        one_by_one.record_value(v)
    record_all(batched, values)
    assert encode(batched) == encode(one_by_one)
    assert batched.get_total_count() == len(values) and batched.get_max_value() == one_by_one.get_max_value()


def test_op_counters_histogram_holds_every_answered_op_when_read_between_and_after_ops():
    kd = OpCounters()
    for i in range(1, 501):
        kd.add(None, Timed(True, None, 0, i * 1000))
        if i == 250:
            assert kd.hist.get_total_count() == 250  # read mid-interval: the latencies so far are in it
    assert kd.hist.get_total_count() == 500 and kd.hist.get_max_value() == kd.hist.get_value_at_percentile(
        100)
    assert kd.payload()["ops"] == 500


def test_every_wrong_answer_is_counted_on_every_op_after_the_per_op_cuts():
    inputs = _inputs(300)
    answers = {(a[0], a[2]): exp for _, a, exp in inputs}
    # over three times the inputs: a prepared input's call is reused, still compared each time
    iterations = 1000
    out = _run(_WrongOnSevens(answers), inputs, iterations, threading.Event(), interval_s=0.001)
    wrong = sum(1 for k in range(iterations) if inputs[k % len(inputs)][1][2] % 7 == 0)
    assert wrong > 0
    assert out.total("ops") == out.total("checked") == iterations
    assert out.total("mismatches") == wrong


def test_a_stop_from_the_parent_ends_the_share_within_the_poll_interval():
    inputs = _inputs(100)
    stop = threading.Event()
    backend = _WrongOnSevens({(a[0], a[2]): exp for _, a, exp in inputs}, stop_after=200, stop=stop)
    out = _run(backend, inputs, 10_000_000, stop)
    assert 200 <= out.total("ops") < 10_000_000
    # 50 ms of slack for a loaded machine
    assert backend.calls[-1] - backend.stopped_at <= worker.POLL_S + 0.05
