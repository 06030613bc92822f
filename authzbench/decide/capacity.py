"""Cores, memory and disk per survivor at the target's rate and size, and the hops a check takes.

The arithmetic is `authzbench plan`'s (core/projection.py, docs/CAPACITY.md): each stage's cost basis
(report/core/basis.py: server core-seconds per check, lookup and write per round, peak server memory, the
footprint on disk) merged over the decide run's sizes, grown to the target size along the exponent those
sizes give, cores = ops/s x (sum of share x core-seconds per op) / utilization.

Hops: a check that crosses a network pays its round trip once per hop. What the records hold:
- client round trips per check: not counted by the runner; a networked backend's check is at least one
  request to its server (an embedded engine, †, makes none), so 1 is a lower bound, stated as one;
- datastore queries per check (an engine's queries to its PostgreSQL): not recorded. Counting them needs
  either pg_stat_statements in the engines' private PostgreSQL (provision/pgcluster.py starts it without
  `shared_preload_libraries`) with its `calls` read before and after each check phase (run/phase.py), or the
  engine's own metrics endpoint scraped around the phase; neither is in the suite, so the hop line counts
  the client's round trip alone and says so.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from authzbench.core.projection import BackendBasis, Projection, Range, missing, project
from authzbench.core.projection import Target as PlanTarget
from authzbench.decide.project import Point, Stage
from authzbench.decide.target import Target
from authzbench.report.capacity import ASSUMPTIONS
from authzbench.report.core.basis import combine, extract

HOP_MS = 0.5  # the round trip the line adds per hop: a same-region network's, stated as an example
UTILIZATION = 0.6  # projection.Target's default: the share of a core a server may use, the rest headroom


@dataclass(frozen=True)
class Capacity:
    backend: str
    projection: Projection | None
    left_out: str  # what the cores do not count ("" when every op kind of the target was measured)
    why_none: str = ""  # no projection at all: the phrase


def plan_target(t: Target, write: bool = True) -> PlanTarget:
    """The `plan` target for the decide target: every op per second, structural changes as writes."""
    total = t.checks_per_s + t.changes_per_s + t.lookups_per_s
    return PlanTarget(total, t.relationships, t.changes_per_s / total if write else 0.0,
                      t.lookups_per_s / total, UTILIZATION)


def bases(runs: list[Stage]) -> dict[str, BackendBasis]:
    return combine([extract(s.run) for s in runs])


def capacity(basis: BackendBasis | None, t: Target) -> Capacity:
    """The plan's projection for one survivor; a target op kind without a measured cost is left out of the
    cores and named (the decide stages may run no closed-loop mixed phase for a write's cost)."""
    if basis is None:
        return Capacity("", None, "", "no server CPU measured in any stage")
    pt = plan_target(t)
    left = ""
    if missing(basis, pt) and pt.write_share > 0:
        pt, left = plan_target(t, write=False), (
            f"structural changes ({t.changes_per_s:g}/s): no write cost measured (no closed-loop mixed "
            "phase)")
    if why := missing(basis, pt):
        return Capacity(basis.backend, None, left, why)
    return Capacity(basis.backend, project(basis, pt), left)


def capacities(runs: list[Stage], t: Target, backends: list[str]) -> dict[str, Capacity]:
    got = bases(runs)
    return {b: capacity(got.get(b), t) for b in backends}


def machines(cores: Range, per_machine: int) -> Range:
    """Machines of `per_machine` cores the cores fill (ceiling of each end)."""
    return Range(*(float(math.ceil(x / per_machine)) for x in (cores.value, cores.low, cores.high)))


# hops ------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Hops:
    backend: str
    client_round_trips: int  # a lower bound: 1 for a networked check, 0 embedded
    datastore_queries: float | None  # per check; None: not recorded
    p50: Point | None  # the check p50 the line adds to, at the largest stage measured


def hops(backend: str, networked: bool, p50: Point | None) -> Hops:
    return Hops(backend, 1 if networked else 0, None, p50)


def hop_line(h: Hops, hop_ms: float = HOP_MS) -> str:
    """"at 0.5 ms a hop, spicedb-pg's check p50 (2.45 ms measured at baseline) would gain at least 0.5 ms
    (arithmetic: ...)"."""
    if h.client_round_trips == 0:
        return (f"{h.backend}: embedded (†), no network between the client and the engine: a deployment with "
                "one adds its round trips, none of which this run could count")
    queries = ("datastore queries per check not recorded (not counted)" if h.datastore_queries is None
               else f"{h.datastore_queries:.3g} datastore queries per check")
    gain = hop_ms * (h.client_round_trips + (h.datastore_queries or 0.0))
    base = ""
    if (p := h.p50) is not None:
        base = f" ({p.value:.3g} ms measured at {p.stage}, one machine, loopback)"
    return (f"at {hop_ms:g} ms a hop, {h.backend}'s check p50{base} would gain at least {gain:.3g} ms "
            f"(arithmetic, not measured: {h.client_round_trips} client round trip per check, the least a "
            f"networked check takes, x {hop_ms:g} ms; {queries})")


def assumptions() -> list[str]:
    return [*ASSUMPTIONS, f"servers at {UTILIZATION:.0%} CPU; structural changes are the plan's writes, "
            "their cost the closed-loop mixed phases' less their checks"]
