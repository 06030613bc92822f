"""Findings: per dimension, the backends ranked with ratios to the best, each linked to its table.

Everything here is computed from the run's DataFrames (RunData). A dimension is one small function
`fn(rd) -> list[Dimension]` listed in DIMENSIONS; a new section (structural writes, a size sweep) adds
its headline figures by appending one such function. Rules applied to every dimension:
- figures marked † (RunData.comparable False) are ranked apart, never with networked servers;
- a difference within the spread of the two figures (noise.py) is "no clear difference", not a rank;
- a percentile resting on fewer ops than it needs (p95: 20, p99: 100) is shown marked.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from authzbench.report import tables, writes
from authzbench.report.charts import render_summary_chart
from authzbench.report.data import RunData
from authzbench.report.frames import resource_table, scenarios_measured, slo_verdicts
from authzbench.report.noise import UNSTABLE_RANGE, min_ops, overlap, round_figure, unstable
from authzbench.report.tables import anchor, merge_repeats

MARK = "⚠"  # a percentile from too few ops
DISTURBED = "⚡"  # a figure resting on a phase that other processes' CPU disturbed even after its re-runs
# A load or a peak RSS is measured once per run: no rounds give it an interval. Between three committed
# make bench runs of one code base the same backend's ingest moved by up to 2.3x (Elasticsearch 27.5k vs
# 62.3k relationships/s; chdb 155k vs 317k) and peak RSS by up to ~1.2x, so such a figure is taken to lie
# anywhere within these factors of its value.
SINGLE_FACTOR = {"ingest": 2.0, "rss": 1.25}


@dataclass
class Figure:
    backend: str
    value: float
    spread: float = float("nan")  # the figure's run-to-run (or interval-to-interval) spread; NaN: unknown
    n: int | None = None  # ops the figure rests on
    q: float | None = None  # the percentile it is, for the sample-size mark
    detail: str = ""
    text: str = ""  # shown instead of the number (e.g. "none met the SLO"); still ranked by value
    bounds: tuple[float, float] | None = None  # where the figure could land on another run (else value ± spread)
    unstable: bool = False  # its rounds disagree by more than noise.UNSTABLE_RANGE: shown, not ranked
    disturbed: bool = False  # other processes' CPU disturbed a phase it rests on, even after re-runs

    def interval(self) -> tuple[float, float]:
        if self.bounds is not None:
            return self.bounds
        s = 0.0 if math.isnan(self.spread) else self.spread  # unmeasured: taken at face value
        return self.value - s, self.value + s

    @property
    def too_few(self) -> bool:
        return self.q is not None and self.n is not None and self.n < min_ops(self.q)


@dataclass
class Dimension:
    group: str  # subheading: Writes, Checks, Lookups, Under load, Resources
    title: str
    unit: str
    higher_is_better: bool
    figures: list[Figure]
    anchor: str  # the table this statement rests on
    note: str = ""
    summary: str = ""  # the Findings chart's row this dimension feeds ("" = not charted)
    comparable: dict[str, bool] = field(default_factory=dict)


DimensionFn = Callable[[RunData], list[Dimension]]


# helpers over the report's tables -------------------------------------------------------------------

def _closed(rd: RunData, scenario: str, kind: str | None = None) -> pd.DataFrame:
    ph = rd.phases
    if ph.empty:
        return ph
    sub = ph[(ph["scenario"] == scenario) & (ph["mode"] == "closed") & (ph["ops"] > 0)]
    if "consistency" in sub:  # phases re-run under another read consistency mode are reported apart
        sub = sub[sub["consistency"] == ""]
    return sub[sub["kind"] == kind] if kind else sub[~sub["kind"].isin(["write", "visibility"])]


def _pct_figures(rd: RunData, scenario: str, q: float, kind: str | None = None,
                 detail: Callable[[str, pd.DataFrame], str] | None = None) -> list[Figure]:
    """Percentile q at each backend's lowest concurrency (1 worker): the median over its rounds."""
    sub = _closed(rd, scenario, kind)
    out = []
    for b, g in sub.groupby("backend", sort=False):
        rows = g[g["concurrency"] == g["concurrency"].min()]
        m = merge_repeats(rows).iloc[0]
        v, bounds = round_figure(rows, q, float(m[f"p{q:g}_ms"]))
        out.append(Figure(b, v, n=int(m["ops"]), q=q, detail=detail(b, rows) if detail else "",
                          bounds=bounds, unstable=unstable(rows, q), disturbed=_disturbed(rows)))
    return out


