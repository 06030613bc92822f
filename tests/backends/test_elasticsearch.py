"""Elasticsearch backend against a real node started natively (Elasticsearch 7.17.29 OSS from Maven Central
jars): answers equal the oracle's, lookups larger than 10,000 results are complete, the expanded arrays and
user closures equal the recomputed oracle after writes and deletes of every relation kind (a hierarchy
cycle included), bad endpoints and wrong credentials fail at connect with one line that shows no password,
a frozen node raises instead of hanging, and a node killed mid-run is recorded while the run moves on.
One node for the module (plus one for the kill test).

    pytest tests/backends/test_elasticsearch.py --backend elasticsearch
"""

from __future__ import annotations

import contextlib
import http.server
import os
import signal
import threading
import time
from collections.abc import Iterator

import pytest

from authzbench.core.errors import UserError
from authzbench.provision.base import free_port
from authzbench.run.loading import run_build, run_load
from authzbench.schema.closure import group_membership
from authzbench.schema.dataset import Dataset
from authzbench.schema.model import PERMISSIONS, Relationship
from authzbench.systems.elasticsearch.adapter import ElasticsearchBackend
from tests.backends.edits import (
    assert_checks_equal_oracle,
    assert_every_lookup_equals_oracle,
    big_org,
    oracle_pairs,
    replay_edits,
)
from tests.backends.faults import bench_with_server_killed_mid_phase, wait_all_threads_stopped

pytestmark = pytest.mark.backend("elasticsearch")


# `scratch` (tests/backends/conftest.py): private indices with their own copy of the dataset.
SCRATCH_ENDPOINT = {"index_prefix": "authzbench_scratch"}
SCRATCH_OPTIONS = {"timeout_s": 30}


def _private(session, prefix: str, ds: Dataset, **options) -> ElasticsearchBackend:
    b = ElasticsearchBackend({**session.dep.endpoint, "index_prefix": prefix}, {"timeout_s": 30, **options})
    b.connect()
    b.drop()
    b.create_schema()
    run_load(b, ds)
    run_build(b)
    b.mark_loaded(ds.hash)
    return b


def _state(b: ElasticsearchBackend) -> dict[str, set[tuple[int, int]]]:
    """The documents as {perm: {(user, resource)}} and the closures as {"groups": {(user, group)}}; view is
    managers + viewers (view-only), and the two must not overlap."""
    from elasticsearch.helpers import scan

    out: dict[str, set[tuple[int, int]]] = {"manage": set(), "view": set(), "groups": set(), "overlap": set()}
    for h in scan(b.es, index=b.ix["resources"], _source=["managers", "viewers"]):
        r, d = int(h["_id"]), h["_source"]
        out["manage"] |= {(u, r) for u in d.get("managers", ())}
        out["view"] |= {(u, r) for u in (*d.get("managers", ()), *d.get("viewers", ()))}
        out["overlap"] |= {(u, r) for u in set(d.get("managers", ())) & set(d.get("viewers", ()))}
    for h in scan(b.es, index=b.ix["users"], _source=["groups"]):
        out["groups"] |= {(int(h["_id"]), g) for g in h["_source"].get("groups", ())}
    return out


def _oracle_state(ds: Dataset) -> dict[str, set[tuple[int, int]]]:
    out = oracle_pairs(ds)
    m = group_membership(ds)
    out["groups"] = set(zip(m["user"].tolist(), m["group"].tolist(), strict=True))
    out["overlap"] = set()
    return out


# answers ----------------------------------------------------------------------------------------

def test_server_info_names_the_native_node_and_footprint_is_measured(backend):
    info = backend.server_info()
    assert info.engine == "Elasticsearch" and info.version == "7.17.29"
    assert info.label == "Elasticsearch 7.17.29 OSS (native node from Maven Central jars)"
    assert backend.footprint() > 0
    backend.baseline_roundtrip()


