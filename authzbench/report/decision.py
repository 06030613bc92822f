"""The decision summary, the report's first screen: which backend suits which need, one row per need with
each backend's figure and letters, one generated sentence per need, and the trade-offs that would change
the answer. Every figure is a Findings figure (dimensions.compute over figures.cell), lettered by the one rule
(figures.letters: sharing a letter = not clearly apart); nothing here is written by hand."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from pathlib import Path

from authzbench.report import churn, decision_chart, freshness, workloads
from authzbench.report.core import clientbound, engines, speed, tables
from authzbench.report.core.data import RunData
from authzbench.report.core.figures import LETTER_MEANING, best_first, clearly_better
from authzbench.report.core.frames import resource_table
from authzbench.report.core.ranking import (
    NO_DIFFERENCE,
    Dimension,
    Figure,
    all_assumed,
    ranked,
    ratio_to_best,
    split,
)
from authzbench.report.core.tables import counted, num, ratio_from_zero, ratio_text
from authzbench.report.dimensions import compute
from authzbench.report.sweep import projected
from authzbench.report.sweep import runs as sweep

ASSUMED_MARK = "(assumed interval)"
# The marks a cell carries, as the Findings and the appendix's tables give them.
MARKS_LEGEND = (
    "⚠: some round behind the percentile had fewer ops than it needs (its interval is open on its worse "
    "side, above for a latency, down to zero for a rate: never clearly apart from another ⚠ figure). "
    "(unstable): its rounds spread wider than the figure.")


@dataclass(frozen=True)
class Need:
    label: str
    keys: tuple[str, ...]  # Findings dimension keys, first present wins ("check_p50/" = any such scenario)
    read: bool = False  # a read-side need (the read winner is counted over these)
    # shown under its dimension's title (which names what the data decides: e.g. writers)
    titled: bool = False


NEEDS = [
    Need("Check p50 via a group, 1 worker", ("check_p50/check_view_via_group_member", "check_p50/"), True),
    Need("Check p95 via a group, 1 worker", ("check_p95/check_view_via_group_member", "check_p95/"), True),
    # the tail: a check sits on every request's critical path (⚠ where a round had under 100 / 1,000 checks)
    Need("Check p99 via a group, 1 worker", ("check_p99/check_view_via_group_member", "check_p99/"), True),
    Need(
        "Check p99.9 via a group, 1 worker", ("check_p999/check_view_via_group_member", "check_p999/"), True
    ),
    Need(
        "Check throughput, best worker count", ("check_rate/check_view_via_group_member", "check_rate/"), True
    ),
    Need("Lookup p95, heavy user", ("lookup_p95/lookup_resources_manage_super",), True),
    Need("Lookup p95, regular user", ("lookup_p95/lookup_resources_view_regular",), True),
    Need("Mixed load within the SLO", ("mixed_slo", "open_loop"), True),
    Need("Group-membership write p95", ("write_p95/write_membership",)),
    Need("Hierarchy write p95", ("write_p95/write_hierarchy",)),
    Need("Rows touched per membership write", ("rows/write_membership",)),
    Need("Visibility lag p95 after a write", ("visibility_p95",)),
    Need("Stale allows", ("stale_allows/",), titled=True),  # own read mode, most writers measured
    Need("Ingest", ("ingest",)),
    Need("Footprint on disk", ("footprint",)),
    Need("Peak server memory", ("memory",)),
    Need("Server CPU per 1,000 checks", ("cpu_per_1k",)),
]


def pick(dims: list[Dimension], need: Need) -> Dimension | None:
    by_key = {d.key: d for d in dims}
    for k in need.keys:
        if k in by_key:
            return by_key[k]
        if k.endswith("/"):
            hit = next((d for d in dims if d.key.startswith(k)), None)
            if hit:
                return hit
    return None


def rows(rd: RunData, dims: list[Dimension]) -> list[tuple[Need, Dimension]]:
    return [
        (replace(n, label=d.title) if n.titled else n, d) for n in NEEDS if (d := pick(dims, n)) is not None]


def section(rd: RunData, out_dir: Path) -> str:
    dims = compute(rd)
    picked, first = rows(rd, dims), envelope(rd, dims, out_dir)
    scope = [_scope(rd), "", *([line, ""] if (line := unanswered(rd)) else [])]
    if not picked:
        return "\n".join(["## Decision summary", "", *scope, *first]) if first else ""
    backends = _backends(rd, picked)
    lines = ["## Decision summary", "", *scope, *first,
             "| Need | Unit | " + " | ".join(tables.label(rd, b) for b in backends) + " |",
             "|---|---|" + "---|" * len(backends)]
    lines += [_row(rd, need, d, backends) for need, d in picked]
    lines += [
        "",
        f"Cell: figure (letters; {LETTER_MEANING}). † lettered among † only. none (unranked): no figure "
        f"to rank (e.g. no worker count met the SLO). {ASSUMED_MARK}: every figure of the row rests on one "
        "measurement per backend, its interval assumed (stated in the Findings and the appendix's figure "
        f"table): no letter sets them apart. {clientbound.LEGEND}.",
        f"{MARKS_LEGEND}", ""]
    lines += [_sentence(rd, need, d) for need, d in picked]
    lines += ["", "**What would change the answer**", ""]
    lines += trade_offs(rd, dims, picked)
    lines += _target(rd)
    if chart := decision_chart.decision_heatmap(_matrix(rd, picked, backends), out_dir,
                                                rd.manifest["run_id"]):
        lines += ["", f"![letters per need and backend, coloured by the first letter]({chart})"]
    return "\n".join([*lines, ""])


def envelope(rd: RunData, dims: list[Dimension], out_dir: Path) -> list[str]:
    """The operating envelope, first: the workload rows, then the churn and revocation figures they rest on
    (nothing for a run without a churn sweep or revocations at 8 writers)."""
    figures = [*churn.summary_lines(rd, out_dir), *freshness.summary_lines(rd)]
    return [*workloads.section_lines(rd, dims), *(x for line in figures for x in (line, ""))]


def _target(rd: RunData) -> list[str]:
    """The reader's size (--target-relationships) projected, when this run ends a size sweep."""
    runs = sweep.sweep_runs(rd)
    return projected.at_target(rd, sweep.labelled(runs, sweep.size_table(runs))) if len(runs) >= 2 else []


