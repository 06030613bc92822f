"""The churn sweep's measurement against fakes: a step's intervals carry the data contract the report reads,
revocations a backend ignores are counted as stale allows, and the sweep stops at the first step whose reads
leave the SLO, the higher ones skipped with that reason."""

from __future__ import annotations

import pytest

from authzbench.config import BenchConfig, Churn
from authzbench.core.errors import UserError
from authzbench.core.records import Interval, as_dict, decode
from authzbench.measure.inflight import CHURN_EXTRAS
from authzbench.measure.runner import BackendFactory, run_phase
from authzbench.run.phase_plan import CHURN_READERS, _churn_specs
from authzbench.truth.social_oracle import oracle_for
from authzbench.workloads.catalog import SCENARIOS
from authzbench.workloads.churn import ChurnSweep, Step, step_of

COMMON = dict(backend="fake", scenario="churn", warmup=10, timeout_s=60.0, max_seconds=120.0, repeat=0)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    from authzbench.generator import generate

    return generate("tiny", tmp_path_factory.mktemp("d") / "tiny")


@pytest.fixture(scope="module")
def inputs(tiny):
    return SCENARIOS["churn"].sampler(tiny, oracle_for(tiny), 200)


def _step(
    ds, inputs, spec, cls: str = "tests.unit.fakes:ChurnSlowBackend", **opts) -> tuple[object, list[dict]]:
    factory = BackendFactory(cls, {}, {"dataset_path": str(ds.path), **opts})
    recs: list[dict] = []
    res = run_phase(spec, factory, inputs, lambda r: recs.append(as_dict(r)), "thread")
    return res, recs


def _specs(rates: list[float], **kw):
    return _churn_specs(Churn(rates=rates, read_rate=40.0, step_s=2.0, **kw), COMMON)


def _writes(recs: list[dict]) -> dict:
    out: dict = {"ops": 0, "late": 0, "errors": {}}
    for r in recs:
        if r["type"] == "interval" and r["kind"] == "write":
            out["ops"] += r["ops"]
            out["late"] += r["late"]
            for k, v in (r["extra"] or {}).items():
                out[k] = out.get(k, 0) + v
            for k, v in r["errors"].items():
                out["errors"][k] = out["errors"].get(k, 0) + v
    return out


def test_a_churn_step_carries_the_contracts_phase_id_kinds_and_extras(tiny, inputs):
    spec = _specs([10.0])[0]
    assert spec.phase_id == f"fake/churn/open{CHURN_READERS + 2}@40+churn10/r0"
    res, recs = _step(tiny, inputs, spec, "authzbench.systems.reference.adapter:ReferenceBackend")
    start = next(r for r in recs if r["type"] == "phase_start")
    assert (start["churn_rate"], start["churn_writers"], start["mode"]) == (10.0, 2, "open")
    assert start["stages"] == [[40.0, 2.0]] or start["stages"] == [(40.0, 2.0)]
    kinds = {r["kind"] for r in recs if r["type"] == "interval"}
    assert kinds == {"check", "write", "visibility"}
    w = _writes(recs)
    assert set(CHURN_EXTRAS) <= set(w) and w["scheduled"] == 20 and w["unissued"] == 0
    # one op a change; grants' revocations and revoke ops'
    assert w["ops"] == 20 and 0 < w["revocations"] < 20
    assert w["stale_allows"] == 0 == w["stale_reads"] and w["errors"] == {}
    # the changes and probes are not the checks' schedule
    assert res.status == "complete" and res.dropped == 0
    step = step_of([decode(r) for r in recs if r["type"] == "interval"])
    assert step.scheduled == 20 and step.late == 0 and step.read_p95_ms is not None


def test_revocations_a_backend_ignores_are_counted_as_stale_allows_in_a_churn_step(tiny, inputs):
    spec = _specs([10.0])[0]
    spec.visibility_bound_s = 0.3  # a revocation never shows: bounded, then NeverVisible
    _, recs = _step(tiny, inputs, spec, "tests.unit.fakes:IgnoresRevocationBackend")
    w = _writes(recs)
    assert w["revocations"] > 0 and w["stale_allows"] == w["revocations"]
    assert w["errors"]["NeverVisible"] == w["revocations"]


@pytest.mark.slow
def test_the_sweep_stops_at_the_first_step_whose_reads_slow_past_the_slo_with_the_write_rate(tiny, inputs):
    """Checks cost 5 ms per write of the last second: ~10 ms at 2 changes/s, ~25 ms at 5/s, ~1 s at 200/s,
    against a 250 ms SLO. With 0.2 ms a write and a 25 ms SLO, CI once saw the 5/s step's p95 at 81.6 ms (2
    cores, after the backend tests): at 40 checks/s for 2 s, one ~100 ms stall of the process delays the 4
    checks a p95 of 80 reads turns on. A stall now has to pass ~215 ms to move the stop."""
    sweep, ran, skipped = ChurnSweep(slo_ms=250.0, freshness_s=10.0), [], []
    for spec in _specs([2.0, 5.0, 200.0, 400.0]):
        if why := sweep.stopped(spec):
            skipped.append((spec.churn_rate, why))
            continue
        tap = sweep.tap(spec)
        _, recs = _step(tiny, inputs, spec)
        tap += [decode(r) for r in recs if r["type"] == "interval"]
        ran.append(spec.churn_rate)
        sweep.judge(tap)
    assert ran == [2.0, 5.0, 200.0], sweep.reason
    assert skipped == [(400.0, sweep.reason)] and "over the 250 ms SLO" in sweep.reason