def _disturbed(rows: pd.DataFrame) -> bool:
    return bool(rows["disturbed"].any()) if "disturbed" in rows else False


def _single(value: float, what: str) -> tuple[float, float]:
    f = SINGLE_FACTOR[what]
    return value / f, value * f


# the dimensions ---------------------------------------------------------------------------------------

def ingest(rd: RunData) -> list[Dimension]:
    df = rd.ingest
    if df.empty:
        return []
    df = df[df["variant"] == ""]
    figs = [Figure(r.backend, float(r.rels_per_s), detail=f"{r.total_s:.1f} s incl. {r.build_s:.1f} s build; "
                   f"{r.rows / r.relationships:.1f} rows written per relationship",
                   bounds=_single(float(r.rels_per_s), "ingest")) for r in df.itertuples()]
    return [Dimension("Writes", "Ingest incl. closure / view / index build", "relationships/s", True, figs,
                      anchor("ingest"), f"one load per backend: a clear difference needs more than "
                      f"{SINGLE_FACTOR['ingest'] ** 2:g}x (loads moved up to 2.3x between runs)",
                      summary="ingest rels/s")]


def footprint(rd: RunData) -> list[Dimension]:
    df = rd.ingest
    if df.empty:
        return []
    df = df[(df["variant"] == "") & df["footprint_bytes"].notna()]
    figs = [Figure(r.backend, float(r.footprint_bytes) / r.relationships,
                   detail=f"{float(r.footprint_bytes) / 2**20:,.1f} MiB") for r in df.itertuples()]
    return [Dimension("Resources", "Footprint on disk", "bytes/relationship", False, figs, anchor("ingest"),
                      summary="footprint")]


def check_latency(rd: RunData) -> list[Dimension]:
    rt = _closed(rd, "roundtrip")
    rt_p50 = {b: float(g[g["concurrency"] == g["concurrency"].min()]["p50_ms"].mean())
              for b, g in rt.groupby("backend")} if not rt.empty else {}

    def vs_rt(b: str, rows: pd.DataFrame) -> str:
        base = rt_p50.get(b)
        p50 = float(rows["p50_ms"].mean())
        return f"{p50 / base:.1f}× its own round trip" if base else ""

    out = []
    for s in scenarios_measured(rd, "check"):
        if _closed(rd, s).empty:
            continue
        c = int(_closed(rd, s)["concurrency"].min())
        out.append(Dimension("Checks", f"Check p50, {s}, {_workers(c)}", "ms", False,
                             _pct_figures(rd, s, 50, detail=vs_rt), anchor(s), summary="check p50"))
        out.append(Dimension("Checks", f"Check p95, {s}, {_workers(c)}", "ms", False,
                             _pct_figures(rd, s, 95), anchor(s), summary="check p95"))
    return out


def check_throughput(rd: RunData) -> list[Dimension]:
    out = []
    for s in scenarios_measured(rd, "check"):
        figs = []
        for b, g in _closed(rd, s).groupby("backend", sort=False):
            by_c = g.groupby("concurrency")["ops_per_s"].median()
            c = int(by_c.idxmax())
            rows = g[g["concurrency"] == c]
            v, bounds = round_figure(rows, None, float(by_c.max()))
            figs.append(Figure(b, v, bounds=bounds, unstable=unstable(rows, None), disturbed=_disturbed(rows),
                               detail=f"at {_workers(c)}"))
        out.append(Dimension("Checks", f"Best throughput over the concurrency sweep, {s}", "checks/s", True,
                             figs, anchor(s), summary="best check throughput"))
    return out


