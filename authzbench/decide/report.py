"""The decision report of one `authzbench decide` run: reports/<decide-id>.md, written from decide.json and
the stages' results directories, every sentence computed from them.

First screen: the target; the pick and the runners-up with the needs each meets, each claim labelled
measured-here (stage, size, mode) or projected (from which sizes, with the method's error); the backends
that left and why; the cores per survivor and the hops a check takes. Then the stages: the plan with its
ETA against the run, each need's figure per stage, the projection's check, the run's own verdicts.
"""

from __future__ import annotations

import json
from pathlib import Path

from authzbench.core.numbers import num, size_text
from authzbench.core.projection import Range
from authzbench.decide import capacity as cap
from authzbench.decide import project
from authzbench.decide.project import Judged, Point, Stage
from authzbench.decide.target import Target
from authzbench.report.core.fold import fold
from authzbench.report.core.tables import MARK

PROJECTED = "(projected)"


def _n(v: float | None) -> str:
    return num(v) if v is not None else "—"


def _range(r: Range, fmt=_n) -> str:
    return f"{fmt(r.value)} ({fmt(r.low)}-{fmt(r.high)})" if r.low < r.high else fmt(r.value)


def _size(n: float) -> str:
    return f"{n:,.0f}"


# the target --------------------------------------------------------------------------------------------

def target_lines(t: Target) -> list[str]:
    mix = ", ".join(f"{share:.0%} {kind}" for kind, share in t.change_mix.items())
    fresh = {"any": "any (stale answers allowed)", "no-stale": "no-stale (no stale allow after a revocation)"}
    return [
        "## The target", "",
        f"- {_size(t.relationships)} relationships; {num(t.checks_per_s)} checks/s at peak, check p95 within "
        f"{num(t.check_p95_ms)} ms; {num(t.changes_per_s)} structural changes/s ({mix}); "
        f"{num(t.lookups_per_s)} lookups/s" + ("" if t.lookups_per_s else " (not a need)") + "; freshness "
        + fresh.get(t.freshness, f"{t.freshness_label} (answers at most {num(t.freshness_s or 0)} s stale)")
        + ".", ""]


# claims ------------------------------------------------------------------------------------------------

def figure(j: Judged) -> str:
    """The need's figure at the target with its unit and marks: ⚠ on too few ops, (projected)."""
    if j.at is None:
        return "not measured"
    mark = f" {MARK}" if j.measured_at is not None and j.measured_at.too_few else ""
    shown = _range(j.at) if j.need.name != "stale" or j.measured_at is None else _n(j.at.value)
    return f"{shown} {j.need.unit}{mark}" + (f" {PROJECTED}" if j.measured_at is None else "")


def label(j: Judged, mode: str) -> str:
    """Where a claim comes from: measured here (stage, size, mode) or projected (sizes, error)."""
    m = f", {mode}" if mode else ""
    if (p := j.measured_at) is not None:
        return f"measured here: {p.stage}, {_size(p.relationships)} relationships{m}; {p.note}"
    if not j.points:
        return "not measured"
    sizes = ", ".join(f"{p.stage} ({_size(p.relationships)})" for p in j.points)
    k = "exponent assumed" if j.assumed else f"size^{j.k.value:.2f}" if j.k else ""
    err = (f"the method's error {j.error:+.0%} ({j.error_of})" if j.error is not None
           else f"no error to judge it by: {j.error_of}")
    return f"projected from {sizes}{m}, {k}; {err}"


def claim(j: Judged, mode: str) -> str:
    side = "≥" if j.need.higher_is_better else "≤"
    why = f" ({j.reason})" if j.measured_at is None else ""
    return (f"{j.need.title} {figure(j)} against {side} {num(j.threshold)} {j.need.unit}: **{j.status}**"
            f"{why} [{label(j, mode)}]")


def ranked(judged: dict[str, list[Judged]], caps: dict[str, cap.Capacity]) -> list[str]:
    """Survivors best first: most needs met, then fewest unknown or undecided, then fewest cores."""
    def key(b: str) -> tuple:
        js = judged[b]
        c = caps.get(b)
        cores = c.projection.cores.value if c and c.projection else float("inf")
        return (-sum(j.meets for j in js), -sum(j.status in (project.MEETS, project.FAILS) for j in js),
                sum(j.status in (project.UNKNOWN, project.UNDECIDED) for j in js), cores)

    return sorted(judged, key=key)


