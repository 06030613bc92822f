"""Capacity at a target: the report's section (when the run names --target-qps and --target-relationships),
the text `authzbench plan` prints, and the scale load test's tiers T1-T13 projected beside their published
vCPUs (`plan --against-tiers`). The arithmetic is projection.py's; the cost basis is basis.py's."""

from __future__ import annotations

import math
from pathlib import Path

from authzbench.core.errors import UserError
from authzbench.core.numbers import num, size_text
from authzbench.core.projection import BackendBasis, Grown, Projection, Range, Target, missing, project
from authzbench.report.core.basis import combine, extract
from authzbench.report.core.data import RunData, sweep_runs
from authzbench.report.core.declared import cpu_example
from authzbench.report.core.published import load_published

ASSUMPTIONS = [
    f"server CPU is the monitor's per-process CPU of the measured server ({cpu_example()}), never the "
    "client's (except an embedded engine, marked †, whose process is the client's too); a phase's "
    "core-seconds are its mean CPU times its wall time",
    "checks and lookups: every closed-loop check (lookup) phase of a round pooled, all scenarios and worker "
    "counts; writes: the mixed phases less their checks at the round's check cost (at 1% writes a small "
    "difference of large numbers: see its interval)",
    "cores = target ops/s x (sum over op kinds of share x core-seconds per op) / utilization; a core is a "
    "logical CPU of the measuring machine",
    "memory = peak server memory (PSS natively) over the read phases (configured caches included, e.g. "
    "PostgreSQL's "
    "shared_buffers); disk = the footprint after the load, one copy (no replication)",
    "a figure grows from the largest size measured as (target size / that size)^k, k from the run's size "
    "sweep; without one, CPU per op is taken as flat (k = 0), memory and disk as proportional (k = 1)",
    "intervals: a figure's lowest to highest round (runs of one size pooled); an exponent's flattest to "
    "steepest fit through its sizes' intervals; a projection's worst combination of both",
    "the load measured here is this suite's sampled inputs on one machine (cache hit rates as they fell, "
    "client on the same cores): a cluster's cache hit rate, dispatch and network are not in it",
]


def _n(v: float) -> str:
    return num(v)


def _range(r: Range, fmt=_n) -> str:
    return f"{fmt(r.value)} ({fmt(r.low)}-{fmt(r.high)})"


def _growth(g: Grown, what: str, fmt) -> str:
    k = "assumed" if g.assumed else f"{g.k.low:.2f}-{g.k.high:.2f} from the sizes measured"
    return (
        f"{what} {_range(g.base, fmt)} at {g.base_size:,} relationships, grown as size^{g.k.value:.2f} ({k})")


def _rests_on(b: BackendBasis, p: Projection) -> str:
    sizes = "; ".join(f"run {', '.join(pt.runs)} ({pt.profile}, {pt.relationships:,} relationships)"
                      for pt in b.points)
    workers = sorted({c for pt in b.points for cs in pt.concurrency.values() for c in cs})
    return f"{sizes}; closed loop at {', '.join(map(str, workers))} worker{'s' * (workers != [1])}"


def _distance(p: Projection) -> str:
    size = f"{_n(p.size_ratio)}x the largest size measured ({p.basis.relationships:,})"
    rate = f"{_n(p.rate_ratio)}x the highest check throughput measured" if math.isfinite(p.rate_ratio) else \
        "no closed-loop check throughput measured"
    return f"relationships {size}; rate {rate}"


def _shares(t: Target) -> str:
    return ", ".join(f"{share * 100:.4g}% {kind}s" for kind, share in t.shares().items() if share > 0)


def projections(bases: dict[str, BackendBasis], target: Target) -> list[Projection]:
    """Every backend's projection; refuses (one UserError naming the first) where one lacks a basis."""
    for b in bases.values():
        if why := missing(b, target):
            raise UserError(f"{b.backend}: {why}; measure it, or leave the backend out with --backend")
    return [project(b, target) for b in bases.values()]


def plan_text(bases: dict[str, BackendBasis], target: Target) -> str:
    lines = [f"Target: {target.qps:,.0f} ops/s ({_shares(target)}) over {target.relationships:,.0f} "
             f"relationships, servers at {target.utilization:.0%} CPU", ""]
    for p in projections(bases, target):
        b = bases[p.backend]
        lines += [f"{p.label}",
                  f"  cores     {_range(p.cores)}  ({_range(p.demand)} busy at the target rate, "
                  f"/ {target.utilization:g} utilization)"]
        if p.memory:
            mem = _growth(p.memory, "peak memory", size_text)
            lines.append(f"  memory    {_range(p.memory.at, size_text)}  ({mem})")
        if p.disk:
            disk = _growth(p.disk, "footprint", size_text)
            lines.append(f"  disk      {_range(p.disk.at, size_text)}  ({disk})")
        for kind, g in p.cpu.items():
            pt = next(x for x in b.points if x.relationships == g.base_size)
            lines.append(
                f"  per {kind:<6}{_range(g.at, _sci)} core-s at the target ({_growth(g, 'measured', _sci)}; "
                f"{len(pt.cpu[kind])} rounds, {pt.ops[kind]:,} ops{_noise(g)})")
        lines += [f"  rests on  {_rests_on(b, p)}", f"  distance  {_distance(p)}", ""]
    lines += ["Assumptions:", *(f"- {a}" for a in ASSUMPTIONS)]
    return "\n".join(lines)


