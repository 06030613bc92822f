"""The structural-write mechanism against fakes: lag shows as visibility lag, an ignored revocation as stale
allows, a wrong answer as a mismatch, a write never visible as an error (and not a hang)."""

from __future__ import annotations

import time

import pytest

from authzbench.core.metrics import merge, summarize
from authzbench.core.records import as_dict
from authzbench.generator import generate
from authzbench.measure.runner import BackendFactory, PhaseSpec, run_phase
from authzbench.report.core.data import phase_table
from authzbench.truth.evaluator import SimpleEvaluator
from authzbench.workloads.catalog import SCENARIOS, WRITE_SCENARIOS
from authzbench.workloads.writes import KINDS, sample_write_ops


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return generate("tiny", tmp_path_factory.mktemp("d") / "tiny")


def _run(ds, scenario: str, cls: str = "ReferenceBackend", n: int = 12, concurrency: int = 2, **opts):
    module = "authzbench.systems.reference.adapter" if cls == "ReferenceBackend" else "tests.unit.fakes"
    factory = BackendFactory(f"{module}:{cls}", {}, {"dataset_path": str(ds.path), **opts})
    inputs = SCENARIOS[scenario].sampler(ds, None, n)
    spec = PhaseSpec(cls, scenario, concurrency=concurrency, iterations=n, visibility_bound_s=0.3)
    recs: list[dict] = []
    res = run_phase(spec, factory, inputs, lambda r: recs.append(as_dict(r)), "thread")
    t = phase_table(recs)
    return res, {k: t[t["kind"] == k].iloc[0] for k in t["kind"]}


@pytest.mark.parametrize("kind", KINDS)
def test_every_write_op_flips_its_probe_in_the_simple_evaluator(tiny, kind):
    ops = sample_write_ops(tiny, kind, 20)
    ev = SimpleEvaluator.from_dataset(tiny)
    users = {op.probe[0] for op in ops}
    assert len(users) == 20 and min(users) >= tiny.entities["user"]  # scratch users, one per op
    for op in ops:
        for rel in op.setup:
            ev.add(*rel)
        before = ev.check(*op.probe)
        (ev.remove if op.revoke_first else ev.add)(*op.change)
        assert ev.check(*op.probe) != before
        (ev.add if op.revoke_first else ev.remove)(*op.change)
        for rel in reversed(op.setup):
            ev.remove(*rel)


@pytest.mark.parametrize("kind", KINDS)
def test_each_write_op_answers_as_alone_while_every_other_op_is_applied(tiny, kind):
    """Workers overlap their ops in any order, so no op may change another's probe or control answer."""
    ops = sample_write_ops(tiny, kind, 40)
    ev = SimpleEvaluator.from_dataset(tiny)
    for op in ops:
        for rel in (*op.setup, op.change):
            ev.add(*rel)
    for op in ops:
        present = op.control_base if op.revoke_first else op.control_applied
        absent = op.control_applied if op.revoke_first else op.control_base
        assert (ev.check(*op.probe), ev.check(*op.control)) == (True, present), op
        ev.remove(*op.change)
        assert (ev.check(*op.probe), ev.check(*op.control)) == (False, absent), op
        ev.add(*op.change)


def test_hierarchy_ops_that_would_see_each_other_are_refused(tiny):
    """The pair the compose CI run caught: op A hangs real group 15 under its scratch group and attaches that
    under group 2 (which grants resource 17); op B attaches its scratch group under 15, so while A's change
    is applied B's user views 17."""
    from authzbench.schema.model import Relationship
    from authzbench.workloads.writes import WriteOp, _independent, _verified

    n_u, n_g = tiny.entities["user"], tiny.entities["group"]
    ua, ub, sa, sb = n_u + 10**6, n_u + 10**6 + 1, n_g + 10**6, n_g + 10**6 + 1
    ev = SimpleEvaluator.from_dataset(tiny)
    a = WriteOp("hierarchy", (Relationship("group_member", sa, ua), Relationship("group_child", sa, 15)),
                Relationship("group_child", 2, sa), False, (ua, "view", 17), (ua, "view", 0))
    b = WriteOp("hierarchy", (Relationship("group_member", sb, ub), Relationship("group_child", sb, 9)),
                Relationship("group_child", 15, sb), False, (ub, "view", 215), (ub, "view", 17))
    ops = [_verified(a, ev), _verified(b, ev)]
    with pytest.raises(AssertionError, match="interfere"):
        _independent(ops, ev)


