"""Stopping a run: SIGINT, SIGTERM and SIGHUP sent to the main process of a real `authzbench bench`,
`authzbench prepare` or `pytest --backend` session end it within a few seconds with 128 + the signal's
number, the phase in flight marked interrupted, the report rendered, and no process of the run left."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

pytestmark = [pytest.mark.backend("postgres"), pytest.mark.slow]
ROOT = Path(__file__).resolve().parents[2]
SIGNALS = [signal.SIGINT, signal.SIGTERM, signal.SIGHUP]


def _env(tmp_path: Path) -> dict[str, str]:
    dirs = {"AUTHZBENCH_STATE": "state", "AUTHZBENCH_DATA": "data", "AUTHZBENCH_RESULTS": "results"}
    return {**os.environ, "PYTHONPATH": str(ROOT), **{k: str(tmp_path / v) for k, v in dirs.items()}}


def _start(args: list[str], tmp_path: Path) -> subprocess.Popen:
    # Its own session: the signal goes to the main process only (`kill -TERM PID`, as CI and service
    # managers send it), not to a terminal's whole process group.
    log = open(tmp_path / "run.log", "w")  # noqa: SIM115 - closed with the process
    return subprocess.Popen(args, cwd=tmp_path, env=_env(tmp_path), stdout=log, stderr=subprocess.STDOUT,
                            start_new_session=True)


def _wait_for(cond, what: str, proc: subprocess.Popen, tmp_path: Path, timeout: float = 180) -> None:
    t0 = time.monotonic()
    while not cond():
        if proc.poll() is not None:
            pytest.fail(
                f"ended (code {proc.returncode}) before {what}: {(tmp_path / 'run.log').read_text()[-2000:]}")
        if time.monotonic() - t0 > timeout:
            pytest.fail(f"no {what} after {timeout} s")
        time.sleep(0.2)


def _run_processes(proc: subprocess.Popen, tmp_path: Path) -> list[psutil.Process]:
    """Every process of the run: the main one, its descendants (workers, forkserver, servers) and the
    servers recorded under .authzbench/servers/ (with their own children)."""
    procs = []
    with contextlib.suppress(psutil.NoSuchProcess):
        main = psutil.Process(proc.pid)
        procs += [main, *main.children(recursive=True)]
    for f in (tmp_path / "state" / "servers").glob("*.json"):
        if f.name.endswith(".load.json"):
            continue
        for pid in json.loads(f.read_text())["pids"]:
            try:
                p = psutil.Process(pid)
                procs += [p, *p.children(recursive=True)]
            except psutil.NoSuchProcess:
                pass
    return list({p.pid: p for p in procs}.values())


def _still_running(procs: list[psutil.Process], proc: subprocess.Popen) -> list[str]:
    left = []
    for p in procs:
        if p.pid == proc.pid:
            continue
        try:
            if p.is_running() and p.status() != psutil.STATUS_ZOMBIE:
                left.append(f"{p.pid} {' '.join(p.cmdline())[:120]}")
        except psutil.NoSuchProcess:
            pass
    return left


def _assert_all_gone(procs: list[psutil.Process], proc: subprocess.Popen) -> None:
    # multiprocessing's forkserver and resource tracker leave on their own when the main process's end
    # closes their pipe: give them (and SIGKILLed processes being reaped) 5 s.
    deadline = time.monotonic() + 5
    while (left := _still_running(procs, proc)) and time.monotonic() < deadline:
        time.sleep(0.2)
    if left:
        for p in procs:  # do not leave them to the next test
            with contextlib.suppress(psutil.Error):
                p.kill()
    assert not left, f"processes of the run still running: {left}"


def _kill_run(proc: subprocess.Popen, tmp_path: Path) -> None:
    """A test that failed before its signal: SIGKILL the run and everything it started (its workers and
    servers would outlive a SIGKILLed main process: a failed wait once left 2.2 GB workers and
    postmasters)."""
    if proc.poll() is not None:
        return
    for p in [*_run_processes(proc, tmp_path)]:
        with contextlib.suppress(psutil.Error):
            p.kill()
    proc.wait(timeout=30)


def _records(tmp_path: Path) -> list[dict]:
    runs = list((tmp_path / "results").glob("*/records.jsonl"))
    if not runs:
        return []
    out = []
    for line in runs[0].read_text().splitlines():
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return out


BENCH = [
    sys.executable, "-m", "authzbench.cli", "bench", "--backend", "postgres", "--provision", "native",
    "--profile", "tiny", "--scenario", "check_manage_direct_user", "--scenario", "check_manage_org_admin",
    # enough iterations that the first phase is still measuring when the signal comes, after its first 1
    # s interval: 50 x CHECK_OPS (8,000) / 3 rounds = 133k ops a round, over 10 s at 2 workers. At 500 x
    # sampling 1.33M inputs and their answers took each of these tests ~70 s (17 s at 50 x)
    "--concurrency", "2", "--iterations-scale", "50"]


@pytest.mark.parametrize("sig", SIGNALS, ids=lambda s: s.name)
def test_a_signal_ends_bench_mid_phase_with_nothing_left_running(tmp_path, sig):
    proc = _start(BENCH, tmp_path)
    try:
        _wait_for(lambda: any(r["type"] == "interval" for r in _records(tmp_path)), "measured interval", proc,
                  tmp_path)
        procs = _run_processes(proc, tmp_path)
        assert len(procs) >= 4  # main, 2 workers, the postmaster (and its backends)
        t0 = time.monotonic()
        os.kill(proc.pid, sig)
        code = proc.wait(timeout=30)
        seconds = time.monotonic() - t0
    finally:
        _kill_run(proc, tmp_path)
    log = (tmp_path / "run.log").read_text()
    assert code == 128 + sig, log[-2000:]
    assert seconds < 15, f"took {seconds:.1f} s to stop"
    _assert_all_gone(procs, proc)
    recs = _records(tmp_path)
    ends = [r for r in recs if r["type"] == "phase_end"]
    assert ends and ends[0]["status"] == "interrupted" and sig.name in ends[0]["reason"]
    assert ends[0]["ops"] > 0  # what the workers measured before the signal was flushed
    assert not any(r.get("scenario") == "check_manage_org_admin" for r in recs)  # no next phase
    reports = [r for r in (tmp_path / "reports").glob("*.md") if not r.stem.endswith("-appendix")]
    assert len(reports) == 1 and "**interrupted**" in reports[0].read_text()  # the main report says so
    assert not list((tmp_path / "state" / "servers").glob("postgres.json"))  # down has nothing to do
    assert f"interrupted by {sig.name}" in log


def test_a_second_signal_ends_bench_at_once(tmp_path):
    proc = _start(BENCH, tmp_path)
    try:
        _wait_for(lambda: any(r["type"] == "interval" for r in _records(tmp_path)), "measured interval", proc,
                  tmp_path)
        procs = _run_processes(proc, tmp_path)
        os.kill(proc.pid, signal.SIGTERM)
        # the second once the first was handled (two pending SIGTERMs would be delivered as one)
        t0 = time.monotonic()
        while "SIGTERM: stopping" not in (tmp_path / "run.log").read_text() and time.monotonic() - t0 < 10:
            time.sleep(0.01)
        os.kill(proc.pid, signal.SIGTERM)
        code = proc.wait(timeout=10)
    finally:
        _kill_run(proc, tmp_path)
    assert code == 143
    # ended at once: no report (the first would render it)
    assert not list((tmp_path / "reports").glob("*.md"))
    _assert_all_gone(procs, proc)


@pytest.mark.parametrize("sig,when", [(signal.SIGINT, "start"), (signal.SIGTERM, "load")],
                         ids=["SIGINT-while-starting", "SIGTERM-while-loading"])
def test_a_signal_during_prepare_stops_the_server_it_was_starting(tmp_path, sig, when):
    # tiny with 100 times its orgs (~250,000 relationships): the load lasts seconds, not a blink
    proc = _start([sys.executable, "-m", "authzbench.cli", "prepare", "--backend", "postgres", "--provision",
                   "native", "--profile", "tiny", "--set", "orgs=300"], tmp_path)
    state = tmp_path / "state" / "servers" / "postgres.json"
    try:
        if when == "start":  # initdb: its `postgres --single` once outlived a SIGINT that killed initdb
            _wait_for(
                lambda: "postgres: initdb (" in (tmp_path / "run.log").read_text(), "initdb", proc, tmp_path)
        else:
            _wait_for(state.is_file, "a started server", proc, tmp_path)
        procs = _run_processes(proc, tmp_path)
        os.kill(proc.pid, sig)
        code = proc.wait(timeout=30)
    finally:
        _kill_run(proc, tmp_path)
    log = (tmp_path / "run.log").read_text()
    assert code == 128 + sig, log[-2000:]
    assert "loaded" not in log  # the signal came before the load finished
    _assert_all_gone(procs + _run_processes(proc, tmp_path), proc)
    assert not state.exists()
    # a postmaster spawned after the snapshot above is found by its data dir, named in the log
    for data_dir in re.findall(r"initdb \(\d+\) in (\S+)", log):
        running = [
            p.pid for p in psutil.process_iter(["cmdline"]) if data_dir in " ".join(p.info["cmdline"] or [])]
        assert not running, f"a postgres on {data_dir} is still running: {running}"


def test_prepared_servers_survive_an_interrupted_bench_and_down_stops_them(tmp_path):
    env = _env(tmp_path)
    r = subprocess.run(
        [sys.executable, "-m", "authzbench.cli", "prepare", "--backend", "postgres", "--provision",
         "native", "--profile", "tiny"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    pids = json.loads((tmp_path / "state" / "servers" / "postgres.json").read_text())["pids"]
    proc = _start(BENCH, tmp_path)
    try:
        _wait_for(lambda: any(r["type"] == "interval" for r in _records(tmp_path)), "measured interval", proc,
                  tmp_path)
        os.kill(proc.pid, signal.SIGTERM)
        assert proc.wait(timeout=30) == 143
        assert all(psutil.pid_exists(p) for p in pids)  # prepare's servers are kept for later runs
    finally:
        _kill_run(proc, tmp_path)
        d = subprocess.run([sys.executable, "-m", "authzbench.cli", "down"], cwd=tmp_path, env=env,
                           capture_output=True, text=True, timeout=120)
    assert d.returncode == 0 and "postgres" in d.stdout
    time.sleep(0.5)
    assert not any(psutil.pid_exists(p) and psutil.Process(p).status() != psutil.STATUS_ZOMBIE for p in pids)


@pytest.mark.parametrize("sig", SIGNALS, ids=lambda s: s.name)
def test_a_signal_ends_a_pytest_backend_session_and_stops_its_servers(tmp_path, sig):
    target = str(ROOT / "tests" / "backends" / "test_postgres.py")
    proc = _start([sys.executable, "-m", "pytest", target, "-p", "no:cacheprovider", "--rootdir", str(ROOT),
                   "--backend", "postgres", "--profile", "tiny", "-q"], tmp_path)
    try:
        state = tmp_path / "state" / "servers" / "postgres.json"
        _wait_for(state.is_file, "a started server", proc, tmp_path)
        time.sleep(2.0)  # loading or testing
        procs = _run_processes(proc, tmp_path)
        os.kill(proc.pid, sig)
        code = proc.wait(timeout=60)
    finally:
        _kill_run(proc, tmp_path)
    assert code == 128 + sig, (tmp_path / "run.log").read_text()[-3000:]
    _assert_all_gone(procs, proc)