def _scope(rd: RunData) -> str:
    ds = rd.manifest.get("dataset", {})
    env = rd.manifest.get("environment", {})
    tier = engines.engine_tier(rd)
    zanzibar = f"Zanzibar engines' figures: {tier}. " if tier else ""
    return (f"Dataset `{ds.get('profile')}` ({ds.get('relationships', 0):,} relationships), "
            f"{env.get('cpu_logical', '?')} shared cores, client and servers on one machine. "
            f"{zanzibar}{_speed(rd)}"
            "Figures are medians over rounds at the workers named; the Findings give every dimension.")


def unanswered(rd: RunData) -> str:
    """What this report cannot answer (another size, another freshness) and the `decide` line that would: a
    target ten times this size, checks at the churn sweep's read rate, its middle change rate, no stale allow
    (the rebac model's runs only: `decide` measures that model)."""
    ds = rd.manifest.get("dataset") or {}
    rels = ds.get("relationships") or 0
    if ds.get("model", "rebac") != "rebac" or not rels:
        return ""
    runs = sweep.sweep_runs(rd)
    top = max((r.manifest.get("dataset") or {}).get("relationships", 0) for r in runs) if runs else rels
    sizes = (f"measured at `{ds.get('profile')}` only, {rels:,} relationships" if len(runs) < 2 else
             f"measured at {len(runs)} sizes up to {top:,} relationships")
    modes = [f"{tables.label(rd, b)} {m}" for b in rd.servers if (m := freshness.own_mode(rd, b))]
    read = f" (each engine read in its session mode: {', '.join(modes)})" if modes else ""
    cfg = churn.settings(rd)
    rates = sorted(cfg["rates"])
    return (f"Not answered here: another size ({sizes}) or another freshness{read}. For a stated target, "
            f"`authzbench decide --relationships {_short(10 * rels)} --checks {cfg['read_rate']:g} "
            f"--changes {rates[len(rates) // 2]:g} --freshness no-stale` measures the contenders there "
            "(`make decide ARGS=...`).")


