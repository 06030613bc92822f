"""A server killed mid-run: the phase records errors and is marked incomplete, results stay on disk,
the run moves on to the next backend, and the report says what happened."""

from __future__ import annotations

import pytest

from tests.backends.faults import bench_with_server_killed_mid_phase

pytestmark = pytest.mark.backend("postgres")


def test_server_killed_mid_phase_is_recorded_and_the_run_moves_on(tmp_path, monkeypatch):
    text, problems, _ = bench_with_server_killed_mid_phase("postgres", tmp_path, monkeypatch)
    assert "postgres/check_manage_direct_user/c2/r0`: **incomplete**" in problems
    assert "postgres/check_manage_org_admin/c2/r0`: **failed**" in problems  # nothing left to connect to
    assert "reference/check_manage_org_admin/c2/r0" not in problems  # the next backend ran normally
    assert "| reference † | 2 |" in text
    assert "errors by type: OperationalError" in problems  # what the server said, counted by type
