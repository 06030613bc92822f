"""A backend's failure is that backend's, not the run's: whatever the driver raises is one line in the
failures and the results, and the run goes on."""

from __future__ import annotations

import pytest

from authzbench.config import BenchConfig
from authzbench.results.store import RunStore
from authzbench.run import orchestrate


def _cfg(tmp_path) -> BenchConfig:
    return BenchConfig.of(backends=["reference"], provision="native", profile="tiny", concurrency=[1],
                          iterations_scale=0.05, data_dir=tmp_path / "data", scenarios=["check_negative"])


def test_a_driver_error_during_the_load_fails_the_backend_not_the_run(tmp_path, monkeypatch):
    def rejected(*a, **k):
        raise RuntimeError("rejected execution of coordinating operation\nsecond line")

    monkeypatch.setattr(orchestrate, "load_backend", rejected)
    store = RunStore.create(tmp_path / "results", config={"profile": "tiny"})
    failures = orchestrate.bench(_cfg(tmp_path), store)
    assert failures == ["reference: RuntimeError: rejected execution of coordinating operation"]
    err = next(r for r in store.records() if r["type"] == "backend_error")
    assert err["stage"] == "bench" and "Traceback" in err["traceback"] and "rejected" in err["message"]


def test_prepare_records_a_driver_error_the_same_way(tmp_path, monkeypatch):
    monkeypatch.setattr(orchestrate, "load_backend", lambda *a, **k: 1 / 0)
    store = RunStore.create(tmp_path / "results", config={"profile": "tiny"})
    assert orchestrate.prepare(_cfg(tmp_path), store) == ["reference: ZeroDivisionError: division by zero"]


def test_elasticsearch_bulk_retries_a_429_with_backoff_then_gives_up(monkeypatch):
    from elastic_transport import ApiResponseMeta, HttpHeaders, NodeConfig
    from elasticsearch import ApiError

    from authzbench.systems.elasticsearch import load as es_mod

    sleeps: list[float] = []
    monkeypatch.setattr(es_mod.time, "sleep", sleeps.append)
    meta = ApiResponseMeta(status=429, http_version="1.1", headers=HttpHeaders(), duration=0.0,
                           node=NodeConfig("http", "127.0.0.1", 9200))

    class Node:
        def __init__(self, rejections: int):
            self.left = rejections

        def bulk(self, **kwargs):
            if self.left:
                self.left -= 1
                raise ApiError("es_rejected_execution_exception", meta=meta, body={})
            return {"items": []}

    def loader(node):
        b = object.__new__(es_mod.BulkLoad)
        b.es, b._retried = node, []
        return b

    client = loader(Node(2))
    client._bulk([])
    assert len(client._retried) == 2 and sleeps == [0.5, 1.0]
    never = loader(Node(99))
    with pytest.raises(ApiError):
        never._bulk([])
    assert len(never._retried) == es_mod.BULK_429_TRIES - 1
