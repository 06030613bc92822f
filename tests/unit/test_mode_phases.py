"""The phases an engine's read consistency modes add (issue 53): revoke_then_check at 8 concurrent writers in
every mode, the via-group check at 1 worker in each mode the run does not read with."""

from __future__ import annotations

import pytest

from authzbench.config import MixedLoad, Schedule
from authzbench.run.phase_plan import REVOKE_WRITERS, BackendTraits, phase_specs

SPICEDB = ("minimize_latency", "at_least_as_fresh", "fully_consistent")


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    from authzbench.generator import generate

    return generate("tiny", tmp_path_factory.mktemp("d") / "tiny")


def _plan(ds, scenarios: list[str], modes: tuple[str, ...], chosen: str = ""):
    sched = Schedule(scenarios=scenarios, rounds=2, visits=2)
    return [
        s for s, _ in phase_specs(sched, MixedLoad(), BackendTraits("engine", "process", modes, chosen), ds)]


def test_revoke_then_check_runs_at_8_writers_in_every_mode_beside_its_1_writer_phase(tiny):
    specs = _plan(tiny, ["revoke_then_check"], SPICEDB)
    assert sorted((s.concurrency, s.consistency) for s in specs) == \
        sorted([(1, ""), *((REVOKE_WRITERS, m) for m in SPICEDB)])
    assert all(s.repeat == 0 and s.iterations == 200 for s in specs)  # whole, in the first round
    assert "revoke_then_check@fully_consistent/c8/r0" in {s.phase_id.split("/", 1)[1] for s in specs}


def test_a_backend_without_modes_runs_revoke_then_check_at_8_writers_once(tiny):
    assert sorted((s.concurrency, s.consistency) for s in _plan(tiny, ["revoke_then_check"], ())) == \
        [(1, ""), (REVOKE_WRITERS, "")]


def test_the_via_group_check_runs_at_1_worker_in_each_other_mode_bounded_like_a_read_phase(tiny):
    specs = _plan(tiny, ["check_view_via_group_member"], SPICEDB, chosen="minimize_latency")
    per_mode = [s for s in specs if s.consistency]
    assert sorted(s.consistency for s in per_mode) == ["at_least_as_fresh", "fully_consistent"]
    assert all(
        s.concurrency == 1 and s.budget_s == 4.0 and s.min_ops == 20 and s.repeat == 0 for s in per_mode)
    assert {s.phase_id for s in per_mode} == {"engine/check_view_via_group_member@at_least_as_fresh/c1/r0",
                                              "engine/check_view_via_group_member@fully_consistent/c1/r0"}
    # the run's own mode keeps its rounds: half the budget each
    assert {(s.concurrency, s.budget_s) for s in specs if not s.consistency} == {
        (1, 2.0), (8, 2.0), (32, 2.0)}


def test_revoke_then_check_at_8_writers_is_skipped_where_its_1_writer_phase_ran_far_past_its_budget():
    from authzbench.run.phase_plan import Pace
    from authzbench.workloads.spec import PhaseSpec

    pace = Pace(cores=2)
    one = PhaseSpec("mongo", "revoke_then_check", concurrency=1, budget_s=6.0)
    eight = PhaseSpec("mongo", "revoke_then_check", concurrency=REVOKE_WRITERS, budget_s=6.0, consistency="")
    assert pace.too_slow(eight, "write") == ""
    pace.note(one, "write", ops=2, wall_s=38.9)  # FerretDB's in 20261128-160246
    assert "queue behind" in pace.too_slow(eight, "write")
    fast = Pace(cores=2)
    fast.note(one, "write", ops=400, wall_s=8.8)  # a 5 s window's drain past a 6 s budget: not slow writes
    assert fast.too_slow(eight, "write") == ""


def test_a_drain_or_a_21s_revocation_past_a_3s_budget_is_not_slow_enough_to_skip_8_writers():
    from authzbench.run.phase_plan import Pace
    from authzbench.workloads.spec import PhaseSpec

    one = PhaseSpec("mongo", "revoke_then_check", concurrency=1, budget_s=3.0)
    eight = PhaseSpec("mongo", "revoke_then_check", concurrency=REVOKE_WRITERS, budget_s=3.0)
    # OpenFGA's drain; FerretDB's fast, slow
    for wall, skipped in ((11.9, False), (21.1, False), (33.7, True)):
        pace = Pace(cores=2)
        pace.note(one, "write", ops=2, wall_s=wall)
        assert bool(pace.too_slow(eight, "write")) is skipped, wall
        assert pace.too_slow(one, "write") == ""  # the 1-writer phase itself always runs
