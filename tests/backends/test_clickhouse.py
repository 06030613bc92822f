"""ClickHouse-specific behaviour on the real engine (embedded chdb here): bad DSN, data kept across a
restart, and group writes recomputing the closure the materialized views join."""

from __future__ import annotations

import subprocess
import sys

import pytest

from authzbench.backends.clickhouse import ClickHouseBackend
from authzbench.errors import UserError
from authzbench.model import Relationship
from authzbench.oracle import Oracle

pytestmark = pytest.mark.backend("clickhouse")


def test_bad_dsn_is_a_clear_error():
    with pytest.raises(UserError, match="clickhouse: cannot connect"):
        ClickHouseBackend({"dsn": "http://default:@127.0.0.1:1"}, {}).connect()


def test_reopening_the_data_dir_in_a_new_process_keeps_the_data(live, dataset):
    dsn = live.dep.endpoint["dsn"]
    code = (f"from authzbench.backends.clickhouse import ClickHouseBackend as B; b=B({{'dsn': {dsn!r}}}, {{}}); b.connect(); "
            "print(b.loaded_hash(), b._count('perm'))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-500:]
    loaded, perm_rows = out.stdout.split()[-2:]
    assert loaded == dataset.hash and int(perm_rows) > 0


def test_group_membership_write_and_delete_recompute_the_closure(live, dataset, tmp_path):
    if dataset.model != "rebac":
        pytest.skip("rebac model")
    users = dataset.entities["user"]
    rv = dataset.table("resource_viewer_group").iloc[0]
    rel = Relationship("group_member", int(rv["subject"]), users + 3)  # a new user joins a viewer group
    with live.backend() as b:
        assert not b.check(users + 3, "view", int(rv["object"]))
        b.write(rel)
        try:
            assert b.check(users + 3, "view", int(rv["object"]))
        finally:
            b.delete(rel)
        assert not b.check(users + 3, "view", int(rv["object"]))
        # and everything else is as before
        o = Oracle(dataset)
        assert sorted(set(b.lookup_resources(0, "view"))) == o.lookup_resources(0, "view")
