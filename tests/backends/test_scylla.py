"""CQL-specific behaviour against the real node (Cassandra natively): unreachable node, a node stopped
mid-run raising instead of hanging, and an existing keyspace reused or recreated on request."""

from __future__ import annotations

import os
import signal

import pytest

from authzbench.backends.scylla import ScyllaBackend
from authzbench.errors import UserError

pytestmark = pytest.mark.backend("scylla")


def test_unreachable_node_is_a_clear_error():
    with pytest.raises(UserError, match="no CQL node reachable"):
        ScyllaBackend({"hosts": ["127.0.0.1"], "port": 1, "keyspace": "x"}, {}).connect()


def test_an_existing_keyspace_with_the_same_dataset_is_detected_for_reuse(live, dataset):
    with live.backend() as b:
        assert b.loaded_hash() == dataset.hash  # prepare would skip the reload
        assert b.check(*_positive(dataset))


def _positive(dataset):
    row = dataset.table("resource_manager_user").iloc[0]
    return int(row["subject"]), "manage", int(row["object"])


def test_node_stopped_mid_run_raises_instead_of_hanging(tmp_path):
    """On its own node, so the session's node stays up for the other tests."""
    from authzbench.provision.manager import provision

    dep = provision("scylla", "native", tmp_path / "run")
    try:
        with ScyllaBackend(dep.endpoint, {"timeout_s": 3}) as b:
            b.create_schema()
            assert b.check(0, "view", 0) is False
            os.kill(dep.pids[0], signal.SIGKILL)
            with pytest.raises(Exception):  # noqa: B017 - NoHostAvailable/OperationTimedOut, quickly
                for _ in range(3):
                    b.check(0, "view", 0)
    finally:
        dep.stop()