def lookup_latency(rd: RunData) -> list[Dimension]:
    out = []
    for s in scenarios_measured(rd, "lookup"):
        def per_lookup(b: str, rows: pd.DataFrame) -> str:
            n = rows["ops"].sum()
            return f"{rows['results'].sum() / n:,.0f} resources per lookup" if n else ""

        if _closed(rd, s).empty:
            continue
        c = int(_closed(rd, s)["concurrency"].min())
        kind = "heavy" if "super" in s else "regular"
        out.append(Dimension("Lookups", f"Lookup p95 ({kind} user), {s}, {_workers(c)}", "ms", False,
                             _pct_figures(rd, s, 95, detail=per_lookup), anchor(s), summary=f"{kind} lookup p95"))
    return out


def mixed_closed(rd: RunData) -> list[Dimension]:
    v = slo_verdicts(rd)
    v = v[v["mode"] == "closed"] if not v.empty else v
    if v.empty:
        return []
    rounds = slo_verdicts(rd, by_round=True)
    rounds = rounds[rounds["mode"] == "closed"]
    figs = []
    for b, g in v.groupby("backend", sort=False):
        ok = g[g["verdict"] == "PASS"]
        if ok.empty:
            figs.append(Figure(b, 0.0, text="no worker count met the SLO",
                               detail=f"tried {_ints(g['concurrency'])} workers"))
            continue
        best = ok.loc[ok["concurrency"].idxmax()]
        detail = f"up to {_workers(int(best['concurrency']))} (check p95 {best['check_p95']:.3g} ms)"
        per_round = _slo_rounds(rounds[rounds["backend"] == b])
        if len(per_round) >= 2:
            # Which worker count still meets the SLO can change from round to round (a p95 near the bound):
            # the figure is each round's own answer, their median and range, as for every other figure.
            med, lo, hi = float(np.median(per_round)), float(min(per_round)), float(max(per_round))
            figs.append(Figure(b, med, bounds=(lo, hi), unstable=med > 0 and (hi - lo) / med > UNSTABLE_RANGE,
                               detail=detail))
        else:
            figs.append(Figure(b, float(best["check_ops_per_s"]), float(best["rate_spread"]), detail=detail))
    return [Dimension("Under load", "Mixed workload (closed loop): check throughput at the most workers that "
                      "still met the SLO", "checks/s", True, figs, anchor("slo"), summary="mixed within SLO")]


def _slo_rounds(rounds: pd.DataFrame) -> list[float]:
    """Per round: the check throughput at the most workers that met the SLO in that round (0: none did)."""
    out = []
    for _, g in rounds.groupby("repeat", sort=True):
        ok = g[g["verdict"] == "PASS"]
        out.append(float(ok.loc[ok["concurrency"].idxmax(), "check_ops_per_s"]) if not ok.empty else 0.0)
    return out


def open_loop(rd: RunData) -> list[Dimension]:
    v = slo_verdicts(rd)
    v = v[v["mode"] == "open"] if not v.empty else v
    if v.empty:
        return []
    figs = []
    for b, g in v.groupby("backend", sort=False):
        ok = g[g["verdict"] == "PASS"]["rate"].dropna()
        figs.append(Figure(b, float(ok.max()) if len(ok) else 0.0, text="" if len(ok) else "no rate met the SLO",
                           detail=f"tried {_ints(g['rate'].dropna())} ops/s"))
    return [Dimension("Under load", "Open loop: highest offered rate that met the SLO", "ops/s", True, figs,
                      anchor("slo"), "rate steps are discrete: the true limit lies between two steps",
                      summary="open-loop rate within SLO")]


def server_memory(rd: RunData) -> list[Dimension]:
    m = rd.monitor_phases
    if m.empty:
        return []
    m = m[~m["phase"].str.contains("/ingest")]
    figs = [Figure(b, float(g["rss_max_mb"].max()), detail=_in_process(rd, b),
                   bounds=_single(float(g["rss_max_mb"].max()), "rss")) for b, g in m.groupby("backend", sort=False)]
    return [Dimension("Resources", "Peak server memory over the read phases", "MiB", False, figs, anchor("resources"),
                      summary="peak memory")]


