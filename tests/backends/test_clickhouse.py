"""ClickHouse backend (`clickhouse`) on the real engine, embedded chdb here: answers equal the oracle's,
the expanded table equals the recomputed oracle after writes and deletes of every relation kind
(including a hierarchy cycle), bad DSNs fail at connect, and a data dir reopened by a new process
keeps its data.

    pytest tests/backends/test_clickhouse.py --backend clickhouse
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

from authzbench.core.errors import UserError
from authzbench.provision.base import free_port
from authzbench.schema.model import Relationship
from authzbench.systems.clickhouse.adapter import ClickHouseBackend
from authzbench.workloads.catalog import SCENARIOS
from tests.backends.edits import (
    assert_checks_equal_oracle,
    assert_every_lookup_equals_oracle,
    oracle_pairs,
    replay_edits,
)

pytestmark = pytest.mark.backend("clickhouse")
# `scratch` (tests/backends/conftest.py): a private database with its own copy of the dataset
# (scratch.first_build is its build()'s stats). Non-rebac runs skip: the registry says rebac only.
SCRATCH_ENDPOINT = {"database": "authzbench_scratch"}


def _table_state(b: ClickHouseBackend, table: str = "perm") -> dict[str, set[tuple[int, int]]]:
    rows = b.client.query(f"SELECT DISTINCT user, resource, toString(perm) FROM {b.db}.{table}").result_rows
    return {"view": {(u, r) for u, r, _ in rows}, "manage": {(u, r) for u, r, p in rows if p == "manage"}}


# answers ----------------------------------------------------------------------------------------

def test_server_info_names_the_embedded_engine_and_footprint_is_measured(backend):
    info = backend.server_info()
    assert info.engine == "ClickHouse" and info.version.split(".")[0].isdigit()
    assert info.label == f"ClickHouse {info.version} embedded (chdb)" and not info.comparable
    assert any("network round trip" in n for n in info.notes)
    assert backend.footprint() > 0
    backend.baseline_roundtrip()


def test_checks_equal_the_oracle_including_negatives(backend, dataset, oracle):
    assert_checks_equal_oracle(backend, dataset, oracle, dataset.entities["user"] // 6)


def test_scenario_samples_are_answered_right_after_load_without_waiting(scratch, dataset, oracle):
    """Ingest-to-closure lag: the MVs expand inside the INSERT, so the first round of probes passes."""
    notes = scratch.first_build.notes
    assert notes["lag_probe_rounds"] == 1 and notes["lag_probes"] >= 4
    samples = [args for name in ("check_manage_direct_user", "check_manage_org_admin",
                                 "check_view_via_group_member", "check_negative")
               for _, args, _ in SCENARIOS[name].sampler(dataset, oracle, 25)]
    assert [scratch.check(*a) for a in samples] == [oracle.check(*a) for a in samples]


def test_every_lookup_equals_the_oracle(backend, dataset, oracle):
    assert_every_lookup_equals_oracle(backend, dataset, oracle)


def test_expanded_table_equals_the_oracle_and_its_source_view_after_load(scratch, dataset):
    want = oracle_pairs(dataset)
    assert _table_state(scratch) == want
    assert _table_state(scratch, "perm_source") == want


def test_unknown_permission_or_relation_is_a_user_error(backend):
    with pytest.raises(UserError, match="unknown permission"):
        backend.check(0, "own", 0)
    with pytest.raises(UserError, match="unknown permission"):
        list(backend.lookup_resources(0, "own"))
    with pytest.raises(UserError, match="unknown relation"):
        backend.write(Relationship("perm; DROP TABLE x", 0, 0))


def test_timeout_option_is_enforced_by_the_engine(session):
    with ClickHouseBackend(session.dep.endpoint, {"timeout_s": 1}) as b:
        t0 = time.perf_counter()
        with pytest.raises(Exception, match="(?i)timeout|TIMEOUT_EXCEEDED"):
            b.client.query("SELECT count() FROM system.numbers WHERE NOT ignore(sipHash64(number))")
        assert time.perf_counter() - t0 < 10


# writes ------------------------------------------------------------------------------------------

def test_writes_and_deletes_keep_the_expanded_table_equal_to_the_recomputed_oracle(scratch, dataset):
    final = replay_edits(scratch, dataset, _table_state, oracle_pairs)
    assert _table_state(scratch, "perm_source") == oracle_pairs(final)


# persistence and reuse ---------------------------------------------------------------------------

def test_loaded_mark_is_per_database_and_cleared_by_drop(session, dataset):
    with ClickHouseBackend({**session.dep.endpoint, "database": "authzbench_empty"}, {}) as b:
        assert b.loaded_hash() is None
        b.create_schema()
        assert b.loaded_hash() is None and list(b.lookup_resources(0, "view")) == []
        b.mark_loaded("abc")
        assert b.loaded_hash() == "abc"
        b.drop()
        assert b.loaded_hash() is None


def _in_subprocess(code: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=180)


LOAD = """import json, sys
from authzbench.systems.clickhouse.adapter import ClickHouseBackend as B
from authzbench.run.loading import run_build, run_load
from authzbench.schema.dataset import Dataset
ds = Dataset.open(sys.argv[2])
with B(json.loads(sys.argv[1]), {}) as b:
    b.drop(); b.create_schema(); run_load(b, ds); run_build(b); b.mark_loaded(ds.hash)
