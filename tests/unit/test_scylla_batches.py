"""Cassandra/Scylla bulk load's batches, sent by the run layer, against a fake session (the driver's futures,
no server): a failed batch fails the load with its error instead of hanging it, and a timed-out batch is sent
again."""

from __future__ import annotations

import threading

import numpy as np
import pytest

pytest.importorskip("cassandra")

from cassandra import OperationTimedOut  # noqa: E402

from authzbench.backends.base import Batches  # noqa: E402
from authzbench.core.errors import BackendUnavailable  # noqa: E402
from authzbench.run.loading import Tally, send_batches  # noqa: E402
from authzbench.systems.scylla.adapter import ScyllaBackend  # noqa: E402
from authzbench.systems.scylla.cql import BATCH_TRIES, _why  # noqa: E402
from authzbench.systems.scylla.tables import _Ticker  # noqa: E402


class _Future:
    def __init__(self, exc: BaseException | None):
        self.exc = exc

    def result(self):
        if self.exc:
            raise self.exc


class _Session:
    """Fails the batches whose number is in `fail` with the exception given, `times` times each."""

    def __init__(self, fail: dict[int, tuple[BaseException, int]]):
        self.fail, self.sent, self.lock = fail, {}, threading.Lock()

    def execute_async(self, batch, timeout):
        with self.lock:  # keyed by the batch itself: it stays alive, so no two batches share a key
            n = self.sent[batch] = self.sent.get(batch, 0) + 1
            order = list(self.sent).index(batch)
        exc, times = self.fail.get(order, (None, 0))
        return _Future(exc if n <= times else None)


def _backend(session) -> ScyllaBackend:
    b = object.__new__(ScyllaBackend)
    b.session, b.ks, b.timeout, b.in_flight, b.batch_rows, b._batch_retries = session, "ks", 1.0, 4, 10, 0
    return b


def _load(b: ScyllaBackend) -> int | BaseException:
    """Rows loaded, or the exception the load raised; fails the test if the load does not end."""
    key = np.repeat(np.arange(20), 10)  # 20 partitions of 10 rows: 20 batches
    out: list[int | BaseException] = []

    def run() -> None:
        try:
            batches = b._batches(key, lambda *_: None, lambda s: b"", _Ticker(lambda n: None, 1.0))
            out.append(send_batches(Batches("scylla: batch", batches, b.in_flight, why=_why), Tally()))
        except BaseException as e:  # noqa: BLE001 - handed to the test thread
            out.append(e)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(20)
    assert out, "the load hung"
    return out[0]


def test_a_failed_batch_fails_the_load_with_its_error_instead_of_hanging_it():
    got = _load(_backend(_Session({3: (ValueError("rejected"), 99)})))
    assert isinstance(got, BackendUnavailable) and "rejected" in str(got)


def test_a_timed_out_batch_is_sent_again_and_the_load_completes():
    b = _backend(_Session({3: (OperationTimedOut("slow"), 2)}))
    assert _load(b) == 200 and b._batch_retries == 2


def test_a_batch_that_keeps_timing_out_fails_the_load_after_its_tries():
    b = _backend(_Session({5: (OperationTimedOut("slow"), 99)}))
    got = _load(b)
    assert isinstance(got, BackendUnavailable) and "OperationTimedOut" in str(got)
    assert b._batch_retries == BATCH_TRIES - 1
