"""--ingest-variants and --max-load-minutes: which load paths run, and a load that stops at its bound."""

from __future__ import annotations

import time

import pytest

from authzbench.config import BenchConfig
from authzbench.report import render
from authzbench.results.store import RunStore
from authzbench.run import orchestrate
from authzbench.systems.reference.adapter import ReferenceBackend
from tests.unit.test_cli import authzbench


@pytest.mark.parametrize("args,message", [
    (["bench", "--backend", "reference", "--profile", "tiny", "--ingest-variants", "Carrier"],
     "unknown ingest variant 'Carrier'"),
    (["prepare", "--backend", "reference", "--profile", "tiny", "--max-load-minutes", "0"],
     "--max-load-minutes must be > 0"),
])
def test_bad_load_options_are_one_line_and_exit_code_2(tmp_path, args, message):
    r = authzbench(*args, cwd=tmp_path)
    assert r.returncode == 2, r.stderr
    assert message in r.stderr.strip().splitlines()[-1] and "Traceback" not in r.stderr


def _record_loads(monkeypatch, step_sleep: float = 0.0) -> list:
    seen: list = []
    original = ReferenceBackend.load

    def load(self, ds, progress):
        seen.append(self.options.get("ingest"))
        for _ in range(20 if step_sleep else 0):  # a slow loader reporting progress in steps
            time.sleep(step_sleep)
            progress(1)
        return original(self, ds, progress)

    monkeypatch.setattr(
        ReferenceBackend, "ingest_variants", {"PathA": {"ingest": "a"}, "PathB": {"ingest": "b"}})
    monkeypatch.setattr(ReferenceBackend, "load", load)
    return seen


@pytest.mark.parametrize(
    "choice,loads", [("none", [None]), ("all", ["a", "b", None]), ("PathB", ["b", None])])
def test_only_the_chosen_ingest_variants_are_loaded_and_the_default_path_loads_last(
    tmp_path, monkeypatch, choice, loads):
    seen = _record_loads(monkeypatch)
    cfg = BenchConfig.of(
        backends=["reference"], provision="native", profile="tiny", data_dir=tmp_path / "data",
        ingest_variants=choice, reload=True)
    assert orchestrate.prepare(cfg) == []
    assert seen == loads


def test_a_load_past_its_bound_stops_and_the_report_gives_rate_and_projection(tmp_path, monkeypatch):
    _record_loads(monkeypatch, step_sleep=0.05)  # 20 steps of 50 ms: ~1 s, far past a 0.3 s bound
    cfg = BenchConfig.of(backends=["reference"], provision="native", profile="tiny", concurrency=[1],
                         scenarios=["check_negative"], iterations_scale=0.05, data_dir=tmp_path / "data",
                         max_load_minutes=0.005)
    store = RunStore.create(tmp_path / "results")
    t0 = time.perf_counter()
    failures = orchestrate.bench(cfg, store)
    assert time.perf_counter() - t0 < 30
    assert len(failures) == 1 and "load stopped after" in failures[0] and "projects to" in failures[0]
    bounded = [r for r in store.records() if r["type"] == "ingest_bounded"]
    assert len(bounded) == 1 and bounded[0]["loaded"] < bounded[0]["relationships"]
    assert bounded[0]["rels_per_s"] > 0 and bounded[0]["projected_seconds"] > bounded[0]["bound_seconds"]
    # nothing measured on a partial load
    assert not [r for r in store.records() if r["type"] == "phase_start"]
    assert "over --max-load-minutes" in render(store.path, tmp_path / "r").read_text()
