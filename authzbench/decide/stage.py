"""One stage as an ordinary bench run: the target's scenarios at one profile, in the target's tier, its
churn step at the target's change rate and mix, the report core reading back what it recorded."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from authzbench.config import BenchConfig, Churn, DatasetChoice, Schedule, ServerChoice, Targets
from authzbench.core.console import say
from authzbench.decide.needs import evidence
from authzbench.decide.run import StageRun
from authzbench.decide.target import Target
from authzbench.workloads.churn import CHURN_FRESHNESS_S, CHURN_READ_RATE, CHURN_STEP_S

# 2 rounds (a figure's interval is their spread) in one visit: a stage keeps each backend's servers up once,
# and a decide run's stages are its repeats. 1 re-run of a disturbed phase, not bench's 2: the budget.
ROUNDS, VISITS, RERUNS = 2, 1, 1


@dataclass(frozen=True)
class StageOptions:
    """What every stage of one decide run shares."""

    target: Target
    tier: str
    provision: str
    data_dir: Path | None
    results_dir: Path | None
    max_load_minutes: float
    iterations_scale: float
    decide_id: str

    def config(self, profile: str, backends: list[str], scenarios: list[str]) -> BenchConfig:
        t = self.target
        churn = Churn(rates=[t.changes_per_s] if t.changes_per_s > 0 else [1.0], read_rate=CHURN_READ_RATE,
                      step_s=CHURN_STEP_S,
                      # bounded:S judges the changes' visibility by S; otherwise the sweep's own bound
                      freshness_s=t.freshness_s if t.freshness == "bounded" else CHURN_FRESHNESS_S,
                      mix=[(k, w) for k, w in t.change_mix.items()])
        return BenchConfig(
            data=DatasetChoice(model="rebac", profile=profile, data_dir=self.data_dir),
            servers=ServerChoice(backends=backends, provision=self.provision, tier=self.tier,
                                 max_load_minutes=self.max_load_minutes),
            schedule=Schedule(scenarios=scenarios, concurrency=[1, 8], iterations_scale=self.iterations_scale,
                              rounds=ROUNDS, visits=VISITS, max_reruns=RERUNS),
            targets=Targets(slo={"check_p95_ms": t.check_p95_ms, "write_p95_ms": 100.0, "success": 0.999},
                            target_qps=t.checks_per_s, target_relationships=t.relationships),
            churn=churn)


def measure(opts: StageOptions, profile: str, backends: list[str], scenarios: list[str]) -> StageRun:
    """bench at `profile` on `backends`, then the evidence its records give."""
    from authzbench.report.core.data import load_run
    from authzbench.results.store import RunStore
    from authzbench.run import orchestrate

    cfg = opts.config(profile, backends, scenarios)
    store = RunStore.create(opts.results_dir)
    store.update_manifest(decide={"id": opts.decide_id, "profile": profile, "scenarios": scenarios})
    say(f"decide: {profile} -> {store.path}")
    t0 = time.monotonic()
    failures = orchestrate.bench(cfg, store)
    seconds = time.monotonic() - t0
    rd = load_run(store.path)
    failed = {f.split(":", 1)[0]: f for f in failures if f.split(":", 1)[0] in backends}
    n = int((rd.manifest.get("dataset") or {}).get("relationships") or 0)
    return StageRun(store.run_id, str(store.path), n, seconds, evidence(rd, opts.target), failed)
