"""A server killed mid-phase (SIGKILL, no clean shutdown), for the backends whose own test files do not do
it yet: the phase is marked incomplete with its errors counted, the next phase fails to connect, and the
next backend (the in-process reference) runs normally. postgres and elasticsearch have the same test in
their own files.

clickhouse is not here: chdb is the ClickHouse engine inside the client's own process, so there is no
server process that could die apart from the run itself."""

from __future__ import annotations

import pytest

from tests.backends.faults import bench_with_server_killed_mid_phase


def _assert_recorded_and_moved_on(backend: str, text: str, problems: str) -> None:
    assert f"{backend}/check_manage_direct_user/c2/r0`: **incomplete**" in problems
    assert f"{backend}/check_manage_org_admin/c2/r0`: **failed**" in problems  # nothing left to connect to
    assert "reference/check_manage_org_admin/c2/r0" not in problems  # the next backend ran normally
    assert "| reference † | 2 |" in text


@pytest.mark.backend("spicedb-pg")
@pytest.mark.slow
def test_spicedb_killed_mid_phase_is_recorded_and_the_run_moves_on(tmp_path, monkeypatch):
    text, problems, seconds = bench_with_server_killed_mid_phase("spicedb-pg", tmp_path, monkeypatch)
    _assert_recorded_and_moved_on("spicedb-pg", text, problems)
    assert "errors by type: " in problems and "RpcError" in problems  # what the server said, by type


@pytest.mark.backend("mongo")
@pytest.mark.slow
def test_ferretdb_killed_mid_phase_is_recorded_and_the_run_moves_on(tmp_path, monkeypatch):
    text, problems, seconds = bench_with_server_killed_mid_phase("mongo", tmp_path, monkeypatch)
    _assert_recorded_and_moved_on("mongo", text, problems)
