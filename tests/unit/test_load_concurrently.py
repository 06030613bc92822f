"""backends.base.load_concurrently, the bounded concurrent batch writer OpenFGA's and Permify's loads share:
every batch sent once, at most `workers` in flight, progress in order, a failure named by backend and size."""

from __future__ import annotations

import threading
import time

import pytest

from authzbench.backends.base import load_concurrently
from authzbench.core.errors import BackendUnavailable


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

    batches = [(10 + i, i) for i in range(40)]
    stats = load_concurrently("x: Write", iter(batches), send, 50, 4, progress.append)
    assert sorted(sent) == list(range(40)) and peak <= 4
    assert progress == [n for n, _ in batches] and stats.rows == sum(progress)
    assert len(stats.batch_seconds) == 40 and all(s > 0 for s in stats.batch_seconds)
    assert stats.notes["method"] == "Write, 50 tuples a request, 4 requests in flight (batch times overlap)"


def test_bodies_are_built_only_a_few_ahead_of_the_requests_in_flight():
    built, release = [], threading.Event()

    def bodies():
        for i in range(100):
            built.append(i)
            yield 1, i

    def send(body):
        release.wait(5)

    t = threading.Thread(target=load_concurrently, args=("x: Write", bodies(), send, 1, 2, lambda n: None))
    t.start()
    time.sleep(0.2)
    ahead = len(built)
    release.set()
    t.join(10)
    assert ahead <= 2 * 2 + 1, f"{ahead} bodies built while 2 requests were stuck"


def test_a_failed_batch_is_one_error_naming_backend_request_and_size():
    def send(body):
        if body == 3:
            raise RuntimeError("ERROR_CODE_SCAN")

    with pytest.raises(BackendUnavailable, match=r"^permify: data/write of 7 tuples failed: ERROR_CODE_SCAN$"):
        load_concurrently("permify: data/write", ((7, i) for i in range(6)), send, 7, 2, lambda n: None)
