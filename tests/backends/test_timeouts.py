"""A frozen server (SIGSTOP) costs one timeout per op at the scenario's bound, not a hung worker: the phase
is marked incomplete and the next phase runs normally once the server is resumed (SIGCONT).

clickhouse is not here: chdb runs the engine inside the worker's own process, so there is no server
process to freeze (stopping it would stop the client with it)."""

from __future__ import annotations

import pytest

from authzbench.workloads.catalog import scenario
from tests.backends.faults import bench_with_server_frozen_mid_phase

FREEZE_S = 5.0


def _phase(records: list[dict], scenario_name: str) -> tuple[dict, list[dict]]:
    end = next(r for r in records if r["type"] == "phase_end" and r["scenario"] == scenario_name)
    intervals = [r for r in records if r["type"] == "interval" and r["phase"] == end["phase"]]
    return end, intervals


def assert_frozen_phase_timed_out_and_the_next_ran(records: list[dict]) -> None:
    bound = scenario("check_manage_direct_user").timeout_s
    end, intervals = _phase(records, "check_manage_direct_user")
    timeouts = sum(i["timeouts"] for i in intervals)
    errors = {k: v for i in intervals for k, v in i["errors"].items()}
    workers = 2
    # Each worker's op in flight when the server froze, and each one after it until the resume, ended as a
    # timeout at the bound: at least one per worker, at most one per bound per worker (+1 in flight).
    assert workers <= timeouts <= workers * (FREEZE_S / bound + 2), (timeouts, errors)
    assert not errors, f"ops ended otherwise than as timeouts: {errors}"
    assert end["status"] == "incomplete" and "timed out" in end["reason"], end
    assert "hung" not in end["reason"]  # no worker waited past the bound
    assert end["wall_s"] < FREEZE_S + 3 * bound + 20, end["wall_s"]
    nxt, nxt_intervals = _phase(records, "check_manage_org_admin")
    assert nxt["status"] == "complete", nxt
    assert sum(i["ops"] for i in nxt_intervals) > 0 and sum(i["mismatches"] for i in nxt_intervals) == 0


@pytest.mark.slow
@pytest.mark.parametrize("backend", [
    pytest.param("postgres", marks=pytest.mark.backend("postgres")),
    pytest.param("spicedb-pg", marks=pytest.mark.backend("spicedb-pg")),
    pytest.param("mongo", marks=pytest.mark.backend("mongo")),
    pytest.param("elasticsearch", marks=pytest.mark.backend("elasticsearch")),
    pytest.param("scylla", marks=pytest.mark.backend("scylla")),
])
def test_a_server_frozen_mid_phase_costs_one_timeout_per_op_and_the_next_phase_runs(backend, tmp_path,
                                                                                    monkeypatch):
    records, _ = bench_with_server_frozen_mid_phase(backend, tmp_path, monkeypatch, FREEZE_S)
    assert_frozen_phase_timed_out_and_the_next_ran(records)
