"""OpenFGA against the real server (built from the Go module proxy, on a private native PostgreSQL): checks
and lookups equal the oracle's (rebac and social), writes and deletes of every relation kind keep every
answer equal to the recomputed oracle, a 10,500-result lookup is complete, every listener is on
loopback, and a wrong key or a killed server each give one clear error.

    pytest tests/backends/test_openfga.py --backend openfga [--model social]
"""

from __future__ import annotations

import os
import signal

import psutil
import pytest

from authzbench.core.errors import BackendUnavailable, UserError
from authzbench.run.loading import run_load
from authzbench.schema.model import SOCIAL_PERMISSIONS
from authzbench.systems.openfga.adapter import OpenFGABackend
from tests.backends.edits import (
    assert_checks_equal_oracle,
    assert_every_lookup_equals_oracle,
    big_org,
    lookup_state,
    oracle_pairs,
    replay_edits,
)

pytestmark = pytest.mark.backend("openfga")


@pytest.fixture(scope="module")
def session(deployments, dataset, run_store):
    return deployments.get("openfga", dataset, run_store)


@pytest.fixture(scope="module")
def backend(session):
    with session.backend(consistency="fully_consistent", timeout_s=30) as b:
        yield b


def _private(session, store: str, ds) -> OpenFGABackend:
    """Another store on the same server, loaded with `ds`: tests that write never touch the session's data."""
    b = OpenFGABackend(session.dep.endpoint, {"consistency": "fully_consistent", "timeout_s": 30,
                                              "store": store, "model": ds.model})
    b.connect()
    b.drop()
    b.create_schema()
    run_load(b, ds)
    b.mark_loaded(ds.hash)
    return b


def _rebac_only(ds) -> None:
    if ds.model != "rebac":
        pytest.skip("rebac model only")


def test_every_check_and_lookup_equals_the_oracle(backend, dataset, oracle):
    """rebac: every user against every resource, both permissions, and every lookup; social: every lookup
    of every user, and every user against every 4th object of each kind (all pairs take ~4 min here)."""
    if dataset.model == "rebac":
        assert_checks_equal_oracle(backend, dataset, oracle, users_step=1)
        assert_every_lookup_equals_oracle(backend, dataset, oracle)
        return
    n = {"view_user": "user", "view_content": "content", "view_interaction": "interaction"}
    bad, positives, total = [], 0, 0
    for u in range(dataset.entities["user"]):
        for perm in SOCIAL_PERMISSIONS:
            if sorted(backend.lookup_resources(u, perm)) != oracle.lookup_resources(u, perm):
                bad.append((u, perm))
            for o in range(0, dataset.entities[n[perm]], 4):
                want = oracle.check(u, perm, o)
                positives, total = positives + want, total + 1
                if backend.check(u, perm, o) != want:
                    bad.append((u, perm, o, want))
    assert 0 < positives < total and not bad, f"{len(bad)} answers differ: {bad[:5]}"


def test_server_reports_its_version_and_footprint(session, backend):
    info = backend.server_info()
    assert info.version == "v1.22.1", "the server logged another version (built without -X build.Version?)"
    assert info.label.startswith("OpenFGA v1.22.1 on PostgreSQL "), info.label
    assert backend.footprint() > 0
    assert backend.loaded_hash() is not None


def test_every_listener_of_the_server_is_on_loopback(session):
    server = psutil.Process(session.dep.pids[0])
    listening = [c.laddr for c in server.net_connections(kind="inet") if c.status == psutil.CONN_LISTEN]
    assert len(listening) == 2, f"expected the gRPC and HTTP listeners only, got {listening}"
    assert all(a.ip == "127.0.0.1" for a in listening), listening


def test_writes_and_deletes_of_every_relation_kind_equal_the_recomputed_oracle(session, dataset, oracle):
    _rebac_only(dataset)
    b = _private(session, "authzbench-edits", dataset)
    try:
        n = dataset.entities["resource"]

        def state(be):
            return lookup_state(be, dataset)

        def expected(ds):
            pairs = oracle_pairs(ds)
            return {perm: {(u, r) for u, r in pairs[perm] if r < n} for perm in pairs}

        replay_edits(b, dataset, state, expected,
                     users_state=lambda be, users: lookup_state(be, dataset, users))
    finally:
        b.drop()
        b.close()


def test_lookup_larger_than_10000_results_is_complete(session, tmp_path):
    """One org of 10,500 resources: its admins see all of them (OpenFGA's default cap is 1,000)."""
    ds, admin, want, want_manage = big_org(tmp_path)
    b = _private(session, "authzbench-big", ds)
    try:
        assert sorted(b.lookup_resources(admin, "view")) == want
        assert sorted(b.lookup_resources(admin, "manage")) == want_manage
    finally:
        b.drop()
        b.close()


def test_a_capped_server_fails_the_lookup_instead_of_returning_a_short_list(session, dataset, oracle):
    """As an external server with OpenFGA's default cap would: a list that reaches the cap is refused."""
    _rebac_only(dataset)
    heavy = max(range(dataset.entities["user"]), key=lambda u: len(oracle.lookup_resources(u, "view")))
    cap = len(oracle.lookup_resources(heavy, "view"))
    capped = OpenFGABackend({**session.dep.endpoint, "max_results": cap}, {"consistency": "fully_consistent"})
    with capped as b, pytest.raises(BackendUnavailable, match="cap"):
        b.lookup_resources(heavy, "view")


def test_wrong_preshared_key_is_one_clear_error(session):
    bad = OpenFGABackend({**session.dep.endpoint, "preshared_key": "wrong"}, {})
    with pytest.raises(UserError, match="rejected the preshared key"):
        bad.connect()


def test_unreachable_server_is_one_clear_error():
    with pytest.raises(BackendUnavailable, match="cannot reach OpenFGA"):
        OpenFGABackend({"url": "http://127.0.0.1:1", "preshared_key": "k"}, {"timeout_s": 5}).connect()


def test_unknown_permission_and_relation_are_user_errors(backend):
    from authzbench.schema.model import Relationship

    with pytest.raises(UserError, match="unknown permission"):
        backend.check(0, "own", 0)
    with pytest.raises(UserError, match="unknown relation"):
        backend.write(Relationship("resource_owner", 0, 0))


def test_killed_server_raises_instead_of_hanging(tmp_path):
    """On its own deployment, so the session's server stays up for the other tests."""
    from authzbench.run.servers import provision

    dep = provision("openfga", "native", tmp_path / "run")
    try:
        with OpenFGABackend(dep.endpoint, {"consistency": "fully_consistent", "timeout_s": 5}) as b:
            b.create_schema()
            assert b.check(0, "view", 0) is False
            os.kill(dep.pids[0], signal.SIGKILL)  # openfga itself, not its datastore
            for _ in range(2):  # the pooled connection is reset, then a new one is refused: same error
                with pytest.raises(BackendUnavailable, match="lost the connection to OpenFGA at http://127.0.0.1"):
                    b.check(0, "view", 0)
            with pytest.raises(BackendUnavailable, match="lost the connection"):
                b.lookup_resources(0, "view")
    finally:
        dep.stop()
