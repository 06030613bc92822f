"""SpiceDB-specific behaviour against the real server (the generic scenario suite covers every
scenario's answers): exact agreement with the oracle on every (user, perm, resource) pair of tiny,
a bad preshared key, and a server killed mid-run."""

from __future__ import annotations

import os
import signal

import pytest

from authzbench.core.errors import UserError
from authzbench.run.loading import run_load
from authzbench.schema.model import Relationship
from authzbench.systems import split
from authzbench.systems.spicedb.native import SPICEDB_VERSION

pytestmark = pytest.mark.backend("spicedb-pg")


def test_every_pair_of_tiny_equals_the_oracle_fully_consistent(live, dataset, oracle):
    if dataset.model != "rebac" or dataset.profile != "tiny":
        pytest.skip("exhaustive pairs on the rebac tiny profile only")
    wrong = []
    with live.backend(consistency="fully_consistent") as b:
        for u in range(dataset.entities["user"]):
            for perm in ("manage", "view"):
                got = set(b.lookup_resources(u, perm))
                if got != set(oracle.lookup_resources(u, perm)):
                    wrong.append((u, perm))
                for r in range(0, dataset.entities["resource"], 7):  # nested groups, child managers, admins
                    if b.check(u, perm, r) != oracle.check(u, perm, r):
                        wrong.append((u, perm, r))
    assert not wrong, f"{len(wrong)} answers differ from the oracle: {wrong[:5]}"


def test_server_reports_its_version_and_datastore(live):
    """The release it was built as: the label's (spicedb-pg@v1.56.2), else the recipe's pin."""
    want = split(live.name)[1] or SPICEDB_VERSION
    with live.backend() as b:
        info = b.server_info()
    assert b.server_version == want, "the server did not report its version (build without -X Version?)"
    assert info.label.startswith(f"SpiceDB {want} on PostgreSQL "), info.label
    assert b.footprint() > 0


def test_write_and_delete_are_visible_fully_consistent(live, dataset):
    scratch = dataset.entities["user"] + 5
    group = int(dataset.table("resource_viewer_group").iloc[0]["subject"])
    rel = Relationship("group_manager", group, scratch)  # a group's manager is in its membership
    with live.backend(consistency="fully_consistent") as b:
        view = set(b.lookup_resources(scratch, "view"))
        assert not view
        b.write(rel)
        view = set(b.lookup_resources(scratch, "view"))
        assert view and all(b.check(scratch, "view", r) for r in sorted(view)[:5])
        b.delete(rel)
        assert not set(b.lookup_resources(scratch, "view"))


def test_lookup_returns_what_the_server_streamed_copies_included(live, dataset, oracle):
    """The runner counts repeated resources (the report's Duplicates column), so the adapter must not
    remove them: its answer has exactly as many items as the raw LookupResources stream."""
    from authzed.api.v1 import Consistency, LookupResourcesRequest, ObjectReference, SubjectReference

    if dataset.model != "rebac":
        pytest.skip("rebac model only")
    user = max(range(dataset.entities["user"]), key=lambda u: len(oracle.lookup_resources(u, "view")))
    with live.backend(consistency="fully_consistent") as b:
        got = list(b.lookup_resources(user, "view"))
        raw = [r.resource_object_id for r in b.client.LookupResources(LookupResourcesRequest(
            resource_object_type="resource", permission="view",
            subject=SubjectReference(object=ObjectReference(object_type="user", object_id=str(user))),
            consistency=Consistency(fully_consistent=True)), timeout=60, metadata=b._md)]
    assert len(got) == len(raw) and sorted(set(got)) == oracle.lookup_resources(user, "view")


def test_write_is_visible_at_least_as_fresh_as_its_token(live, dataset):
    scratch = dataset.entities["user"] + 7
    rel = Relationship("resource_viewer_user", 1, scratch)
    with live.backend(consistency="at_least_as_fresh") as b:
        b.write(rel)
        assert b.check(scratch, "view", 1)
        b.delete(rel)
        assert not b.check(scratch, "view", 1)


def test_bad_preshared_key_is_a_clear_error(live):
    from authzbench.systems.spicedb.adapter import SpiceDBBackend

    bad = SpiceDBBackend({**live.dep.endpoint, "preshared_key": "wrong"}, {})
    with pytest.raises(UserError, match="rejected the preshared key"):
        bad.connect()


def test_unreachable_server_is_a_clear_error():
    from authzbench.systems.spicedb.adapter import SpiceDBBackend

    with pytest.raises(UserError, match="cannot reach SpiceDB"):
        SpiceDBBackend({"addr": "127.0.0.1:1", "preshared_key": "k"}, {}).connect()


def test_killed_server_raises_instead_of_hanging(tmp_path):
    """On its own deployment, so the session's server stays up for the other tests."""
    from authzbench.run.servers import provision
    from authzbench.systems.spicedb.adapter import SpiceDBBackend

    dep = provision("spicedb-pg", "native", tmp_path / "run")
    try:
        with SpiceDBBackend(dep.endpoint, {"consistency": "fully_consistent", "timeout_s": 5}) as b:
            b.create_schema()
            assert b.check(0, "view", 0) is False
            os.kill(dep.pids[0], signal.SIGKILL)  # spicedb itself, not its datastore
            with pytest.raises(Exception):  # noqa: B017 - any gRPC error, quickly (not a hang)
                b.check(0, "view", 0)
    finally:
        dep.stop()


def test_import_in_concurrent_streams_loads_every_relationship(live, dataset, oracle):
    """Each import stream must finish inside the server's streaming timeout, so large loads are cut into
    several streams, and several run at once over disjoint chunks: a reload in streams of 200
    relationships (messages of 100), 3 in flight, still equals the oracle everywhere."""
    if dataset.model != "rebac":
        pytest.skip("rebac model only")
    with live.backend(consistency="fully_consistent", import_stream_rows=200, import_batch=100,
                      import_streams=3) as b:
        b.drop()
        b.create_schema()
        stats = run_load(b, dataset)
        b.mark_loaded(dataset.hash)
        assert stats.rows == sum(len(dataset.table(r)) for r in dataset.authz_relations())
        wrong = [(u, perm) for u in range(dataset.entities["user"]) for perm in ("manage", "view")
                 if sorted(set(b.lookup_resources(u, perm))) != oracle.lookup_resources(u, perm)]
    assert stats.notes["streams"] > 3 and stats.notes["streams_in_flight"] == 3
    assert stats.notes["bytes_written"] > 0 and not wrong, f"{len(wrong)} lookups differ: {wrong[:5]}"


def test_the_copy_floor_copies_every_relationship_into_a_relation_tuple_twin_and_drops_it(live, dataset):
    """The floor under the import (tools/spicedb_copy_floor) writes what the import writes, in the server's
    own datastore, and leaves nothing behind."""
    import psycopg

    from authzbench.systems.spicedb.tools.copy_floor import TABLE, copy_floor

    dsn, password = live.dep.endpoint["datastore_dsn"], live.dep.endpoint["datastore_password"]
    got = copy_floor(dataset, dsn, password, streams=2, say=lambda _: None)
    assert got["rows"] == sum(len(dataset.table(r)) for r in dataset.authz_relations()) and got["per_s"] > 0
    with psycopg.connect(dsn, password=password) as c:
        assert c.execute("SELECT to_regclass(%s)", (TABLE,)).fetchone()[0] is None