def _short(n: float) -> str:
    """10x a size to one significant digit as the size options read it: 4M, 50k."""
    v = float(f"{n:.1g}")
    return f"{v / 1e6:g}M" if v >= 1e6 else f"{v / 1e3:g}k" if v >= 1e3 else f"{v:g}"


def _speed(rd: RunData) -> str:
    idx = speed.speed_index(rd)
    return (f"Machine-speed index {idx.median:.2f} ({idx.lo:.2f}-{idx.hi:.2f} over {idx.n} visits). "
            if idx
            else "")


def _backends(rd: RunData, picked: list[tuple[Need, Dimension]]) -> list[str]:
    seen = list(dict.fromkeys(f.backend for _, d in picked for f in d.figures))
    return sorted(seen, key=lambda b: (not rd.comparable(b), b))


def _flags(f: Figure) -> str:
    """The marks a summary cell and its heatmap cell carry: ⚠ too few ops, ◐ client-bound."""
    return (" ⚠" if f.too_few else "") + (f" {clientbound.MARK}" if f.client_bound else "")


def _row(rd: RunData, need: Need, d: Dimension, backends: list[str]) -> str:
    r = ranked(rd, d)
    cells = []
    for b in backends:
        if b not in r:
            cells.append("—")
            continue
        f, g, net = r[b]
        flag = _flags(f)
        flag += " (unstable)" if f.unstable else ""  # the Findings' mark: 4 figures lacked it here (issue 67)
        cells.append(
            f"none (unranked){flag}" if g is None else f"{_value(f)} ({'' if net else '†'}{g}){flag}")
    arrow = "↑" if d.higher_is_better else "↓"
    mark = f" {ASSUMED_MARK}" if all_assumed([f for f in d.figures if not f.text]) else ""
    return f"| {need.label}{mark} | {d.unit or 'count'} {arrow} | " + " | ".join(cells) + " |"


def _sentence(rd: RunData, need: Need, d: Dimension) -> str:
    net, _ = split(d, rd)
    valued = best_first([f for f in net if not f.text], d.higher_is_better)
    head = f"- **{need.label}**: "
    if not valued and net:  # e.g. no worker count met the SLO: nothing to rank
        return (head
                + f"none qualified ({net[0].text}): "
                + ", ".join(tables.label(rd, f.backend) for f in net)
                + ".")
    if not valued:
        return head + "no networked server measured."
    unit = f" {d.unit}" if d.unit else ""
    if len(valued) == 1:
        return head + f"only {_fig(rd, valued[0], unit)} measured."
    lead, rest = valued[0], valued[1:]
    if all_assumed(valued):  # no interval measured: the order is shown, no winner claimed
        return (
            head
            + f"{_fig(rd, lead, unit)} is the best figure, then {_fig(rd, rest[0], unit)}; {NO_DIFFERENCE}.")
    # "clearly" rests on the pairwise rule: the lead clearly better than every other figure
    tied = [lead, *(f for f in rest if not clearly_better(lead, f, d.higher_is_better))]
    if len(tied) > 1:
        names = ", ".join(_fig(rd, f, unit) for f in tied[:-1]) + f" and {_fig(rd, tied[-1], unit)}"
        return head + f"no clear winner between {names}."
    nxt = (max if d.higher_is_better else min)(rest, key=lambda f: f.value)
    r = ratio_to_best(lead.value, nxt.value, d.higher_is_better)
    gap = f", {ratio_text(r, d.higher_is_better)}" if math.isfinite(r) and r != 1 else ""
    if (bounded := ratio_from_zero(lead.interval(), nxt.interval(), d.higher_is_better)) is not None:
        gap = f", {bounded}" if bounded else ""  # a base within its resolution of 0 gives no precise ratio
    return head + f"{tables_label(rd, lead.backend)} is best, clearly: {_fig_value(lead, unit)} against " \
        f"{_fig(rd, nxt, unit)}{gap}."