def test_a_step_is_computed_from_its_intervals_late_and_unissued_changes_together():
    from authzbench.core.metrics import encode, new_histogram

    def hist(*us: int) -> str:
        h = new_histogram()
        for v in us:
            h.record_value(v)
        return encode(h)

    ivs = [_iv(kind="check", hist=hist(*[1000] * 19, 40_000), ops=20, errors={"Boom": 1}),
           _iv(kind="write", hist=hist(500), ops=1, late=2, extra={"scheduled": 10, "unissued": 1},
               errors={"NeverVisible": 1, "OSError": 2}),
           _iv(kind="visibility", hist=hist(2_000_000), ops=1)]
    step = step_of(ivs)
    assert step == Step(read_p95_ms=pytest.approx(1.0, rel=0.01), scheduled=10, late=3, never_visible=1,
                        lag_p95_s=pytest.approx(2.0, rel=0.01), read_errors=1, write_errors=2)


def _iv(**fields) -> Interval:
    """An Interval record with what a test does not care about filled in."""
    base = dict(phase="p", backend="b", scenario="s", worker=0, kind="check", hist="", ops=0, errors={},
                timeouts=0, mismatches=0, examples=[], results=0, duplicates=0, checked=0, late=0, extra={})
    return Interval(**{**base, **fields})


def _write_phase_tap(*write_us: int) -> list[Interval]:
    from authzbench.core.metrics import encode, new_histogram

    h = new_histogram()
    for v in write_us:
        h.record_value(v)
    return [_iv(kind="write", hist=encode(h), ops=len(write_us)),
            _iv(kind="visibility", hist=encode(h), ops=len(write_us))]


def test_a_step_the_write_phases_show_cannot_keep_its_schedule_is_foreseen_and_not_run():
    # 2 writers: 2 s a change each at 1/s, 0.2 s at 10/s; a quickest write over that plus 1 s makes every
    # change after a writer's first start over 1 s late
    one, ten = _churn_specs(Churn(rates=[1.0, 10.0], read_rate=40.0, step_s=6.0), COMMON)
    write_phase = one.__class__(**{**COMMON, "scenario": "write_membership", "concurrency": 1})
    for quickest_s, at_one in ((3.5, True), (2.5, False)):
        sweep = ChurnSweep(slo_ms=250.0, freshness_s=10.0)
        assert sweep.tap(write_phase) == []
        sweep.judge(_write_phase_tap(int(quickest_s * 1e6), int(quickest_s * 2e6)))
        assert sweep.foreseen(ten).startswith(f"its quickest write took {quickest_s:g} s")
        why = sweep.stopped(one)
        assert bool(why) is at_one
    assert why == "" and sweep.tap(one) == []  # 1/s at 2.5 s runs: it may hold
    sweep = ChurnSweep(slo_ms=250.0, freshness_s=10.0)
    sweep.tap(write_phase)
    sweep.judge(_write_phase_tap(3_500_000))
    assert sweep.stopped(one).startswith("foreseen: its quickest write took 3.5 s") and "4 of 6 changes" in \
        sweep.stopped(one)
    assert sweep.stopped(ten) == sweep.stopped(one)  # a higher rate is not run either


def test_a_read_or_many_writer_phase_foretells_nothing():
    sweep = ChurnSweep(slo_ms=250.0, freshness_s=10.0)
    for scenario, workers in (("check_view_via_group_member", 1), ("write_membership", 8)):
        assert (
            sweep.tap(_specs([1.0])[0].__class__(**{**COMMON, "scenario": scenario, "concurrency": workers}))
            is None
        )
        sweep.judge(None)
    assert sweep.fastest_write_s is None and sweep.stopped(_specs([1.0])[0]) == ""


def test_churn_steps_are_planned_ascending_in_the_first_round_and_recorded_in_the_manifest(tiny):
    from authzbench.config import MixedLoad, Schedule
    from authzbench.run.phase_plan import BackendTraits, phase_specs

    sched = Schedule(scenarios=["churn"], rounds=2, visits=2)
    specs = phase_specs(sched, MixedLoad(), BackendTraits("postgres"), tiny, Churn(rates=[1.0, 10.0]))
    assert [(s.churn_rate, s.repeat, s.concurrency, s.churn_writers) for s, _ in specs] == \
        [(1.0, 0, CHURN_READERS + 2, 2), (10.0, 0, CHURN_READERS + 2, 2)]
    cfg = BenchConfig.of(churn={"rates": [1.0, 5.0], "read_rate": 50.0, "step_s": 3.0, "writers": 1,
                                "freshness_s": 5.0})
    assert cfg.to_manifest()["churn"] == {"rates": [1.0, 5.0], "read_rate": 50.0, "step_s": 3.0, "writers": 1,
                                          "freshness_s": 5.0, "mix": None}  # None: CHURN_MIX


