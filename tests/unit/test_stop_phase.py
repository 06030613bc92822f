"""A stop request (what the first SIGINT/SIGTERM/SIGHUP makes) ends the phase in flight within seconds:
workers stop, what they measured is recorded, the phase is marked interrupted."""

from __future__ import annotations

import signal
import threading
import time

import pytest

from authzbench.core import stopping
from authzbench.core.records import Record, as_dict
from authzbench.generator import generate
from authzbench.measure.runner import BackendFactory, PhaseSpec, run_phase
from authzbench.truth.oracle import Oracle
from authzbench.workloads.catalog import SCENARIOS


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    ds = generate("tiny", tmp_path_factory.mktemp("d") / "tiny")
    return ds, Oracle(ds)


@pytest.mark.parametrize("model", ["thread", "process"])
def test_a_stop_request_ends_the_phase_in_flight_marked_interrupted(tiny, model):
    ds, o = tiny
    inputs = SCENARIOS["check_negative"].sampler(ds, o, 100)
    # every 10th op sleeps 50 ms: 100,000 ops would take ~4 minutes
    factory = BackendFactory(
        "tests.unit.fakes:SleepyBackend", {}, {"dataset_path": str(ds.path), "sleep_s": 0.05})
    spec = PhaseSpec("sleepy", "s", concurrency=2, iterations=100_000, timeout_s=1.0, max_seconds=300)
    recs: list[dict] = []
    asked: list[float] = []

    def ask_to_stop() -> None:
        asked.append(time.monotonic())
        stopping.request_stop("a test's stop request")

    # The request comes once the workers have measured something: a fixed 3 s timer fired before the
    # process workers' first op on a busy 2-core CI machine (ops 0). The 60 s timer is the fallback.
    fallback = threading.Timer(60.0, ask_to_stop)

    def sink(record: Record) -> None:
        recs.append(rec := as_dict(record))
        if not asked and rec["type"] == "interval" and rec["ops"] > 0:
            ask_to_stop()

    fallback.start()
    try:
        res = run_phase(spec, factory, inputs, sink, model)
    finally:
        fallback.cancel()
        stopping.clear_internal_stop()
    seconds = time.monotonic() - asked[0]
    assert res.status == "interrupted" and "a test's stop request" in res.reason
    assert seconds < stopping.GRACE_S + 3  # ended by the request, not by the 300 s cap
    end = recs[-1]
    assert end["type"] == "phase_end" and end["status"] == "interrupted"
    assert 0 < end["ops"] < 100_000 and sum(r["ops"] for r in recs if r["type"] == "interval") == end["ops"]


def test_a_stopped_write_phase_skips_its_restore_check_and_the_run_ends(tmp_path, monkeypatch):
    from authzbench.config import BenchConfig
    from authzbench.results.store import RunStore
    from authzbench.run import orchestrate, phase

    checks: list[str] = []
    monkeypatch.setattr(phase, "verify_restored", lambda sess, ds, o, store, pid, *a: checks.append(pid))
    real = phase._run_phase

    def stopped_midway(spec, *a, **k):
        res = real(spec, *a, **k)
        stopping._state.update(signum=signal.SIGINT, at=time.perf_counter())  # a SIGINT during the phase
        stopping.STOP.set()
        return res

    monkeypatch.setattr(phase, "_run_phase", stopped_midway)
    cfg = BenchConfig.of(backends=["reference"], provision="native", profile="tiny", concurrency=[1],
                         iterations_scale=0.05, data_dir=tmp_path / "data", scenarios=["write_acl"])
    store = RunStore.create(tmp_path / "results", config={"profile": "tiny"})
    try:
        with pytest.raises(stopping.Interrupted):
            orchestrate.bench(cfg, store)
    finally:
        stopping._state["signum"] = None
        stopping.clear_internal_stop()
    assert checks == []  # the restore check (minutes on a slow backend) did not hold up the stop
    assert any(r["type"] == "backend_error" and "interrupted" in r["message"] for r in store.records())