def tables_label(rd: RunData, b: str) -> str:
    return f"**{tables.label(rd, b)}**"


def _fig(rd: RunData, f: Figure, unit: str) -> str:
    return f"{tables.label(rd, f.backend)} {_fig_value(f, unit)}"


def _fig_value(f: Figure, unit: str) -> str:
    if f.text:
        return f.text
    if unit in (" rows", " workers"):  # "1 row", "478 rows"
        return counted(num(f.value), unit.strip()[:-1])
    return f"{num(f.value)}{unit}" + (f" ({f.base})" if f.base else "")


def _value(f: Figure) -> str:
    """A table cell's number, with the count a rate rests on: "70 [14 of 200]"."""
    return num(f.value) + (f" [{f.base}]" if f.base else "")


# trade-offs ---------------------------------------------------------------------------------------------

def trade_offs(rd: RunData, dims: list[Dimension], picked: list[tuple[Need, Dimension]]) -> list[str]:
    out = _write_cost(rd, picked) + _freshness(rd, picked)
    out.append(_size(rd, dims))
    out += _stand_ins(rd)
    out.append(_shared_cores(rd))
    return [x for x in out if x]


def read_winners(rd: RunData, picked: list[tuple[Need, Dimension]]) -> dict[str, int]:
    """Networked backend -> how many read needs it leads (no backend clearly better)."""
    wins: dict[str, int] = {}
    for need, d in picked:
        if need.read:
            net = [f for f in split(d, rd)[0] if not f.text]
            for f in net:
                if not any(clearly_better(g, f, d.higher_is_better) for g in net):
                    wins[f.backend] = wins.get(f.backend, 0) + 1
    return wins


def _write_cost(rd: RunData, picked: list[tuple[Need, Dimension]]) -> list[str]:
    wins = read_winners(rd, picked)
    reads = sum(1 for n, _ in picked if n.read)
    if not wins:
        return []
    top = max(wins.values())
    out = []
    for b in [b for b, n in wins.items() if n == top]:
        costs = []
        for need, d in picked:
            if need.read or need.label.startswith(("Ingest", "Footprint", "Peak", "Server CPU")):
                continue
            r = ranked(rd, d).get(b)
            if r is None:
                continue
            f, g, _ = r
            if g is None:  # no value to rank, so no cost to state
                continue
            net, _ = split(d, rd)
            best = best_first([x for x in net if not x.text], d.higher_is_better)[0]
            near = best.backend == b or not clearly_better(best, f, d.higher_is_better)
            vs = "" if near else f" (best: {_fig(rd, best, ' ' + d.unit if d.unit else '')})"
            costs.append(
                (near, f"{need.label.lower()} {_fig_value(f, ' ' + d.unit if d.unit else '')} ({g}){vs}"))
        if costs:
            out.append(
                _leader_line(
                    f"{tables_label(rd, b)} (none clearly better in {top} of {reads} read needs)", costs))
    return out


def _leader_line(leader: str, costs: list[tuple[bool, str]]) -> str:
    """Whether the read leader pays on the write side, from its write letters: "pays" only where a backend is
    clearly better (20261129-201802 said "pays" before four rank 1s of five), "pays nothing" where none is."""
    paid, led = [t for top, t in costs if not top], [t for top, t in costs if top]
    if not paid:
        return (f"- The read leader, {leader}, pays nothing on the write side: none clearly better in all "
                f"{len(led)} write needs: "
                + "; ".join(led)
                + ".")
    rest = f"; it leads the other {len(led)}: " + "; ".join(led) if led else ""
    where = "in every write need" if not led else f"in {len(paid)} of {len(costs)} write needs"
    return f"- The read leader, {leader}, pays on the write side {where}: " + "; ".join(paid) + rest + "."


