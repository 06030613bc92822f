"""The ranking model: per dimension, each backend's headline figure (Figure) with its interval, and the rules
that rank them; the Findings section (findings.py), the decision summary, the digest and compare render it.

Everything here is computed from the run's DataFrames (RunData). A dimension is one small function
`fn(rd) -> list[Dimension]` listed in DIMENSIONS; a new section (structural writes, a size sweep) adds
its headline figures by appending one such function. Rules applied to every dimension:
- figures marked † (RunData.comparable False) are lettered apart, never with networked servers;
- a difference within the spread of the two figures (noise.py) is "no clear difference", and so is any
  difference between figures whose interval is assumed (a factor set from earlier runs, a poll's width, or
  none: one measurement); the figures show as letters (figures.letters): two share a letter exactly when
  they are not clearly apart;
- a percentile resting on fewer ops than it needs (p95: 20, p99: 100) is shown marked.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from authzbench.report import freshness
from authzbench.report.core import clientbound
from authzbench.report.core.data import RunData, derived
from authzbench.report.core.figures import best_first, best_rate, cell, letters
from authzbench.report.core.frames import (
    peak_memory,
    resource_table,
    scenarios_measured,
    slo_verdicts,
    write_table,
)
from authzbench.report.core.noise import min_ops, spread_unstable
from authzbench.report.core.tables import anchor, num
from authzbench.report.sweep import runs as sweep
from authzbench.scenarios.writes import POLL_S

MARK = "⚠"  # a percentile from too few ops
DISTURBED = "⚡"  # a figure resting on a phase that other processes' CPU disturbed even after its re-runs
# A load or a peak RSS is measured once per run: no rounds give it an interval. Between three committed
# make bench runs of one code base the same backend's ingest moved by up to 2.3x (Elasticsearch 27.5k vs
# 62.3k relationships/s; chdb 155k vs 317k) and peak RSS by up to ~1.2x, so such a figure is taken to lie
# anywhere within these factors of its value.
SINGLE_FACTOR = {"ingest": 2.0, "rss": 1.25}
NO_INTERVAL = "assumed: one measurement per backend, no interval"
# what the report says where a dimension's figures all rest on assumed intervals
NO_DIFFERENCE = "one measurement per backend, so no difference is claimed"


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
    client_bound: bool | None = None  # a throughput whose client used more CPU than the server; None: unknown
    fewest: int | None = None  # ops in its smallest round; None: n is the one count it rests on
    base: str = ""  # the count a rate rests on ("14 of 200"), shown beside its value wherever it is shown
    basis: str = ""  # why its interval is assumed (a factor or width set by hand); "" with bounds: measured
    # a rate whose ⚠ is its SLO verdict's p95: a p95 from fewer ops than it needs mostly lies above the slowest op
    # seen (3 writes: 86% of the time), so the verdict errs towards PASS and the rate towards too high
    worse_below: bool = False

    def interval(self) -> tuple[float, float]:
        if self.bounds is not None:
            lo, hi = self.bounds
        else:
            s = 0.0 if math.isnan(self.spread) else self.spread  # unmeasured: taken at face value
            lo, hi = self.value - s, self.value + s
        # a figure marked ⚠ rests on a round too small for its percentile: it may be anywhere worse than its
        # interval says, so it is never clearly apart from another ⚠ figure (figures._compute's rule for a Cell)
        if not self.too_few:
            return lo, hi
        return (0.0, hi) if self.worse_below else (lo, math.inf)

    @property
    def assumed(self) -> str:
        """What its interval rests on when it is not measured ("" when it is): figures.clearly_better never
        holds for such a figure."""
        if self.basis:
            return self.basis
        return NO_INTERVAL if self.bounds is None and math.isnan(self.spread) else ""

    @property
    def too_few(self) -> bool:
        """figures.Cell.too_few's rule: any round behind the percentile had fewer ops than it needs."""
        n = self.fewest if self.fewest is not None else self.n
        return self.q is not None and n is not None and n < min_ops(self.q)


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
    key: str = ""  # the dimension's id in the report's JSON table and the decision summary


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
    """Percentile q at each backend's lowest concurrency (1 worker): the one computed figure (figures.cell)."""
    sub = _closed(rd, scenario, kind)
    out = []
    for b, g in sub.groupby("backend", sort=False):
        c = int(g["concurrency"].min())
        x = cell(rd, b, scenario, c, f"p{q:g}_ms", kind)
        if x is None:
            continue
        out.append(Figure(b, x.value, n=x.n, q=q, detail=detail(b, g[g["concurrency"] == c]) if detail else "",
                          bounds=(x.lo, x.hi), unstable=x.unstable, disturbed=x.disturbed, fewest=x.fewest))
    return out


