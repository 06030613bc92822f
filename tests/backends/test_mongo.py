"""MongoDB-wire backend (`mongo`) against a real server started natively (FerretDB 1.24 on PostgreSQL):
answers equal the oracle's in both query modes, the expanded arrays and user closures equal the
recomputed oracle after writes and deletes of every relation kind (a hierarchy cycle included), reads
use the GIN indexes, and a bad endpoint fails at connect with one line. One server for the module.

    pytest tests/backends/test_mongo.py --backend mongo
"""

from __future__ import annotations

import time

import pytest

from authzbench.core.errors import UserError
from authzbench.provision.base import free_port
from authzbench.schema.closure import group_membership
from authzbench.schema.dataset import Dataset
from authzbench.schema.model import PERMISSIONS, Relationship
from authzbench.systems.mongo.adapter import FERRETDB_LABEL, MongoBackend
from authzbench.systems.mongo.native import FERRETDB_VERSION
from authzbench.truth.oracle import Oracle
from tests.backends.edits import (
    assert_checks_equal_oracle,
    assert_every_lookup_equals_oracle,
    oracle_pairs,
    replay_edits,
)

pytestmark = pytest.mark.backend("mongo")


# Every `backend` test runs on both read paths; `scratch` (tests/backends/conftest.py) is a private
# database with its own copy of the dataset.
BACKEND_VARIANTS = [{"query": "expanded"}, {"query": "acl"}]
SCRATCH_ENDPOINT = {"database": "authzbench_scratch"}


def _state(b: MongoBackend) -> dict[str, set[tuple[int, int]]]:
    """The expanded arrays as {perm: {(user, resource)}} and the closures as {"groups": {(user, group)}}."""
    out: dict[str, set[tuple[int, int]]] = {"manage": set(), "view": set(), "groups": set()}
    for d in b.res.find({}, {"managers": 1, "viewers": 1}):
        out["manage"] |= {(u, d["_id"]) for u in d.get("managers", ())}
        out["view"] |= {(u, d["_id"]) for u in d.get("viewers", ())}
    for d in b.users.find({}, {"groups": 1}):
        out["groups"] |= {(d["_id"], g) for g in d.get("groups", ())}
    return out


def _oracle_state(ds: Dataset) -> dict[str, set[tuple[int, int]]]:
    out = oracle_pairs(ds)
    m = group_membership(ds)
    out["groups"] = set(zip(m["user"].tolist(), m["group"].tolist(), strict=True))
    return out


# answers ----------------------------------------------------------------------------------------

def test_server_info_labels_ferretdb_and_footprint_is_measured(backend):
    info = backend.server_info()
    assert info.engine == "FerretDB" and info.version == FERRETDB_VERSION
    # networked: ‡
    assert info.label == FERRETDB_LABEL and info.stands_in_for == "MongoDB" and info.comparable
    assert backend.footprint() > 0
    backend.baseline_roundtrip()