def test_hotspot_groups_are_always_among_the_membership_writes(tiny):
    ops = sample_write_ops(tiny, "membership", 10)
    ev = SimpleEvaluator.from_dataset(tiny)
    sizes = {g: len(ev.fwd["group_member"][g]) + len(ev.fwd["group_manager"][g])
             for g in range(tiny.entities["group"])}
    written = {op.change.object for op in ops}
    assert max((g for g in written), key=lambda g: sizes[g]) in sorted(sizes, key=lambda g: -sizes[g])[:3]


@pytest.mark.parametrize("scenario", WRITE_SCENARIOS)
def test_a_consistent_backend_shows_every_write_visible_and_no_stale_allow(tiny, scenario):
    res, k = _run(tiny, scenario)
    w = k["write"]
    assert res.status == "complete"
    assert w["ops"] == (12 if scenario == "revoke_then_check" else 24)  # grant + revoke per op
    assert w["mismatches"] == 0 and w["errors"] == 0 and w["checked"] > 0
    assert w["extra"].get("stale_allows", 0) == 0 and k["visibility"]["ops"] == w["ops"]


def test_a_backend_that_applies_writes_late_shows_visibility_lag(tiny):
    _, k = _run(tiny, "write_membership", "LaggyBackend", lag_s=0.05)
    lag = summarize(merge(k["visibility"]["hists"]))
    assert lag.p50_ms >= 45  # the fake's 50 ms, measured from the write's return
    assert k["write"]["extra"]["stale_reads"] > 0 and k["write"]["mismatches"] == 0


def test_a_backend_that_ignores_a_revocation_shows_stale_allows(tiny):
    _, k = _run(tiny, "revoke_then_check", "IgnoresRevocationBackend", n=6)
    w = k["write"]
    assert w["extra"]["stale_allows"] == 6
    assert w["error_types"] == {"NeverVisible": 6}  # and the revocation never shows: an error, counted


def test_a_backend_that_answers_wrongly_shows_mismatches(tiny):
    _, k = _run(tiny, "write_acl", "GenerousBackend", n=6)
    assert k["write"]["mismatches"] > 0 and k["write"]["examples"]


def test_a_write_never_visible_is_an_error_within_the_bound_not_a_hang(tiny):
    t0 = time.perf_counter()
    res, k = _run(tiny, "write_org_admin", "LaggyBackend", n=2, concurrency=1, lag_s=60.0)
    assert time.perf_counter() - t0 < 10  # bound 0.3 s per write: 2 ops x 2 writes
    # the grants; each revocation is visible at once
    assert k["write"]["error_types"].get("NeverVisible") == 2
    assert res.status == "incomplete"  # every op failed: the figures describe no working backend


@pytest.mark.parametrize("kind", ["revoke", "hierarchy"])
def test_an_op_stopped_midway_is_found_cleaned_up_and_counted_after_the_phase(tiny, kind):
    from authzbench.run.restore import repair_scratch
    from authzbench.systems.reference.adapter import ReferenceBackend

    ops = sample_write_ops(tiny, kind, 6)
    with ReferenceBackend({}, {"dataset_path": str(tiny.path)}) as b:
        for rel in (*ops[2].setup, ops[2].change):  # a worker stopped after writing op 2's grant
            b.write(rel)
        assert b.check(*ops[2].probe)
        rec: dict = {}
        repair_scratch(b, ops, rec)
        assert rec == {"scratch_checked": 6, "scratch_left": 1, "scratch_cleaned": 1, "scratch_still_left": 0}
        assert not any(b.check(*op.probe) or b.check(*op.control) for op in ops)


def test_a_write_phase_is_followed_by_a_check_of_every_ops_probe(tmp_path):
    from authzbench.config import BenchConfig
    from authzbench.results.store import RunStore
    from authzbench.run import orchestrate

    cfg = BenchConfig.of(backends=["reference"], provision="native", profile="tiny", concurrency=[1],
                         iterations_scale=0.05, data_dir=tmp_path / "data", scenarios=["revoke_then_check"])
    store = RunStore.create(tmp_path / "results", config={"profile": "tiny"})
    assert orchestrate.bench(cfg, store) == []
    restored = [r for r in store.records() if r["type"] == "restored"]
    assert [r["phase"] for r in restored] == [
        "reference/revoke_then_check/c1/r0", "reference/revoke_then_check/c8/r0"]
    assert all("error" not in r and r["scratch_checked"] > 0 and r["scratch_left"] == 0 for r in restored), (
        restored)