def pick_lines(decide: dict, judged: dict[str, list[Judged]], caps: dict[str, cap.Capacity]) -> list[str]:
    order = ranked(judged, caps)
    if not order:
        return ["## The pick", "", "No backend survived the stages: see the backends that left.", ""]
    first = order[0]
    n = len(judged[first])
    met = sum(j.meets for j in judged[first])
    head = (f"**Pick: {first}**, meeting all {n} needs" if met == n else
            f"**No backend meets all {n} needs.** The closest: **{first}**, meeting {met} of {n}")
    out = ["## The pick", "", head + ":", ""]
    out += [f"- {claim(j, project.mode_of(decide, first))}" for j in judged[first]]
    if len(order) > 1:
        out += ["", why_first(first, order[1], judged, caps)]
    for b in order[1:]:
        out += ["", f"Runner-up **{b}**, meeting {sum(j.meets for j in judged[b])} of {len(judged[b])}:", ""]
        out += [f"- {claim(j, project.mode_of(decide, b))}" for j in judged[b]]
    return [*out, "", *mode_lines(decide, order), ""]


def why_first(a: str, b: str, judged: dict[str, list[Judged]], caps: dict[str, cap.Capacity]) -> str:
    """Which of the ranking's keys put the pick before the runner-up, in the order they are read."""
    met = [sum(j.meets for j in judged[x]) for x in (a, b)]
    here = [sum(j.status in (project.MEETS, project.FAILS) for j in judged[x]) for x in (a, b)]
    if met[0] != met[1]:
        return f"{a} is first: it meets {met[0]} needs, {b} {met[1]}."
    if here[0] != here[1]:
        return f"{a} is first: both meet {met[0]}; {a} has {here[0]} verdicts measured here, {b} {here[1]}."
    cores = [caps[x].projection.cores.value if x in caps and caps[x].projection else None for x in (a, b)]
    if None not in cores:
        return (f"{a} is first: both meet {met[0]} needs; it needs {num(cores[0])} cores at the target, "
                f"{b} {num(cores[1])} (projected).")
    return f"{a} is first: both meet {met[0]} needs; no cores to tell them apart (the order given)."


def mode_lines(decide: dict, backends: list[str]) -> list[str]:
    modes = decide.get("modes") or {}
    got = [f"{b}: {modes[b]['mode'] or 'no read mode'} ({modes[b]['why']})" for b in backends if b in modes]
    return [f"Modes measured: {'; '.join(got)}."] if got else []


def pruned_lines(decide: dict) -> list[str]:
    gone = decide.get("pruned") or []
    if not gone:
        return ["## The backends that left", "", "None: every backend measured stayed to the last stage.", ""]
    out = ["## The backends that left", ""]
    out += [f"- **{p['backend']}** left at {p['stage']}, failing {p['need']}: {p['reason']}. Why that "
            f"predicts the target: {p['predicts']}." for p in gone]
    return [*out, ""]


# capacity and hops -------------------------------------------------------------------------------------

def cores_lines(t: Target, caps: dict[str, cap.Capacity]) -> list[str]:
    out = ["## Cores per survivor", "",
           f"At {num(t.checks_per_s + t.changes_per_s + t.lookups_per_s)} ops/s over "
           f"{_size(t.relationships)} relationships, servers at {cap.UTILIZATION:.0%} CPU, from this run's "
           "server CPU per op (the `authzbench plan` arithmetic; every figure projected):", "",
           "| Backend | Cores (interval) | Memory (interval) | Disk, one copy (interval) | Grown from | "
           "Not counted |", "|---|---:|---:|---:|---|---|"]
    for b, c in caps.items():
        if c.projection is None:
            out.append(f"| {b} | — | — | — | no basis: {c.why_none} | {c.left_out} |")
            continue
        p = c.projection
        mem = _range(p.memory.at, size_text) if p.memory else "—"
        disk = _range(p.disk.at, size_text) if p.disk else "—"
        grown = f"{_size(p.basis.relationships)} relationships ({p.basis.profile}), x{num(p.size_ratio)}"
        out.append(f"| {b} | {_range(p.cores)} {PROJECTED} | {mem} {PROJECTED} | {disk} {PROJECTED} | "
                   f"{grown} | {c.left_out} |")
    return [*out, ""]