def test_checks_equal_the_oracle_including_negatives(backend, dataset, oracle):
    assert_checks_equal_oracle(backend, dataset, oracle, dataset.entities["user"] // 10, 2)


def test_every_lookup_equals_the_oracle(backend, dataset, oracle):
    assert_every_lookup_equals_oracle(backend, dataset, oracle)


def test_unknown_permission_and_relation_are_user_errors(backend):
    with pytest.raises(UserError, match="unknown permission"):
        backend.check(0, "own", 0)
    with pytest.raises(UserError, match="unknown relation"):
        backend.write(Relationship("resource_owner", 0, 0))


def test_reads_are_pushed_down_to_a_usable_gin_index(session):
    """FerretDB pushes {viewers: u} down to PostgreSQL as `_jsonb->'viewers' @> u`; the GIN expression index
    the backend made must be able to serve exactly that expression. (On tiny the planner rightly prefers a
    sequential scan of a few hundred rows, so the plan is asked for with sequential scans disabled.)"""
    with session.backend(timeout_s=10) as b, b._pg() as conn:  # noqa: SLF001
        explain = b.res.find({"viewers": 0}, {"_id": 1}).explain()
        assert explain.get("filterPushdown") is True, explain
        cond = explain["queryPlanner"]["Plan"].get("Filter") or explain["queryPlanner"]["Plan"].get(
            "Recheck Cond")
        if cond is None:  # an index plan: the condition sits on the index scan below
            cond = str(explain["queryPlanner"]["Plan"])
        assert "'viewers'" in cond and "@>" in cond, cond
        table = b._tables(conn)["resources"]  # noqa: SLF001
        conn.execute("SET enable_seqscan = off")
        plan = "\n".join(
            r[0]
            for r in conn.execute(
                f"""EXPLAIN SELECT _jsonb FROM "{b.db.name}"."{table}" WHERE _jsonb -> 'viewers' @> '0'"""
            ).fetchall())
        assert f"{table}_viewers_gin" in plan, plan


# writes ------------------------------------------------------------------------------------------

def test_load_equals_the_oracle(scratch, dataset):
    assert _state(scratch) == _oracle_state(dataset)


def test_writes_and_deletes_keep_documents_equal_to_the_recomputed_oracle(scratch, dataset):
    final = replay_edits(scratch, dataset, _state, _oracle_state)
    o = Oracle(final)
    # the ACL-array answers too
    with MongoBackend(scratch.endpoint, {"timeout_s": 10, "query": "acl"}) as acl:
        for u in range(dataset.entities["user"] - 8, dataset.entities["user"]):
            for perm in PERMISSIONS:
                assert sorted(acl.lookup_resources(u, perm)) == o.lookup_resources(u, perm)
                assert all(acl.check(u, perm, r) == o.check(u, perm, r) for r in range(0, 12))


def test_a_write_touching_many_documents_never_sends_ferretdb_a_bulk_of_50_updates(scratch, dataset):
    """FerretDB 1.24 never answers a bulk of 50 or more updates and stops serving altogether: an org-admin
    grant rewrites every resource of the org (80 on tiny, plus grants and users), yet no update command
    may carry 50 statements, and the write and its revocation return within their timeout."""
    from pymongo import monitoring

    class UpdateStatements(monitoring.CommandListener):
        """The number of statements of every `update` command a client sends."""

        sizes: list[int] = []

        def started(self, event) -> None:
            if event.command_name == "update":
                self.sizes.append(len(event.command.get("updates", ())))

        def succeeded(self, event) -> None: ...

        def failed(self, event) -> None: ...

    listener = UpdateStatements()
    monitoring.register(listener)  # applies to clients made from here on: the backend below
    org = max(range(dataset.entities["organization"]),
              key=lambda o: len(dataset.table("resource_org").query("subject == @o")))
    rel = Relationship("org_admin", org, dataset.entities["user"] + 77)
    with MongoBackend(scratch.endpoint, {"timeout_s": 30}) as b:
        assert b.ferretdb
        before = b.rows_touched
        t0 = time.monotonic()
        b.write(rel)
        b.delete(rel)
        assert time.monotonic() - t0 < 60
        assert b.rows_touched - before >= 2 * 50  # the write did send at least 50 updates each way
    assert sum(listener.sizes) >= 100 and max(listener.sizes) < 50, listener.sizes


def test_loaded_hash_marks_a_complete_load(scratch, dataset):
    assert scratch.loaded_hash() == dataset.hash
    with MongoBackend({**scratch.endpoint, "database": "authzbench_empty"}, {}) as b:
        assert b.loaded_hash() is None


# failures ------------------------------------------------------------------------------------------

def test_unreachable_server_is_one_clear_line():
    t0 = time.monotonic()
    with pytest.raises(UserError, match="cannot reach a MongoDB server") as e:
        MongoBackend(MongoBackend.endpoint_from_url(f"mongodb://127.0.0.1:{free_port()}/"), {}).connect()
    assert "\n" not in str(e.value) and time.monotonic() - t0 < 10


def test_bad_url_and_query_mode_are_user_errors():
    with pytest.raises(UserError, match="invalid URL"):
        MongoBackend({"url": "http://nope"}, {}).connect()
    with pytest.raises(UserError, match="unknown query mode"):
        MongoBackend({"url": "mongodb://127.0.0.1:1/"}, {"query": "magic"}).connect()