def _noise(g: Grown) -> str:
    """A write cost at 0 in a round is the mixed phase's CPU less its checks' coming out at or below 0."""
    return "; at 0 in a round: within the checks' noise" if g.base.low == 0 else ""


def _sci(v: float) -> str:
    return f"{v:.3g}"


def tiers_markdown(bases: dict[str, BackendBasis], utilization: float) -> str:
    """Per backend, the tiers T1-T13 (1% writes) projected beside the published engine + datastore vCPUs."""
    scale = load_published()["scale"]
    head = (
        f"| Tier | Relationships | Target ops/s | Published cache hit | Published {scale['engine']} vCPU | "
        f"Published {scale['datastore']} vCPU | Published total | Published vCPU per 1,000 ops/s | Projected "
        "cores (interval) | Published / projected | Projected disk, one copy |")
    out = []
    for b in bases.values():
        rows = [head, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
        for t in scale["tiers"]:
            p = projections({b.backend: b}, Target(t["qps"], t["relationships"], 0.01, 0.0, utilization))[0]
            engine, store = math.prod(t["engine_nodes"]), math.prod(t["datastore_nodes"])
            total = engine + store
            rows.append(
                f"| {t['test']} | {t['relationships']:,} | {t['qps']:,} | {t['cache_hit']:.1%} | {engine:,} "
                f"| {store:,} | {total:,} | {_n(1000 * total / t['qps'])} | {_range(p.cores)} | "
                f"{total / p.cores.value:.3g} ({total / p.cores.high:.3g}-{total / p.cores.low:.3g}) | "
                f"{_range(p.disk.at, size_text) if p.disk else '—'} |")
        out += [f"{b.label}, servers at {utilization:.0%} CPU:", "", *rows, ""]
    return "\n".join(out)


def section(rd: RunData, out_dir: Path) -> str:
    """The report's "Capacity at a target": "" unless the run named --target-qps and
    --target-relationships."""
    cfg = rd.manifest.get("config") or {}
    qps, rels = cfg.get("target_qps"), cfg.get("target_relationships")
    if not qps or not rels:
        return ""
    target = Target(float(qps), float(rels), float(cfg.get("write_share", 0.01)))
    bases = combine([extract(r) for r in sweep_runs(rd)] if (rd.manifest.get("sweep") or {}).get("runs")
                    else [extract(rd)])
    lines = [
        "## Capacity at a target", "",
        f"What each backend would need for {target.qps:,.0f} ops/s ({_shares(target)}) over "
        f"{target.relationships:,.0f} relationships, servers at {target.utilization:.0%} CPU, projected from "
        "this run's per-op costs (`authzbench plan` prints the same for any target).", "",
        "| Backend | Cores (interval) | Memory (interval) | Disk (interval) | Rests on | Extrapolation |",
        "|---|---:|---:|---:|---|---|"]
    for b in bases.values():
        if why := missing(b, target):
            lines.append(f"| {b.label} | — | — | — | no basis: {why} | |")
            continue
        p = project(b, target)
        mem = _range(p.memory.at, size_text) if p.memory else "—"
        disk = _range(p.disk.at, size_text) if p.disk else "—"
        lines.append(
            f"| {p.label} | {_range(p.cores)} | {mem} | {disk} | {_rests_on(b, p)} | {_distance(p)} |")
    lines += ["", *_per_op_table(bases, target), "", "Assumptions:", "", *(f"- {a}" for a in ASSUMPTIONS), ""]
    return "\n".join(lines)


def _per_op_table(bases: dict[str, BackendBasis], target: Target) -> list[str]:
    """What each projection rests on per op kind: the measured cost, its size, rounds and growth."""
    rows = ["| Backend | Op | Server core-s per op, measured (interval) | At relationships | Rounds | Ops | "
            "Growth exponent | At the target size |", "|---|---|---:|---:|---:|---:|---|---:|"]
    for b in bases.values():
        if missing(b, target):
            continue
        for kind, g in project(b, target).cpu.items():
            pt = next(x for x in b.points if x.relationships == g.base_size)
            k = (f"{g.k.value:.2f} (assumed)"
                 if g.assumed
                 else f"{g.k.value:.2f} ({g.k.low:.2f}-{g.k.high:.2f})")
            rows.append(
                f"| {b.label} | {kind} | {_range(g.base, _sci)} | {g.base_size:,} | {len(pt.cpu[kind])} | "
                f"{pt.ops[kind]:,} | {k}{_noise(g)} | {_range(g.at, _sci)} |")
    return rows
