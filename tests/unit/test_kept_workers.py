"""Worker processes kept across a visit's phases: reused while healthy, replaced when a phase lost one."""

from __future__ import annotations

import pickle

import pytest

from authzbench.core.records import as_dict
from authzbench.generator import generate
from authzbench.measure.runner import BackendFactory, KeptWorkers, PhaseSpec, run_phase
from authzbench.report.core.data import phase_table
from authzbench.truth.oracle import Oracle
from authzbench.workloads.catalog import SCENARIOS

FAKES = "tests.unit.fakes"


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    ds = generate("tiny", tmp_path_factory.mktemp("d") / "tiny")
    return ds, Oracle(ds)


def _phase(kept, spec, factory, inputs):
    recs: list[dict] = []
    res = run_phase(spec, factory, inputs, lambda r: recs.append(as_dict(r)), "process", kept=kept)
    return res, phase_table(recs).iloc[0]


def test_phases_on_kept_workers_reuse_the_processes_and_connections_and_count_every_op(tiny, tmp_path):
    ds, o = tiny
    log = tmp_path / "connects"
    inputs = SCENARIOS["check_view_via_group_member"].sampler(ds, o, 100)
    same = BackendFactory(
        f"{FAKES}:ConnectLogBackend", {}, {"dataset_path": str(ds.path), "log_path": str(log)})
    other = BackendFactory(same.impl, {}, {**same.options, "timeout_s": 5.0})
    with KeptWorkers() as kept:
        for conc, factory in [(2, same), (3, same), (2, same), (2, other), (2, same)]:
            res, row = _phase(kept, PhaseSpec("connect-log", "s", concurrency=conc, iterations=120, warmup=6),
                              factory, inputs)
            assert res.status == "complete" and row["ops"] == 120 and row["mismatches"] == 0
        pids = log.read_text().split()
    # 3 workers connected once for the phases of one factory, two once more for the other factory; back on
    # the first factory they use the connections they kept
    assert len(pids) == 3 + 2 and len(set(pids)) == 3


class _SizeLog:
    """A worker's command queue that records the pickled size of each command it forwards."""

    def __init__(self, q, sizes: list[int]):
        self.q, self.sizes = q, sizes

    def put(self, obj) -> None:
        self.sizes.append(len(pickle.dumps(obj)))
        self.q.put(obj)


def test_a_kept_worker_is_sent_a_phases_inputs_once_and_runs_each_phase_on_its_own_inputs(tiny):
    ds, o = tiny
    checks = SCENARIOS["check_view_via_group_member"].sampler(ds, o, 8000)
    trips = SCENARIOS["roundtrip"].sampler(ds, o, 8000)
    good = BackendFactory(
        "authzbench.systems.reference.adapter:ReferenceBackend", {}, {"dataset_path": str(ds.path)})
    spec = PhaseSpec("reference", "s", concurrency=2, iterations=200, warmup=4)
    with KeptWorkers() as kept:
        _phase(kept, spec, good, checks)
        sizes: list[int] = []
        kept.commands = [_SizeLog(q, sizes) for q in kept.commands]
        kinds = []
        for inputs in (checks, trips, checks):
            res, row = _phase(kept, spec, good, inputs)
            assert res.status == "complete" and row["ops"] == 200 and row["mismatches"] == 0
            kinds.append(row["kind"])
    assert kinds == ["check", "roundtrip", "check"]
    again, new, back = sizes[0:2], sizes[2:4], sizes[4:6]
    assert max(again + back) < 2_000 < 10_000 < min(new)  # only the new inputs travel, and only once


def test_a_worker_lost_in_a_phase_leaves_fresh_workers_for_the_next_phase(tiny):
    ds, o = tiny
    inputs = SCENARIOS["check_view_via_group_member"].sampler(ds, o, 100)
    dying = BackendFactory(f"{FAKES}:DyingBackend", {}, {"dataset_path": str(ds.path)})
    good = BackendFactory(
        "authzbench.systems.reference.adapter:ReferenceBackend", {}, {"dataset_path": str(ds.path)})
    with KeptWorkers() as kept:
        res, _ = _phase(kept, PhaseSpec("dying", "s", concurrency=2, iterations=50), dying, inputs)
        assert res.status != "complete"
        lost = {p.pid for p in kept.procs}
        res, row = _phase(
            kept, PhaseSpec("reference", "s", concurrency=2, iterations=100, warmup=4), good, inputs)
        assert res.status == "complete" and row["ops"] == 100 and row["mismatches"] == 0
        assert lost.isdisjoint(p.pid for p in kept.procs)
        procs = list(kept.procs)
    assert procs and not any(p.is_alive() for p in procs)  # closing the visit ends its workers
