"""The client's side of the cross-check (issue 56): OpenFGA's runner over gRPC as a side of its own, the CPU
each side's client and the server spent per op, and the bare driver call alone as the floor, from records to
report."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from authzbench.tools.crosscheck import sides_in_order
from authzbench.tools.crosscheck_client import cpu_spent, floor
from authzbench.tools.crosscheck_report import render, rows
from tests.unit.test_crosscheck import _rec

MANIFEST = {"run_id": "x", "config": {"seconds": 3, "rounds": 1}, "dataset": {"profile": "tiny"}}


def _fga(side: str, p50_us: int, **cpu: float) -> dict:
    return {**_rec(side, 0, 1, p50_us, 10, 1.0, backend="openfga"), **cpu,
            "tool": "ghz" if side == "theirs" else "authzbench"}


def test_openfgas_grpc_side_is_a_row_of_its_own_beside_http_and_judges_it_like_for_like():
    recs = [_fga("theirs", 400), _fga("ours", 1000), _fga("ours-grpc", 440)]
    http, grpc = rows(recs)
    assert (http.side, grpc.side) == ("ours", "ours-grpc") and grpc.ratio("p50_ms") == pytest.approx(
        1.1, rel=0.01)
    text = " ".join(render(MANIFEST, recs).split())
    assert (
        "| openfga | check_negative | 1 | ghz | ours over gRPC | 0.440 | 0.400 | 1.10 (1.10-1.10) |" in text)
    assert (
        "our p50 is within 1.15x of the independent tool's on all 1 (backend, scenario) pairs (highest 1.10)"
        in text)
    assert ("Over HTTP through its SDK, what `bench` measures for it, against ghz's gRPC, our 1-worker p50 / "
            "ghz's: "
            "openfga check_negative 2.50" in text)


def test_the_grpc_side_runs_at_either_end_and_the_tool_first_every_other_round():
    assert sides_in_order(0, grpc=True) == ("theirs", "ours", "ours-grpc")
    assert sides_in_order(1, grpc=True) == ("ours-grpc", "ours", "theirs")
    assert sides_in_order(1) == ("ours", "theirs")


def test_a_client_taking_a_quarter_or_more_of_the_saturated_cores_is_flagged_client_bound():
    # 10 ops/s x 200 ms of CPU per op = 2 core-s a second: both sides saturate the 2 cores
    recs = [_fga("theirs", 400, client_cpu_ms=5.0, server_cpu_ms=180.0),
            _fga("ours", 1000, client_cpu_ms=100.0, server_cpu_ms=100.0),
            _fga("ours-grpc", 440, client_cpu_ms=20.0, server_cpu_ms=180.0)]
    text = " ".join(render({**MANIFEST, "environment": {"cpu_logical": 2}}, recs).split())
    assert (
        "| openfga | check_negative | 1 | ours | 100.0000 | 5.0000 | 20.00 | 100.0000 | 180.0000 | 100% | "
        "50% | 10 | 20 | ◐ yes |") in text
    assert (
        "| openfga | check_negative | 1 | ours over gRPC | 20.0000 | 5.0000 | 4.00 | 180.0000 | 180.0000 | "
        "100% | 10% | 10 | 11 | no |") in text
    assert (
        "Our client spent 4.00-20.00x the tool's CPU per op over 2 rows. Client-bound (◐: client + server "
        "CPU at least 75% of the 2 cores, our client at least 25% of it, so the throughput understates the "
        "server): openfga check_negative at 1 (ours).") in text


def test_no_cpu_section_when_the_runs_recorded_no_cpu():
    assert "client's CPU per op" not in render(MANIFEST, [_rec("theirs", 0, 1, 400, 10, 1.0),
                                                          _rec("ours", 0, 1, 500, 10, 1.0)])


def test_the_floor_is_the_driver_alone_set_against_the_tool_and_ours():
    recs = [_rec("theirs", 0, 1, 400, 10, 1.0), _rec("ours", 0, 1, 500, 10, 1.0),
            {"type": "crosscheck_breakdown", "backend": "postgres", "scenario": "check_negative",
             "adapter_p50_ms": 0.47, "driver_p50_ms": 0.45, "calls": 10, "floor_p50_ms": 0.44,
             "floor_cpu_ms": 0.02}]
    text = " ".join(render(MANIFEST, recs).split())
    assert "| +0.050 | 0.440 | +0.040 | 0.020 |" in text
    assert ("- postgres check_negative: the driver alone 0.440 ms, 1.10x pgbench's 0.400 ms; ours 0.500 ms, "
            "1.14x "
            "the driver alone.") in text


def test_the_floor_times_each_call_and_stops_at_a_failed_one():
    got = floor([lambda: time.sleep(0.002)] * 5)
    assert got["floor_p50_ms"] >= 2.0 and got["floor_cpu_ms"] < 2.0  # asleep, not on the CPU
    with pytest.raises(ZeroDivisionError):
        floor([lambda: 1 / 0])


BURN = "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.3: pass\n"


def test_cpu_spent_counts_the_waited_tool_for_theirs_and_this_process_tree_for_ours():
    with cpu_spent("theirs", []) as theirs:
        subprocess.run([sys.executable, "-c", BURN], check=True)
    assert theirs.client_s >= 0.25 and theirs.server_s is None
    with cpu_spent("ours", []) as ours:
        ours.window(True)  # ours: the runner's measured window opens and closes it
        t = time.process_time()
        while time.process_time() - t < 0.3:
            pass
        ours.window(False)
    assert ours.client_s >= 0.25
    assert ours.per_op_ms(100)["client_cpu_ms"] == pytest.approx(ours.client_s * 10)


def _spent_while_a_child_reaps_a_burn(tmp_path, server: bool):
    """The CpuSpent of a window in which a child of ours ran a CPU burn in its own child and reaped it; the
    child is the server when `server`, else a descendant of the client."""
    done = tmp_path / "reaped"
    child = subprocess.Popen([sys.executable, "-c", "import pathlib, subprocess, sys, time\n"
                              f"subprocess.run([sys.executable, '-c', {BURN!r}])\n"
                              f"pathlib.Path({str(done)!r}).touch()\ntime.sleep(60)"])
    try:
        with cpu_spent("ours", [child.pid] if server else []) as spent:
            spent.window(True)
            deadline = time.monotonic() + 60
            while not done.exists() and time.monotonic() < deadline:
                time.sleep(0.05)
            spent.window(False)
        assert done.exists()
        return spent
    finally:
        child.kill()
        child.wait()


def test_cpu_spent_counts_a_servers_process_and_the_children_it_reaped(tmp_path):
    spent = _spent_while_a_child_reaps_a_burn(tmp_path, server=True)
    assert spent.server_s is not None and spent.server_s >= 0.25
    assert spent.client_s is not None and spent.client_s < 0.2  # the server, our child, is not our client


def test_a_client_descendants_reaped_grandchild_still_counts_so_the_sum_never_falls(tmp_path):
    spent = _spent_while_a_child_reaps_a_burn(tmp_path, server=False)
    assert spent.client_s is not None and spent.client_s >= 0.25


def test_the_floor_note_adds_the_runners_own_cost_per_op_where_measured():
    recs = [_rec("theirs", 0, 1, 400, 10, 1.0), _rec("ours", 0, 1, 500, 10, 1.0),
            {"type": "crosscheck_breakdown", "backend": "postgres", "scenario": "check_negative",
             "adapter_p50_ms": 0.47, "driver_p50_ms": 0.45, "calls": 10, "floor_p50_ms": 0.44,
             "floor_cpu_ms": 0.02, "runner_us": 2.2}]
    text = " ".join(render(MANIFEST, recs).split())
    assert "The runner's own loop around a no-op check: +2.2 µs an op (0.5% of the driver alone)." in text