def _single(value: float, what: str) -> tuple[float, float]:
    f = SINGLE_FACTOR[what]
    return value / f, value * f


def single_basis(what: str) -> str:
    """The stated basis of a single measurement's assumed interval."""
    f = SINGLE_FACTOR[what]
    return f"assumed: one measurement, taken to lie within {f:g}x of its value, a width from earlier runs"


def _single_note(what: str) -> str:
    """One run cannot show how far a single load moves between runs: the factor is stated as an assumption."""
    f = SINGLE_FACTOR[what]
    return (f"one load per backend: each is assumed to lie within {f:g}x of its value (a width set from earlier "
            "runs of this suite; one run cannot measure how far its loads move between runs), so no difference "
            "is claimed")


# the dimensions ---------------------------------------------------------------------------------------

def ingest(rd: RunData) -> list[Dimension]:
    df = rd.ingest
    if df.empty:
        return []
    df = df[df["variant"] == ""]
    figs = [Figure(r.backend, float(r.rels_per_s), detail=f"{r.total_s:.1f} s incl. {r.build_s:.1f} s build; "
                   f"{r.rows / r.relationships:.1f} rows written per relationship",
                   bounds=_single(float(r.rels_per_s), "ingest"), basis=single_basis("ingest"))
            for r in df.itertuples()]
    return [Dimension("Writes", "Ingest incl. closure / view / index build", "relationships/s", True, figs,
                      anchor("ingest"), _single_note("ingest"),
                      summary="ingest rels/s", key="ingest")]


def footprint(rd: RunData) -> list[Dimension]:
    df = rd.ingest
    if df.empty:
        return []
    df = df[(df["variant"] == "") & df["footprint_bytes"].notna()]
    figs = [Figure(r.backend, float(r.footprint_bytes) / r.relationships,
                   detail=f"{float(r.footprint_bytes) / 2**20:,.1f} MiB") for r in df.itertuples()]
    return [Dimension("Resources", "Footprint on disk", "bytes/relationship", False, figs, anchor("ingest"),
                      summary="footprint", key="footprint")]


def check_latency(rd: RunData) -> list[Dimension]:
    out = []
    for s in scenarios_measured(rd, "check"):
        if _closed(rd, s).empty:
            continue
        c = int(_closed(rd, s)["concurrency"].min())
        out.append(Dimension("Checks", f"Check p50, {s}, {_workers(c)}", "ms", False,
                             _pct_figures(rd, s, 50), anchor(s), summary="check p50", key=f"check_p50/{s}"))
        out.append(Dimension("Checks", f"Check p95, {s}, {_workers(c)}", "ms", False,
                             _pct_figures(rd, s, 95), anchor(s), summary="check p95", key=f"check_p95/{s}"))
    return out