def test_after_workers_were_stopped_every_op_is_cleaned_up_waiting_out_a_dead_writers_lock(tiny):
    from authzbench.backends.locks import LockBusy
    from authzbench.run.restore import repair_scratch
    from authzbench.systems.reference.adapter import ReferenceBackend

    class DeadWritersLock(ReferenceBackend):  # the first delete finds the lock of a stopped worker
        busy = 1

        def delete(self, rel):
            if self.busy:
                self.busy -= 1
                raise LockBusy("reference: group write lock busy for 120 s")
            super().delete(rel)

    ops = sample_write_ops(tiny, "hierarchy", 5)
    with DeadWritersLock({}, {"dataset_path": str(tiny.path)}) as b:
        b.write(ops[3].setup[0])  # half done: the setup's first edge only, the probe cannot show it
        rec: dict = {}
        repair_scratch(b, ops, rec, clean_all=True)
        assert rec == {"scratch_checked": 5, "scratch_left": 0, "scratch_cleaned": 5, "scratch_still_left": 0}
        rel = ops[3].setup[0]
        assert (rel.object, rel.subject) not in b.ev.rel[rel.relation]


@pytest.mark.parametrize("scenario", WRITE_SCENARIOS)
def test_write_scenarios_warm_up_with_acl_ops_on_scratch_users_of_their_own(tiny, scenario):
    """A warm-up op of a write scenario is a cheap ACL grant and revocation whose scratch user no measured op
    uses (a slow store's hierarchy warm-up took minutes)."""
    inputs = SCENARIOS[scenario].sampler(tiny, None, 8)
    measured = {op.probe[0] for _, op, _ in inputs} | {
        r.subject for _, op, _ in inputs for r in (op.change, *op.setup)}
    warm = [w for _, _, w in inputs]
    assert all(w.kind == "acl" and w.change.relation == "resource_viewer_user" for w in warm)
    assert not {w.change.subject for w in warm} & measured
    factory = BackendFactory(
        "authzbench.systems.reference.adapter:ReferenceBackend", {}, {"dataset_path": str(tiny.path)})
    spec = PhaseSpec("reference", scenario, concurrency=2, iterations=2, warmup=4)
    recs: list[dict] = []
    assert run_phase(spec, factory, inputs, lambda r: recs.append(as_dict(r)), "thread").status == "complete"
    assert next(r for r in recs if r["type"] == "phase_end")["warmup_ops"] == 4


def test_the_report_tells_workers_still_running_from_hung_ones():
    from types import SimpleNamespace

    from authzbench.report.core.data import typed
    from authzbench.report.writes import stopped_table

    end = {
        "type": "phase_end", "backend": "mongo", "stopped_workers": 0, "hung_workers": 0,
        "status": "complete", "reason": "", "wall_s": 1.0, "scheduled": None, "dropped": 0, "warmup_ops": 0,
        "ops": 1}
    rd = SimpleNamespace(records=typed([
        {**end, "phase": "mongo/write_hierarchy/c8/r0", "scenario": "write_hierarchy", "stopped_workers": 3,
         "hung_workers": 1},
        {**end, "phase": "mongo/write_acl/c8/r0", "scenario": "write_acl"},
        {**end, "phase": "mongo/check_negative/c8/r0", "scenario": "check_negative", "stopped_workers": 2},
        {**end, "phase": "old/write_acl/c1/r0", "backend": "old", "scenario": "write_acl",
         "stopped_workers": 1, "hung_workers": None}]))  # a run recorded before hung_workers existed
    t = stopped_table(rd).set_index("phase")
    assert list(t.index) == ["mongo/write_hierarchy/c8/r0", "old/write_acl/c1/r0"]
    assert t.loc["mongo/write_hierarchy/c8/r0", ["stopped", "running", "hung"]].tolist() == [3, 2, 1]
    assert t.loc["old/write_acl/c1/r0", ["running", "hung"]].isna().all()  # unknown, not "running"


class _Session:
    """What verify_restored needs of a Session: a name and a fresh backend per call (one per client)."""

    def __init__(self, cls):
        self.name, self.cls, self.opened = "reference", cls, 0

    def backend(self, **options):
        self.opened += 1
        return self.cls({}, options)


@pytest.mark.parametrize("wrong_checks", [False, True])
def test_the_restore_check_counts_every_answer_from_its_parallel_clients(tiny, tmp_path, wrong_checks):
    from authzbench.results.store import RunStore
    from authzbench.run.restore import RESTORE_CLIENTS, RestoreOptions, verify_restored
    from authzbench.systems.reference.adapter import ReferenceBackend
    from authzbench.truth.oracle import Oracle

    class Flipped(ReferenceBackend):  # a dataset left changed: every check answers the opposite
        def check(self, user, permission, resource):
            return not super().check(user, permission, resource) if wrong_checks else super().check(
                user, permission, resource)

    sess = _Session(Flipped)
    rec = verify_restored(
        sess, tiny, Oracle(tiny), RunStore.create(tmp_path / "r"), "p1", RestoreOptions(n_checks=200))
    assert rec["checked"] == 202 and "error" not in rec, rec  # 200 checks and the two anchor lookups
    assert rec["mismatches"] == (200 if wrong_checks else 0)
    assert len(rec["examples"]) == (5 if wrong_checks else 0)
    assert sess.opened == RESTORE_CLIENTS


