"""`authzbench decide`: everything checked before anything starts (the target, the backends, the basis, the
budget), the plan printed with its ETA, then the stages (run.decide) and where decide.json is."""

from __future__ import annotations

import argparse
from collections import defaultdict
from functools import partial
from pathlib import Path
from types import SimpleNamespace

from authzbench.core.console import stdout
from authzbench.decide import modes, parse
from authzbench.decide.plan import SIZES, Plan, Sizing, make_plan, memory_bytes, read_priors
from authzbench.decide.run import DecideLog, decide, needs_line, scenarios_for
from authzbench.decide.stage import StageOptions


def _sizes() -> dict[str, int]:
    from authzbench.generator.profiles import resolve
    from authzbench.generator.rebac import approx_relationships

    return {p: int(approx_relationships(resolve(p, {}, "rebac"))) for p in SIZES}


def _phases(opts: StageOptions, scenarios: list[str]):
    """backend -> its stage's phases' planned seconds (the same at every size: phases are bounded by time).
    The plan needs no dataset: a stand-in with the model and entity counts the phase specs read."""
    from authzbench.run.orchestrate import _planned

    shape = SimpleNamespace(model="rebac", entities=defaultdict(lambda: 1))
    return lambda b: _planned(opts.config(SIZES[0], [b], scenarios), shape, [b])[b]


def prepare_plan(args: argparse.Namespace) -> tuple[StageOptions, Plan, dict, list[str], str]:
    """Every check before anything starts (UserError: exit 2): the target, its basis, the backends, each
    stage's config and the budget. Returns (stage options, plan, modes, scenarios, decide id)."""
    from authzbench.config import default_backends
    from authzbench.provision.manager import default_mode
    from authzbench.results.store import new_run_id
    from authzbench.run.orchestrate import not_offered

    target = parse.target_of(args)
    backends = list(dict.fromkeys(x for v in args.backend or [] for x in v)) or default_backends()
    sizes = _sizes()
    parse.check_basis(target, backends, sizes[SIZES[-1]], lambda b: not not_offered(b, "lookup"))
    tier, chosen = modes.choose(target, backends)
    decide_id = f"decide-{new_run_id()}"
    opts = StageOptions(target, tier, args.provision or default_mode(), args.data_dir, args.results_dir,
                        args.max_load_minutes, args.iterations_scale, decide_id)
    scenarios = scenarios_for(target)
    opts.config(SIZES[0], backends, scenarios).validate()  # unknown or unrunnable backends: refused here
    sizing = Sizing(_phases(opts, scenarios), scenarios, args.max_load_minutes * 60, memory_bytes())
    plan = make_plan(target.relationships, backends, sizes, read_priors(), sizing, args.budget * 60)
    return opts, plan, chosen, scenarios, decide_id


def run_decide(args: argparse.Namespace) -> int:
    from authzbench.decide.growth import predicts
    from authzbench.decide.stage import measure
    from authzbench.results.store import default_results_dir

    opts, plan, chosen, scenarios, decide_id = prepare_plan(args)
    t = opts.target
    stdout.print(f"decide target: {t.relationships:,.0f} relationships, {t.checks_per_s:g} checks/s, "
                 f"{t.changes_per_s:g} changes/s ({', '.join(f'{k} {w:g}' for k, w in t.change_mix.items())}"
                 "), "
                 f"{t.lookups_per_s:g} lookups/s, freshness {t.freshness_label}, check p95 <= "
                 f"{t.check_p95_ms:g} ms, at most {args.max_cores} cores; needs: {needs_line(t)}; tier "
                 f"{opts.tier}", markup=False, highlight=False, soft_wrap=True)
    for b, m in chosen.items():
        stdout.print(f"  {b}: reads {m['mode']}: {m['why']}", markup=False, highlight=False, soft_wrap=True)
    for line in plan.lines():
        stdout.print(line, markup=False, highlight=False, soft_wrap=True)
    if args.plan_only:
        return 0
    path = (args.results_dir or default_results_dir()) / decide_id / "decide.json"
    log = DecideLog(path, t, chosen, plan, opts.tier)
    stdout.print(f"decide: {path}", markup=False)
    try:
        alive = decide(log, partial(measure, opts), predicts, scenarios, args.max_cores)
    finally:
        log.write()
    from authzbench.decide.report import render

    stdout.print(f"decide: survivors {', '.join(alive) or 'none'}; {len(log.pruned)} pruned; {path}; "
                 f"decision report: {render(path, args.report_dir)}", markup=False, highlight=False,
                 soft_wrap=True)
    return 0


def results_of(path: Path) -> Path:
    return path.parent