def _freshness(rd: RunData, picked: list[tuple[Need, Dimension]]) -> list[str]:
    """One line a backend whose answers can be stale: its visibility lag (>= 100 ms) and stale allows."""
    lag = next((d for n, d in picked if n.keys == ("visibility_p95",)), None)
    stale = next((d for n, d in picked if n.keys == ("stale_allows/",)), None)
    found: dict[str, list[tuple[float, str]]] = {}
    for d, what in ((lag, "visibility lag p95"), (stale, "stale allows")):
        if d is None:
            continue
        for f in d.figures:
            if f.value > 0 and (what == "stale allows" or f.value >= 100):
                found.setdefault(f.backend, []).append(
                    (f.value,
                     f"{what} {num(f.value)}{' ' + d.unit if d.unit else ''} ({f.detail or 'this run'})"))
    order = sorted(found, key=lambda b: -max(v for v, _ in found[b]))
    return [f"- {tables_label(rd, b)} answers can be stale: " + "; ".join(t for _, t in found[b])
            + f"; its read consistency: {_consistency(rd, b)}." for b in order]


def _consistency(rd: RunData, b: str) -> str:
    return rd.info(b).get("consistency") or "the backend's own"


def _size(rd: RunData, dims: list[Dimension]) -> str:
    growth = [d for d in dims if d.key.startswith("growth/")]
    if growth:
        d = growth[0]
        worst = max(d.figures, key=lambda f: f.value)
        return f"- With size, {tables_label(rd, worst.backend)} grows worst in {d.title.lower()}: exponent " \
               f"{num(worst.value)}."
    ds = rd.manifest.get("dataset", {})
    return (f"- Measured at one size only (`{ds.get('profile')}`): `--profiles baseline,large` shows what "
            "scales worse.")


def _stand_ins(rd: RunData) -> list[str]:
    """What each stand-in's and embedded engine's figures may not be used for."""
    out = []
    for b, s in rd.servers.items():
        what, kind = s.info.get("label", b), rd.kind(b)
        if kind == "stand-in":
            out.append(
                f"- ‡ {b}: {what}. Its figures are that product's, run with this model, lettered with the "
                f"servers; they may not be used as {rd.stands_in_for(b)}'s latency, throughput, ingest, "
                "footprint or memory.")
        elif kind == "embedded":
            out.append(
                f"- † {b}: {what}, in-process: no network round trip and no server process, so lettered "
                "apart; its figures may not be compared with a networked server's latency or throughput.")
    return out


def _shared_cores(rd: RunData) -> str:
    t = resource_table(rd)
    if t.empty or t["client_cpu_mean"].isna().all():
        return ""
    c = float(t["client_cpu_mean"].median())
    cores = rd.manifest.get("environment", {}).get("cpu_logical", "?")
    return (
        f"- The client shared the {cores} cores with the servers: {c:.0f}% of one core in a median backend's "
        "check phases; a server on its own host would do better past 1 worker.")


def _matrix(rd: RunData, picked: list[tuple[Need, Dimension]], backends: list[str]):
    """(needs, backends, letters, texts ("none": none qualified), stand-in per backend) for the heatmap."""
    groups, texts = [], []
    for _, d in picked:
        r = ranked(rd, d)
        groups.append([r[b][1] if b in r else None for b in backends])
        # the heatmap's cell carries the marks the summary's cell does (it showed neither ⚠ nor ◐)
        texts.append([("none" if r[b][0].text else num(r[b][0].value)) + _flags(r[b][0]) if b in r else ""
                      for b in backends])
    marked = [n.label + (f" {ASSUMED_MARK}" if all_assumed([f for f in d.figures if not f.text]) else "")
              for n, d in picked]
    return (marked, [tables.label(rd, b) for b in backends], groups, texts,
            [not rd.comparable(b) for b in backends])