"""
READ = """import json, sys
from authzbench.systems.clickhouse.adapter import ClickHouseBackend as B
with B(json.loads(sys.argv[1]), {}) as b:
    print(json.dumps([b.loaded_hash(), sorted(b.lookup_resources(int(sys.argv[2]), "view"))]))
"""


def test_a_data_dir_loaded_by_one_process_is_reopened_by_the_next(dataset, oracle, tmp_path):
    """chdb holds a data dir for the life of its process (one engine per process): `prepare` and `bench`
    run one after the other, each in its own process, so the data must survive the first one's exit."""
    endpoint = json.dumps({"dsn": f"chdb://{tmp_path / 'chdb'}"})
    out = _in_subprocess(LOAD, endpoint, str(dataset.path))
    assert out.returncode == 0, out.stderr[-800:]
    user = int(np.argmax(oracle.count_by_user("view")))
    out = _in_subprocess(READ, endpoint, str(user))
    assert out.returncode == 0, out.stderr[-800:]
    loaded, resources = json.loads(out.stdout.strip().splitlines()[-1])
    assert loaded == dataset.hash and resources == oracle.lookup_resources(user, "view") and resources


def test_a_data_dir_held_by_a_running_process_is_one_clear_line(session, backend):
    out = _in_subprocess(READ, json.dumps(session.dep.endpoint), "0")
    assert out.returncode != 0
    last = out.stderr.strip().splitlines()[-1]
    assert "in use by another process" in last, out.stderr[-800:]


# failures ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("dsn, match", [
    ("", "DSN must be"),
    ("postgres://x@127.0.0.1/db", "DSN must be"),
    (f"http://default:secret@127.0.0.1:{free_port()}", "cannot connect to http://default:\\*\\*\\*@"),
])
def test_bad_dsn_is_one_clear_line_at_connect(dsn, match):
    with pytest.raises(UserError, match=match) as e:
        ClickHouseBackend({"dsn": dsn}, {"timeout_s": 2}).connect()
    assert "\n" not in str(e.value) and "secret" not in str(e.value)


def test_bad_database_name_is_a_user_error(session):
    with pytest.raises(UserError, match="invalid database name"):
        ClickHouseBackend({**session.dep.endpoint, "database": "a-b; DROP"}, {}).connect()


def test_unusable_chdb_data_dir_is_one_clear_line(tmp_path):
    """In a fresh process: chdb keeps one engine per process, so this one must not share the test's."""
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    code = ("from authzbench.systems.clickhouse.adapter import ClickHouseBackend as B; from "
            "authzbench.core.errors import UserError\n"
            f"try:\n    B({{'dsn': 'chdb://{blocker}/data'}}, {{}}).connect()\n"
            "except UserError as e:\n    print('USERERROR', e)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert "USERERROR clickhouse: cannot connect to chdb://" in out.stdout, out.stdout + out.stderr[-800:]


def test_a_pair_granted_before_and_after_a_membership_change_is_never_denied_while_it_is_rewritten(scratch):
    """A membership change re-derives all of the user's rows; a concurrent check of a pair it keeps must see
    it throughout (the churn sweep at tiny saw 3 false denies while the rows were deleted, then inserted
    again)."""
    db = scratch.db
    user, resource = scratch.client.query(f"SELECT user, any(resource) FROM {db}.perm GROUP BY user "
                                          f"ORDER BY count() DESC LIMIT 1").result_rows[0]
    group = scratch.client.query(
        f"SELECT min(object) FROM {db}.group_member WHERE object NOT IN "
        f"(SELECT object FROM {db}.group_member WHERE subject = {user})").result_rows[0][0]
    edge, stop, denied, seen = Relationship("group_member", int(group), int(user)), threading.Event(), [], []

    def read() -> None:
        while not stop.is_set():
            (seen if scratch.check(int(user), "view", int(resource)) else denied).append(1)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        for _ in range(10):
            scratch.write(edge)
            scratch.delete(edge)
    finally:
        stop.set()
        reader.join(30)
    assert seen and not denied, (
        f"{len(denied)} of {len(seen) + len(denied)} checks denied ({user}, view, {resource})")