def test_a_warm_up_write_checks_its_probe_once_instead_of_waiting_for_it_to_show(tiny):
    """Under a 5 s snapshot window the polling made SpiceDB's two warm-up ops 18 s of every write phase: a
    warm-up op warms the write and check paths, and waiting for its write to show warms nothing more."""
    import threading

    from authzbench.measure.worker import _warm_up
    from tests.unit.fakes import LaggyBackend

    class Counting(LaggyBackend):
        checks = 0

        def check(self, user: int, perm: str, resource: int) -> bool:
            Counting.checks += 1
            return super().check(user, perm, resource)

    b = Counting({}, {"dataset_path": str(tiny.path), "lag_s": 60.0})  # its writes never show in the test
    b.connect()
    inputs = SCENARIOS["write_membership"].sampler(tiny, None, 2)
    spec = PhaseSpec(
        "laggy", "write_membership", concurrency=1, iterations=2, warmup=2, visibility_bound_s=10.0)
    assert _warm_up(b, inputs, spec, {}, 0, threading.Event()) == 2
    # per op: the grant's probe, its control, the revocation's probe, its control; polled, it would be
    # thousands
    assert Counting.checks == 2 * 4


def test_a_worker_stops_warming_up_after_a_second_once_it_ran_an_op(tiny):
    """Permify's heaviest lookup (20 s an op) warmed up for 2 ops: one op of that length is warm."""
    import threading

    from authzbench.measure.worker import WARMUP_MAX_S, _warm_up
    from authzbench.systems.reference.adapter import ReferenceBackend

    class Slow(ReferenceBackend):
        def check(self, user: int, perm: str, resource: int) -> bool:
            time.sleep(WARMUP_MAX_S * 0.6)
            return super().check(user, perm, resource)

    b = Slow({}, {"dataset_path": str(tiny.path)})
    b.connect()
    inputs = [("check", (0, "view", 0), False)] * 10  # a warm-up compares nothing
    spec = PhaseSpec("slow", "check_negative", concurrency=1, iterations=10, warmup=10)
    assert _warm_up(b, inputs, spec, {}, 0, threading.Event()) == 2  # the second op ends past the second


class _CountingBackend:
    """Records the writes and deletes a revoke op sends; `fail_delete` makes the timed revocation raise."""

    def __init__(self, ev: SimpleEvaluator, fail_delete: bool = False):
        self.ev, self.fail_delete, self.sent = ev, fail_delete, []
        self.rows_touched, self.counts_rows = 0, False

    def write(self, rel):
        self.sent.append(("write", rel))
        self.ev.add(*rel)

    def delete(self, rel):
        self.sent.append(("delete", rel))
        if self.fail_delete:
            self.fail_delete = False
            raise RuntimeError("revocation refused")
        self.ev.remove(*rel)

    def check(self, user, perm, resource):
        return self.ev.check(user, perm, resource)


class _Rec:
    def __getattr__(self, name):
        return lambda *a, **k: None


def test_a_revoke_op_deletes_its_grant_once_not_again_at_teardown(tiny):
    from authzbench.measure.visibility import run_write_op

    op = sample_write_ops(tiny, "revoke", 1)[0]
    b = _CountingBackend(SimpleEvaluator.from_dataset(tiny))
    run_write_op(b, op, _Rec(), bound_s=0.3)
    assert b.sent == [("write", op.change), ("delete", op.change)]
    assert not b.check(*op.probe)


def test_a_failed_revocation_is_deleted_at_teardown(tiny):
    from authzbench.measure.visibility import run_write_op

    op = sample_write_ops(tiny, "revoke", 1)[0]
    b = _CountingBackend(SimpleEvaluator.from_dataset(tiny), fail_delete=True)
    with pytest.raises(RuntimeError):
        run_write_op(b, op, _Rec(), bound_s=0.3)
    assert b.sent == [("write", op.change), ("delete", op.change), ("delete", op.change)]
    assert not b.check(*op.probe)


