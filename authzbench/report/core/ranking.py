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
- a percentile resting on fewer ops than it needs (p95: 20, p99: 100, p99.9: 1,000) is shown marked.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import pandas as pd

from authzbench.report.core.data import RunData
from authzbench.report.core.figures import best_first, cell, letters
from authzbench.report.core.noise import column, min_ops

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
    # where the figure could land on another run (else value ± spread)
    bounds: tuple[float, float] | None = None
    unstable: bool = False  # its rounds disagree by more than noise.UNSTABLE_RANGE: shown, not ranked
    disturbed: bool = False  # other processes' CPU disturbed a phase it rests on, even after re-runs
    client_bound: bool | None = None  # a throughput whose client used more CPU than the server; None: unknown
    fewest: int | None = None  # ops in its smallest round; None: n is the one count it rests on
    base: str = ""  # the count a rate rests on ("14 of 200"), shown beside its value wherever it is shown
    basis: str = ""  # why its interval is assumed (a factor or width set by hand); "" with bounds: measured
    # a rate whose ⚠ is its SLO verdict's p95: a p95 from fewer ops than it needs mostly lies above the
    # slowest op seen (3 writes: 86% of the time), so the verdict errs towards PASS and the rate towards too
    # high
    worse_below: bool = False

    def interval(self) -> tuple[float, float]:
        if self.bounds is not None:
            lo, hi = self.bounds
        else:
            s = 0.0 if math.isnan(self.spread) else self.spread  # unmeasured: taken at face value
            lo, hi = self.value - s, self.value + s
        # a figure marked ⚠ rests on a round too small for its percentile: it may be anywhere worse than its
        # interval says, so it is never clearly apart from another ⚠ figure (figures._compute's rule for a
        # Cell)
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

def closed_phases(rd: RunData, scenario: str, kind: str | None = None) -> pd.DataFrame:
    ph = rd.phases
    if ph.empty:
        return ph
    sub = ph[(ph["scenario"] == scenario) & (ph["mode"] == "closed") & (ph["ops"] > 0)]
    if "consistency" in sub:  # phases re-run under another read consistency mode are reported apart
        sub = sub[sub["consistency"] == ""]
    return sub[sub["kind"] == kind] if kind else sub[~sub["kind"].isin(["write", "visibility"])]


def pct_figures(rd: RunData, scenario: str, q: float, kind: str | None = None,
                 detail: Callable[[str, pd.DataFrame], str] | None = None) -> list[Figure]:
    """Percentile q at each backend's lowest concurrency (1 worker): the one computed figure
    (figures.cell)."""
    sub = closed_phases(rd, scenario, kind)
    out = []
    for b, g in sub.groupby("backend", sort=False):
        c = int(g["concurrency"].min())
        x = cell(rd, b, scenario, c, column(q), kind)
        if x is None:
            continue
        out.append(
            Figure(b, x.value, n=x.n, q=q, detail=detail(b, g[g["concurrency"] == c]) if detail else "",
                   bounds=(x.lo, x.hi), unstable=x.unstable, disturbed=x.disturbed, fewest=x.fewest))
    return out


def single_bounds(value: float, what: str) -> tuple[float, float]:
    f = SINGLE_FACTOR[what]
    return value / f, value * f


def single_basis(what: str) -> str:
    """The stated basis of a single measurement's assumed interval."""
    f = SINGLE_FACTOR[what]
    return f"assumed: one measurement, taken to lie within {f:g}x of its value, a width from earlier runs"


def single_note(what: str) -> str:
    """One run cannot show how far a single load moves between runs: the factor is stated as an assumption."""
    f = SINGLE_FACTOR[what]
    return (
        f"one load per backend: each is assumed to lie within {f:g}x of its value (a width set from earlier "
        "runs of this suite; one run cannot measure how far its loads move between runs), so no difference "
        "is claimed")


def in_process(rd: RunData, b: str) -> str:
    s = rd.servers.get(b)
    return "in-process engine: includes the client" if s and s.concurrency_model == "thread" else ""


def worker_count(c: int) -> str:
    return f"{c} worker" + ("" if c == 1 else "s")


def ints_text(s: pd.Series) -> str:
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
    return ([f for f in d.figures if rd.comparable(f.backend)],
            [f for f in d.figures if not rd.comparable(f.backend)])


def ranked(rd: RunData, d: Dimension) -> dict[str, tuple[Figure, str | None, bool]]:
    """backend -> (figure, letters, networked). A figure with no value (e.g. "no worker count met the SLO")
    has letters None: lettering it put a backend that met no SLO first among the †."""
    out: dict[str, tuple[Figure, str | None, bool]] = {}
    for figs in split(d, rd):
        r = letters([f for f in figs if not f.text], d.higher_is_better)
        out.update({f.backend: (f, None if f.text else r[f.backend], rd.comparable(f.backend))
                    for f in figs if f.text or f.backend in r})
    return out


def compute(rd: RunData, dims: list[DimensionFn]) -> list[Dimension]:
    """The dimensions `dims` make of the run, those without figures left out (dimensions.py lists the
    report's)."""
    out: list[Dimension] = []
    for fn in dims:
        out += [d for d in fn(rd) if d.figures]
    return out
