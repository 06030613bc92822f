"""The one measurement of an op, shared by everything that times one: `timed` runs the op between two
perf_counter_ns readings, `OpCounters.add` counts the outcome into its kind's counters (the latency in an
HdrHistogram in µs, an error by type or a timeout, the answer compared with the oracle's).

Its users: the bench's workers (measure/worker.py, every phase of `bench`), a structural write's change
(measure/visibility.py), the k6 load test's executor (measure/k6.py) and the Permify client experiment
(systems/permify/tools/clients.py). What differs between them is what an op is and when it was due, never how
it is timed, counted or checked: a latency runs from `begin_ns` (the open loop's intended start) or else from
the send, and only an answered op is in the histogram (an error or a timeout is counted, not timed)."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any, NamedTuple

from hdrh.histogram import HdrHistogram

from authzbench.core.metrics import encode, new_histogram, record_all


class Timed(NamedTuple):
    """One op's outcome: its answer or the exception it raised, and the perf_counter_ns instants around it. A
    tuple, not a frozen dataclass: its __init__ was ~0.3 µs of every op's bookkeeping (issue 56)."""

    answer: Any
    error: BaseException | None
    sent_ns: int
    end_ns: int


def timed(call: Callable[[], Any]) -> Timed:
    """Run one op and read the clock on either side of it: the only place an op's latency is taken."""
    sent = time.perf_counter_ns()
    try:
        answer, error = call(), None
    except Exception as e:  # noqa: BLE001 - counted by OpCounters.add, as any failed op
        answer, error = None, e
    return Timed(answer, error, sent, time.perf_counter_ns())


def is_timeout(e: BaseException) -> bool:
    name = type(e).__name__.lower()  # ConnectionTimeout, ExecutionTimeout, OperationTimedOut (Cassandra)
    return isinstance(e, TimeoutError) or "timeout" in name or "timedout" in name or \
        "deadline" in str(e).lower()[:200]


class OpCounters:
    """One op kind's counters (check, lookup, write, ...) over an interval, as a worker ships them."""

    __slots__ = (
        "_hist", "_lat_us", "_svc_us", "ops", "errors", "timeouts", "mismatches", "examples", "results",
        "duplicates", "checked", "late", "extra", "longest_us", "longest_ns")

    def __init__(self) -> None:
        self._hist = new_histogram()
        # Latencies (µs) not yet in the histogram: hdrh's pure-Python record_value cost ~2 µs an op; they go
        # in as (value, count) pairs when the histogram is read, once an interval (the same histogram).
        self._lat_us: list[int] = []
        self._svc_us: list[int] = []  # the open loop's latencies from the send (service time), likewise
        self.ops = 0
        self.errors: dict[str, int] = {}
        self.timeouts = 0
        self.mismatches = 0
        self.examples: list[dict] = []
        self.results = 0
        self.duplicates = 0
        self.checked = 0
        self.late = 0
        self.extra: dict[str, int] = {}  # kind-specific counters (writes: rows touched, stale reads...)
        # The interval's longest op and when it began (perf_counter_ns): a 50 ms stall among 0.1 ms checks is
        # 1 op in 500, under the p95 and the p99; the histogram keeps its length, not its time.
        self.longest_us = 0
        self.longest_ns = 0

    @property
    def hist(self) -> HdrHistogram:
        """The kind's latency histogram, every latency recorded so far in it."""
        if self._lat_us:
            record_all(self._hist, self._lat_us)
            self._lat_us = []
        return self._hist

    def service_hist(self) -> str | None:
        """The open loop's service times (send to answer) as an encoded histogram; None in a closed loop."""
        if not self._svc_us:
            return None
        h = new_histogram()
        record_all(h, self._svc_us)
        return encode(h)

    def payload(self, origin_ns: int | None = None) -> dict:
        """The counters as an interval record's fields; with `origin_ns` (the phase's measured origin on this
        clock) the longest op and the seconds from the origin to its start."""
        at_s = (self.longest_ns - origin_ns) / 1e9 if origin_ns is not None and self.longest_us else None
        return {"hist": encode(self.hist), "service_hist": self.service_hist(), "ops": self.ops,
                "errors": self.errors, "timeouts": self.timeouts, "mismatches": self.mismatches,
                "examples": self.examples, "results": self.results, "duplicates": self.duplicates,
                "checked": self.checked, "late": self.late, "extra": self.extra,
                "longest_us": self.longest_us if at_s is not None else None, "longest_at_s": at_s}

    def add(self, inp: tuple | None, t: Timed, *, begin_ns: int | None = None, late: bool = False,
            timeout_ns: float = math.inf, max_examples: int = 5) -> bool:
        """One timed op: a timeout, an error by type, or a latency (from begin_ns, else from the send) and,
        with `inp` (op, args, the oracle's answer), the answer compared. True when it was answered."""
        self.late += int(late)
        if t.error is not None:
            if is_timeout(t.error):
                self.timeouts += 1
            else:
                name = type(t.error).__name__
                self.errors[name] = self.errors.get(name, 0) + 1
                self.example({"error": f"{name}: {str(t.error)[:200]}"}, max_examples)
            return False
        start_ns = t.sent_ns if begin_ns is None else begin_ns
        lat_ns = t.end_ns - start_ns
        if lat_ns > timeout_ns:
            self.timeouts += 1
            return False
        self.ops += 1
        lat_us = max(1, lat_ns // 1000)
        self._lat_us.append(lat_us)
        if lat_us > self.longest_us:
            self.longest_us, self.longest_ns = lat_us, start_ns
        if begin_ns is not None:
            self._svc_us.append(max(1, (t.end_ns - t.sent_ns) // 1000))
        if inp is not None:
            self.compare(inp, t.answer, max_examples)
        return True

    def compare(self, inp: tuple, answer: Any, max_examples: int) -> None:
        """A check's or a lookup's answer against the oracle's (a round trip answers nothing)."""
        op, args, expected = inp
        if op not in ("check", "lookup"):
            return
        self.checked += 1
        if op == "check":
            if bool(answer) != expected:
                self._mismatch(args, expected, bool(answer), max_examples)
            return
        got = set(answer)
        self.results += len(answer)
        self.duplicates += len(answer) - len(got)
        # The oracle's set built at most once an op (the worker passes a frozenset, made once a phase), the
        # example's counts only on a mismatch: three set(expected) an op were 3.1 ms of client CPU for a
        # lookup of 8,280 resources, 0.82 ms with the worker's frozenset (side by side on 2 shared cores)
        want = expected if isinstance(expected, (set, frozenset)) else set(expected)
        if got != want:
            self._mismatch(args, len(expected), {"count": len(got), "missing": len(want - got),
                                                 "extra": len(got - want)}, max_examples)

    def _mismatch(self, args: tuple, expected: Any, got: Any, max_examples: int) -> None:
        self.mismatches += 1
        self.example({"args": list(args), "expected": expected, "got": got}, max_examples)

    def example(self, ex: dict, max_examples: int) -> None:
        if len(self.examples) < max_examples:
            self.examples.append(ex)