def test_checks_equal_the_oracle_including_negatives(backend, dataset, oracle):
    assert_checks_equal_oracle(backend, dataset, oracle, dataset.entities["user"] // 12, 2)


def test_every_lookup_equals_the_oracle(backend, dataset, oracle):
    assert_every_lookup_equals_oracle(backend, dataset, oracle)


def test_lookup_streams_pages_and_closes_its_point_in_time(session, dataset, oracle):
    """Pages of 7 ids: every lookup spans many search_after pages of one PIT, and no PIT is left open."""
    with session.backend(timeout_s=10, lookup_page=7) as b:
        heavy = max(range(dataset.entities["user"]), key=lambda u: len(oracle.lookup_resources(u, "view")))
        assert len(oracle.lookup_resources(heavy, "view")) > 3 * 7
        for u in (heavy, 0, 1):
            for perm in PERMISSIONS:
                assert b.lookup_resources(u, perm) == oracle.lookup_resources(u, perm)
        stats = b.es.indices.stats(index=b.ix["resources"], metric="search")
        assert stats["_all"]["total"]["search"]["open_contexts"] == 0


def test_unknown_permission_and_relation_are_user_errors(backend):
    with pytest.raises(UserError, match="unknown permission"):
        backend.check(0, "own", 0)
    with pytest.raises(UserError, match="unknown permission"):
        backend.lookup_resources(0, "own")
    with pytest.raises(UserError, match="unknown relation"):
        backend.write(Relationship("resource_owner", 0, 0))


def test_lookup_larger_than_10000_results_is_complete(session, tmp_path):
    """One org of 10,500 resources: its admins see all of them, past index.max_result_window (10,000)."""
    ds, admin, want, want_manage = big_org(tmp_path)
    b = _private(session, "authzbench_big", ds)
    try:
        assert b.lookup_resources(admin, "view") == want
        assert b.lookup_resources(admin, "manage") == want_manage
        assert len(b.lookup_resources(admin, "manage")) == 10500
    finally:
        b.drop()
        b.close()


# writes ------------------------------------------------------------------------------------------

def test_load_equals_the_oracle(scratch, dataset):
    assert _state(scratch) == _oracle_state(dataset)


def test_writes_and_deletes_keep_documents_equal_to_the_recomputed_oracle(scratch, dataset):
    replay_edits(scratch, dataset, _state, _oracle_state)


def test_loaded_hash_marks_a_complete_load(session, scratch, dataset):
    assert scratch.loaded_hash() == dataset.hash
    with ElasticsearchBackend({**session.dep.endpoint, "index_prefix": "authzbench_empty"}, {}) as b:
        assert b.loaded_hash() is None


def test_load_restores_refresh_and_replica_settings(scratch):
    got = scratch.es.indices.get_settings(index=scratch.ix["resources"], flat_settings=True)
    s = got[scratch.ix["resources"]]["settings"]
    assert "index.refresh_interval" not in s  # the default (1 s) again
    assert s["index.number_of_replicas"] == "0"


# failures ------------------------------------------------------------------------------------------

def test_unreachable_url_is_one_clear_line():
    t0 = time.monotonic()
    with pytest.raises(UserError, match="cannot reach") as e:
        ElasticsearchBackend(
            ElasticsearchBackend.endpoint_from_url(f"http://127.0.0.1:{free_port()}"), {}).connect()
    assert "\n" not in str(e.value) and time.monotonic() - t0 < 10


def test_bad_url_and_prefix_are_user_errors():
    with pytest.raises(UserError, match="invalid URL"):
        ElasticsearchBackend({"url": "127.0.0.1:9200"}, {}).connect()
    with pytest.raises(UserError, match="invalid index prefix"):
        ElasticsearchBackend({"url": "http://127.0.0.1:1", "index_prefix": "A-b"}, {}).connect()


class _Rejecting(http.server.BaseHTTPRequestHandler):
    """What a secured Elasticsearch answers to a wrong password (the OSS node has no security to test)."""

    def do_GET(self) -> None:  # noqa: N802 - http.server's naming
        body = (b'{"error":{"root_cause":[{"type":"security_exception","reason":"unable to authenticate user '
                b'[elastic] for REST request [/]"}],"type":"security_exception"},"status":401}')
        self.send_response(401)
        self.send_header("WWW-Authenticate", 'Basic realm="security" charset="UTF-8"')
        self.send_header("X-elastic-product", "Elasticsearch")
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        return None


@contextlib.contextmanager
def _rejecting_server() -> Iterator[int]:
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Rejecting)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        yield srv.server_address[1]
    finally:
        srv.shutdown()
        srv.server_close()


def test_wrong_credentials_are_one_clear_line_without_the_password(monkeypatch):
    with _rejecting_server() as port:
        monkeypatch.setenv("AUTHZBENCH_ELASTICSEARCH_PASSWORD", "s3cret-from-env")
        for url in (f"http://elastic:s3cret-in-url@127.0.0.1:{port}", f"http://127.0.0.1:{port}"):
            ep = ElasticsearchBackend.endpoint_from_url(url)
            assert "s3cret" not in ep["url"] and ep["username"] == "elastic"
            with pytest.raises(UserError, match="rejected the credentials of user 'elastic'") as e:
                ElasticsearchBackend(ep, {}).connect()
            assert "\n" not in str(e.value) and "s3cret" not in str(e.value)


def test_frozen_node_raises_timeouts_instead_of_hanging(session, scratch, dataset):
    """SIGSTOP freezes the node (connections stay open, nothing answers): each operation fails within its
    timeout. SIGCONT restores the node for the rest of the session."""
    from elasticsearch import ConnectionTimeout

    pid = session.dep.pids[0]
    with ElasticsearchBackend(scratch.endpoint, {"timeout_s": 1}) as b:
        assert b.check(0, "view", 0) in (True, False)
        os.kill(pid, signal.SIGSTOP)
        try:
            stopped = wait_all_threads_stopped(pid)
            ops = {"check": lambda: b.check(0, "view", 0), "lookup": lambda: b.lookup_resources(0, "view"),
                   "write": lambda: b.write(
                       Relationship("resource_viewer_user", 0, dataset.entities["user"] + 5))}
            for name, op in ops.items():
                t0 = time.monotonic()
                with pytest.raises(ConnectionTimeout):
                    got = op()
                    pytest.fail(f"{name} answered {got!r} from a frozen node (threads stopped: {stopped})")
                assert time.monotonic() - t0 < 5
        finally:
            os.kill(pid, signal.SIGCONT)
    deadline = time.monotonic() + 30
    while True:  # the node answers again
        try:
            with session.backend(timeout_s=5) as b:
                assert b.lookup_resources(0, "view") == sorted(b.lookup_resources(0, "view"))
                break
        except Exception:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def test_node_killed_mid_run_is_recorded_and_the_run_moves_on(tmp_path, monkeypatch):
    """A run of its own (its own node): SIGKILL once the first phase is measuring; that phase is marked
    incomplete with its errors counted, the next one fails to connect, and the next backend runs normally."""
    text, problems, seconds = bench_with_server_killed_mid_phase("elasticsearch", tmp_path, monkeypatch)
    assert seconds < 150
    assert "elasticsearch/check_manage_direct_user/c2/r0`: **incomplete**" in problems
    assert "elasticsearch/check_manage_org_admin/c2/r0`: **failed**" in problems
    assert "reference/check_manage_org_admin/c2/r0" not in problems
    assert "ConnectionError" in text
