"""Sentences of the report that said what their own numbers contradicted (issue 67, item 6): each is computed
from the figures or records beside it."""

from __future__ import annotations

import pytest

from authzbench.report import decision
from authzbench.report.core import declared, staleness
from tests.unit.test_report_findings import NET, Run


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    from authzbench.generator import generate

    return generate("tiny", tmp_path_factory.mktemp("d") / "tiny")


def test_the_read_leader_pays_only_where_a_backend_is_clearly_better_on_the_write_side():
    line = decision._leader_line("postgres", [(True, "membership write p95 5.32 ms (ab)"),
                                              (False, "rows touched 360 rows (d) (best: spicedb-pg 1 row)"),
                                              (True, "stale allows 0 (a)")])
    assert (
        "pays on the write side in 1 of 3 write needs: rows touched 360 rows (d) (best: spicedb-pg 1 row);"
        in line)
    assert "it leads the other 2: membership write p95 5.32 ms (ab); stale allows 0 (a)." in line


def test_a_read_leader_first_in_every_write_need_pays_nothing():
    line = decision._leader_line("postgres", [(True, "a (a)"), (True, "b (a)")])
    assert ("pays nothing on the write side: none clearly better in all 2 write needs" in line
            and " pays on" not in line)


def test_a_read_leader_behind_in_every_write_need_pays_in_every_one():
    line = decision._leader_line("postgres", [(False, "a, rank 2"), (False, "b, rank 3")])
    assert "pays on the write side in every write need: a, rank 2; b, rank 3." in line and "leads" not in line


def test_the_tier_line_names_the_mode_each_engine_read_in_from_its_server_record():
    from authzbench.report import overview

    run = Run().server("postgres", NET)
    for b, mode in [("spicedb-pg", "minimize_latency"), ("openfga", "minimize_latency"),
                    ("permify", "at_least_as_fresh")]:
        run.server(b, {**NET, "label": b, "consistency": mode})
    assert overview.session_modes(run.data()) == ("minimize_latency (spicedb-pg, openfga) and "
                                              "at_least_as_fresh (permify)")


def test_the_outside_reproduction_is_claimed_for_spicedb_only_and_cites_the_same_reports_everywhere():

    rd = (Run()
          .server("spicedb-pg", {**NET, "label": "SpiceDB"})
          .server("permify", {**NET, "label": "Permify"})
          .data())
    note = staleness.strict_stale_note(
        rd, [("spicedb-pg", "fully_consistent"), ("permify", "fully_consistent")])
    assert "spicedb-pg: reproduced outside the suite with SpiceDB's public API alone" in note
    assert "permify: not reproduced outside the suite" in note and "permify: reproduced" not in note
    urls = declared.stale_reports("spicedb-pg")
    assert len(urls) == 3 and all(u in note for u in urls) and "(none for permify)" in note
    permify_only = staleness.strict_stale_note(rd, [("permify", "fully_consistent")])
    assert ("newenemy_repro.py` speaks SpiceDB's API only" in permify_only
            and "no upstream report found" in permify_only)


def test_the_appendix_and_the_report_cite_the_reproduction_in_one_sentence():
    import pandas as pd

    from authzbench.report.writes import _strict_stale_allows

    rd = Run().server("spicedb-pg", {**NET, "label": "SpiceDB"}).data()
    rows = pd.DataFrame([{"backend": "spicedb-pg", "consistency": "fully_consistent", "stale_allows": 3}])
    assert _strict_stale_allows(rd, rows)[1] == staleness.strict_stale_note(
        rd, [("spicedb-pg", "fully_consistent")])


def _churn_run(rates: list[float]):
    run = Run().server("permify", {**NET, "label": "Permify"})
    for rate in rates:
        run.phase("permify", "churn", [[30.0] * 20])
        next(r for r in reversed(run.recs) if r["type"] == "phase_start")["churn_rate"] = rate
    skipped = {
        "type": "phase_skipped", "phase": "permify/churn/open10@100+churn10/r0", "backend": "permify",
        "scenario": "churn", "concurrency": 10, "repeat": 0, "reason": "check p95 338 ms over the 25 ms SLO"}
    run.recs.append(skipped)
    return run.data()


