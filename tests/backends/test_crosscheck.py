"""`authzbench crosscheck` against real servers: pgbench on PostgreSQL and ghz on SpiceDB measure the same
check phase as the runner, on the same server and inputs, and both sides' figures reach the report.

    pytest --backend postgres,spicedb-pg --profile tiny tests/backends/test_crosscheck.py
"""

from __future__ import annotations

import json
import math

import pytest

from authzbench.config import BenchConfig
from authzbench.provision.pgcluster import bin_dir
from authzbench.results.store import RunStore
from authzbench.tools.crosscheck import Plan, grpc_requests, run_backend, seconds_scale
from authzbench.tools.crosscheck_report import render_run, rows

SCENARIO = "check_view_via_group_member"


def _crosscheck(live, dataset, oracle, tmp_path) -> tuple[RunStore, list[dict]]:
    plan = Plan([live.name], [SCENARIO], [1, 2], rounds=1, seconds=1, breakdown_calls=50)
    cfg = BenchConfig.of(
        backends=[live.name], provision=live.servers.provision, profile=dataset.profile, model="rebac",
        scenarios=plan.scenarios, concurrency=plan.concurrency, rounds=1, full_curve=True,
        iterations_scale=seconds_scale(plan.seconds, plan.rounds))
    store = RunStore.create(tmp_path / "results", config={"command": "crosscheck", "seconds": 1, "rounds": 1})
    run_backend(live, cfg, dataset, oracle, store, plan)
    return store, list(store.records())


def _both_sides_measured(store: RunStore, records: list[dict], tool: str, tmp_path) -> None:
    table = rows(records)
    # OpenFGA's rows come twice: our runner over HTTP and over gRPC, each beside the tool
    sides = {"ours", "ours-grpc"} if tool == "ghz" and any(r.side == "ours-grpc" for r in table) else {"ours"}
    assert sorted((r.concurrency, r.tool, r.side) for r in table) == sorted(
        (c, tool, s) for c in (1, 2) for s in sides)
    for r in table:
        for side in (r.ours, r.theirs):
            assert side.ops > 0 and side.errors == 0 and side.p50_ms > 0 and math.isfinite(side.throughput)
    mismatches = sum(r["mismatches"] for r in records if r.get("type") == "interval")
    assert mismatches == 0, "our side's answers differ from the oracle's"
    (bd,) = [r for r in records if r.get("type") == "crosscheck_breakdown"]
    assert bd["calls"] == 50 and bd["driver_p50_ms"] > 0 and bd["adapter_p50_ms"] > 0
    text = render_run(store.path, tmp_path / "reports").read_text()
    assert f"| {SCENARIO} | 1 | {tool} |" in text and "## Where our time goes at 1 worker" in text


@pytest.mark.backend("postgres")
def test_pgbench_runs_the_adapters_check_query_beside_our_phase(live, dataset, oracle, tmp_path):
    if dataset.model != "rebac":
        pytest.skip("the cross-check measures the rebac check scenarios")
    store, records = _crosscheck(live, dataset, oracle, tmp_path)
    cmd = next(r["command"] for r in records if r.get("type") == "crosscheck" and r["side"] == "theirs")
    assert cmd.startswith(str(bin_dir() / "pgbench"))
    assert "-M prepared" in cmd and "DSN" in cmd and "password" not in cmd.lower()
    _both_sides_measured(store, records, "pgbench", tmp_path)


@pytest.mark.backend("spicedb-pg")
def test_ghz_sends_the_adapters_check_request_beside_our_phase(live, dataset, oracle, tmp_path):
    if dataset.model != "rebac":
        pytest.skip("the cross-check measures the rebac check scenarios")
    from google.protobuf.json_format import Parse

    with live.backend(timeout_s=10) as b:
        (req,) = grpc_requests(b, "spicedb-pg", [("check", (3, "view", 7), False)])
        assert Parse(json.dumps(req), type(b.check_request(3, "view", 7))()) == b.check_request(3, "view", 7)
    store, records = _crosscheck(live, dataset, oracle, tmp_path)
    key = live.dep.endpoint["preshared_key"]
    assert not any(key in json.dumps(r) for r in records), "the preshared key reached the records"
    _both_sides_measured(store, records, "ghz", tmp_path)


@pytest.mark.backend("openfga")
def test_openfga_is_measured_over_http_and_over_our_own_grpc_beside_ghz(live, dataset, oracle, tmp_path):
    if dataset.model != "rebac":
        pytest.skip("the cross-check measures the rebac check scenarios")
    from authzbench.systems.openfga.grpc import OpenfgaGrpc

    inputs = [("check", (u, "view", r), None) for u in range(1, 6) for r in range(1, 6)]
    with live.backend(timeout_s=10) as b:
        client = OpenfgaGrpc(live.dep.endpoint["grpc_addr"], live.dep.endpoint.get("preshared_key") or "", 10)
        try:  # our gRPC call answers as the adapter's HTTP check does, input by input
            assert [client.call(b.check_message(*a))() for _, a, _ in inputs] == [
                b.check(*a) for _, a, _ in inputs]
        finally:
            client.close()
    store, records = _crosscheck(live, dataset, oracle, tmp_path)
    _both_sides_measured(store, records, "ghz", tmp_path)
    assert any(r.side == "ours-grpc" for r in rows(records)), "no row of our gRPC side"
    (bd,) = [r for r in records if r.get("type") == "crosscheck_breakdown"]
    assert bd["grpc_p50_ms"] > 0
    text = render_run(store.path, tmp_path / "reports").read_text()
    assert "## OpenFGA over HTTP and over gRPC at 1 worker" in text and f"| openfga | {SCENARIO} |" in text
