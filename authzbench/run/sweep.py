"""`bench --profiles tiny,baseline,large` (or `--scale 1,10,100`): the same scenarios at each size.

Each size is an ordinary run (results dir, report); every run's manifest lists the sweep's runs so far,
so the last report's "How cost grows with size" covers every size. Each backend's servers are stopped
after its size, as in any run (--keep-running keeps them): the next size starts them empty. Kept up, they
had the bigger size's data to drop first (SpiceDB's DeleteRelationships of `xl`'s 39.6M relationships
outlasted its 600 s deadline) and sat idle beside every other backend's phases.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from pathlib import Path

from authzbench.config import BenchConfig
from authzbench.core.console import say
from authzbench.core.errors import UserError
from authzbench.generator.profiles import SocialParams, resolve
from authzbench.generator.rebac import approx_relationships
from authzbench.results.store import RunStore
from authzbench.run import orchestrate, servers
from authzbench.run.loading import LoadBound

# --scale: multiples of the reference report's dataset, i.e. of the calibrated `baseline`.
SCALES = {"1": "baseline", "10": "large", "100": "xl"}


def parse_sizes(profiles: str | None, scale: str | None, model: str) -> list[str]:
    """Profile names of a sweep, validated before anything starts (bad -> UserError)."""
    if profiles is not None and scale is not None:
        raise UserError("give --profiles or --scale, not both")
    opt, given = ("--scale", scale) if scale is not None else ("--profiles", profiles or "")
    if any(not x.strip() for x in given.split(",")):
        raise UserError(f"{opt}: a comma-separated list without empty items, got {given!r}")
    if scale:
        bad = [s for s in scale.split(",") if s.strip() not in SCALES]
        if bad:
            raise UserError(f"--scale {bad[0]!r} is not a known multiple; valid: {', '.join(SCALES)}")
        names = [SCALES[s.strip()] for s in scale.split(",")]
    else:
        names = [p.strip() for p in (profiles or "").split(",") if p.strip()]
    if len(names) < 2 or len(set(names)) != len(names):
        raise UserError(
            f"{opt}: a size sweep needs two or more distinct profiles, got {','.join(names) or 'none'}")
    for n in names:
        resolve(n, {}, model)
    return names


def run_sweep(cfg: BenchConfig, sizes: list[str], results_dir: Path | None,
              render: Callable[[Path], Path] | None) -> list[str]:
    """bench at every size in order; returns the failures of all sizes (one line each)."""
    runs: list[str] = []
    timed: list[SizeTime] = []
    approx = [approx_size(cfg, p) for p in sizes]
    t0 = time.monotonic()

    def manifest(run_id: str, i: int) -> dict:
        runs.append(run_id)
        say(sweep_eta(sizes, i, timed, approx, time.monotonic() - t0, cfg.servers.max_load_minutes * 60))
        return {"sweep": {"profiles": sizes, "runs": list(runs)}}

    def after(store: RunStore, wall_s: float) -> None:
        timed.append(size_time(store.records(), wall_s))

    return run_each([(p, _sized(cfg, p)) for p in sizes], cfg, results_dir, render, manifest, after)


def sweep_of(last: Path) -> tuple[list[str], list[str]]:
    """The profiles and runs of the size sweep whose last run is `last`, every run found beside it (else a
    UserError, before anything starts)."""
    try:
        sweep = json.loads((last / "manifest.json").read_text()).get("sweep") or {}
    except (OSError, ValueError) as e:
        raise UserError(f"--extend-sweep {last}: no run manifest there ({e})") from None
    runs, missing = (
        sweep.get("runs") or [], [r for r in sweep.get("runs") or [] if not (last.parent / r).is_dir()])
    if len(runs) < 2 or runs[-1] != last.name:
        raise UserError(
            f"--extend-sweep {last}: not the last run of a size sweep (its manifest lists {runs or 'none'})")
    if missing:
        raise UserError(
            f"--extend-sweep {last}: the sweep's run {missing[0]} is not beside it in {last.parent}")
    return list(sweep.get("profiles") or []), runs


def extend_sweep(cfg: BenchConfig, last: Path, render: Callable[[Path], Path] | None) -> list[str]:
    """bench at cfg's profile as one more run of the sweep `last` ends, written beside it: its manifest lists
    the sweep's runs and itself, so its report covers every size. xl of 20261129-114811 reached six of the
    eight backends before the session's end; this adds the other two without running the rest again."""
    profiles, runs = sweep_of(last)
    profile = cfg.data.profile
    if profile not in profiles:
        profiles.append(profile)
    return run_each([(profile, cfg)], cfg, last.parent, render,
                    lambda run_id, _: {"sweep": {"profiles": profiles, "runs": [*runs, run_id]}})


