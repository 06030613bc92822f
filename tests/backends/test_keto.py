"""Ory Keto against the real server (built from the Go module proxy, on a private native PostgreSQL): every
check of tiny equals the oracle, writes and deletes of every relation kind change exactly the answers the
recomputed oracle changes, a group chain deeper than Keto's default read depth is followed, every listener
is on loopback, lookups are refused by name, a dead or absent server is one clear error, and each claim the
declaration makes (authzbench/systems/keto/system.py) that a test can exercise is exercised here.

    pytest tests/backends/test_keto.py --backend keto
"""

from __future__ import annotations

import os
import signal
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import psutil
import pytest

from authzbench.core.errors import BackendUnavailable, UserError
from authzbench.provision.base import StartContext, wait_until
from authzbench.run.loading import run_load
from authzbench.schema.model import PERMISSIONS, Relationship
from authzbench.systems.keto import native
from authzbench.systems.keto.adapter import KetoBackend, LookupUnsupported
from authzbench.systems.keto.system import SYSTEM
from tests.backends.edits import edit_steps, mutated, oracle_pairs

pytestmark = pytest.mark.backend("keto")
CLIENTS = 4  # checks in flight: Keto answers each from several datastore reads


@pytest.fixture(scope="module")
def session(deployments, dataset, run_store):
    if dataset.model != "rebac":
        pytest.skip("Keto serves the rebac model only")
    return deployments.get("keto", dataset, run_store)


@pytest.fixture(scope="module")
def backend(session):
    with session.backend(timeout_s=30) as b:
        yield b


@pytest.fixture(scope="module")
def private(tmp_path_factory, dataset):
    """A second Keto with its own datastore, loaded with the dataset: the edit script never touches the
    session's data."""
    dep = native.start(StartContext(tmp_path_factory.mktemp("keto-private")))
    try:
        with KetoBackend(dep.endpoint, {"timeout_s": 30}) as b:
            b.create_schema()
            run_load(b, dataset)
            yield b
    finally:
        dep.stop()


def _answers(endpoint: dict, triples: list[tuple[int, str, int]]) -> list[bool]:
    """check(u, perm, r) for every triple, CLIENTS connections at once, in order."""
    parts = [triples[i::CLIENTS] for i in range(CLIENTS)]

    def run(part):
        with KetoBackend(endpoint, {"timeout_s": 30}) as b:
            return [b.check(u, perm, r) for u, perm, r in part]

    with ThreadPoolExecutor(CLIENTS) as pool:
        done = list(pool.map(run, parts))
    out: list[bool] = [False] * len(triples)
    for i, part in enumerate(done):
        out[i::CLIENTS] = part
    return out