def cpu_per_1k(rd: RunData) -> list[Dimension]:
    """The reference's "CPU% per 1K operations", as server core-seconds per 1,000 checks."""
    t = resource_table(rd)
    if t.empty:
        return []
    # its interval: the lowest to the highest round's, as for latency (one value per round of every check phase)
    figs = [Figure(r.backend, float(r.cpu_s_per_1k), detail=_in_process(rd, r.backend),
                   bounds=(min(r.cpu_rounds), max(r.cpu_rounds)) if len(r.cpu_rounds) >= 2 else None)
            for r in t.itertuples() if not math.isnan(r.cpu_s_per_1k)]
    return [Dimension("Resources", "Server CPU per 1,000 checks (all check phases)", "core-seconds", False, figs,
                      anchor("resources"), summary="CPU per 1k checks")]


STRUCTURAL = ("write_membership", "write_hierarchy", "write_org_admin", "write_acl", "revoke_then_check")


def structural_writes(rd: RunData) -> list[Dimension]:
    """Write p95 of the structural-write scenarios, when a run has them (records of kind "write")."""
    present = set(rd.phases["scenario"]) if not rd.phases.empty else set()
    return [Dimension("Writes", f"Write p95, {s}", "ms", False, _pct_figures(rd, s, 95, kind="write"),
                      anchor(s), summary="structural write p95")
            for s in STRUCTURAL if s in present and not _closed(rd, s, "write").empty]


def write_freshness(rd: RunData) -> list[Dimension]:
    """How stale answers get after a structural write, in the run's own read consistency: the worst visibility
    lag p95 over the write kinds at the first concurrency level, and the stale allows (revocations whose first
    check still allowed) at every level: concurrent writers are where a datastore's snapshots can lag."""
    df = writes.write_table(rd)
    if df.empty:
        return []
    df = df[df["session"]]
    first = df[df["concurrency"] == df["concurrency"].min()]
    c = int(first["concurrency"].min())
    lag = [Figure(b, float(g["vis_p95_ms"].max()), detail=f"worst of {len(g)} write kinds")
           for b, g in first.groupby("backend", sort=False)]
    stale = [Figure(b, float(g["stale_allows"].sum()), detail=f"{int(g['ops'].sum()):,} writes at "
                    f"{', '.join(map(str, sorted(set(g['concurrency']))))} workers")
             for b, g in df.groupby("backend", sort=False)]
    return [Dimension("Writes", f"Visibility lag p95 after a structural write (worst write kind), {c} "
                      f"worker{'s' if c > 1 else ''}", "ms", False, lag, anchor("structural-writes"),
                      summary="visibility lag p95"),
            Dimension("Writes", "Stale allows after a revocation (all write kinds and worker counts)", "", False,
                      stale, anchor("structural-writes"))]


GROWTH = ("check_p95_ms", "lookup_p95_ms", "bytes_per_rel")  # size-sweep measures ranked by growth exponent


def size_growth(rd: RunData) -> list[Dimension]:
    """Growth exponents of a `--profiles` size sweep (authzbench.report.scaling), when this run ends one."""
    try:
        from authzbench.report import scaling
    except ImportError:  # the size sweep's section is not in this build
        return []
    runs = scaling.sweep_runs(rd)
    df = scaling.size_table(runs) if len(runs) >= 2 else pd.DataFrame()
    out = []
    for m in GROWTH if not df.empty else ():
        figs = []
        for b, g in df.groupby("backend", sort=False):
            k = scaling.slope(g["relationships"].to_numpy(float), g[m].to_numpy(float))
            if k is not None:
                figs.append(Figure(b, k, detail=f"{g['relationships'].nunique()} sizes"))
        out.append(Dimension("Growth with size", f"Growth of {scaling.MEASURES[m]} with the dataset (exponent: "
                             "1 = linear, 0 = flat)", "", False, figs, "how-cost-grows-with-size"))
    return out


DIMENSIONS: list[DimensionFn] = [ingest, structural_writes, write_freshness, check_latency, check_throughput, lookup_latency,
                                 mixed_closed, open_loop, footprint, server_memory, cpu_per_1k, size_growth]


def _in_process(rd: RunData, b: str) -> str:
    s = rd.servers.get(b)
    return "in-process engine: includes the client" if s and s.get("concurrency_model") == "thread" else ""


def _workers(c: int) -> str:
    return f"{c} worker" + ("" if c == 1 else "s")