@dataclass(frozen=True)
class SizeTime:
    """How long one size of the sweep took: its wall time and each backend's load."""

    wall_s: float
    loads: dict[str, float]

    @property
    def phases_s(self) -> float:
        return max(0.0, self.wall_s - sum(self.loads.values()))


def size_time(records: Iterable[dict], wall_s: float) -> SizeTime:
    """A finished size's wall time and its backends' load steps, from its records."""
    loads: dict[str, float] = {}
    for r in records:
        if r.get("type") == "step" and r.get("step") == "load" and r.get("backend"):
            loads[r["backend"]] = loads.get(r["backend"], 0.0) + r["seconds"]
    return SizeTime(wall_s, loads)


def approx_size(cfg: BenchConfig, profile: str) -> float:
    """About how many relationships a size holds, before it is generated."""
    params = resolve(profile, cfg.data.overrides, cfg.data.model)
    return params.relationships if isinstance(params, SocialParams) else approx_relationships(params)


def sweep_eta(sizes: list[str], i: int, timed: list[SizeTime], approx: list[float], elapsed_s: float,
              load_bound_s: float) -> str:
    """"size sweep: 3/4 sizes (large), 31 min elapsed, ~52 min left ...": each size left as long as the last
    one's phases (they are bounded by time, not size) plus its loads at the last size's rates, each as long as
    the load bound lets it run. No estimate before a size has finished."""
    head = f"size sweep: {i + 1}/{len(sizes)} sizes ({sizes[i]}), {elapsed_s / 60:,.0f} min elapsed"
    if not timed:
        return head
    last, ratio = timed[-1], [a / approx[i - 1] for a in approx[i:]]
    loads = sum(LoadBound.expected_s(s * r, load_bound_s) for r in ratio for s in last.loads.values())
    phases = last.phases_s * len(ratio)
    return (
        f"{head}, ~{(loads + phases) / 60:,.0f} min left: ~{phases / 60:,.0f} min of phases as long as the "
        f"last size's, ~{loads / 60:,.0f} min of loads at its rates")


def run_each(runs: list[tuple[str, BenchConfig]], cfg: BenchConfig, results_dir: Path | None,
             render: Callable[[Path], Path] | None, manifest: Callable[[str, int], dict],
             after: Callable[[RunStore, float], None] | None = None) -> list[str]:
    """bench every (label, config) in order, each its own run whose manifest gets manifest(run_id, index), and
    after(store, wall seconds) once it ends; the servers this started are stopped at the end (unless
    --keep-running). The failures, one line each."""
    for _, c in runs:
        c.validate()
    running_before = set(servers.running())
    failures: list[str] = []
    try:
        for i, (label, one) in enumerate(runs):
            store = RunStore.create(results_dir)
            store.update_manifest(**manifest(store.run_id, i))
            say(f"{label} -> {store.path}")
            started = time.monotonic()
            try:
                failures += [f"{label}: {f}" for f in orchestrate.bench(one, store)]
                if after:
                    after(store, time.monotonic() - started)
            finally:
                if render:
                    say(f"report: {render(store.path)}")
    finally:
        if not cfg.servers.keep_running:
            servers.down([b for b in cfg.servers.backends if b not in running_before])
    return failures


def _sized(cfg: BenchConfig, profile: str) -> BenchConfig:
    """The run of one size: the same options at another profile (the other parts shared, not copied)."""
    return replace(cfg, data=replace(cfg.data, profile=profile))