def check_throughput(rd: RunData) -> list[Dimension]:
    out = []
    for s in scenarios_measured(rd, "check"):
        figs = []
        for b in dict.fromkeys(_closed(rd, s)["backend"]):
            best = best_rate(rd, b, s)
            if best is None:
                continue
            c, x = best
            figs.append(Figure(b, x.value, bounds=(x.lo, x.hi), unstable=x.unstable, disturbed=x.disturbed,
                               detail=f"at {_workers(c)}", client_bound=clientbound.client_bound(rd, b, s, c)))
        levels = sorted(set(_closed(rd, s)["concurrency"].astype(int)))  # a scenario may run at 1 worker only
        what = (f"Throughput at {_workers(levels[0])}" if len(levels) == 1
                else f"Best throughput over {_ints(pd.Series(levels))} workers")
        out.append(Dimension("Checks", f"{what}, {s}", "checks/s", True,
                             figs, anchor(s), summary="best check throughput", key=f"check_rate/{s}"))
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
                             _pct_figures(rd, s, 95, detail=per_lookup), anchor(s), summary=f"{kind} lookup p95",
                             key=f"lookup_p95/{s}"))
    return out


def mixed_closed(rd: RunData) -> list[Dimension]:
    """The check throughput at the most workers whose merged rounds met the SLO: the same figure (median over
    rounds) the mixed table shows for that worker count."""
    v = slo_verdicts(rd)
    v = v[v["mode"] == "closed"] if not v.empty else v
    if v.empty:
        return []
    figs = []
    for b, g in v.groupby("backend", sort=False):
        ok = g[g["verdict"] == "PASS"]
        if ok.empty:
            figs.append(Figure(b, 0.0, text="no worker count met the SLO",
                               detail=f"tried {_ints(g['concurrency'])} workers"))
            continue
        best = ok.loc[ok["concurrency"].idxmax()]
        c = int(best["concurrency"])
        x = cell(rd, b, str(best["scenario"]), c, "ops_per_s", "check")
        if x is None:
            continue
        # the verdict rests on its check and write p95s: ⚠ when either rests on too few ops in some round
        fewest = min(int(best["check_fewest"]), int(best["write_fewest"]) if best["write_ops"] else 10**9)
        figs.append(Figure(b, x.value, bounds=(x.lo, x.hi), unstable=x.unstable, disturbed=x.disturbed,
                           detail=f"up to {_workers(c)}", q=95.0, n=int(best["check_ops"]), fewest=fewest, worse_below=True,
                           client_bound=clientbound.client_bound(rd, b, str(best["scenario"]), c)))
    return [Dimension("Under load", "Mixed workload (closed loop): check throughput at the most workers that "
                      "still met the SLO", "checks/s", True, figs, anchor("slo"), summary="mixed within SLO",
                      key="mixed_slo")]


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
                      summary="open-loop rate within SLO", key="open_loop")]


def server_memory(rd: RunData) -> list[Dimension]:
    peaks = peak_memory(rd)
    figs = [Figure(b, mb, detail=_in_process(rd, b), bounds=_single(mb, "rss"), basis=single_basis("rss"))
            for b, mb in peaks.items()]
    return [Dimension("Resources", "Peak server memory over the read phases", "MiB", False, figs, anchor("resources"),
                      summary="peak memory", key="memory")]


def cpu_per_1k(rd: RunData) -> list[Dimension]:
    """The reference's "CPU% per 1K operations", as server core-seconds per 1,000 checks."""
    t = resource_table(rd)
    if t.empty:
        return []
    # its interval: the lowest to the highest round's, as for latency (one value per round of every check phase)
    # unstable by the latency figures' rule (noise.spread_unstable): mongo's 3.23 rested on rounds of 1.95-9.45
    figs = [Figure(r.backend, float(r.cpu_s_per_1k), detail=_in_process(rd, r.backend),
                   bounds=(min(r.cpu_rounds), max(r.cpu_rounds)) if len(r.cpu_rounds) >= 2 else None,
                   unstable=spread_unstable(np.array(r.cpu_rounds), float(r.cpu_s_per_1k)))
            for r in t.itertuples() if not math.isnan(r.cpu_s_per_1k)]
    return [Dimension("Resources", "Server CPU per 1,000 checks (all check phases)", "core-seconds", False, figs,
                      anchor("resources"), summary="CPU per 1k checks", key="cpu_per_1k")]


STRUCTURAL = ("write_membership", "write_hierarchy", "write_org_admin", "write_acl", "revoke_then_check")


