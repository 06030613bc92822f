"""`bench --profiles tiny,baseline,large` (or `--scale 1,10,100`): the same scenarios at each size.

Each size is an ordinary run (results dir, report); every run's manifest lists the sweep's runs so far,
so the last report's "How cost grows with size" covers every size. Each backend's servers are stopped
after its size, as in any run (--keep-running keeps them): the next size starts them empty. Kept up, they
had the bigger size's data to drop first (SpiceDB's DeleteRelationships of `xl`'s 39.6M relationships
outlasted its 600 s deadline) and sat idle beside every other backend's phases.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from authzbench.config import BenchConfig
from authzbench.core.errors import UserError
from authzbench.generator.profiles import resolve
from authzbench.provision.base import say
from authzbench.run import orchestrate, servers
from authzbench.scenarios.results import RunStore

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
        raise UserError(f"{opt}: a size sweep needs two or more distinct profiles, got {','.join(names) or 'none'}")
    for n in names:
        resolve(n, {}, model)
    return names


def run_sweep(cfg: BenchConfig, sizes: list[str], results_dir: Path | None,
              render: Callable[[Path], Path] | None) -> list[str]:
    """bench at every size in order; returns the failures of all sizes (one line each)."""
    runs: list[str] = []

    def manifest(run_id: str, _i: int) -> dict:
        runs.append(run_id)
        say(f"size sweep: {len(runs)}/{len(sizes)} sizes")
        return {"sweep": {"profiles": sizes, "runs": list(runs)}}

    return run_each([(p, _sized(cfg, p)) for p in sizes], cfg, results_dir, render, manifest)


def run_each(runs: list[tuple[str, BenchConfig]], cfg: BenchConfig, results_dir: Path | None,
             render: Callable[[Path], Path] | None, manifest: Callable[[str, int], dict]) -> list[str]:
    """bench every (label, config) in order, each its own run whose manifest gets manifest(run_id, index);
    the servers this started are stopped at the end (unless --keep-running). The failures, one line each."""
    for _, c in runs:
        c.validate()
    running_before = set(servers.running())
    failures: list[str] = []
    try:
        for i, (label, one) in enumerate(runs):
            store = RunStore.create(results_dir)
            store.update_manifest(**manifest(store.run_id, i))
            say(f"{label} -> {store.path}")
            try:
                failures += [f"{label}: {f}" for f in orchestrate.bench(one, store)]
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
