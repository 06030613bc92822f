"""Builds before measuring (provision/builds.py): every build the selected backends need runs before the first
server starts, each once, and a failed build fails only the backends that need it."""

from __future__ import annotations

import importlib
import inspect

import pytest

from authzbench.config import BenchConfig
from authzbench.provision import builds
from authzbench.provision.builds import BuildStep, steps_of
from authzbench.results.store import RunStore
from authzbench.run import orchestrate
from authzbench.systems import systems


def _step(events: list[str], what: str, fail: bool = False) -> BuildStep:
    def run() -> None:
        events.append(f"build {what}")
        if fail:
            raise RuntimeError(f"{what}: go build failed with exit code 1")

    return BuildStep(what, run, "~2 min", lambda: False)


class _FakeSession:
    def __init__(self, events: list[str], name: str) -> None:
        events.append(f"start {name}")
        self.name, self.started_here = name, False


def _bench(tmp_path, monkeypatch, steps: dict) -> tuple[list[str], list[str], RunStore]:
    events: list[str] = []
    fake = {k: tuple(v(events)) for k, v in steps.items()}
    monkeypatch.setattr(builds, "steps_of", lambda name: fake.get(name, ()))
    monkeypatch.setattr(orchestrate, "Session", lambda name, servers, model: _FakeSession(events, name))
    monkeypatch.setattr(orchestrate, "load_backend", lambda sess, *a, **k: events.append(f"load {sess.name}"))
    monkeypatch.setattr(orchestrate._BenchRun, "bench_backend",
                        lambda run, sess, visit: events.append(f"phases {sess.name}"))
    cfg = BenchConfig.of(
        backends=["postgres", "clickhouse"], provision="native", profile="tiny", concurrency=[1],
        iterations_scale=0.05, data_dir=tmp_path / "data", scenarios=["check_negative"])
    store = RunStore.create(tmp_path / "results", config={"profile": "tiny"})
    return events, orchestrate.bench(cfg, store), store


def test_every_build_runs_before_the_first_server_starts_and_a_shared_one_once(tmp_path, monkeypatch):
    shared: dict = {}

    def postgres(ev):
        shared["pg"] = _step(ev, "postgres server")
        return [shared["pg"], _step(ev, "pg extension")]

    events, failures, store = _bench(tmp_path, monkeypatch, {
        "postgres": postgres, "clickhouse": lambda ev: [shared["pg"], _step(ev, "clickhouse engine")]})
    assert failures == []
    builds_done = [e for e in events if e.startswith("build ")]
    assert builds_done == ["build postgres server", "build pg extension", "build clickhouse engine"]
    first_start = events.index("start postgres")
    assert all(events.index(b) < first_start for b in builds_done)
    assert events[first_start:] == ["start postgres", "load postgres", "phases postgres",
                                    "start clickhouse", "load clickhouse", "phases clickhouse"]
    steps = [r for r in store.records() if r["type"] == "step"]
    assert steps[0]["step"] == "builds before measuring"  # the timeline shows it first, before the dataset


def test_a_failed_build_fails_only_its_backend_and_no_server_of_it_starts(tmp_path, monkeypatch):
    events, failures, store = _bench(tmp_path, monkeypatch, {
        "postgres": lambda ev: [_step(ev, "postgres server")],
        "clickhouse": lambda ev: [_step(ev, "clickhouse engine", fail=True)]})
    assert failures == ["clickhouse: RuntimeError: clickhouse engine: go build failed with exit code 1"]
    assert "start clickhouse" not in events and "phases postgres" in events
    err = next(r for r in store.records() if r["type"] == "backend_error")
    assert err["backend"] == "clickhouse" and err["stage"] == "bench (build)"


def test_nothing_is_built_for_servers_provisioned_elsewhere():
    assert builds.steps_for(["openfga", "spicedb-pg"], "external") == []
    assert [s.what for s in builds.steps_for(["openfga", "spicedb-pg", "clickhouse"], "native")] == [
        "PostgreSQL server (apt)", "openfga (go build)", "spicedb (go build)"]


@pytest.mark.parametrize("backend", sorted(n for n, s in systems().items() if s.builds))
def test_each_estimate_is_the_one_its_recipe_announces(backend):
    for step in steps_of(backend):
        if step.expect:
            src = inspect.getsource(importlib.import_module(step.recipe))
            assert step.expect in src, (backend, step.what)


def test_an_estimate_is_the_middle_of_a_stated_range():
    assert BuildStep("x", lambda: None, "5-25 min, ~1 GB of modules", lambda: True).minutes() == 15
    assert BuildStep("x", lambda: None, "~6.5 min", lambda: True).minutes() == 6.5
    assert BuildStep("x", lambda: None, "", lambda: True).minutes() == 0