def structural_writes(rd: RunData) -> list[Dimension]:
    """Write p95 of the structural-write scenarios, when a run has them (records of kind "write"), and the rows
    each write touched (what keeping a denormalized model fresh costs)."""
    present = set(rd.phases["scenario"]) if not rd.phases.empty else set()
    out = []
    for s in STRUCTURAL:
        if s not in present or _closed(rd, s, "write").empty:
            continue
        out.append(Dimension("Writes", f"Write p95, {s}, 1 worker", "ms", False, _pct_figures(rd, s, 95, kind="write"),
                             anchor("structural-writes"), summary="structural write p95", key=f"write_p95/{s}"))
        rows = _rows_touched(rd, s)
        if rows:
            out.append(Dimension("Writes", f"Rows touched per write (mean), {s}", "rows", False, rows,
                                 anchor("structural-writes"), key=f"rows/{s}"))
    return out


def _rows_touched(rd: RunData, s: str) -> list[Figure]:
    df = write_table(rd)
    if df.empty:
        return []
    df = df[(df["scenario"] == s) & df["session"]]
    df = df[df["concurrency"] == df["concurrency"].min()] if not df.empty else df
    return [Figure(r.backend, float(r.rows_mean)) for r in df.itertuples() if not math.isnan(r.rows_mean)]


def write_freshness(rd: RunData) -> list[Dimension]:
    """How stale answers get after a structural write, in the run's own read consistency: the worst visibility
    lag p95 over the write kinds at the first concurrency level, and the stale allows per 1,000 revocations per
    writer count (stale_dimensions): concurrent writers are where a datastore's snapshots can lag."""
    df = write_table(rd)
    if df.empty:
        return []
    df = df[df["session"]]
    if df.empty:  # every write phase named a mode (e.g. only revocations at 8 writers per mode)
        return stale_dimensions(rd)
    first = df[df["concurrency"] == df["concurrency"].min()]
    c = int(first["concurrency"].min())
    lag = [_lag(b, g) for b, g in first.groupby("backend", sort=False)]
    return [Dimension("Writes", f"Visibility lag p95 after a structural write (worst write kind), {c} "
                      f"worker{'s' if c > 1 else ''}", "ms", False, lag, anchor("structural-writes"),
                      summary="visibility lag p95", key="visibility_p95"),
            *stale_dimensions(rd)]


def stale_dimensions(rd: RunData) -> list[Dimension]:
    """Stale allows per 1,000 revocations (freshness.stale_allows) in each backend's own read mode, one dimension
    per writer count, most writers first (the decision summary's row), each figure's base beside it. Ranked by
    Wilson's 95% interval: measured, so it may ground a clear difference; 0 of 3 (0-562) is apart from none but
    a rate near 1,000."""
    t = freshness.stale_allows(rd)
    t = t[t["own"] & (t["revocations"] > 0)] if not t.empty else t
    out = []
    for c in sorted(set(t["writers"]), reverse=True) if not t.empty else ():
        figs = [_stale_figure(r) for _, r in t[t["writers"] == c].iterrows()]
        out.append(Dimension("Writes", f"Stale allows, own read mode, {_workers(c).replace('worker', 'writer')}",
                             freshness.STALE_UNIT, False, figs, anchor("structural-writes"), key=f"stale_allows/{c}"))
    return out


def _stale_figure(r: pd.Series) -> Figure:
    base, writers = f"{r['stale_allows']:,} of {r['revocations']:,}", _workers(r["writers"]).replace("worker", "writer")
    mode = "" if r["mode"] == "—" else f"{r['mode']}, "
    return Figure(r["backend"], float(r["per_1k"]), n=int(r["revocations"]), bounds=(r["lo_1k"], r["hi_1k"]),
                  base=base, detail=f"{mode}{writers}: {base} revocations, 95% {num(r['lo_1k'])}-{num(r['hi_1k'])}")


# A visibility lag p95 is one figure per backend (no rounds give it an interval); told apart by ±1 poll, openfga
# 5,005 vs spicedb-pg 4,993 ms (20261128-083444) became 5,042 vs 5,308 ms (20261129-201802): two 5 s cache
# windows, reversed by noise. Its interval is stated as assumed and carries no verdict.
LAG_BASIS = f"assumed: one p95 per backend, taken to lie within one {POLL_S * 1000:g} ms poll of its value"