def test_the_report_says_whose_heaviest_user_was_checked_by_checks_and_keeps_the_old_wording_for_old_runs():
    from pathlib import Path

    from authzbench.report.core.data import from_records
    from authzbench.report.writes import _EVERY_PHASE_SAMPLED, restore_method

    def restored(backend, phase, checked, heavy=None):
        return {"type": "restored", "backend": backend, "phase": phase, "checked": checked, "mismatches": 0,
                "examples": [], "heavy": heavy}

    new = [restored("permify", "permify/write_membership/c1/r0", 0, ""),
           restored("permify", "permify/mixed/c8/r1", 402, "checks"),
           restored("postgres", "postgres/mixed/c8/r1", 202, "lookup")]
    text = restore_method(from_records(Path("fixture"), {}, new))
    assert "except for permify: that lookup took over 5 s an op" in text and "postgres" not in text
    old = [restored("permify", "permify/write_membership/c1/r0", 202),
           restored("permify", "permify/mixed/c8/r1", 202)]
    assert restore_method(from_records(Path("fixture"), {}, old)) == _EVERY_PHASE_SAMPLED


def _window_run(ds, scenario: str, lag_s: float, budget_s: float | None = None):
    # the default run's write budget
    budget_s = SCENARIOS[scenario].budget_s if budget_s is None else budget_s
    factory = BackendFactory(
        "tests.unit.fakes:LaggyBackend", {}, {"dataset_path": str(ds.path), "lag_s": lag_s})
    inputs = SCENARIOS[scenario].sampler(ds, None, 200)
    spec = PhaseSpec(
        "laggy", scenario, concurrency=1, iterations=200, budget_s=budget_s, visibility_bound_s=10.0,
        timeout_s=120.0, max_seconds=180.0)
    recs: list[dict] = []
    res = run_phase(spec, factory, inputs, lambda r: recs.append(as_dict(r)), "thread")
    t = phase_table(recs)
    return res, {k: t[t["kind"] == k].iloc[0] for k in t["kind"]}


@pytest.mark.slow
@pytest.mark.parametrize("scenario, changes", [("write_membership", 2), ("revoke_then_check", 1)])
def test_a_5s_visibility_window_still_gives_at_least_20_write_ops_in_the_default_write_budget(
    tiny, scenario, changes):
    """One op at a time waited ~10 s an op (its grant, then its revocation, 5 s each to show): 1 op a phase.
    In flight together, up to MAX_IN_FLIGHT ops start at once and each change of theirs is timed."""
    from authzbench.measure.inflight import MAX_IN_FLIGHT

    res, k = _window_run(tiny, scenario, lag_s=5.0)
    w, lag = k["write"], summarize(merge(k["visibility"]["hists"]))
    assert res.status == "complete"
    # every grant (revoke ops: untimed) and revocation
    assert w["ops"] >= 20 and w["ops"] == changes * MAX_IN_FLIGHT
    assert w["extra"]["revocations"] == MAX_IN_FLIGHT and w["mismatches"] == 0 and w["errors"] == 0
    assert 5000 <= lag.p50_ms < 5200  # the probe rounds resolve the 5 s lag to within a few ms


def test_a_write_phase_without_lag_is_ended_by_its_op_cap_not_its_probes(tiny):
    """A writer whose changes show at once runs op after op: the phase's 200 ops, each grant and revocation
    timed, none held back by the pipeline."""
    res, k = _window_run(tiny, "revoke_then_check", lag_s=0.0)
    assert res.status == "complete" and k["write"]["ops"] == 200 == k["write"]["extra"]["revocations"]
    assert k["write"]["extra"].get("stale_allows", 0) == 0 == k["write"]["extra"].get("stale_reads", 0)


def test_a_control_check_that_raises_fails_its_op_not_the_worker(tiny):
    """Every op's control check raises: each op is counted as failed by the error's type, the phase runs
    on."""
    from authzbench.measure.inflight import Pipeline, run_pipelined
    from authzbench.measure.worker import _WriteRecorder

    class ControlFails:
        rows_touched, counts_rows = 0, False

        def __init__(self, ops):
            self.controls, self.edges = {op.control for op in ops}, set()

        def write(self, rel):
            self.edges.add(rel)

        def delete(self, rel):
            self.edges.discard(rel)

        def check(self, u, perm, r):
            if (u, perm, r) in self.controls:
                raise ConnectionResetError("gone")
            return any(rel.subject == u for rel in self.edges)

    ops = sample_write_ops(tiny, "acl", 5)
    rec = _WriteRecorder({}, 5)
    run_pipelined(Pipeline(ControlFails(ops), rec, 0.3), ops, lambda: False)
    assert rec.kinds["write"].errors == {"ConnectionResetError": 5} and rec.kinds["write"].ops == 5