def hop_lines(hops: list[cap.Hops]) -> list[str]:
    if not hops:
        return []
    return ["**Hops a check takes** (the reader adds their network's round trip):", "",
            *(f"- {cap.hop_line(h)}" for h in hops), ""]


# the stages --------------------------------------------------------------------------------------------

def plan_lines(decide: dict) -> list[str]:
    plan = decide["plan"]
    out = ["## The stages", "",
           f"Plan printed before anything was measured: budget {num(plan['budget_s'] / 60)} min, ETA "
           f"{num(plan['eta_s'] / 60)} min; the run took {num(decide['seconds'] / 60)} min "
           f"({_eta_error(plan['eta_s'], decide['seconds'])}).", "",
           "| Stage | Relationships | Backends | ETA (min) | Actual (min) | Results |",
           "|---|---:|---|---:|---:|---|"]
    done = {(s["profile"], s["relationships"]): s for s in decide["stages"]}
    for p in plan["stages"]:
        s = done.get((p["profile"], p["relationships"]))
        actual = num(s["seconds"] / 60) if s else "not run"
        run = f"`{s['run_id']}`" if s else "—"
        out.append(f"| {p['profile']} | {_size(p['relationships'])} | {', '.join(p['backends'])} | "
                   f"{num(p['eta_s'] / 60)} | {actual} | {run} |")
    if plan.get("dropped"):
        out += ["", f"Dropped to fit the budget: {', '.join(plan['dropped'])}."]
    return [*out, ""]


def _eta_error(eta: float, took: float) -> str:
    return f"ETA off by {eta / took - 1:+.0%}" if took > 0 else "no time recorded"


def figures_lines(judged: dict[str, list[Judged]], runs: list[Stage]) -> list[str]:
    """One table per need: each survivor's figure per stage, then at the target."""
    if not judged:
        return []
    out = ["### Each need per stage", ""]
    needs = [j.need for j in next(iter(judged.values()))]
    sizes = [f"{s.profile} ({_size(s.relationships)})" for s in runs]
    for i, need in enumerate(needs):
        out += [f"**{need.title}** ({need.unit})", "",
                "| Backend | " + " | ".join(sizes) + " | At the target | Status |",
                "|---|" + "---:|" * (len(sizes) + 1) + "---|"]
        for b, js in judged.items():
            j = js[i]
            by = {p.stage: p for p in j.points}
            cells = [_point(by[s.profile]) if s.profile in by else "—" for s in runs]
            out.append(f"| {b} | " + " | ".join(cells) + f" | {figure(j)} | {j.status} |")
        out.append("")
    return out


def cost_lines(runs: list[Stage], backends: list[str], decide: dict) -> list[str]:
    """Per survivor and stage, what the cores rest on: check p50, server CPU per check, peak memory, disk."""
    bases = cap.bases(runs)
    out = ["### What the cores rest on, per stage", "",
           "| Backend | Stage | Check p50 (ms) | Server CPU per check (core-ms, rounds' range) | Rounds | "
           "Peak server memory | Disk |", "|---|---|---:|---:|---:|---:|---:|"]
    for b in backends:
        for s in (s for s in runs if b in s.backends):
            pt = next((x for x in bases[b].points if x.relationships == s.relationships), None) \
                if b in bases else None
            p50 = project.check_point(s, b, project.mode_of(decide, b), "p50_ms")
            cpu = Range.of(pt.cpu.get("check", [])) if pt else None
            rss, disk = (Range.of(pt.rss), Range.of(pt.disk)) if pt else (None, None)
            out.append(
                f"| {b} | {s.profile} | {_point(p50) if p50 else '—'} | "
                f"{_range(cpu.scaled(1000)) if cpu else '—'} | {len(pt.cpu.get('check', [])) if pt else 0} | "
                f"{_range(rss, size_text) if rss else '—'} | {size_text(disk.value) if disk else '—'} |")
    return [*out, ""]


