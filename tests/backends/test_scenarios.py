"""The scenario suite, per selected backend: every answer equals the oracle's, and each scenario is
timed with pytest-benchmark (pedantic, warm-up rounds, deterministic inputs), its JSON carrying the
p95/p99 from the suite's own histograms.

    pytest --backend postgres                      # one backend
    pytest --backend all --benchmark-json out.json # every backend that can run here
"""

from __future__ import annotations

import itertools
import time

import pytest

from authzbench.core.metrics import encode, new_histogram, summarize
from authzbench.core.records import Interval, PhaseEnd, PhaseStart, as_dict
from authzbench.measure.runner import run_phase
from authzbench.schema.model import Relationship
from authzbench.systems import systems
from authzbench.workloads.catalog import SCENARIOS
from authzbench.workloads.spec import PhaseSpec

CHECKS = [n for n, s in SCENARIOS.items() if s.op == "check"]
LOOKUPS = [n for n, s in SCENARIOS.items() if s.op == "lookup"]


def _offers_lookups(name: str) -> bool:
    """False for a system that declares no reverse lookup (its own test proves the adapter refuses one by
    name)."""
    declared = systems().get(name)
    return not (declared and declared.no_lookup)


def _lookups_or_skip(name: str) -> None:
    if not _offers_lookups(name):
        pytest.skip(f"{name}: {systems()[name].no_lookup}")


@pytest.fixture(autouse=True)
def _model_matches(request):
    """Run each scenario only under its model (`--model rebac|social`)."""
    model = request.config.getoption("model")
    scen = request.node.callspec.params.get("scenario") if hasattr(request.node, "callspec") else None
    wanted = SCENARIOS[scen].model if scen else "rebac"
    if wanted != model and not request.node.get_closest_marker("any_model"):
        pytest.skip(f"a {wanted} scenario; this run uses --model {model}")


def _options(request, correctness: bool) -> dict:
    # Correctness runs fully consistent (SpiceDB's import returns no token); timing runs what production uses.
    if correctness:
        return {"consistency": "fully_consistent"}
    strict = request.config.getoption("tier") == "strict"  # the strict tier times fully consistent reads
    return {"consistency": request.config.getoption("consistency") or
            ("fully_consistent" if strict else "minimize_latency")}


def _record(store, backend: str, scenario: str, kind: str, hist, checked: int, mismatches: int, wall: float,
            examples: list, answer: list | None = None) -> None:
    """Write the same records as the runner, so `--report` renders this pytest run (a lookup's `answer`
    as streamed: its repeated resources are the report's Duplicates)."""
    answer = answer or []
    phase = f"{backend}/{scenario}/c1/r0"
    ops = hist.get_total_count()
    store.append(PhaseStart(phase=phase, backend=backend, scenario=scenario, mode="closed", concurrency=1,
                            iterations=ops, budget_s=None, repeat=0, stages=[]))
    store.append(
        Interval(
            phase=phase, backend=backend, scenario=scenario, worker=0, kind=kind, hist=encode(hist), ops=ops,
            errors={}, timeouts=0, mismatches=mismatches, examples=examples[:5], results=len(answer),
            duplicates=len(answer) - len(set(answer)), checked=checked, late=0))
    store.append(PhaseEnd(phase=phase, backend=backend, scenario=scenario, status="complete", reason="",
                          wall_s=wall, scheduled=None, dropped=0, warmup_ops=0, ops=ops))


