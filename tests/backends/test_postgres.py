"""PostgreSQL backend against a real, natively started server: answers equal the oracle's, writes keep the
group closure right (cycles included), bad endpoints fail at connect, a dying server raises instead of
hanging, and a second prepare of the same dataset is skipped.

    pytest tests/backends/test_postgres.py --backend postgres
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time

import numpy as np
import pandas as pd
import psutil
import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from authzbench.core.errors import UserError
from authzbench.provision.base import StartContext, free_port
from authzbench.run.loading import run_build, run_load
from authzbench.schema.closure import group_membership
from authzbench.schema.dataset import Dataset
from authzbench.schema.model import PERMISSIONS, Relationship
from authzbench.systems.postgres.adapter import PostgresBackend
from authzbench.truth.oracle import Oracle

pytestmark = pytest.mark.backend("postgres")


def _db_endpoint(endpoint: dict, dbname: str) -> dict:
    """The same server, another database: tests that write get a private copy of the data."""
    admin = psycopg.connect(endpoint["dsn"], password=endpoint.get("password"), autocommit=True)
    with admin:
        admin.execute(f"DROP DATABASE IF EXISTS {dbname}")
        admin.execute(f"CREATE DATABASE {dbname}")
    return {**endpoint, "dsn": make_conninfo(endpoint["dsn"], dbname=dbname)}


def _load(b: PostgresBackend, ds: Dataset) -> None:
    b.drop()
    b.create_schema()
    run_load(b, ds)
    run_build(b)


def _mutated(ds: Dataset, tables: dict[str, pd.DataFrame]) -> Dataset:
    """A dataset whose relations are the given DataFrames (for a recomputed oracle)."""
    out = Dataset(ds.path, ds.manifest)
    out.__dict__["_tables"] = tables
    return out


# correctness ---------------------------------------------------------------------------------------

def test_server_info_and_build(backend, dataset):
    info = backend.server_info()
    assert info.engine == "PostgreSQL" and info.version[:2].isdigit()
    assert info.label.startswith("PostgreSQL ")
    assert backend.footprint() > 0
    members = int(backend._one("SELECT count(*) FROM authzbench.group_membership"))
    assert members == len(group_membership(dataset))


@pytest.mark.parametrize("perm", PERMISSIONS)
def test_check_matches_oracle(backend, oracle, dataset, perm):
    rng = np.random.default_rng(11)
    n_res = dataset.entities["resource"]
    keys = oracle.keys[perm]
    positives = rng.choice(keys, size=min(300, len(keys)), replace=False)
    pairs = [(int(k // n_res), int(k % n_res)) for k in positives]
    pairs += [(int(u), int(r)) for u, r in zip(rng.integers(0, dataset.entities["user"], 600),
                                               rng.integers(0, n_res, 600), strict=True)]
    wrong = [(u, r) for u, r in pairs if backend.check(u, perm, r) != oracle.check(u, perm, r)]
    assert sum(oracle.check(u, perm, r) for u, r in pairs) >= 300
    assert sum(not oracle.check(u, perm, r) for u, r in pairs) > 50  # negatives are really tested
    assert wrong == []


@pytest.mark.parametrize("perm", PERMISSIONS)
def test_lookup_matches_oracle(backend, oracle, dataset, perm):
    users = range(dataset.entities["user"])
    if len(users) > 400:
        users = np.random.default_rng(5).choice(len(users), 400, replace=False).tolist()
    wrong = []
    for u in users:
        got = list(backend.lookup_resources(u, perm))
        assert len(got) == len(set(got)), "lookup returned duplicates"
        if sorted(got) != oracle.lookup_resources(u, perm):
            wrong.append(u)
    assert wrong == []


def test_writes_keep_closure_equal_to_recomputed_oracle(session, dataset):
    """Group writes and deletes, including one that closes a cycle, against a fresh oracle each step."""
    endpoint = _db_endpoint(session.dep.endpoint, "authz_writes")
    tables = {rel: dataset.table(rel).copy() for rel in dataset.relations()}
    gc = tables["group_child"]
    assert len(gc), "the dataset needs a group hierarchy"
    parent, child = int(gc["object"].iloc[0]), int(gc["subject"].iloc[0])
    top = parent
    while (up := gc[gc["subject"] == top]).shape[0]:  # the root above `parent`
        top = int(up["object"].iloc[0])
    users = dataset.entities["user"]
    some_user = users - 1
    res = int(dataset.table("resource_viewer_group")["object"].iloc[0])
    steps = [
        ("write", Relationship("group_member", child, some_user)),  # reaches parent and its ancestors
        ("write", Relationship("group_manager", child, 0)),
        ("write", Relationship("group_child", child, top)),  # closes a cycle: top -> ... -> child -> top
        ("delete", Relationship("group_child", parent, child)),  # and opens it again elsewhere
        ("delete", Relationship("group_member", child, some_user)),
        ("write", Relationship("resource_viewer_group", res, child)),
        ("write", Relationship("resource_manager_user", res, some_user)),
        ("delete", Relationship("resource_manager_user", res, some_user)),
        ("write", Relationship("org_admin", 0, some_user)),
        ("write", Relationship("group_member", child, some_user)),  # re-add: idempotent paths
        ("write", Relationship("group_member", child, some_user)),
    ]
    b = PostgresBackend(endpoint, {"timeout_s": 10})
    with b:
        _load(b, dataset)
        for op, rel in steps:
            df = tables[rel.relation]
            row = (df["object"] == rel.object) & (df["subject"] == rel.subject)
            if op == "write":
                b.write(rel)
                if not row.any():
                    df = pd.concat([df, pd.DataFrame({"object": [rel.object], "subject": [rel.subject]},
                                                     dtype="int32")], ignore_index=True)
            else:
                b.delete(rel)
                df = df[~row]
            tables[rel.relation] = df.reset_index(drop=True)
            oracle = Oracle(_mutated(dataset, tables))
            for perm in PERMISSIONS:
                bad = [u
                       for u in range(users)
                       if sorted(b.lookup_resources(u, perm)) != oracle.lookup_resources(u, perm)]
                assert bad == [], f"after {op} {rel}: {perm} lookups differ for users {bad[:5]}"
            members = int(b._one("SELECT count(*) FROM authzbench.group_membership"))
            assert members == len(group_membership(_mutated(dataset, tables))), (
                f"closure size after {op} {rel}")
        b.drop()


def test_prepare_twice_skips_loaded_dataset(session, dataset, backend):
    from authzbench.run.loading import load_backend

    assert backend.loaded_hash() == dataset.hash
    rec = load_backend(session, dataset, None, reload=False)
    assert rec["type"] == "ingest_skipped"


# failures ------------------------------------------------------------------------------------------

def test_wrong_port_is_a_user_error(session):
    ep = session.dep.endpoint
    bad = {**ep, "dsn": make_conninfo(ep["dsn"], port=str(free_port()))}
    t0 = time.monotonic()
    with pytest.raises(UserError, match="cannot connect"):
        PostgresBackend(bad).connect()
    assert time.monotonic() - t0 < 10


def test_wrong_password_is_a_user_error(session):
    if session.dep.mode != "native":
        pytest.skip("the server's auth method is only known for the native cluster")
    ep = session.dep.endpoint
    with pytest.raises(UserError, match="password authentication failed"):
        PostgresBackend({**ep, "password": "not-the-password"}).connect()
    # A password inside an external DSN works too (endpoint_from_url).
    url = make_conninfo(ep["dsn"], password=ep["password"])
    params = conninfo_to_dict(url)
    dsn = f"postgresql://{params['user']}:{params['password']}@{params['host']}:{params['port']}/{params['dbname']}"
    with PostgresBackend(PostgresBackend.endpoint_from_url(dsn)) as b:
        b.baseline_roundtrip()


def test_server_killed_mid_operation_raises_not_hangs(tmp_path, dataset):
    """A crashed server (postmaster and its backends SIGKILLed) turns the op in flight into an exception."""
    from authzbench.provision.pgcluster import start_cluster

    cluster = start_cluster(StartContext(tmp_path), name="pgkill")
    try:
        b = PostgresBackend({"dsn": cluster.public_dsn, "password": cluster.password}, {"timeout_s": 5})
        b.connect()
        _load(b, dataset)
        outcome: dict = {}

        def hammer():
            try:
                deadline = time.monotonic() + 30
                while time.monotonic() < deadline:
                    b.check(0, "view", 0)
                    list(b.lookup_resources(0, "view"))
                outcome["result"] = "no error in 30 s"
            except Exception as e:  # noqa: BLE001 - any exception is the expected outcome
                outcome["error"] = e

        t = threading.Thread(target=hammer, daemon=True)
        t.start()
        time.sleep(0.5)
        procs = [psutil.Process(cluster.pid), *psutil.Process(cluster.pid).children(recursive=True)]
        for p in procs:  # all started by us: the postmaster we spawned and its own children
            with contextlib.suppress(ProcessLookupError):
                os.kill(p.pid, signal.SIGKILL)
        t.join(15)
        assert not t.is_alive(), "the backend call hung after the server died"
        assert isinstance(outcome.get("error"), psycopg.Error), outcome
        b.close()
        with pytest.raises(UserError):
            PostgresBackend({"dsn": cluster.public_dsn, "password": cluster.password}).connect()
    finally:
        cluster.stop()
