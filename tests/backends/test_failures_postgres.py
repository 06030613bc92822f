"""A server killed mid-run: the phase records errors and is marked incomplete, results stay on disk,
the run moves on to the next backend, and the report says what happened."""

from __future__ import annotations

import contextlib
import os
import signal
import threading

import psutil
import pytest

from authzbench import orchestrate
from authzbench.orchestrate import BenchConfig
from authzbench.report import render
from authzbench.results import RunStore

pytestmark = pytest.mark.backend("postgres")


def test_server_killed_mid_phase_is_recorded_and_the_run_moves_on(tmp_path, monkeypatch):
    monkeypatch.setenv("AUTHZBENCH_STATE", str(tmp_path / "state"))
    real_run_phase = orchestrate.run_phase
    calls = {"n": 0}
    sessions: list = []
    real_session = orchestrate.Session

    def tracking_session(*a, **k):
        s = real_session(*a, **k)
        sessions.append(s)
        return s

    def run_phase_then_kill(spec, factory, inputs, sink, *a, **k):
        calls["n"] += 1
        if spec.backend != "postgres" or calls["n"] != 1:
            return real_run_phase(spec, factory, inputs, sink, *a, **k)
        killed = threading.Event()

        def sink_and_kill(rec):
            sink(rec)
            if rec["type"] == "interval" and not killed.is_set():
                # Kill the server (SIGKILL: no clean shutdown) once the first phase is measuring.
                killed.set()
                server = psutil.Process(sessions[0].dep.pids[0])
                for p in [*server.children(recursive=True), server]:  # the backends serving our connections too
                    with contextlib.suppress(ProcessLookupError):  # crash recovery may have ended it already
                        os.kill(p.pid, signal.SIGKILL)

        return real_run_phase(spec, factory, inputs, sink_and_kill, *a, **k)

    monkeypatch.setattr(orchestrate, "Session", tracking_session)
    monkeypatch.setattr(orchestrate, "run_phase", run_phase_then_kill)
    cfg = BenchConfig(backends=["postgres", "reference"], provision="native", profile="tiny",
                      scenarios=["check_manage_direct_user", "check_manage_org_admin"],
                      # 60,000 ops: the phase outlasts its first 1 s interval, when the kill comes.
                      concurrency=[2], iterations_scale=30, data_dir=tmp_path / "data")
    store = RunStore.create(tmp_path / "results")
    orchestrate.bench(cfg, store)
    text = render(store.path, tmp_path / "reports").read_text()
    problems = text.split("## 10.")[1]
    assert "postgres/check_manage_direct_user/c2/r0`: **incomplete**" in problems
    assert "postgres/check_manage_org_admin/c2/r0`: **failed**" in problems  # nothing left to connect to
    assert "reference/check_manage_org_admin/c2/r0" not in problems  # the next backend ran normally
    assert "| reference † | 2 |" in text
    assert "OperationalError" in text or "errors" in problems  # the errors are counted by type