@pytest.mark.parametrize("bad, message",
                         [(dict(rates=[10.0, 1.0]), "ascend"), (dict(rates=[]), "--churn-rates"),
                          (dict(writers=0), "--churn-writers"), (dict(step_s=0.0), "--churn-step"),
                          (dict(read_rate=float("inf")), "--churn-read-rate")])
def test_bad_churn_options_are_one_line_naming_the_option(bad, message):
    with pytest.raises(UserError, match=message):
        Churn(**bad).validate()


def test_bench_runs_the_sweep_until_a_step_fails_and_records_the_higher_steps_as_skipped(
    tmp_path, monkeypatch):
    """Through orchestrate.bench on the reference backend: a check SLO no backend meets fails the first
    step."""
    from authzbench.results.store import RunStore
    from authzbench.run import orchestrate, phase

    monkeypatch.setenv("AUTHZBENCH_STATE", str(tmp_path / "state"))
    restored: list[tuple[str, int]] = []
    monkeypatch.setattr(phase, "verify_restored", lambda sess, ds, o, store, pid, opts:
                        restored.append((pid, len(opts.write_ops or []))))
    cfg = BenchConfig.of(backends=["reference"], provision="native", profile="tiny", scenarios=["churn"],
                         concurrency=[1], rounds=1, visits=1, data_dir=tmp_path / "data",
                         slo={"check_p95_ms": 1e-6},
                         churn={"rates": [1.0, 2.0, 4.0], "read_rate": 20.0, "step_s": 1.0, "writers": 1,
                                "freshness_s": 10.0})
    store = RunStore.create(tmp_path / "results")
    assert orchestrate.bench(cfg, store) == []
    recs = list(store.records())
    ran = [r["phase"] for r in recs if r["type"] == "phase_end"]
    skipped = [(r["phase"], r["reason"]) for r in recs if r["type"] == "phase_skipped"]
    assert ran == ["reference/churn/open9@20+churn1/r0"]
    assert [p for p, _ in skipped] == [
        "reference/churn/open9@20+churn2/r0", "reference/churn/open9@20+churn4/r0"]
    assert all("over the 1e-06 ms SLO" in why for _, why in skipped)
    assert store.manifest()["config"]["churn"]["rates"] == [1.0, 2.0, 4.0]
    assert restored == [(ran[0], 0)]  # ended cleanly: its writers cleaned up what they held


def test_the_restore_check_repairs_the_ops_a_write_phases_workers_started_and_their_warm_up_ops():
    from authzbench.run.restore import touched_ops
    from authzbench.workloads.spec import PhaseSpec

    inputs = [("structural", f"op{k}", f"warm{k}") for k in range(20)]
    spec = PhaseSpec("b", "write_acl", concurrency=2, iterations=20, warmup=2)
    ivs = [_iv(kind="write", worker=0, extra={"started": 2}), _iv(kind="write", worker=1, extra={}),
           _iv(kind="write", worker=1, extra={"started": 1}), _iv(kind="visibility", worker=0, extra={})]
    assert touched_ops(spec, inputs, ivs, clean=True) == ["op0", "op1", "op2", "warm0", "warm1"]
    assert len(touched_ops(spec, inputs, ivs, clean=False)) == 40  # a worker stopped: every op and warm-up op


def test_a_churn_steps_changes_are_probed_a_gap_apart_so_the_probes_do_not_crowd_out_the_checks(tiny, inputs):
    """A 1 s lag: each change is probed right after its write, then every CHURN_PROBE_GAP_S until it shows, so
    ~1 / gap stale probes a change (back to back, a worker probed hundreds of times a second)."""
    from authzbench.core.metrics import merge, summarize
    from authzbench.measure.inflight import CHURN_PROBE_GAP_S

    spec = _specs([10.0])[0]
    _, recs = _step(tiny, inputs, spec, "tests.unit.fakes:LaggyBackend", lag_s=1.0)
    w = _writes(recs)
    lag = summarize(merge([r["hist"] for r in recs if r["type"] == "interval" and r["kind"] == "visibility"
                           and r["ops"]]))
    assert w["ops"] == 20 and w["late"] == 0 and w["unissued"] == 0
    assert 1000 <= lag.p50_ms <= 1000 + 1000 * CHURN_PROBE_GAP_S + 100  # resolved to within the gap
    assert w["stale_reads"] <= w["ops"] * (1 / CHURN_PROBE_GAP_S + 2)