def _ints(s: pd.Series) -> str:
    return ", ".join(f"{x:,.0f}" for x in s)


# ranking --------------------------------------------------------------------------------------------

def tiers(figs: list[Figure], higher_is_better: bool) -> list[list[Figure]]:
    """Best first; a figure within the noise of its tier's leader joins that tier (no clear difference).
    Unstable figures are left out: they are listed apart (ranking_text)."""
    ordered = sorted((f for f in figs if not math.isnan(f.value) and not f.unstable),
                     key=lambda f: -f.value if higher_is_better else f.value)
    out: list[list[Figure]] = []
    for f in ordered:
        lead = out[-1][0] if out else None
        if lead is not None and (lead.value == f.value or overlap(lead.interval(), f.interval())):
            out[-1].append(f)
        else:
            out.append([f])
    return out


def ratio_to_best(best: float, value: float, higher_is_better: bool) -> float:
    """How many times worse than the best (>= 1; inf when the best is 0 and this is not, or this is 0
    where higher is better)."""
    if value == best:
        return 1.0
    if higher_is_better:
        return best / value if value > 0 else float("inf")
    return value / best if best > 0 else float("inf")


def split(d: Dimension, rd: RunData) -> tuple[list[Figure], list[Figure]]:
    """(networked, †): never ranked together."""
    return ([f for f in d.figures if rd.comparable(f.backend)], [f for f in d.figures if not rd.comparable(f.backend)])


def ranking_text(figs: list[Figure], d: Dimension, label: Callable[[str], str]) -> str:
    ts = tiers(figs, d.higher_is_better)
    shaky = [f for f in figs if f.unstable and not math.isnan(f.value)]
    if not ts and not shaky:
        return "nothing measured"
    best = ts[0][0].value if ts else math.nan
    parts = []
    for i, tier in enumerate(ts, 1):
        cells = [_cell(f, d, label, best, i > 1) for f in tier]  # a tie with the best has no ratio
        if len(tier) == 1:
            parts.append(f"{i}. {cells[0]}")
        else:
            parts.append(f"{i}. no clear difference between " + ", ".join(cells[:-1]) + f" and {cells[-1]}")
    if shaky:
        parts.append("not ranked, its rounds disagree (unstable): " +
                     ", ".join(_cell(f, d, label, best, False) for f in shaky))
    return "; ".join(parts)


def _cell(f: Figure, d: Dimension, label: Callable[[str], str], best: float, show_ratio: bool) -> str:
    v = f"{MARK} " if f.too_few else ""
    v += f"{DISTURBED} " if f.disturbed else ""
    v += f"**{label(f.backend)}** " + (f.text or f"{_num(f.value)} {d.unit}".rstrip())
    bits = []
    if show_ratio and not f.text:
        r = ratio_to_best(best, f.value, d.higher_is_better)
        if math.isfinite(r):  # a best of 0 (no stale allows) has no ratio
            bits.append(f"{'÷' if d.higher_is_better else '×'}{r:.2g}")
    if f.bounds is not None and not f.text and f.bounds != (f.value, f.value):
        bits.append(f"{_num(f.bounds[0])}-{_num(f.bounds[1])}")
    if f.n is not None:
        bits.append(f"n={f.n:,}" + (f", too few for a p{f.q:g}" if f.too_few else ""))
    if f.detail:
        bits.append(f.detail)
    return v + (f" ({'; '.join(bits)})" if bits else "")


def _num(v: float) -> str:
    if v == 0:
        return "0"
    if abs(v) >= 100:
        return f"{v:,.0f}"
    return f"{v:.3g}"


def compute(rd: RunData, dims: list[DimensionFn] | None = None) -> list[Dimension]:
    out: list[Dimension] = []
    for fn in dims or DIMENSIONS:
        out += [d for d in fn(rd) if d.figures]
    return out


def section(rd: RunData, out_dir: Path) -> str:
    """The Findings with their chart: per dimension how far each backend is from the best, with intervals."""
    dims = compute(rd)
    matrices = [summary_matrix(rd, dims, end) for end in ("value", "lo", "hi")]
    for m in matrices:
        m.columns = [tables.label(rd, b) for b in m.columns]
    chart = render_summary_chart(*matrices, out_dir=out_dir, run_id=rd.manifest["run_id"])
    return render_section(rd, lambda b: tables.label(rd, b), chart, dims)


