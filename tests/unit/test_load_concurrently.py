"""The run layer sends and times what a backend's load and build yield (run/loading.py): a fake backend that
reads no clock gets every batch timed and counted, its steps' seconds in its notes, at most `workers` requests
in flight with progress in order, a failed batch as one error line naming backend, request and size, and a
load past its time bound stopped. backends.base.load_concurrently (OpenFGA's, Permify's) rides on it."""

from __future__ import annotations

import threading
import time

import pytest

from authzbench.backends.base import Batch, Batches, BuildStats, LoadStats, Step, Stream, load_concurrently
from authzbench.core.errors import BackendUnavailable
from authzbench.run.loading import LoadBound, LoadTooSlow, run_build, run_load


class FakeBackend:
    """A backend as the run layer sees it: a closure step, then batches that sleep as a server would."""

    def __init__(self, batches: int = 6, sleep_s: float = 0.01, fail: int | None = None, workers: int = 1):
        self.batches, self.sleep_s, self.fail, self.workers = batches, sleep_s, fail, workers
        self.sent: list[int] = []

    def send(self, i: int) -> None:
        time.sleep(self.sleep_s)
        if i == self.fail:
            raise RuntimeError("ERROR_CODE_SCAN")
        self.sent.append(i)

    def load(self, ds, progress):
        closure = yield Step("closure_seconds", lambda: time.sleep(0.02) or "closed")
        assert closure == "closed"  # a step's result is handed back
        rows = yield Batches(
            "fake: Write", (Batch(10, lambda i=i: self.send(i)) for i in range(self.batches)), self.workers,
            name="insert_seconds")
        return LoadStats(rows=rows, batch_rows=10, notes={"method": "Write"})

    def build(self):
        yield Step("index_seconds", lambda: time.sleep(0.02))
        members = yield Step("", lambda: 7)
        return BuildStats("indexes", rows=members)


def test_the_run_layer_times_and_counts_every_batch_and_step_of_a_backend_that_reads_no_clock():
    progress: list[int] = []
    stats = run_load(FakeBackend(), None, progress.append)
    assert stats.rows == 60 and progress == [10] * 6
    assert len(stats.batch_seconds) == 6 and all(s >= 0.01 for s in stats.batch_seconds)
    assert stats.notes["closure_seconds"] >= 0.02 and stats.notes["insert_seconds"] >= 0.06
    assert stats.notes["method"] == "Write" and stats.notes["client_cpu_seconds"] >= 0


def test_a_build_is_its_steps_its_seconds_their_total():
    build = run_build(FakeBackend())
    assert build.what == "indexes" and build.rows == 7
    assert build.seconds >= build.notes["index_seconds"] >= 0.02 and list(build.notes) == ["index_seconds"]


def test_a_backend_with_nothing_to_time_returns_its_stats_at_once():
    class Plain:
        def build(self):
            return None

    assert run_build(Plain()) is None


def test_a_failed_batch_is_one_error_line_naming_backend_request_and_size():
    with pytest.raises(BackendUnavailable, match=r"^fake: Write of 10 tuples failed: ERROR_CODE_SCAN$"):
        run_load(FakeBackend(fail=3, workers=2), None, lambda n: None)


def test_the_time_bound_stops_a_load_between_its_batches():
    backend = FakeBackend(batches=200, sleep_s=0.01)
    bound = LoadBound("fake", 2000, 0.2, memory=lambda: (1, 1))
    t0 = time.perf_counter()
    with pytest.raises(LoadTooSlow, match="load stopped after"):
        run_load(backend, None, bound)
    assert time.perf_counter() - t0 < 1.5 and len(backend.sent) < 200


def test_every_batch_is_sent_once_with_at_most_workers_in_flight_and_progress_in_order():
    sent, progress, lock = [], [], threading.Lock()
    in_flight = peak = 0

    def send(body):
        nonlocal in_flight, peak
        with lock:
            in_flight += 1
            peak = max(peak, in_flight)
        time.sleep(0.002 * (body % 3))  # out-of-order completion
        with lock:
            in_flight -= 1
            sent.append(body)

    class Concurrent:
        def load(self, ds, progress):
            return load_concurrently("x: Write", iter([(10 + i, i) for i in range(40)]), send, 50, 4)

    stats = run_load(Concurrent(), None, progress.append)
    assert sorted(sent) == list(range(40)) and peak <= 4
    assert progress == [10 + i for i in range(40)] and stats.rows == sum(progress)
    assert len(stats.batch_seconds) == 40 and all(s > 0 for s in stats.batch_seconds)
    assert stats.notes["method"] == "Write, 50 tuples a request, 4 requests in flight (batch times overlap)"


def test_bodies_are_built_only_a_few_ahead_of_the_requests_in_flight():
    built, release = [], threading.Event()

    def bodies():
        for i in range(100):
            built.append(i)
            yield 1, i

    class Stuck:
        def load(self, ds, progress):
            return load_concurrently("x: Write", bodies(), lambda body: release.wait(5), 1, 2)

    t = threading.Thread(target=run_load, args=(Stuck(), None))
    t.start()
    time.sleep(0.2)
    ahead = len(built)
    release.set()
    t.join(10)
    assert ahead <= 2 * 2 + 1, f"{ahead} bodies built while 2 requests were stuck"


def test_a_stream_times_each_message_and_its_answer_and_a_stop_ends_the_other_streams():
    def send(messages):
        got = list(messages)
        time.sleep(0.01)  # the server's commit
        return len(got)

    class Streams:
        def load(self, ds, progress):
            rows = yield Batches(
                "x: Import", [Stream(6, [(3, b"a"), (3, b"b")], send, answer="commit_seconds")] * 3, 2)
            return LoadStats(rows=rows, batch_rows=3)

    progress: list[int] = []
    stats = run_load(Streams(), None, progress.append)
    assert stats.rows == 18 and sum(progress) == 18 and len(stats.batch_seconds) == 6
    assert stats.notes["commit_seconds"] >= 0.03

    def over(n):
        raise LoadTooSlow("load stopped after 1 s", {})

    with pytest.raises(LoadTooSlow):  # the bound's own error, not the cancelled stream's
        run_load(Streams(), None, over)
