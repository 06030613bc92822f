"""Worker processes kept across a visit's phases: reused while healthy, replaced when a phase lost one."""

from __future__ import annotations

import pytest

from authzbench.generator import generate
from authzbench.oracle import Oracle
from authzbench.report.data import phase_table
from authzbench.scenarios.catalog import SCENARIOS
from authzbench.scenarios.runner import BackendFactory, KeptWorkers, PhaseSpec, run_phase

FAKES = "tests.unit.fakes"


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    ds = generate("tiny", tmp_path_factory.mktemp("d") / "tiny")
    return ds, Oracle(ds)


def _phase(kept, spec, factory, inputs):
    recs: list[dict] = []
    res = run_phase(spec, factory, inputs, recs.append, "process", kept=kept)
    return res, phase_table(recs).iloc[0]


def test_phases_on_kept_workers_reuse_the_processes_and_connections_and_count_every_op(tiny, tmp_path):
    ds, o = tiny
    log = tmp_path / "connects"
    inputs = SCENARIOS["check_view_via_group_member"].sampler(ds, o, 100)
    same = BackendFactory(f"{FAKES}:ConnectLogBackend", {}, {"dataset_path": str(ds.path), "log_path": str(log)})
    other = BackendFactory(same.impl, {}, {**same.options, "timeout_s": 5.0})
    with KeptWorkers() as kept:
        for conc, factory in [(2, same), (3, same), (2, same), (2, other)]:
            res, row = _phase(kept, PhaseSpec("connect-log", "s", concurrency=conc, iterations=120, warmup=6),
                              factory, inputs)
            assert res.status == "complete" and row["ops"] == 120 and row["mismatches"] == 0
        pids = log.read_text().split()
    # 3 workers connected once for the three phases of one factory; two reconnected for the other factory
    assert len(pids) == 3 + 2 and len(set(pids)) == 3


def test_a_worker_lost_in_a_phase_leaves_fresh_workers_for_the_next_phase(tiny):
    ds, o = tiny
    inputs = SCENARIOS["check_view_via_group_member"].sampler(ds, o, 100)
    dying = BackendFactory(f"{FAKES}:DyingBackend", {}, {"dataset_path": str(ds.path)})
    good = BackendFactory("authzbench.backends.reference:ReferenceBackend", {}, {"dataset_path": str(ds.path)})
    with KeptWorkers() as kept:
        res, _ = _phase(kept, PhaseSpec("dying", "s", concurrency=2, iterations=50), dying, inputs)
        assert res.status != "complete"
        lost = {p.pid for p in kept.procs}
        res, row = _phase(kept, PhaseSpec("reference", "s", concurrency=2, iterations=100, warmup=4), good, inputs)
        assert res.status == "complete" and row["ops"] == 100 and row["mismatches"] == 0
        assert lost.isdisjoint(p.pid for p in kept.procs)
        procs = list(kept.procs)
    assert procs and not any(p.is_alive() for p in procs)  # closing the visit ends its workers