def _point(p: Point) -> str:
    shown = _range(p.range) if p.high != float("inf") else f"{_n(p.value)} (at least)"
    return shown + (f" {MARK}" if p.too_few else "")


def error_lines(judged: dict[str, list[Judged]]) -> list[str]:
    rows = [(b, j) for b, js in judged.items() for j in js if j.error is not None]
    if not rows:
        return ["The projection could not be checked: no survivor has two sizes of a need.", ""]
    worst = max(rows, key=lambda r: abs(r[1].error))
    out = ["### The projection checked on what the run measured", "",
           "The largest size measured, projected from the sizes below it by the same method, against its "
           f"measurement. The largest error: {worst[1].error:+.0%} ({worst[0]}, {worst[1].need.title}).", "",
           "| Backend | Need | Checked | Error |", "|---|---|---|---:|"]
    out += [f"| {b} | {j.need.title} | {j.error_of} | {j.error:+.0%} |" for b, j in rows]
    return [*out, ""]


def verdict_lines(decide: dict) -> list[str]:
    vs = decide.get("verdicts") or []
    if not vs:
        return []
    out = ["### The run's verdicts per stage", "",
           "| Stage | Backend | Need | Status | Measured | Interval | Threshold | Reason |",
           "|---|---|---|---|---:|---|---:|---|"]
    for v in vs:
        iv = f"{_n(v['interval'][0])}-{_n(v['interval'][1])}" if v.get("interval") else "—"
        out.append(f"| {v['stage']} | {v['backend']} | {v['need']} | {v['status']} | {_n(v['measured'])} | "
                   f"{iv} | {num(v['threshold'])} {v['unit']} | {v['reason']} |")
    return [*out, ""]


# the document ------------------------------------------------------------------------------------------

def intro(decide_id: str, where: str, runs: list[Stage]) -> list[str]:
    env = runs[0].run.manifest.get("environment", {}) if runs else {}
    checked = sum(int(s.run.phases["checked"].sum()) for s in runs if not s.run.phases.empty)
    mism = sum(int(s.run.phases["mismatches"].sum()) for s in runs if not s.run.phases.empty)
    return [f"# authzbench decide — run `{decide_id}`", "",
            f"Generated by authzbench from `{where}` and its {len(runs)} stage"
            f"{'s' * (len(runs) != 1)} ({', '.join(f'`{s.run.path.name}`' for s in runs)}). Machine: "
            f"{env.get('cpu_model', '?')}, {env.get('cpu_logical', '?')} logical cores, client and servers "
            f"on one machine. Answers checked against the oracle: **{checked:,}**, mismatches: "
            f"**{mism:,}**.", ""]


def document(decide: dict, runs: list[Stage], decide_id: str, where: str) -> str:
    t = project.target_of(decide)
    judged = project.judge_all(decide, runs)
    caps = cap.capacities(runs, t, list(judged))
    hops = [cap.hops(b, _networked(runs, b), _p50(runs, b, project.mode_of(decide, b))) for b in judged]
    lines = [*intro(decide_id, where, runs), *target_lines(t), *pick_lines(decide, judged, caps),
             *pruned_lines(decide), *cores_lines(t, caps), *hop_lines(hops), *plan_lines(decide),
             *figures_lines(judged, runs), *cost_lines(runs, list(judged), decide), *error_lines(judged),
             *verdict_lines(decide),
             "### Assumptions of the cores", "", *(f"- {a}" for a in cap.assumptions()), ""]
    return fold("\n".join(lines))


def _networked(runs: list[Stage], backend: str) -> bool:
    return all(s.run.comparable(backend) for s in runs if backend in s.backends)


def _p50(runs: list[Stage], backend: str, mode: str) -> Point | None:
    mine = [s for s in runs if backend in s.backends]
    return project.check_point(mine[-1], backend, mode, "p50_ms") if mine else None


def render(decide_json: Path, out_dir: Path) -> Path:
    """reports/<decide-id>.md from results/<decide-id>/decide.json; returns its path."""
    decide = json.loads(decide_json.read_text())
    decide_id = decide_json.parent.name
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"{decide_id}.md"
    path.write_text(document(decide, project.stages(decide, decide_json), decide_id, str(decide_json)))
    return path
