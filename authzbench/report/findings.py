"""Findings: per dimension, the backends ranked with ratios to the best, each linked to its table.

The figures and the rules ranking them are the ranking model (ranking.py); this module only renders them.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path

from authzbench.report import clientbound, tables
from authzbench.report.data import RunData
from authzbench.report.figures import ranks
from authzbench.report.ranking import (
    DISTURBED,
    MARK,
    SINGLE_FACTOR,
    Dimension,
    Figure,
    compute,
    ratio_to_best,
    split,
    tiers,
)
from authzbench.report.tables import num, ratio_text


def ranking_text(figs: list[Figure], d: Dimension, label: Callable[[str], str]) -> str:
    """"1. a 0.13 ms; 2. b 0.69 ms ×5.5 = c 0.71 ms ×5.5": each rank (1 + the number clearly better) with its
    figures, which have no clear difference between them; a figure with no value ("none met the SLO") unranked.
    Intervals and op counts: the appendix's figure table."""
    valued = [f for f in figs if not f.text]
    ts, r = tiers(valued, d.higher_is_better), ranks(valued, d.higher_is_better)
    unranked = [f"unranked: {_cell(f, d, label, f.value)}" for f in figs if f.text]
    if not ts and not unranked:
        return "nothing measured"
    best = ts[0][0].value if ts else math.nan
    return "; ".join([*(f"{r[t[0].backend]}. " + " = ".join(_cell(f, d, label, best) for f in t) for t in ts),
                      *unranked])


def _cell(f: Figure, d: Dimension, label: Callable[[str], str], best: float) -> str:
    v = f"{MARK} " if f.too_few else ""
    v += f"{DISTURBED} " if f.disturbed else ""
    v += f"{clientbound.MARK} " if f.client_bound else ""
    v += f"**{label(f.backend)}** " + (f.text or f"{num(f.value)} {d.unit}".rstrip())
    if not f.text and f.value != best:
        v += " " + ratio_text(ratio_to_best(best, f.value, d.higher_is_better), d.higher_is_better)
    if f.unstable:
        v += " (unstable)"
    return v.rstrip()

def section(rd: RunData, out_dir: Path) -> str:
    """The Findings: per dimension the backends in rank groups, best first (the decision summary's heatmap is
    their picture)."""
    return render_section(rd, lambda b: tables.label(rd, b))


def render_section(rd: RunData, label: Callable[[str], str], chart: str | None = None,
                   dims: list[Dimension] | None = None) -> str:
    dims = compute(rd) if dims is None else dims
    if not dims:
        return ""
    lines = ["## Findings", "",
             "Per dimension, backends by rank, best first. Rank k: exactly k−1 backends are clearly better, 1 = "
             "none is; one rank (joined by =) = no clear difference, but a smaller rank alone does not mean clearly "
             "better. ×N: N times the best's figure; ÷N: the best's divided by N.",
             "A backend is clearly better than another when their intervals (lowest to highest round, widened "
             "to a percentile's 95% confidence interval) do not overlap and its figure is the better.",
             f"Loads and peak memory are measured once and taken to lie within {SINGLE_FACTOR['ingest']:g}x and "
             f"{SINGLE_FACTOR['rss']:g}x of their value; footprint and rows touched at face value. † backends are "
             "ranked apart.",
             f"(unstable): rounds spread wider than the figure, ranked by that wide interval; {MARK}: fewer ops "
             f"than the percentile needs in some round (its interval is open on its worse side, above for a latency, "
             f"down to zero for a rate: never ranked apart from another such figure); "
             f"{DISTURBED}: other processes disturbed a phase even after re-runs. "
             "Each figure's interval and op count: appendix, \"Every ranked figure\".", f"{clientbound.LEGEND}.", ""]
    if chart:
        lines += [f"![how far each backend is from the best, per dimension]({chart})", ""]
    group = None
    for d in dims:
        if d.group != group:
            lines += ([""] if group else []) + [f"### {d.group}", ""]
            group = d.group
        net, apart = split(d, rd)
        unit = f" ({d.unit})" if d.unit else ""
        text = f"- [{d.title}{unit}](#{d.anchor}), {'higher' if d.higher_is_better else 'lower'} is better: "
        text += ranking_text(net, _unitless(d), label) if net else "no networked server measured"
        if apart:
            text += f". † apart: {ranking_text(apart, _unitless(d), label)}"
        lines.append(text)
        if d.note:
            lines.append(f"  _{d.note}_")
    lines.append("")
    return "\n".join(lines)


def _unitless(d: Dimension) -> Dimension:
    """The dimension with its unit moved to the title: a cell shows the number alone."""
    return Dimension(d.group, d.title, "", d.higher_is_better, d.figures, d.anchor, key=d.key)