def test_a_churn_step_skipped_after_a_lower_step_failed_names_that_step_not_a_timeout_prediction():
    from authzbench.report import validity

    text = "\n".join(validity._stops(_churn_run([1.0]), None, None))
    assert "not run: the 1/s step did not hold, and no higher rate holds better: check p95 338 ms" in text
    assert "past its timeout" not in text


def test_skips_foreseen_from_the_write_phases_and_queued_writers_say_so():
    from authzbench.report.validity import _skip_cause

    assert "1-writer write phases" in _skip_cause("foreseen: its quickest write took 12.7 s", "churn", None)
    assert "1-writer phase ran far past its budget" in _skip_cause(
        "at 1 writer the phase took 29 s for its 3 s budget (its ops outlast it)", "revoke_then_check")
    assert "past its timeout" in _skip_cause("predicted 80 s an op, over its 60 s timeout: ...", "lookup")


def _mode_run():
    """A via-group check in the session mode in 2 rounds and in a named mode in one, with twice the budget."""
    run = Run().server("openfga", {**NET, "label": "OpenFGA", "consistency": "minimize_latency"})
    for rnd in (0, 1):
        run.phase("openfga", "check_view_via_group_member", [[3.0] * 30], repeat=rnd)
        next(r for r in reversed(run.recs) if r["type"] == "phase_start").update(
            iterations=32_000, budget_s=2.0, min_ops=10)
    first = len(run.recs)
    run.phase("openfga", "check_view_via_group_member", [[3.0] * 30])
    next(r for r in reversed(run.recs) if r["type"] == "phase_start").update(
        iterations=64_000, budget_s=4.0, min_ops=20, consistency="fully_consistent")
    for r in run.recs[first:]:  # the named mode's phase id, as phase_plan names it
        if "phase" in r:
            r["phase"] = "openfga/check_view_via_group_member@fully_consistent/c1/r0"
    return run.data()


def test_the_method_gives_a_named_mode_its_own_budget_and_the_rounds_it_ran_in():
    from authzbench.report import overview

    rd = _mode_run()
    rules = "\n".join(overview._stop_rule(rd.phases))
    assert "- `check_view_via_group_member`: 32,000 ops or a 2 s time budget a round" in rules
    assert (
        "- `check_view_via_group_member` in a named consistency mode (openfga fully_consistent): 64,000 ops "
        "or a 4 s time budget, whichever comes first, in 1 round.") in rules
    fewer = overview._fewer_rounds(rd.phases, 2)
    assert fewer == "`check_view_via_group_member` openfga fully_consistent at 1 worker (one round)"


def test_the_round_trip_is_called_a_reference_point_with_the_checks_faster_than_it():
    from authzbench.report import overview

    run = Run().server("postgres", NET)
    run.phase("postgres", "roundtrip", [[0.2] * 40], kind="roundtrip")
    run.phase("postgres", "check_negative", [[0.15] * 40])
    run.phase("postgres", "check_view_via_group_member", [[0.3] * 40])
    rd = run.data()
    below = overview._below_roundtrip(rd)
    assert below == "postgres 0.75"
    line = next(
        x for x in overview._worker_caps(rd.phases.assign(concurrency=[1, 1, 8]), below) if "roundtrip" in x)
    assert "a reference point, not a floor (checks faster than it here" in line and "postgres 0.75" in line
    assert "floor a check" not in line


def test_the_config_line_says_what_the_write_keys_ran_as():
    from authzbench.report import overview

    run = Run().server("postgres", NET)
    run.phase("postgres", "write_membership", [[1.0]], kind="write")
    run.phase("postgres", "revoke_then_check", [[1.0]], kind="write")
    run.phase("postgres", "revoke_then_check", [[1.0]], kind="write", concurrency=8)
    run.phase("postgres", "mixed", [[1.0]])
    run.phase("postgres", "churn", [[1.0]], concurrency=10)
    for r in run.recs:
        if r["type"] == "phase_start":
            r.update(write_kind="acl", write_share=0.01 if r["scenario"] == "mixed" else 0.0)
    notes = overview.config_notes(run.data())
    assert (notes["write_concurrency"]
            == "ran: `write_membership` at 1 writer; `revoke_then_check` at 1 and 8 writers")
    assert notes["write_kind"].startswith("the mixed phase wrote acl; the churn steps changed membership 75%")