def test_every_check_of_tiny_equals_the_oracle(session, dataset, oracle):
    """Every user against every resource, both permissions (a sample past tiny); positives and negatives."""
    step = 1 if dataset.profile == "tiny" else max(1, dataset.entities["user"] // 40)
    triples = [(u, perm, r) for u in range(0, dataset.entities["user"], step) for perm in PERMISSIONS
               for r in range(dataset.entities["resource"])]
    want = [oracle.check(*t) for t in triples]
    got = _answers(session.dep.endpoint, triples)
    bad = [(t, w) for t, w, g in zip(triples, want, got, strict=True) if w != g]
    assert 0 < sum(want) < len(want) and not bad, f"{len(bad)} of {len(want)} checks differ: {bad[:5]}"


def test_server_reports_its_version_datastore_and_loaded_hash(backend, dataset):
    info = backend.server_info()
    assert info.version == native.KETO_VERSION, "another version reported (built without -X Version?)"
    assert info.label.startswith(f"Ory Keto {native.KETO_VERSION} on PostgreSQL "), info.label
    assert info.consistency == "latest committed"
    assert backend.footprint() > 0
    assert backend.loaded_hash() == dataset.hash


def test_every_listener_of_the_server_is_on_loopback(session):
    server = psutil.Process(session.dep.pids[0])
    listening = [c.laddr for c in server.net_connections(kind="inet") if c.status == psutil.CONN_LISTEN]
    assert len(listening) == 4, f"expected the read, write, OPL and metrics listeners, got {listening}"
    assert all(a.ip == "127.0.0.1" for a in listening), listening


def test_writes_and_deletes_of_every_relation_kind_change_exactly_what_the_oracle_changes(private, dataset):
    """The shared edit script (every relation kind, a hierarchy cycle made and removed) on a private server:
    after each compared step, every (user, resource) pair whose answer the recomputed oracle changed, and a
    fixed sample of the others, equal the oracle."""
    tables = {rel: dataset.table(rel).copy() for rel in dataset.relations()}
    n = dataset.entities["resource"]
    before = oracle_pairs(dataset)
    sample = [(u, perm, r) for u in range(0, dataset.entities["user"] + 4, 7) for perm in PERMISSIONS
              for r in range(0, n, 13)]
    changed_total = 0
    for op, rel, compare in edit_steps(dataset):
        tables[rel.relation] = _edited(tables[rel.relation], rel, op)
        if op == "write":
            private.write(rel)
        else:
            private.delete(rel)
        if not compare:
            continue
        after = oracle_pairs(mutated(dataset, tables))
        changed = sorted({(u, perm, r) for perm in PERMISSIONS for u, r in after[perm] ^ before[perm]
                          if r < n})
        changed_total += len(changed)
        triples = changed + sample
        got = _answers(private.endpoint, triples)
        bad = [(t, g) for t, g in zip(triples, got, strict=True) if g != ((t[0], t[2]) in after[t[1]])]
        assert not bad, f"after {op} {rel}: {len(bad)} answers differ from the recomputed oracle: {bad[:5]}"
        before = after
    assert changed_total > 0, "the script changed no answer: it proved nothing"


def _edited(df, rel: Relationship, op: str):
    import numpy as np
    import pandas as pd

    hit = (df["object"] == rel.object) & (df["subject"] == rel.subject)
    if op == "delete":
        return df[~hit].reset_index(drop=True)
    if hit.any():
        return df
    return pd.concat([df, pd.DataFrame({"object": [rel.object], "subject": [rel.subject]}, dtype=np.int32)],
                     ignore_index=True)


def test_a_group_chain_deeper_than_ketos_default_read_depth_is_followed(backend, dataset):
    """Keto stops a check after max_read_depth hops (default 5) and answers "not allowed"; keto.yml lifts it
    to 64. A chain of 8 nested groups (ids past the dataset's) grants a resource to its deepest member."""
    base = dataset.entities["group"] + 1000
    user, resource = dataset.entities["user"] + 1000, dataset.entities["resource"] + 1000
    edges = [Relationship("group_child", base + i, base + i + 1) for i in range(8)]
    edges += [Relationship("group_member", base + 8, user),
              Relationship("resource_viewer_group", resource, base)]
    try:
        for e in edges:
            backend.write(e)
        assert backend.check(user, "view", resource) and not backend.check(user, "manage", resource)
    finally:
        for e in edges:
            backend.delete(e)
    assert not backend.check(user, "view", resource)


def test_lookups_are_refused_by_name_not_answered(backend):
    with pytest.raises(LookupUnsupported, match="no reverse lookup"):
        backend.lookup_resources(0, "view")
    with pytest.raises(UserError, match="unknown permission"):
        backend.lookup_resources(0, "own")


# the declaration's claims ---------------------------------------------------------------------------

def test_every_claim_names_a_test_of_this_file_or_none():
    names = {c.test.rpartition("::")[2] for c in SYSTEM.claims if c.test}
    assert all(c.test.startswith("tests/backends/test_keto.py::") for c in SYSTEM.claims if c.test)
    assert names <= set(globals()), names - set(globals())


def test_a_write_is_seen_by_the_next_check_and_no_check_answer_carries_a_token(backend, dataset):
    """No consistency tokens, and none needed for read-your-writes: the next check reads the latest commit."""
    user = dataset.entities["user"] + 11
    rel = Relationship("resource_viewer_user", 2, user)
    url = f"/relation-tuples/check/openapi?namespace=Resource&object=2&relation=view&subject_id={user}"
    try:
        backend.write(rel)
        answer = backend._call(backend.read, "GET", url)
        assert answer == {"allowed": True}, f"a check answer carries more than its verdict: {answer}"
    finally:
        backend.delete(rel)
    assert backend._call(backend.read, "GET", url) == {"allowed": False}


def test_the_server_offers_no_watch_and_no_reverse_lookup(session, backend):
    """What the read and write APIs serve, from the server's gRPC reflection: no method watches changes or
    lists the objects a subject may reach (so the two claims say no)."""
    grpc = pytest.importorskip("grpc")
    reflection = pytest.importorskip("grpc_reflection.v1alpha.proto_reflection_descriptor_database")
    from google.protobuf.descriptor_pool import DescriptorPool

    methods = []
    for url in (session.dep.endpoint["read_url"], session.dep.endpoint["write_url"]):
        with grpc.insecure_channel(url.removeprefix("http://")) as channel:
            db = reflection.ProtoReflectionDescriptorDatabase(channel)
            pool = DescriptorPool(db)
            keto = [s for s in db.get_services() if s.startswith("ory.keto.")]  # not gRPC health's Watch
            for name in keto:
                methods += [f"{name}/{m.name}" for m in pool.FindServiceByName(name).methods]
    assert any(m.endswith("CheckService/Check") for m in methods), methods  # reflection saw Keto's services
    assert not [m for m in methods if any(w in m.lower() for w in ("watch", "lookup", "listobjects"))], \
        methods


def test_a_star_subject_grants_no_one_else(backend, dataset):
    """No wildcards: a tuple whose subject id is * grants that literal id only."""
    rel = Relationship("resource_viewer_user", 3, 0)
    star = {**backend_tuple(rel), "subject_id": "*"}
    other = dataset.entities["user"] + 12
    try:
        backend._patch([{"action": "insert", "relation_tuple": star}])
        assert not backend.check(other, "view", 3)
        assert backend._call(backend.read, "GET", "/relation-tuples/check/openapi?namespace=Resource&object=3"
                             "&relation=view&subject_id=%2A") == {"allowed": True}
    finally:
        backend._delete(star)


def backend_tuple(rel: Relationship) -> dict:
    from authzbench.systems.keto.adapter import tuple_json

    return tuple_json(rel.relation, rel.object, rel.subject)


def test_an_edited_model_file_is_served_without_a_restart(tmp_path):
    """The server watches its namespaces file: a namespace added to a copy of the model is served by the
    same process, no restart, and the model's permissions keep answering."""
    from authzbench.provision.native.goengine import start_engine

    opl = tmp_path / "namespaces.keto.ts"
    opl.write_text(native.OPL.read_text())
    ctx = StartContext(tmp_path / "run")
    eng = native.Keto(native.binary(), native.tier("cached"), run_dir=ctx.dir("keto"), opl=opl)
    dep = start_engine(ctx, eng)
    try:
        with KetoBackend(dep.endpoint, {"timeout_s": 10}) as b:
            pid = dep.pids[0]
            assert "Folder" not in _namespaces(b)
            opl.write_text(opl.read_text() + "\nclass Folder implements Namespace {}\n")
            wait_until(lambda: "Folder" in _namespaces(b), timeout=30, what="the edited model served")
            assert psutil.pid_exists(pid) and dep.pids[0] == pid
            assert b.check(0, "view", 0) is False
    finally:
        dep.stop()


def _namespaces(b: KetoBackend) -> set[str]:
    return {n["name"] for n in b._call(b.read, "GET", "/namespaces")["namespaces"]}


# failures ---------------------------------------------------------------------------------------------

def test_unknown_permission_and_relation_are_user_errors(backend):
    with pytest.raises(UserError, match="unknown permission"):
        backend.check(0, "own", 0)
    with pytest.raises(UserError, match="unknown relation"):
        backend.write(Relationship("resource_owner", 0, 0))


def test_the_social_model_is_refused_in_one_line(session):
    with pytest.raises(UserError, match="only the rebac model"):
        KetoBackend(session.dep.endpoint, {"model": "social"}).connect()


def test_unreachable_server_is_one_clear_error():
    with pytest.raises(BackendUnavailable, match="cannot reach Ory Keto"):
        KetoBackend({"read_url": "http://127.0.0.1:1", "write_url": "http://127.0.0.1:2"},
                    {"timeout_s": 5}).connect()


def test_killed_server_raises_instead_of_hanging(tmp_path):
    """On its own deployment, so the session's server stays up for the other tests."""
    dep = native.start(StartContext(tmp_path / "run"))
    try:
        with KetoBackend(dep.endpoint, {"timeout_s": 5}) as b:
            b.create_schema()
            assert b.check(0, "view", 0) is False
            os.kill(dep.pids[0], signal.SIGKILL)  # keto itself, not its datastore
            t0 = time.monotonic()
            for _ in range(2):  # the kept-alive connection is reset, then a new one is refused: same error
                with pytest.raises(BackendUnavailable, match="lost the connection to Ory Keto at 127.0.0.1"):
                    b.check(0, "view", 0)
            assert time.monotonic() - t0 < 5
    finally:
        dep.stop()


def test_the_recipe_writes_every_listener_on_loopback_and_the_model_path(tmp_path):
    """Offline: the config the recipe hands Keto names 127.0.0.1 for all four APIs and the model file."""
    eng = native.Keto(Path("/bin/true"), native.tier("strict"), run_dir=tmp_path)
    args = eng.arguments({"http": 1, "write": 2, "opl": 3, "metrics": 4})
    text = (tmp_path / "listeners.yml").read_text()
    assert text.count("host: 127.0.0.1") == 4 and all(f"port: {p}" in text for p in (1, 2, 3, 4))
    assert args[:2] == ["serve", "--config"] and str(native.SETTINGS) in args[2]
    assert eng.environment("postgresql://x/keto", "k")["NAMESPACES_LOCATION"] == f"file://{native.OPL}"


def test_the_tuple_mapping_covers_every_relation_and_only_the_models_relations():
    """Offline: every relationship of the rebac catalog maps to a relation the OPL file declares, with the
    subject kind it declares (a user id for User[], a subject set of that class otherwise)."""
    import re

    from authzbench.schema.model import REBAC_RELATIONS
    from authzbench.systems.keto.adapter import TUPLES

    text = native.OPL.read_text()
    declared = {}
    for chunk in text.split("\nclass ")[1:]:  # one class each
        cls = chunk.split()[0]
        related = re.search(r"related: \{(.*?)\}", chunk, re.S)
        for rel, kind in re.findall(r"(\w+): (\w+)\[\]", related.group(1) if related else ""):
            declared[(cls, rel)] = "" if kind == "User" else kind
    assert set(TUPLES) == {n for n, d in REBAC_RELATIONS.items() if d.authz}
    assert {(ns, rel): sub for ns, rel, sub in TUPLES.values()} == declared
