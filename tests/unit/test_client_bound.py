"""The client-bound flag and the server's capacity per core, on fixture records (no servers): the client's and
the server's CPU are chosen here, so which throughput is the client's is known."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from authzbench.report import decision, digest, dimensions, findings
from authzbench.report.core import clientbound, ranking
from authzbench.report.document import render
from tests.unit.test_report_findings import CASS, CHDB, NET, Run, steady

S = "check_view_via_group_member"


def _run(client_cpu: float, cpu: float) -> Run:
    return (Run().server("postgres", NET).server("scylla", CASS)
            .phase("postgres", S, steady(0.5), concurrency=8, cpu=cpu, client_cpu=client_cpu)
            .phase("scylla", S, steady(1.0), concurrency=8, cpu=cpu, client_cpu=client_cpu))


def _without_client_cpu(run: Run) -> Run:
    """A run recorded before the monitor sampled the client apart from the server."""
    for r in run.recs:
        if r["type"] == "monitor":
            r.pop("client_cpu_percent")
    return run


def _throughput(rd) -> ranking.Dimension:
    return next(d for d in dimensions.compute(rd) if d.key == f"check_rate/{S}")


def test_a_throughput_whose_client_used_more_cpu_than_the_server_is_flagged_client_bound():
    rd = _run(client_cpu=120.0, cpu=40.0).data()
    assert clientbound.client_bound(rd, "postgres", S, 8) is True
    assert all(f.client_bound for f in _throughput(rd).figures)
    recs = [r for r in digest.figure_records(rd) if r["dimension"] == f"check_rate/{S}"]
    assert recs and all("client_bound" in r["flags"] and r["client_bound"] is True for r in recs)


def test_a_throughput_whose_server_used_more_cpu_than_the_client_is_not_flagged():
    rd = _run(client_cpu=20.0, cpu=150.0).data()
    assert clientbound.client_bound(rd, "postgres", S, 8) is False
    recs = [r for r in digest.figure_records(rd) if r["dimension"] == f"check_rate/{S}"]
    assert recs and all("client_bound" not in r["flags"] and r["client_bound"] is False for r in recs)


def test_cpu_per_op_is_mean_cpu_times_wall_time_over_ops():
    rd = _run(client_cpu=120.0, cpu=40.0).data()
    # 4 slots of 200 ops in 4 s: 800 ops; server 0.4 core x 4 s = 1.6 core-s -> 2 ms per op; client 6 ms
    client, server = clientbound.per_op(rd, "postgres", S, 8)
    assert (client, server) == (pytest.approx(6.0), pytest.approx(2.0))


def test_capacity_per_core_is_a_thousand_over_server_cpu_ms_per_check():
    assert clientbound.capacity_per_core(2.0) == pytest.approx(500.0)
    assert clientbound.capacity_per_core(0.091) == pytest.approx(10_989.0, rel=1e-4)
    assert math.isnan(clientbound.capacity_per_core(0.0))


def test_the_appendix_table_names_the_client_bound_figures_and_their_server_only_bound():
    rd = _run(client_cpu=120.0, cpu=40.0).data()
    text = clientbound.section(rd)
    assert (
        "Client-bound, so understating the server: postgres (`check_view_via_group_member`), scylla" in text)
    # the fixture's 2 cores / 2 ms of server CPU per check; the machine 80% busy, the client 75% of it
    assert "| 80% | 75% | 1,000 |" in text


def test_a_client_taking_40_percent_of_a_saturated_machine_is_client_bound_though_its_server_took_more():
    rd = _run(client_cpu=80.0, cpu=120.0).data()  # 2 cores fully busy: client 0.8 core, server 1.2
    cpu = clientbound.per_op(rd, "postgres", S, 8)
    assert cpu is not None and cpu[0] < cpu[1]  # the old rule (client CPU over the server's) said: not bound
    assert clientbound.share(rd, "postgres", S, 8) == (pytest.approx(1.0), pytest.approx(0.4))
    assert clientbound.client_bound(rd, "postgres", S, 8) is True
    # 800 ops in 4 s, server 1.2 core x 4 s: 6 ms per op; the server alone on 2 cores: 2000 / 6 = 333/s
    assert clientbound.bound(rd, "postgres", S, 8) == pytest.approx(333.33, rel=1e-3)
    assert "| 100% | 40% | 333 |" in clientbound.section(rd)
    merged = rd.phases[rd.phases["backend"] == "postgres"][["backend", "scenario", "concurrency"]]
    row = clientbound.with_cpu(rd, merged).iloc[0]
    assert (row["client_share"], row["bound"]) == ("40%", f"333 {clientbound.MARK}")
    assert all(f.client_bound for f in _throughput(rd).figures)


def test_a_client_heavier_than_its_server_on_an_idle_machine_is_not_client_bound():
    rd = _run(client_cpu=30.0, cpu=20.0).data()  # a quarter of 2 cores busy: the client took nothing from it
    assert clientbound.client_bound(rd, "postgres", S, 8) is False


def test_the_rule_takes_its_thresholds_from_saturation_and_the_clients_share():
    assert clientbound.judge(0.5, 1.5, 1.0, 2) is True  # saturated, client 25%
    assert clientbound.judge(0.4, 1.6, 1.0, 2) is False  # saturated, client 20%
    assert clientbound.judge(0.7, 0.7, 1.0, 2) is False  # 70% busy: below SATURATED
    assert clientbound.judge(0.8, 0.2, 1.0, 2, pinned=True) is True  # pinned: the client's one core saturated
    assert clientbound.judge(math.nan, 1.0, 1.0, 2) is None


def test_a_run_without_the_client_cpu_apart_is_unknown_not_false():
    rd = _without_client_cpu(_run(client_cpu=120.0, cpu=40.0)).data()
    assert clientbound.client_bound(rd, "postgres", S, 8) is None
    recs = [r for r in digest.figure_records(rd) if r["dimension"] == f"check_rate/{S}"]
    assert recs and all(r["client_bound"] is None and "client_bound" not in r["flags"] for r in recs)
    assert "in-process engine whose server is the client): postgres" in clientbound.section(rd)


def test_an_embedded_engine_is_unknown_because_its_server_cpu_is_the_clients_process():
    rd = Run().server("chdb", CHDB, model="thread").phase("chdb", S, steady(1.0), concurrency=8, cpu=40.0,
                                                          client_cpu=120.0).data()
    assert clientbound.client_bound(rd, "chdb", S, 8) is None


def test_an_old_run_without_client_cpu_renders_with_unknown(tmp_path: Path):
    root = _without_client_cpu(_run(client_cpu=120.0, cpu=40.0)).write(tmp_path / "run")
    render(root, tmp_path / "out")
    appendix = (tmp_path / "out" / "fixture-appendix.md").read_text()
    assert (
        "| unknown |" in appendix
        and clientbound.MARK not in (tmp_path / "out" / "fixture.md").read_text().split("Cell: figure")[0])
    figures = json.loads((tmp_path / "out" / "fixture.json").read_text())["figures"]
    assert any(f["dimension"] == f"check_rate/{S}" and f["client_bound"] is None for f in figures)


def test_the_findings_and_the_decision_summary_mark_a_client_bound_throughput(tmp_path: Path):
    rd = _run(client_cpu=120.0, cpu=40.0).data()
    text = findings.section(rd, tmp_path)
    line = next(x for x in text.splitlines() if x.startswith("- [Throughput at 8"))
    assert line.count(clientbound.MARK) == 2 and clientbound.LEGEND in text
    quiet = findings.section(_run(client_cpu=20.0, cpu=150.0).data(), tmp_path)
    assert clientbound.MARK not in next(x for x in quiet.splitlines() if x.startswith("- [Throughput at 8"))
    row = next(x for x in decision.section(rd, tmp_path).splitlines() if x.startswith("| Check throughput"))
    assert row.count(clientbound.MARK) == 2



def test_each_read_phase_row_states_its_client_and_server_cpu_per_op():
    rd = _run(client_cpu=120.0, cpu=40.0).data()
    merged = rd.phases[rd.phases["backend"] == "postgres"][["backend", "scenario", "concurrency"]]
    row = clientbound.with_cpu(rd, merged).iloc[0]
    assert (row["client_ms"], row["server_ms"]) == ("6", "2")
    old = _without_client_cpu(_run(client_cpu=120.0, cpu=40.0)).data()
    assert clientbound.with_cpu(old, merged).iloc[0]["client_ms"] == "unknown"


def test_the_appendix_states_whether_client_and_servers_were_pinned_to_separate_cores():
    run = _run(client_cpu=120.0, cpu=40.0)
    assert "Cores not pinned: client and servers shared" in clientbound.section(run.data())
    manifest = run.manifest()
    manifest["config"] = {**manifest.get("config", {}), "pin": True}
    run.manifest = lambda: manifest  # type: ignore[method-assign]
    text = clientbound.section(run.data())
    assert "Cores pinned (--pin): each native server's processes on the last of" in text
    assert "not pinned" not in text


def test_the_read_tables_print_the_server_only_bound_right_after_the_throughput():
    cols = list(clientbound.beside_throughput({"ops": "Ops", "ops_per_s": "Ops/s", "errors": "Errors"}))
    assert cols[:3] == ["ops", "ops_per_s", "bound"] and cols[-3:] == [
        "client_ms", "server_ms", "client_share"]
