"""CQL backend (`scylla`) against a real node started natively (Apache Cassandra 5.0.9): answers equal the
oracle's, writes and deletes of every relation kind keep the permission tables equal to the recomputed
oracle, bad endpoints fail at connect, a stopped node raises instead of hanging, and an existing keyspace
is reused or recreated on request. One node for the whole module.

    pytest tests/backends/test_scylla.py --backend scylla
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

from authzbench.backends import expansion
from authzbench.core.errors import UserError
from authzbench.provision.base import free_port
from authzbench.run.loading import run_load
from authzbench.schema.dataset import Dataset
from authzbench.schema.model import PERMISSIONS, Relationship
from authzbench.systems.scylla.adapter import ScyllaBackend
from tests.backends.edits import (
    assert_checks_equal_oracle,
    assert_every_lookup_equals_oracle,
    oracle_pairs,
    replay_edits,
)
from tests.backends.faults import wait_all_threads_stopped

pytestmark = pytest.mark.backend("scylla")


# `scratch` (tests/backends/conftest.py): a private keyspace with its own copy of the dataset.
SCRATCH_ENDPOINT = {"keyspace": "authzbench_scratch"}


def _table_state(b: ScyllaBackend) -> dict[str, set[tuple[int, int]]]:
    """Both permission tables, read whole, as {perm: {(user, resource)}} per table."""
    by_res = list(b.session.execute(f"SELECT resource, user, manage FROM {b.ks}.perm_by_resource"))
    by_user = list(b.session.execute(f"SELECT user, perm, resource FROM {b.ks}.perm_by_user"))
    return {"res:view": {(u, r) for r, u, _ in by_res}, "res:manage": {(u, r) for r, u, m in by_res if m},
            "user:view": {(u, r) for u, p, r in by_user if p == "view"},
            "user:manage": {(u, r) for u, p, r in by_user if p == "manage"}}


def _oracle_state(ds: Dataset) -> dict[str, set[tuple[int, int]]]:
    pairs = oracle_pairs(ds)
    return {f"{side}:{perm}": pairs[perm] for perm in PERMISSIONS for side in ("res", "user")}


# answers ----------------------------------------------------------------------------------------

def test_server_info_names_the_engine_and_footprint_is_measured(backend):
    info = backend.server_info()
    assert info.engine == "Apache Cassandra" and info.version.startswith("5.0")
    assert (info.label == f"Cassandra {info.version} (CQL, standing in for ScyllaDB)"
            and info.stands_in_for == "ScyllaDB")
    assert backend.footprint() > 0
    backend.baseline_roundtrip()


def test_checks_equal_the_oracle_including_negatives(backend, dataset, oracle):
    assert_checks_equal_oracle(backend, dataset, oracle, dataset.entities["user"] // 12)


def test_every_lookup_equals_the_oracle(backend, dataset, oracle):
    assert_every_lookup_equals_oracle(backend, dataset, oracle)


def test_tables_equal_the_oracle_after_load(scratch, dataset):
    assert _table_state(scratch) == _oracle_state(dataset)


def test_unknown_permission_is_a_user_error(backend):
    with pytest.raises(UserError, match="unknown permission"):
        backend.check(0, "own", 0)


# writes ------------------------------------------------------------------------------------------

def test_writes_and_deletes_keep_both_tables_equal_to_the_recomputed_oracle(scratch, dataset):
    replay_edits(scratch, dataset, _table_state, _oracle_state)


# load paths ----------------------------------------------------------------------------------------

def _source_state(b: ScyllaBackend) -> set[tuple[str, int, str, int]]:
    """Every source table, read whole, as (table, object, relation, subject) rows."""
    rows = {(t, o, r, s) for t in ("rel_resource", "rel_group", "rel_org")
            for o, r, s in b.session.execute(f"SELECT object, relation, subject FROM {b.ks}.{t}")}
    return rows | {
        ("rel_by_subject", o, r, s)
        for r, s, o in b.session.execute(f"SELECT relation, subject, object FROM {b.ks}.rel_by_subject")}


def _dataset_source(ds: Dataset) -> set[tuple[str, int, str, int]]:
    from authzbench.schema.model import REBAC_RELATIONS
    from authzbench.systems.scylla.tables import REVERSE, SOURCE_TABLE, _short

    out = set()
    for rel in ds.relations():
        table = SOURCE_TABLE[REBAC_RELATIONS[rel].object_type]
        for o, s in ds.table(rel)[["object", "subject"]].itertuples(index=False):
            out.add((table, o, _short(rel), s))
            if rel in REVERSE:
                out.add(("rel_by_subject", o, rel, s))
    return out


@pytest.mark.parametrize("path", ["sstable", "sstable-chunked", "cql"])
def test_each_load_path_fills_every_table_exactly_as_the_dataset_and_oracle_say(session, dataset, path,
                                                                                 monkeypatch):
    """The SSTable path (written by the helper, imported by the node) and the CQL variant each load a
    private keyspace: the permission tables equal the oracle, the source tables the dataset, and the
    load reports its rows, bytes written and (SSTables) how many files the node imported. Chunked: the
    closure in many small chunks, so the two permission tables' blocks alternate on the helper's pipe (and
    one table's chunks run out first), as at xl."""
    if path == "sstable-chunked":
        monkeypatch.setattr(expansion, "CHUNK_PAIRS", 2_000)  # the loader's expansion, built in load()
        e = expansion.Expansion(dataset)
        assert len(e.user_chunks()) > 2 and len(e.resource_chunks()) > 2
        path = "sstable"
    with ScyllaBackend({**session.dep.endpoint, "keyspace": f"authzbench_{path}"}, {"timeout_s": 10,
                                                                                   "ingest": path}) as b:
        b.drop()
        b.create_schema()
        try:
            stats = run_load(b, dataset)
            assert stats.notes["ingest"] == path and stats.notes["bytes_written"] > 0
            assert stats.rows == stats.notes["source_rows"] + stats.notes["permission_rows"]
            if path == "sstable":  # one SSTable a table at least, each moved into the node's table
                assert stats.notes["sstables"] >= 6 and stats.notes["import_seconds"] > 0
                # the compactions the import calls for ran before the load returned, not minutes later
                # in the middle of measured phases
                assert stats.notes["compaction_seconds"] is not None
                running = [t
                           for t in b.session.execute("SELECT keyspace_name FROM system_views.sstable_tasks")
                           if t.keyspace_name == b.ks]
                assert running == []
            assert _table_state(b) == _oracle_state(dataset)
            assert _source_state(b) == _dataset_source(dataset)
        finally:
            b.drop()


def test_a_bulk_load_in_many_small_sstables_leaves_none_for_the_node_to_merge(session, dataset, monkeypatch):
    """Blocks of 500 rows and spill ranges of ~2,000: ~50 SSTables, written in token order,
    each one slice of the ring. The node imports them and merges none (as many Data.db files on disk as
    the helper wrote); written in user or resource order every SSTable spans the ring and the node merges
    them (a baseline load spent 10-13 s in it). The tokens computed here equal the node's own."""
    from authzbench.systems.scylla import sstable as scylla_sstable
    from authzbench.systems.scylla.tokens import TokenSpill, id_tokens

    monkeypatch.setattr(scylla_sstable, "SSTABLE_BLOCK_ROWS", 500)
    monkeypatch.setattr(TokenSpill, "SPILL_ROWS", 2_000)
    monkeypatch.setattr(expansion, "CHUNK_PAIRS", 2_000)
    with ScyllaBackend({**session.dep.endpoint, "keyspace": "authzbench_slices"}, {"timeout_s": 10,
                                                                                  "ingest": "sstable"}) as b:
        b.drop()
        b.create_schema()
        try:
            stats = run_load(b, dataset)
            files = list((Path(session.dep.endpoint["data_dir"]) / "data" / b.ks).glob("*/*-Data.db"))
            assert stats.notes["sstables"] > 40 and len(files) == stats.notes["sstables"]
            assert _table_state(b) == _oracle_state(dataset)
            assert _source_state(b) == _dataset_source(dataset)
            node = b.session.execute(
                f"SELECT DISTINCT user, perm, token(user, perm) FROM {b.ks}.perm_by_user")
            mine = {p: id_tokens(dataset.entities["user"], after=p.encode()) for p in PERMISSIONS}
            assert all(mine[p][u] == t for u, p, t in node)
            node = b.session.execute(
                f"SELECT DISTINCT resource, token(resource) FROM {b.ks}.perm_by_resource")
            mine_r = id_tokens(dataset.entities["resource"])
            assert all(mine_r[r] == t for r, t in node)
        finally:
            b.drop()


def test_the_sstable_helper_refuses_a_partition_whose_rows_are_out_of_clustering_order(tmp_path):
    """The helper builds each partition's rows itself and hands them to the SSTable writer as they come:
    rows out of clustering order would make an SSTable the node cannot read, so the load stops instead."""
    import numpy as np

    from authzbench.core.errors import BackendUnavailable
    from authzbench.systems.scylla.native import bulk_tool
    from authzbench.systems.scylla.sstable import _SSTableWriter
    from authzbench.systems.scylla.tables import _Ticker

    schema = ["CREATE TABLE IF NOT EXISTS ks.perm_by_resource (resource int, user int, manage boolean, "
              "PRIMARY KEY ((resource), user));"]
    tick = _Ticker(lambda n: None, 1.0)
    with _SSTableWriter(bulk_tool(), tmp_path, "ks", schema) as w:
        w.table("perm_by_resource", "resource,user,manage", "iib", [])
        w.rows("perm_by_resource", [np.array([7, 7, 7]), np.array([1, 3, 2]), np.array([True, False, True])],
               tick)
        w.close("perm_by_resource")
        with pytest.raises(BackendUnavailable, match="out of clustering order"):
            w.finish()


# keyspace reuse ------------------------------------------------------------------------------------

def test_existing_keyspace_is_reused_or_recreated_on_request(session, scratch, dataset):
    ep = {**session.dep.endpoint, "keyspace": "authzbench_scratch"}
    with ScyllaBackend(ep, {"timeout_s": 10}) as b:
        assert b.loaded_hash() == dataset.hash  # prepare skips the reload
    with ScyllaBackend(ep, {"timeout_s": 10, "recreate": True}) as b:
        assert b.loaded_hash() is None  # prepare reloads
        b.create_schema()  # drops the keyspace first
    with ScyllaBackend(ep, {"timeout_s": 10}) as b:
        assert b.loaded_hash() is None
        assert b.lookup_resources(0, "view") == []


# failures ------------------------------------------------------------------------------------------

def test_unreachable_node_is_one_clear_line():
    with pytest.raises(UserError, match="no CQL node reachable") as e:
        ScyllaBackend({"hosts": ["127.0.0.1"], "port": free_port(), "keyspace": "x"}, {}).connect()
    assert "\n" not in str(e.value)


def test_invalid_keyspace_name_is_a_user_error(session):
    with pytest.raises(UserError, match="invalid keyspace"):
        ScyllaBackend({**session.dep.endpoint, "keyspace": "a-b; DROP"}, {}).connect()


def test_stopped_node_raises_driver_errors_instead_of_hanging(session, scratch, dataset):
    """SIGSTOP freezes the node mid-run (the worst case: connections stay open, nothing answers); each
    operation must fail with the driver's error within its timeout. SIGCONT restores the node for
    the rest of the session."""
    from cassandra import OperationTimedOut
    from cassandra.cluster import NoHostAvailable

    pid = session.dep.pids[0]
    # on the scratch keyspace: a write cut off halfway must not touch the shared dataset
    with ScyllaBackend({**session.dep.endpoint, "keyspace": scratch.ks}, {"timeout_s": 2}) as b:
        assert b.check(0, "view", 0) in (True, False)
        os.kill(pid, signal.SIGSTOP)
        try:
            # an op sent before every JVM thread stopped may be answered
            stopped = wait_all_threads_stopped(pid)
            ops = {"check": lambda: b.check(0, "view", 0), "lookup": lambda: b.lookup_resources(0, "view"),
                   "write": lambda: b.write(
                       Relationship("resource_viewer_user", 0, dataset.entities["user"] + 5))}
            for name, op in ops.items():
                t0 = time.monotonic()
                with pytest.raises((OperationTimedOut, NoHostAvailable)):
                    got = op()
                    pytest.fail(f"{name} answered {got!r} from a frozen node (threads stopped: {stopped})")
                assert time.monotonic() - t0 < 10
        finally:
            os.kill(pid, signal.SIGCONT)
    deadline = time.monotonic() + 60
    while True:  # the node answers again (a fresh session; the frozen one may have marked it down)
        try:
            with session.backend(timeout_s=5) as b:
                assert b.lookup_resources(0, "view") == sorted(b.lookup_resources(0, "view"))
                break
        except Exception:
            if time.monotonic() > deadline:
                raise
            time.sleep(1)
