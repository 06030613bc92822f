"""A server killed mid-run, for any backend: run a bench of BACKEND then `reference`, SIGKILL the backend's
first server (and its children) once the first phase is measuring, and render the report."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import signal
import threading
import time
from pathlib import Path

import psutil

from authzbench.config import BenchConfig
from authzbench.report import render
from authzbench.results.store import RunStore
from authzbench.run import orchestrate, phase
from authzbench.workloads import catalog


def bench_with_server_killed_mid_phase(
    backend: str, tmp_path, monkeypatch, cap: int = 8000) -> tuple[str, str, float]:
    """Returns (report text, its 'incomplete phases' section, the bench's wall seconds)."""
    monkeypatch.setenv("AUTHZBENCH_STATE", str(tmp_path / "state"))
    real_run_phase, real_session = phase.run_phase, orchestrate.Session
    sessions: list = []
    calls = {"n": 0}

    def tracking_session(*a, **k):
        s = real_session(*a, **k)
        sessions.append(s)
        return s

    def run_phase_then_kill(spec, factory, inputs, sink, *a, **k):
        calls["n"] += 1
        if spec.backend != backend or calls["n"] != 1:
            return real_run_phase(spec, factory, inputs, sink, *a, **k)
        killed = threading.Event()

        def sink_and_kill(rec):
            sink(rec)
            if rec.KIND == "interval" and not killed.is_set():
                # SIGKILL (no clean shutdown) once the first phase is measuring; the server's children
                # too (PostgreSQL's backends serving our connections).
                killed.set()
                server = psutil.Process(sessions[0].dep.pids[0])
                for p in [*server.children(recursive=True), server]:
                    with contextlib.suppress(ProcessLookupError):  # crash recovery may have ended it already
                        os.kill(p.pid, signal.SIGKILL)

        return real_run_phase(spec, factory, inputs, sink_and_kill, *a, **k)

    monkeypatch.setattr(orchestrate, "Session", tracking_session)
    monkeypatch.setattr(phase, "run_phase", run_phase_then_kill)
    _cap_at(monkeypatch, cap)  # the op counts below were set against the 8,000-op cap (catalog.CHECK_OPS was)
    cfg = BenchConfig.of(backends=[backend, "reference"], provision="native", profile="tiny",
                         scenarios=["check_manage_direct_user", "check_manage_org_admin"],
                         # enough ops that the phase outlasts its first 1 s interval, when the kill comes; at
                         # 30x (no budget: 120 s over the 60 s cap) each kill test waited out the cap, failing
                         # ops for ~50 s; at 3x the 12 s budget ends it (24,000 ops, 2-8 s before a kill here)
                         concurrency=[2], iterations_scale=3, data_dir=tmp_path / "data")
    store = RunStore.create(tmp_path / "results")
    t0 = time.monotonic()
    orchestrate.bench(cfg, store)
    seconds = time.monotonic() - t0
    main = render(store.path, tmp_path / "reports")
    # the phase tables (a backend's rows, its errors by type) are in the appendix beside the main report
    text = main.read_text() + main.with_name(f"{main.stem}-appendix.md").read_text()
    # the main report's section on incomplete phases only (its number moves as sections are added)
    return text, text.split("Incomplete phases and backend errors\n")[1].split("\n## ")[0], seconds


def _tree(pid: int) -> list[psutil.Process]:
    server = psutil.Process(pid)
    return [server, *server.children(recursive=True)]


def _signal_tree(procs: list[psutil.Process], sig: int) -> None:
    for p in procs:
        with contextlib.suppress(psutil.Error, ProcessLookupError):
            os.kill(p.pid, sig)


def bench_with_server_frozen_mid_phase(backend: str, tmp_path, monkeypatch, freeze_s: float = 5.0,
                                       server_index: int = 0) -> tuple[list[dict], str]:
    """Run two check phases of BACKEND; SIGSTOP its server (and its children) the moment the first phase
    starts measuring, SIGCONT it `freeze_s` later. Returns (the run's records, the report's text)."""
    monkeypatch.setenv("AUTHZBENCH_STATE", str(tmp_path / "state"))
    real_run_phase, real_session = phase.run_phase, orchestrate.Session
    sessions: list = []
    frozen: list[psutil.Process] = []
    resumed = threading.Event()

    def tracking_session(*a, **k):
        sessions.append(real_session(*a, **k))
        return sessions[-1]

    def resume() -> None:
        if not resumed.wait(freeze_s):
            resumed.set()
        _signal_tree(frozen, signal.SIGCONT)

    def run_phase_then_freeze(spec, factory, inputs, sink, *a, on_window=None, **k):
        if spec.backend != backend or frozen:
            return real_run_phase(spec, factory, inputs, sink, *a, on_window=on_window, **k)

        def window(measuring: bool) -> None:
            if measuring and not frozen:
                frozen.extend(_tree(sessions[0].dep.pids[server_index]))
                _signal_tree(frozen, signal.SIGSTOP)
                threading.Thread(target=resume, daemon=True).start()
            if on_window:
                on_window(measuring)

        return real_run_phase(spec, factory, inputs, sink, *a, on_window=window, **k)

    monkeypatch.setattr(orchestrate, "Session", tracking_session)
    monkeypatch.setattr(phase, "run_phase", run_phase_then_freeze)
    # No time budget: it would end the frozen phase while the server is still stopped (0.4 s at this
    # scale), and the next phase's workers could not connect. Both phases run their 200 ops.
    for name in ("check_manage_direct_user", "check_manage_org_admin"):
        # 8,000 ops as a cap (catalog.CHECK_OPS was): the 200 ops below
        monkeypatch.setitem(catalog.SCENARIOS, name,
                            dataclasses.replace(catalog.SCENARIOS[name], budget_s=None, iterations=8000))
    cfg = BenchConfig.of(backends=[backend], provision="native", profile="tiny",
                         scenarios=["check_manage_direct_user", "check_manage_org_admin"],
                         # 200 ops per phase (CHECK_OPS 8,000 x 0.025): the timeouts of a 5 s freeze are well
                         # over the 1% that makes a phase incomplete (at 0.1 x, 800 ops, 2 timeouts were
                         # 0.75%)
                         concurrency=[2], iterations_scale=0.025, data_dir=tmp_path / "data")
    store = RunStore.create(tmp_path / "results")
    try:
        orchestrate.bench(cfg, store)
    finally:
        resumed.set()
        _signal_tree(frozen, signal.SIGCONT)  # never leave a stopped server behind
    return list(store.records()), render(store.path, tmp_path / "reports").read_text()


def wait_all_threads_stopped(pid: int, within_s: float = 5.0) -> str:
    """SIGSTOP returns before every thread of a JVM has stopped: wait until /proc shows each one stopped."""
    deadline = time.monotonic() + within_s
    while True:
        states = [
            (t / "stat").read_text().rsplit(")", 1)[1].split()[0] for t in Path(f"/proc/{pid}/task").iterdir()
        ]
        if all(st in "Tt" for st in states) or time.monotonic() > deadline:
            return f"{sum(st in 'Tt' for st in states)} of {len(states)}"
        time.sleep(0.01)


def _cap_at(monkeypatch, ops: int) -> None:
    """The two check scenarios of these tests with `ops` as their op cap: a test's op counts stay as
    reasoned."""
    for name in ("check_manage_direct_user", "check_manage_org_admin"):
        monkeypatch.setitem(
            catalog.SCENARIOS, name, dataclasses.replace(catalog.SCENARIOS[name], iterations=ops))