def render_section(rd: RunData, label: Callable[[str], str], chart: str | None = None,
                   dims: list[Dimension] | None = None) -> str:
    dims = compute(rd) if dims is None else dims
    if not dims:
        return ""
    lines = ["## Findings", "",
             "Computed from this run's tables (each statement links to its table). Per dimension the backends "
             "are ranked best first; ×N means N times the best's figure (lower is better), ÷N the best's "
             "figure divided by N (higher is better). Backends marked † are ranked apart, never with networked "
             "servers. A figure is the median over its rounds (each phase runs in rounds interleaved with "
             "the other phases and spread over the backend's visits; see Method), shown with its interval: "
             "the lowest to the highest round, widened to a percentile's 95% confidence interval from its op "
             "count. Two figures whose intervals overlap are reported as **no clear difference**; a figure "
             "whose rounds spread wider than the figure itself is **unstable** and not ranked. A load and a "
             f"peak memory are measured once: they are taken to lie within {SINGLE_FACTOR['ingest']:g}x and "
             f"{SINGLE_FACTOR['rss']:g}x of their value (the most they moved between runs here); footprint at "
             f"face value. n = ops a percentile rests on; {MARK} = fewer ops than the percentile needs (p95: "
             f"20, p99: 100); {DISTURBED} = other processes' CPU disturbed a phase it rests on even after its "
             "re-runs (see Validity).", ""]
    if chart:
        lines += [f"![how far each backend is from the best, per dimension]({chart})", ""]
    group = None
    for d in dims:
        if d.group != group:
            lines += ([""] if group else []) + [f"### {d.group}", ""]
            group = d.group
        net, apart = split(d, rd)
        text = f"- **{d.title}** ([table](#{d.anchor}); {'higher' if d.higher_is_better else 'lower'} is better): "
        text += ranking_text(net, d, label) if net else "no networked server measured"
        if apart:
            text += f". † apart: {ranking_text(apart, d, label)}"
        if d.note:
            text += f". _{d.note}_"
        lines.append(text)
    lines.append("")
    return "\n".join(lines)


def summary_matrix(rd: RunData, dims: list[Dimension], end: str = "value") -> pd.DataFrame:
    """Rows: chart rows; columns: backends; value: times worse than the best of its group (geometric mean
    over the dimensions sharing a row), so 1 is the best. † backends are measured against † backends.
    end "lo" / "hi": the same for the nearer / farther end of each figure's interval (the chart's bars)."""
    vals: dict[tuple[str, str], list[float]] = {}
    for d in dims:
        if not d.summary:
            continue
        for figs in split(d, rd):
            ok = [f for f in figs if not math.isnan(f.value)]
            if not ok:
                continue
            best = (max if d.higher_is_better else min)(f.value for f in ok)
            for f in ok:  # inf (e.g. no rate met the SLO) is kept: the chart draws it at its edge
                vals.setdefault((d.summary, f.backend), []).append(_ratio_end(best, f, d.higher_is_better, end))
    if not vals:
        return pd.DataFrame()
    rows = {k: float(np.exp(np.mean(np.log(v)))) if all(map(math.isfinite, v)) else math.inf
            for k, v in vals.items()}
    s = pd.Series(rows)
    order = list(dict.fromkeys(d.summary for d in dims if d.summary))
    return s.unstack().reindex([o for o in order if o in s.index.get_level_values(0)])


def _ratio_end(best: float, f: Figure, higher_is_better: bool, end: str) -> float:
    """The figure's ratio to the best, or that of one end of its interval (never below 1/10: a lower end at
    or below 0 would have no ratio on the chart's log axis)."""
    if end == "value" or f.text or not math.isfinite(f.value):
        return ratio_to_best(best, f.value, higher_is_better)
    lo, hi = f.interval()
    near, far = (hi, lo) if higher_is_better else (lo, hi)
    v = near if end == "lo" else far
    if higher_is_better:
        return best / v if v > 0 else math.inf
    return max(v, best / 10) / best if best > 0 else math.inf