def test_group_depth_zero_is_shown_with_the_hierarchy_edges_the_share_drew():
    from authzbench.report import overview

    assert overview._depth_note({"group_depth": 0}, {"group_child": 14}) == \
        "no fixed chain: 14 hierarchy edges from child_group_share"
    assert overview._depth_note({"group_depth": 3}, {"group_child": 48}) == ""


def test_the_speed_index_base_is_not_named_like_the_reference_report():
    from authzbench.report.core import speed

    line = speed._reference_line()
    assert "Index 1.0 = the index's base machine" in line and "reference machine" not in line


def _modes_run(named_offset: int):
    """Permify's via-group check: the session mode's phase (100 ops from input 0), then fully_consistent at
    named_offset, its first second fast (1 ms) and its second slow (4 ms)."""
    run = Run().server("permify", {**NET, "label": "Permify", "consistency": "at_least_as_fresh"})
    run.phase("permify", "check_view_via_group_member", [[8.0] * 100])
    first = len(run.recs)
    run.phase("permify", "check_view_via_group_member", [[1.0] * 100, [4.0] * 100])
    for r in run.recs[first:]:
        if "phase" in r:
            r["phase"] = "permify/check_view_via_group_member@fully_consistent/c1/r0"
    for r in run.recs:
        if r["type"] == "phase_start":
            r["input_offset"] = named_offset if r["phase"].count("@") else 0
            r["consistency"] = "fully_consistent" if r["phase"].count("@") else ""
    return run.data()


def test_a_named_mode_phase_that_re_asks_the_session_modes_inputs_says_how_many_and_its_first_second():
    from authzbench.report import freshness

    lines = freshness.rechecks(_modes_run(0))
    assert lines[-1].startswith(
        "- permify fully_consistent: 100 of 200 ops re-checked inputs an earlier phase")
    assert "its first second 100 ops at p50 1 ms, the other 100 at p50 4 ms" in lines[-1]


def test_a_named_mode_phase_on_inputs_no_phase_checked_says_none_were_re_checked():
    from authzbench.report import freshness

    line = freshness.rechecks(_modes_run(4000))[-1]
    assert "0 of 200 ops re-checked" in line and "the earliest" not in line


def test_each_named_mode_starts_on_inputs_the_session_modes_phases_of_its_round_do_not_reach(tiny):
    from authzbench.config import MixedLoad, Schedule
    from authzbench.run.phase_plan import BackendTraits, phase_specs

    sched = Schedule(scenarios=["check_view_via_group_member"], rounds=2, visits=2)
    modes = ("minimize_latency", "at_least_as_fresh", "fully_consistent")
    specs = [s for s, _ in phase_specs(sched, MixedLoad(), BackendTraits("e", "process", modes, ""), tiny)]
    session = [s.input_offset for s in specs if not s.consistency]
    named = sorted(s.input_offset for s in specs if s.consistency)
    share = sorted(set(session))[1]  # round 1's first input: round 0's slice is [0, share)
    assert sorted(set(session)) == [0, share] and named == [share // 3, 2 * share // 3]


def test_a_read_warms_up_on_the_inputs_its_round_starts_at():
    from authzbench.measure import worker
    from authzbench.workloads.spec import PhaseSpec

    asked = []

    class Backend:
        def check(self, *a, **k):
            return True

    spec = PhaseSpec(
        backend="e", scenario="check_negative", mode="closed", concurrency=1, iterations=10, warmup=3,
        input_offset=5)
    inputs = [("check", i) for i in range(10)]
    real = worker._op
    worker._op = lambda backend, inp, spec, state: (None, lambda: asked.append(inp[1]))
    try:
        worker._warm_up(Backend(), inputs, spec, {}, 0, type("S", (), {"is_set": lambda self: False})())
    finally:
        worker._op = real
    assert asked == [5, 6, 7]
