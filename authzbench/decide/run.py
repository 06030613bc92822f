"""The decide run: the plan printed first, then each stage an ordinary bench run (a results dir), its needs
judged as soon as it ends, an undecided need measured once more (only its scenario, only those backends)
before it is called, a backend that fails a need leaving with the measured reason and the growth line that
predicts the target, and results/<decide-id>/decide.json rewritten after every step (a stopped decide loses
nothing recorded; each stage's bench stops the servers it started, as any run does)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from authzbench.core.console import say
from authzbench.decide.needs import SCENARIO_OF, Figure, Verdict, judge, judge_all, needs_of
from authzbench.decide.plan import Plan, Stage
from authzbench.decide.target import Target

# The scenarios of a stage: the round trip (the floor the hops are read against), the via-group check (its
# latency and CPU), the structural writes, the revocations (8 writers in each mode: the stale allows) and,
# as the target asks, the churn step and the median user's lookups.
BASE_SCENARIOS = ["roundtrip", "check_view_via_group_member", "write_membership", "write_hierarchy",
                  "revoke_then_check"]


def scenarios_for(target: Target) -> list[str]:
    return [*BASE_SCENARIOS, *(["churn"] if target.changes_per_s > 0 else []),
            *(["lookup_resources_view_regular"] if target.lookups_per_s > 0 else [])]


@dataclass(frozen=True)
class StageRun:
    """What one measured stage gave: its run and, per backend and need, the figure; `failed`: backends the
    run could not measure (a load stopped at its bound, a server that did not start), with the line."""

    run_id: str
    results_dir: str
    relationships: int
    seconds: float
    evidence: dict[str, dict[str, Figure]]
    failed: dict[str, str] = field(default_factory=dict)


# (profile, backends, scenarios, tier) -> StageRun
Measure = Callable[[str, list[str], list[str]], StageRun]


@dataclass
class DecideLog:
    """decide.json as it grows: the schema decide2's report renders (keys kept exactly)."""

    path: Path
    target: Target
    modes: dict[str, dict[str, str]]
    plan: Plan
    tier: str
    stages: list[dict] = field(default_factory=list)
    verdicts: list[dict] = field(default_factory=list)
    pruned: list[dict] = field(default_factory=list)
    unmeasured: list[dict] = field(default_factory=list)
    t0: float = field(default_factory=time.monotonic)
    done: bool = False

    def write(self) -> None:
        doc = {"target": asdict(self.target), "modes": self.modes, "tier": self.tier,
               "plan": self.plan.as_json(), "stages": self.stages, "verdicts": self.verdicts,
               "pruned": self.pruned, "unmeasured": self.unmeasured, "eta_s": round(self.plan.eta_s, 1),
               "seconds": round(time.monotonic() - self.t0, 1), "finished": self.done}
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(doc, indent=2) + "\n")
        tmp.replace(self.path)  # whole or not at all: a stop mid-write leaves the previous one


def _record(log: DecideLog, st: Stage, run: StageRun, backends: list[str], repeat: bool) -> None:
    log.stages.append({"profile": st.profile, "relationships": run.relationships, "run_id": run.run_id,
                       "results_dir": run.results_dir, "backends": backends, "seconds": round(run.seconds, 1),
                       "repeat": repeat, "planned_s": None if repeat else round(st.eta_s, 1)})
    for b, why in run.failed.items():
        log.unmeasured.append({"backend": b, "stage": st.profile, "reason": why})
    log.write()


def _repeat_undecided(log: DecideLog, st: Stage, verdicts: list[Verdict], measure: Measure,
                      max_cores: int) -> list[Verdict]:
    """Every undecided need measured once more (its scenario, its backends); the repeat's verdict stands,
    undecided again where it straddles again."""
    open_ = [v for v in verdicts if v.status == "undecided" and v.measured is not None]
    if not open_:
        return verdicts
    backends = sorted({v.backend for v in open_})
    scenarios = sorted({SCENARIO_OF[v.need] for v in open_})
    say(f"decide: {len(open_)} undecided need(s) at {st.profile}: measuring {', '.join(scenarios)} once more "
        f"on {', '.join(backends)}")
    run = measure(st.profile, backends, scenarios)
    _record(log, st, run, backends, repeat=True)
    again = {(v.backend, v.need): judge(st.profile, v.backend, v.need, run.evidence.get(v.backend, {}).get(
        v.need), log.target, max_cores) for v in open_}
    return [again.get((v.backend, v.need), v) for v in verdicts]


Predicts = Callable[[str, str, float, float], str]  # (backend, need, target size, size measured) -> line


def _prune(log: DecideLog, st: Stage, verdicts: list[Verdict], predicts: Predicts, size: int,
           alive: list[str]) -> None:
    for v in verdicts:
        if v.status == "fails" and v.backend in alive:
            alive.remove(v.backend)
            line = predicts(v.backend, v.need, log.target.relationships, size)
            log.pruned.append({"backend": v.backend, "stage": st.profile, "need": v.need, "reason": v.reason,
                               "predicts": line})
            say(f"decide: {v.backend} leaves at {st.profile}: {v.need}: {v.reason}")


def left_s(stages: list[Stage], alive: list[str]) -> float:
    """The planned seconds of the stages left, on the backends still in (each stage's shared sampling
    kept)."""
    return sum(s.eta_s - sum(s.per_backend_s.values()) + sum(s.per_backend_s.get(b, 0.0) for b in alive)
               for s in stages if any(b in alive for b in s.backends))


def decide(log: DecideLog, measure: Measure, predicts: Predicts,
           scenarios: list[str], max_cores: int) -> list[str]:
    """Every planned stage in order on the backends still in; returns the survivors."""
    alive = list(dict.fromkeys(b for s in log.plan.stages for b in s.backends))
    log.write()
    for i, st in enumerate(log.plan.stages):
        todo = [b for b in st.backends if b in alive]
        if not todo:
            say(f"decide: no backend left for {st.profile}")
            break
        say(f"decide: stage {st.profile}: {', '.join(todo)} (planned ~{st.eta_s / 60:.1f} min)")
        run = measure(st.profile, todo, scenarios)
        _record(log, st, run, todo, repeat=False)
        measured = {b: ev for b, ev in run.evidence.items() if b in todo}
        verdicts = _repeat_undecided(log, st, judge_all(st.profile, measured, log.target, max_cores),
                                     measure, max_cores)
        log.verdicts += [v.as_json() for v in verdicts]
        _prune(log, st, verdicts, predicts, run.relationships or st.relationships, alive)
        for b in run.failed:  # not measurable here: no larger size will load either
            if b in alive:
                alive.remove(b)
        log.stages[-1]["left_s"] = round(left := left_s(log.plan.stages[i + 1:], alive), 1)
        say(f"decide: after {st.profile}: {len(alive)} backend(s) in, ~{left / 60:.1f} min planned left")
        log.write()
    log.done = True
    log.write()
    return alive


def needs_line(target: Target) -> str:
    return ", ".join(needs_of(target))
