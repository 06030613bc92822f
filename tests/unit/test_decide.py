"""`authzbench decide` against fakes (no servers): the stage loop prunes a backend on a measured failure and
never measures it again, the no-stale need is measured and met in a backend's safe mode only, the budget
bounds the plan by dropping the largest size first, and a target without a basis is refused before anything
starts. The evidence reader runs on a committed example's records."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from authzbench import cli
from authzbench.core.errors import UserError
from authzbench.decide import modes, plan
from authzbench.decide.needs import Figure, judge
from authzbench.decide.run import DecideLog, StageRun, decide
from authzbench.decide.stage import StageOptions
from authzbench.decide.target import Target

NO_STALE = Target(relationships=4e6, checks_per_s=100, changes_per_s=10, freshness="no-stale")
GOOD = {"checks": Figure(5.0, 4.0, 6.0), "throughput": Figure(900.0, 800.0, 1000.0),
        "churn": Figure(10.0, note="held"), "stale": Figure(0.0, 0.0, 9.0, "0 of 400 revocations")}


def _stages(backends: list[str], sizes=("baseline", "large")) -> plan.Plan:
    stages = [plan.Stage(p, 10 ** (i + 5), list(backends), 60.0) for i, p in enumerate(sizes)]
    return plan.Plan(3600.0, stages, [])


class FakeStages:
    """A Measure: per (profile, backend) the evidence a stage would record; it notes every call."""

    def __init__(self, evidence):
        self.evidence, self.calls = evidence, []

    def __call__(self, profile: str, backends: list[str], scenarios: list[str]) -> StageRun:
        self.calls.append((profile, list(backends), list(scenarios)))
        ev = {b: self.evidence(profile, b, len(self.calls)) for b in backends}
        return StageRun(f"run-{len(self.calls)}", f"results/run-{len(self.calls)}", 1000, 1.0, ev)


def _log(tmp_path: Path, target: Target, backends: list[str]) -> DecideLog:
    return DecideLog(tmp_path / "d" / "decide.json", target, {b: {"mode": "m", "why": "w"} for b in backends},
                     _stages(backends), "strict")


def test_a_backend_that_fails_the_churn_need_at_baseline_leaves_with_that_reason_and_is_not_measured_again(
        tmp_path):
    why = "the step at 10 changes/s did not hold: check p95 41.2 ms over the 25 ms SLO"

    def evidence(profile, b, _):
        return {**GOOD, "churn": Figure(None, failed=why)} if b == "churny" else GOOD

    stages = FakeStages(evidence)
    log = _log(tmp_path, NO_STALE, ["steady", "churny"])
    alive = decide(log, stages, lambda b, n, t, at: f"{b} {n} grows", ["churn"], 24)
    assert alive == ["steady"]
    assert [c[:2] for c in stages.calls] == [("baseline", ["steady", "churny"]), ("large", ["steady"])]
    doc = json.loads(log.path.read_text())
    assert doc["pruned"] == [{"backend": "churny", "stage": "baseline", "need": "churn", "reason": why,
                              "predicts": "churny churn grows"}]
    assert {v["backend"] for v in doc["verdicts"] if v["stage"] == "large"} == {"steady"}
    assert set(doc) >= {"target", "modes", "plan", "stages", "verdicts", "pruned", "eta_s", "seconds"}
    assert [s["profile"] for s in doc["stages"]] == ["baseline", "large"] and doc["finished"]


def test_an_undecided_need_is_measured_once_more_on_its_scenario_before_it_is_called(tmp_path):
    def evidence(profile, b, call):  # the first measurement straddles the SLO, the repeat lies under it
        return {**GOOD, "checks": Figure(24.0, 20.0, 29.0) if call == 1 else Figure(21.0, 19.0, 23.0)}

    stages = FakeStages(evidence)
    log = _log(tmp_path, NO_STALE, ["edgy"])
    log.plan = _stages(["edgy"], ("baseline",))
    decide(log, stages, lambda *a: "", ["check_view_via_group_member", "churn"], 24)
    assert stages.calls[1] == ("baseline", ["edgy"], ["check_view_via_group_member"])
    checks = [v for v in json.loads(log.path.read_text())["verdicts"] if v["need"] == "checks"]
    assert [v["status"] for v in checks] == ["meets"] and checks[0]["interval"] == [19.0, 23.0]


def test_a_backend_whose_stale_allows_appear_only_in_its_latency_mode_passes_no_stale_only_in_its_safe_mode(
        tmp_path):
    two = modes.Traits(modes=("minimize_latency", "fully_consistent"))
    tier, chosen = modes.choose(NO_STALE, ["twomode"], of=lambda b: two)
    assert tier == "strict" and chosen["twomode"]["mode"] == "fully_consistent"
    opts = StageOptions(NO_STALE, tier, "native", None, None, 30.0, 1.0, "decide-x")
    cfg = opts.config("baseline", ["reference"], ["revoke_then_check"])
    cfg.validate()
    assert cfg.servers.tier == "strict" and cfg.servers.options["consistency"] == "fully_consistent"

    def stale_in(mode: str) -> Figure:  # the fake: 12 stale allows of 400 revocations in its latency mode
        return Figure(0.0, 0.0, 9.5) if mode == "fully_consistent" else Figure(30.0, 17.3, 51.5)

    stages = FakeStages(lambda p, b, _: {**GOOD, "stale": stale_in(cfg.servers.options["consistency"])})
    log = _log(tmp_path, NO_STALE, ["twomode"])
    assert decide(log, stages, lambda *a: "", ["revoke_then_check"], 24) == ["twomode"]
    assert judge("baseline", "twomode", "stale", stale_in("minimize_latency"), NO_STALE).status == "fails"
    latency_tier, latency = modes.choose(Target(4e6, 100, 10), ["twomode"], of=lambda b: two)
    assert latency_tier == "cached" and latency["twomode"]["mode"] == "minimize_latency"


def _sizing(per_phase: float = 10.0) -> plan.Sizing:
    return plan.Sizing(lambda b: [per_phase] * 6, ["churn"], 1800.0, (20 * 2**30, 24 * 2**30))


PRIORS = plan.Priors([plan.Measured(400_000, {"a": 1.0, "b": 1.0}, {"a": 10.0, "b": 40.0}, {"a": 2**24},
                                    {"churn": 1.0})])
SIZES = {"baseline": 400_000, "large": 4_000_000, "xl": 40_000_000}


def test_the_budget_bounds_the_planned_run_dropping_the_largest_size_first():
    full = plan.make_plan(40e6, ["a", "b"], SIZES, PRIORS, _sizing(), 1e9)
    assert [s.profile for s in full.stages] == ["baseline", "large", "xl"] and not full.dropped
    baseline, large, xl = (s.eta_s for s in full.stages)
    fits_two = plan.make_plan(40e6, ["a", "b"], SIZES, PRIORS, _sizing(), baseline + large + 1)
    assert [s.profile for s in fits_two.stages] == ["baseline", "large"]
    assert fits_two.eta_s <= baseline + large + 1
    assert len(fits_two.dropped) == 1 and fits_two.dropped[0].startswith("xl")
    one = plan.make_plan(40e6, ["a", "b"], SIZES, PRIORS, _sizing(), baseline + 1)
    assert [s.profile for s in one.stages] == ["baseline"]
    assert [d[:5] for d in one.dropped] == ["xl (~", "large"]
    with pytest.raises(UserError, match="stage 1"):
        plan.make_plan(40e6, ["a", "b"], SIZES, PRIORS, _sizing(), baseline - 1)


def test_a_size_whose_load_would_pass_the_load_bound_is_not_planned_for_that_backend():
    # b loads 400k in 40 s: xl's 40M would take ~67 min, past the 30 min bound; a's 17 min fits
    xl = plan.stage("xl", SIZES["xl"], ["a", "b"], PRIORS, _sizing())
    assert xl.backends == ["a"] and "load bound" in xl.left_out["b"]


@pytest.mark.parametrize("extra, says", [
    (["--lookups", "5", "--backend", "keto"], "--lookups 5: no basis"),
    (["--relationships", "1G"], "--relationships 1,000,000,000: no basis"),
    (["--freshness", "bounded:0"], "bounded:SECONDS must be > 0"),
    (["--change-mix", "membership=0.5"], "must sum to 1"),
])
def test_a_target_without_a_basis_is_refused_in_one_line_with_exit_2_before_anything_starts(
        extra, says, monkeypatch, capsys, tmp_path):
    from authzbench.decide import stage

    monkeypatch.setattr(stage, "measure", lambda *a: pytest.fail("a stage started"))
    argv = ["decide", "--relationships", "20M", "--checks", "1000", "--changes", "10",
            "--results-dir", str(tmp_path), *extra]
    try:
        code = cli.main(argv)
    except SystemExit as e:  # argparse's own refusals
        code = e.code
    err = capsys.readouterr().err.strip()
    assert code == 2 and says in err and len(err.splitlines()) == 1, err
    assert not list(tmp_path.iterdir())


def test_a_failure_measured_past_the_target_s_size_is_not_carried_down_to_it_by_growth():
    from authzbench.decide.growth import predicts

    assert "does not carry" in predicts("any", "checks", 1e6, 4e6)
    assert "not from the graph's size" in predicts("any", "stale", 1e6, 4e6)


def test_the_evidence_of_a_committed_run_gives_every_backend_its_needs():
    from authzbench.decide.needs import evidence, judge_all
    from authzbench.report.core.data import load_run

    rd = load_run(Path(__file__).resolve().parents[2] / "reports" / "data" / "20261202-052519")
    ev = evidence(rd, NO_STALE)
    assert len(ev) == 9 and all(set(e) == {"checks", "throughput", "churn", "stale"} for e in ev.values())
    assert all(e["checks"].lo <= e["checks"].value <= e["checks"].hi for e in ev.values())
    verdicts = judge_all("baseline", ev, NO_STALE)
    assert {v.status for v in verdicts} <= {"meets", "fails", "undecided"} and len(verdicts) == 36
    assert any(v.need == "churn" and v.status == "fails" for v in verdicts)


def test_a_stage_s_churn_step_changes_only_the_kinds_of_the_target_s_mix(tmp_path):
    from authzbench.generator import generate
    from authzbench.truth.social_oracle import oracle_for
    from authzbench.workloads.catalog import SCENARIOS

    target = Target(4e6, 100, 10, change_mix={"membership": 0.5, "hierarchy": 0.5})
    opts = StageOptions(target, "cached", "native", None, None, 30.0, 1.0, "d")
    cfg = opts.config("baseline", ["reference"], ["churn"])
    assert cfg.churn.rates == [10] and cfg.churn.mix == [("membership", 0.5), ("hierarchy", 0.5)]
    ds = generate("tiny", tmp_path / "tiny")
    ops = [x[1] for x in SCENARIOS["churn"].sampler(ds, oracle_for(ds), 5, mix=cfg.churn.mix)
           if x[0] == "structural"]
    assert {op.kind for op in ops} == {"membership", "hierarchy"}