def _bench(benchmark, request, fn, inputs, rounds: int, warmup: int):
    hist = new_histogram()
    it = itertools.cycle(inputs)
    calls = itertools.count()

    def one():
        args = next(it)
        t0 = time.perf_counter_ns()
        fn(*args)
        if next(calls) >= warmup:  # pedantic runs the warm-up rounds first: keep them out of the figures
            hist.record_value(max(1, (time.perf_counter_ns() - t0) // 1000))

    benchmark.pedantic(one, rounds=rounds, iterations=1, warmup_rounds=warmup)
    s = summarize(hist)
    benchmark.extra_info.update({"p50_ms": s.p50_ms, "p95_ms": s.p95_ms, "p99_ms": s.p99_ms,
                                 "max_ms": s.max_ms, "ops": s.count, "source": "authzbench HdrHistogram"})
    return hist


@pytest.mark.parametrize("scenario", CHECKS)
def test_check_answers_equal_the_oracle(request, benchmark, live, backend_name, dataset, oracle, run_store,
                                        scenario):
    inputs = SCENARIOS[scenario].sampler(dataset, oracle, 200)
    t0 = time.perf_counter()
    with live.backend(**_options(request, True)) as b:
        got = [(args, exp, b.check(*args)) for _, args, exp in inputs]
    wrong = [{"args": list(a), "expected": e, "got": g} for a, e, g in got if g != e]
    with live.backend(**_options(request, False)) as b:
        hist = _bench(benchmark, request, b.check, [a for _, a, _ in inputs],
                      request.config.getoption("rounds"), 20)
    _record(run_store, backend_name, scenario, "check", hist, len(got), len(wrong), time.perf_counter() - t0,
            wrong)
    assert not wrong, f"{len(wrong)}/{len(got)} answers differ from the oracle, e.g. {wrong[:3]}"


@pytest.mark.parametrize("scenario", LOOKUPS)
def test_lookup_answers_equal_the_oracle(request, benchmark, live, backend_name, dataset, oracle, run_store,
                                         scenario):
    _lookups_or_skip(backend_name)
    (_, args, expected), = SCENARIOS[scenario].sampler(dataset, oracle, 1)
    t0 = time.perf_counter()
    with live.backend(**_options(request, True)) as b:
        got = list(b.lookup_resources(*args))
    with live.backend(**_options(request, False)) as b:
        hist = _bench(benchmark, request, lambda u, p: list(b.lookup_resources(u, p)), [args], 20, 2)
    ok = sorted(set(got)) == list(expected)
    _record(run_store, backend_name, scenario, "lookup", hist, 1, 0 if ok else 1, time.perf_counter() - t0,
            [] if ok else [{"args": list(args), "expected": len(expected), "got": len(set(got))}], got)
    assert ok, (f"lookup{args}: {len(set(got))} resources, oracle {len(expected)}; missing "
                f"{sorted(set(expected) - set(got))[:5]}, extra {sorted(set(got) - set(expected))[:5]}")


def test_every_users_lookups_equal_the_oracle(request, live, backend_name, dataset, oracle):
    """Beyond the two anchor users: every user of the dataset (tiny) or a sample of 200."""
    _lookups_or_skip(backend_name)
    users = range(dataset.entities["user"])
    if len(users) > 200:
        users = range(0, dataset.entities["user"], dataset.entities["user"] // 200)
    bad = []
    with live.backend(**_options(request, True)) as b:
        for u in users:
            for perm in ("manage", "view"):
                got = sorted(set(b.lookup_resources(u, perm)))
                if got != oracle.lookup_resources(u, perm):
                    bad.append((u, perm, len(got), len(oracle.lookup_resources(u, perm))))
    assert not bad, f"{len(bad)} (user, perm) lookups differ: {bad[:5]}"


def test_writes_and_deletes_are_visible_to_checks_and_lookups(request, live, backend_name, dataset):
    lookups = _offers_lookups(backend_name)  # where there is none, the checks alone
    scratch = dataset.entities["user"] + 100  # a user id no relationship mentions
    rel = Relationship("resource_viewer_user", 0, scratch)
    with live.backend(**_options(request, True)) as b:
        assert not b.check(scratch, "view", 0)
        b.write(rel)
        try:
            assert b.check(scratch, "view", 0)
            assert not b.check(scratch, "manage", 0)
            assert not lookups or 0 in set(b.lookup_resources(scratch, "view"))
        finally:
            b.delete(rel)
        assert not b.check(scratch, "view", 0)
        assert not lookups or 0 not in set(b.lookup_resources(scratch, "view"))


@pytest.mark.any_model
def test_trivial_round_trip_is_measured_for_comparison(request, benchmark, live, backend_name, run_store):
    with live.backend(**_options(request, False)) as b:
        hist = _bench(benchmark, request, b.baseline_roundtrip, [()], request.config.getoption("rounds"), 20)
    _record(run_store, backend_name, "roundtrip", "roundtrip", hist, 0, 0, 0.0, [])
    assert hist.get_total_count() == request.config.getoption("rounds")


WRITES = [n for n, s in SCENARIOS.items() if s.op == "write"]


@pytest.mark.parametrize("scenario", WRITES)
def test_structural_writes_are_visible_revocations_hold_and_the_data_is_restored(request, live, backend_name,
                                                                                 dataset, oracle, run_store,
                                                                                 scenario):
    """The write scenario through the real runner, fully consistent reads: every write becomes visible
    within the bound, no revoked user is still allowed, no read is wrong, and afterwards checks and the
    anchor lookups equal the pristine oracle again."""
    from authzbench.backends.registry import backend_class
    from authzbench.report.core.data import phase_table
    from authzbench.run.restore import RestoreOptions, verify_restored

    if dataset.model != "rebac":
        pytest.skip("write scenarios are rebac scenarios")
    inputs = SCENARIOS[scenario].sampler(dataset, oracle, 6)
    recs: list[dict] = []
    spec = PhaseSpec(backend_name, scenario, concurrency=2, iterations=6, warmup=0, max_seconds=120)
    # Two workers write at once: read-your-writes needs the write's own token where an engine has one.
    # fully_consistent allowed after a revocation under concurrent writers (reports/20261126-045830: SpiceDB
    # 8 and Permify 16 of 201 at 8 workers; 0 of 201 with the token, 20261126-051556).
    modes = backend_class(backend_name).consistency_modes
    opts = {"consistency": "at_least_as_fresh"} if "at_least_as_fresh" in modes else _options(request, True)
    res = run_phase(
        spec, live.factory(**opts), inputs, lambda r: (recs.append(as_dict(r)), run_store.append(r)),
        backend_class(backend_name).concurrency)
    t = phase_table(recs).set_index("kind")
    w = t.loc["write"]
    assert w["mismatches"] == 0 and w["errors"] == 0, (w["error_types"], w["examples"])
    assert res.status == "complete", res.reason
    assert w["extra"].get("stale_allows", 0) == 0 and t.loc["visibility", "ops"] == w["ops"]
    restored = verify_restored(live, dataset, oracle, run_store, spec.phase_id, RestoreOptions(n_checks=60))
    assert restored["mismatches"] == 0 and not restored.get("error"), restored


def test_a_churn_step_keeps_every_read_right_and_every_change_visible_and_restores_the_data(
    request, live, backend_name, dataset, oracle, run_store):
    """One churn step through the real runner (checks at a fixed rate while structural changes arrive): no
    read or probe is wrong, every issued change becomes visible within the bound, the step is judged by the
    one rule, and afterwards the data equals the pristine oracle again."""
    from authzbench.backends.registry import backend_class
    from authzbench.core.records import decode
    from authzbench.report.core.data import phase_table
    from authzbench.run.restore import RestoreOptions, verify_restored
    from authzbench.workloads.churn import step_of

    if dataset.model != "rebac":
        pytest.skip("the churn sweep is a rebac scenario")
    inputs = SCENARIOS["churn"].sampler(dataset, oracle, 40)
    recs: list[dict] = []
    spec = PhaseSpec(backend_name, "churn", mode="open", concurrency=3, start_rate=20.0, stages=[(20.0, 2.0)],
                     churn_rate=5.0, churn_writers=1, timeout_s=60.0, max_seconds=120,
                     scratch_user=dataset.entities["user"])
    res = run_phase(
        spec, live.factory(**_options(request, True)), inputs,
        lambda r: (recs.append(as_dict(r)), run_store.append(r)), backend_class(backend_name).concurrency)
    t = phase_table(recs).set_index("kind")
    for kind in ("check", "write"):
        assert t.loc[kind, "mismatches"] == 0 and t.loc[kind, "errors"] == 0, (t.loc[kind, "error_types"],
                                                                                t.loc[kind, "examples"])
    assert res.status == "complete", res.reason
    step = step_of([decode(r) for r in recs if r.get("type") == "interval"])
    assert step.scheduled == 10 and step.never_visible == 0 and t.loc["visibility", "ops"] > 0
    restored = verify_restored(live, dataset, oracle, run_store, spec.phase_id, RestoreOptions(n_checks=60))
    assert restored["mismatches"] == 0 and not restored.get("error"), restored
