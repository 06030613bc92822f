"""Comparing two machines' runs: each backend normalized by its own round trip on each host, ingest by the
CPU part of the speed index, and the compare report saying which kinds of figure transfer."""

from __future__ import annotations

from pathlib import Path

import pytest

from authzbench.report.compare import render_compare, speed_ratio, summary, transfer_table
from authzbench.report.core.transfer import roundtrip_p50, scale_for, scales
from tests.unit.test_report_findings import CASS, NET, Run, steady

# (round trip ms, extra CPU work ms of a check) per backend on host A: postgres is all round trip, scylla's
# round trip is ten times longer and its check does some work of its own
HOST_A = {"postgres": (0.1, 0.02), "scylla": (1.0, 0.1)}


def _one_worker(ms: float) -> list[list[float]]:
    """One worker's second of ops each `ms` long: its throughput is 1000 / ms, as a closed loop's is."""
    return steady(ms, n=round(1000 / ms))


def _host(net: dict[str, float], cpu: float, loopback: float) -> Run:
    """Host A with each backend's round trip `net[backend]` times longer and CPU work `cpu` times longer; the
    speed index's loopback part `loopback` times slower (a different amount than any backend, as measured)."""
    run = Run().server("postgres", NET).server("scylla", CASS)
    for visit, (b, (rt, work)) in enumerate(HOST_A.items()):
        run.ingest(b, 10.0 * cpu)
        for rnd in range(3):
            run.phase(b, "roundtrip", _one_worker(rt * net[b]), kind="roundtrip", repeat=rnd)
            run.phase(b, "check_negative", _one_worker(rt * net[b] + work * cpu), repeat=rnd)
        cpu_s, rtt_us = 0.075 * cpu, 13.0 * loopback
        run.recs.append(
            {"type": "speed_index", "backend": b, "visit": visit, "cpu_s": cpu_s, "rtt_p50_us": rtt_us,
             "cpu_score": 1 / cpu, "rtt_score": 1 / loopback, "index": (cpu * loopback) ** -0.5,
             "seconds": 2.5})
    return run


def test_each_backend_is_scaled_by_its_own_round_trip_and_ingest_by_the_cpu_part():
    a = _host({"postgres": 1.0, "scylla": 1.0}, 1.0, 1.0).data()
    b = _host({"postgres": 4.0, "scylla": 2.0}, 1.5, 6.0).data()
    assert roundtrip_p50(a) == {
        "postgres": pytest.approx(0.1, rel=0.02), "scylla": pytest.approx(1.0, rel=0.02)}
    s = scales(a, b)
    assert scale_for(s, "postgres", "ms") == pytest.approx(1 / 4, rel=0.02)
    assert scale_for(s, "scylla", "checks/s") == pytest.approx(1 / 2, rel=0.02)
    assert scale_for(s, "scylla", "relationships/s") == pytest.approx(1 / 1.5)
    assert scale_for(s, "mongo", "ms") == pytest.approx(speed_ratio(a, b))  # no round trip: the index


def test_a_host_with_slower_network_and_cpu_compares_within_tolerance_once_normalized():
    # B: postgres' round trip 4x, scylla's 2x, CPU 1.5x slower, the index's loopback 6x: the raw figures
    # and the index-normalized ones both miss ±25%; each backend's own round trip brings them back
    a = _host({"postgres": 1.0, "scylla": 1.0}, 1.0, 1.0).data()
    b = _host({"postgres": 4.0, "scylla": 2.0}, 1.5, 6.0).data()
    s = summary(a, b)
    assert s["headline"] > 0 and s["headline_agree"] == 0
    assert s["headline_agree_norm"] == s["headline"]
    t = transfer_table(a, b).set_index("kind")
    assert t.loc["Check p50", "transfers"] and t.loc["Check p50", "raw"] == 0
    assert t.loc["Ingest incl. closure / view / index build", "norm"] == 2


def test_a_kind_of_figure_that_moved_apart_from_its_round_trip_is_said_not_to_transfer(tmp_path):
    # every check is 10x slower on B while the round trips and the index are unchanged: nothing explains it
    a = _host({"postgres": 1.0, "scylla": 1.0}, 1.0, 1.0)
    b = Run().server("postgres", NET).server("scylla", CASS)
    for visit, (bk, (rt, work)) in enumerate(HOST_A.items()):
        b.ingest(bk, 10.0)
        for rnd in range(3):
            b.phase(bk, "roundtrip", _one_worker(rt), kind="roundtrip", repeat=rnd)
            b.phase(bk, "check_negative", _one_worker((rt + work) * 10), repeat=rnd)
        b.recs.append(
            {"type": "speed_index", "backend": bk, "visit": visit, "cpu_s": 0.075, "rtt_p50_us": 13.0,
             "cpu_score": 1.0, "rtt_score": 1.0, "index": 1.0, "seconds": 2.5})
    t = transfer_table(a.data(), b.data()).set_index("kind")
    assert (not t.loc["Check p50", "transfers"]
            and t.loc["Ingest incl. closure / view / index build", "transfers"])
    text = render_compare(a.write(tmp_path / "a"), b.write(tmp_path / "b"), tmp_path / "out").read_text()
    section = text.split("### Which figures transfer between the machines")[1].split("##")[0]
    assert "- Do not transfer (" in section and "Check p50" in section.split("- Do not transfer")[1]


REPO = Path(__file__).resolve().parents[2]
XEON, EPYC = (
    REPO / "reports" / "data" / "20261128-083444", REPO.parent / "shared" / "runs" / "20261128-115554")


@pytest.mark.slow
@pytest.mark.skipif(
    not EPYC.exists(), reason=f"the other host's run is not at {EPYC} (../shared beside the clone)")
def test_the_two_hosts_figures_agree_more_often_normalized_than_raw():
    from authzbench.report.core.data import load_run

    s = summary(load_run(XEON), load_run(EPYC))
    assert s["headline"] > 0 and s["headline_agree_norm"] > s["headline_agree"]
    assert s["log_norm"] < s["log_raw"]