def _lag(backend: str, kinds: pd.DataFrame) -> Figure:
    """The worst write kind's visibility lag p95 (kinds: the backend's write_table rows, one per write kind).
    A visibility lag is read by polling every POLL_S: within one poll of its figure it is not resolved, so
    lags under a poll (visible at the first check) are no clear difference. Ranked at face value, 0.069 and
    0.152 ms swapped places between two back-to-back make bench runs (20261128-051009, -053218). ⚠ when any
    kind's p95 rests on a round under its op floor: that kind's true p95 may lie above the worst one shown
    (scylla's revocations: 1 op in 20261129-201802)."""
    poll = POLL_S * 1000
    ms = float(kinds["vis_p95_ms"].max())
    return Figure(backend, ms, bounds=(max(0.0, ms - poll), ms + poll), detail=f"worst of {len(kinds)} write kinds",
                  q=95.0, n=int(kinds["vis_ops"].sum()), fewest=int(kinds["vis_fewest"].min()), basis=LAG_BASIS)


GROWTH = ("check_p95_ms", "lookup_p95_ms", "bytes_per_rel")  # size-sweep measures ranked by growth exponent


def size_growth(rd: RunData) -> list[Dimension]:
    """Growth exponents of a `--profiles` size sweep (authzbench.report.sweep.runs), when this run ends one."""
    runs = sweep.sweep_runs(rd)
    df = sweep.size_table(runs) if len(runs) >= 2 else pd.DataFrame()
    out = []
    for m in GROWTH if not df.empty else ():
        figs = []
        for b, g in df.groupby("backend", sort=False):
            k = sweep.slope(g["relationships"].to_numpy(float), g[m].to_numpy(float))
            if k is not None:
                figs.append(Figure(b, k, detail=f"{g['relationships'].nunique()} sizes"))
        out.append(Dimension("Growth with size", f"Growth of {sweep.MEASURES[m]} with the dataset (exponent: "
                             "1 = linear, 0 = flat)", "", False, figs, "how-cost-grows-with-size",
                             key=f"growth/{m}"))
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


# ranking ----------------------------------------------------------------------------------------------

def lettered(figs: list[Figure], higher_is_better: bool) -> list[tuple[Figure, str]]:
    """(figure, its letters), best value first (figures.letters). Unstable figures are lettered by their
    (wide) interval and keep their flag."""
    cld = letters(figs, higher_is_better)
    return [(f, cld[f.backend]) for f in best_first(figs, higher_is_better)]


def all_assumed(figs: list[Figure]) -> bool:
    """Every figure's interval assumed: the dimension claims no difference at all."""
    return bool(figs) and all(f.assumed for f in figs)


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


def ranked(rd: RunData, d: Dimension) -> dict[str, tuple[Figure, str | None, bool]]:
    """backend -> (figure, letters, networked). A figure with no value (e.g. "no worker count met the SLO")
    has letters None: lettering it put a backend that met no SLO first among the †."""
    out: dict[str, tuple[Figure, str | None, bool]] = {}
    for figs in split(d, rd):
        r = letters([f for f in figs if not f.text], d.higher_is_better)
        out.update({f.backend: (f, None if f.text else r[f.backend], rd.comparable(f.backend))
                    for f in figs if f.text or f.backend in r})
    return out


def compute(rd: RunData, dims: list[DimensionFn] | None = None) -> list[Dimension]:
    if not dims:  # the whole ranking: the decision summary, the digest and the findings each ask for it
        return list(derived(rd, "ranking", lambda: _compute(rd, DIMENSIONS)))
    return _compute(rd, dims)


def _compute(rd: RunData, dims: list[DimensionFn]) -> list[Dimension]:
    out: list[Dimension] = []
    for fn in dims:
        out += [d for d in fn(rd) if d.figures]
    return out
