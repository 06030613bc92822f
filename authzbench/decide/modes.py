"""Which read mode each backend is measured in for a target's freshness need, and why (one line each).

The suite's two tiers (provision/tiers.py) are the switch: `strict` reads every engine fully consistent with
its answer caches off (each adapter's fully_consistent mode), `cached` reads in each adapter's latency-first
mode behind one FRESHNESS_S window. A tier is the whole run's, so a stage runs every backend in one tier:
- no-stale: strict, for checks, lookups, churn and throughput alike (every phase of the stage);
- bounded:S: cached where every engine's window is within S (its measured lag is judged in the churn steps
  and the 8-writer revocations), else strict;
- any: cached (the latency-first mode).
A backend without read modes has one: it is named as its server reports it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from authzbench.decide.target import Target

SAFE = "fully_consistent"  # the mode every adapter with modes reads in under --tier strict (config.py)


@dataclass(frozen=True)
class Traits:
    """What the mode choice needs of a backend: its adapter's read modes; for an engine with tiers, the
    cached tier's window (None: no time window) and the reads each tier records."""

    modes: tuple[str, ...] = ()
    window_s: float | None = None
    cached_reads: str = ""
    strict_reads: str = ""
    tiered: bool = False


def traits(name: str) -> Traits:
    """From the registry's adapter class and, for an engine, its recipe's tiers."""
    from authzbench.backends.registry import backend_class
    from authzbench.provision.tiers import engine_tier, engines

    modes = tuple(backend_class(name).consistency_modes)
    if name not in engines():
        return Traits(modes)
    cached, strict = engine_tier(name, "cached").settings, engine_tier(name, "strict").settings
    return Traits(modes, cached.get("freshness_s"), str(cached.get("reads", "")),
                  str(strict.get("reads", "")), True)


def tier_for(target: Target, of: dict[str, Traits]) -> str:
    """The stage's tier: strict for no-stale, cached for any, and for bounded:S cached only when every
    engine's window (a snapshot-keyed cache has none: 0) is within S."""
    if target.freshness == "no-stale":
        return "strict"
    if target.freshness == "bounded":
        widest = max((t.window_s or 0.0 for t in of.values() if t.tiered), default=0.0)
        return "cached" if widest <= (target.freshness_s or 0.0) else "strict"
    return "cached"


def mode_of(target: Target, tier: str, t: Traits) -> dict[str, str]:
    """{"mode", "why"} of one backend in the stage's tier."""
    if not t.modes and not t.tiered:
        return {"mode": "latest committed",
                "why": "one read mode (no consistency option, no answer cache): no-stale and bounded rest on "
                       "its measured stale allows at 8 writers and its visibility lag"}
    if not t.modes:
        reads = t.strict_reads if tier == "strict" else t.cached_reads
        return {"mode": reads, "why": "one read mode in either tier: judged on its measured stale allows"}
    if tier == "strict":
        mode = t.strict_reads or SAFE if SAFE in t.modes else t.modes[-1]
        return {"mode": mode, "why": f"{_need(target)}: its safe mode (--tier strict: fully consistent "
                                     "reads, answer caches off), for every phase of the stage"}
    mode = t.cached_reads or t.modes[0]
    if target.freshness == "bounded":
        return {"mode": mode, "why": f"bounded:{target.freshness_s:g}: the cached mode, its window "
                                     f"{t.window_s or 0:g} s within the bound; its measured lag is judged"}
    return {"mode": mode, "why": "any: its latency-first mode (the cached tier)"}


def _need(target: Target) -> str:
    return target.freshness_label


def choose(target: Target, backends: list[str],
           of: Callable[[str], Traits] = traits) -> tuple[str, dict[str, dict[str, str]]]:
    """The stage tier and every backend's {"mode", "why"}."""
    ts = {b: of(b) for b in backends}
    tier = tier_for(target, ts)
    return tier, {b: mode_of(target, tier, t) for b, t in ts.items()}
