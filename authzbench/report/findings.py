"""Findings: per dimension, the backends ranked with ratios to the best, each linked to its table.

The figures and the rules ranking them are the ranking model (ranking.py); this module only renders them.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from authzbench.report.core import clientbound, tables
from authzbench.report.core.data import RunData
from authzbench.report.core.figures import LETTER_MEANING
from authzbench.report.core.ranking import (
    DISTURBED,
    MARK,
    NO_DIFFERENCE,
    SINGLE_FACTOR,
    Dimension,
    Figure,
    all_assumed,
    lettered,
    ratio_to_best,
    split,
)
from authzbench.report.core.tables import num, ratio_from_zero, ratio_text
from authzbench.report.dimensions import compute


def ranking_text(figs: list[Figure], d: Dimension, label: Callable[[str], str]) -> str:
    """"a 0.13 ms (a); b 0.69 ms ×5.5 (b); c 0.71 ms ×5.5 (ab)": best value first, each figure with its
    letters (figures.letters: sharing a letter = not clearly apart); a figure with no value ("none met the
    SLO") unranked. Intervals and op counts: the appendix's figure table."""
    valued = [f for f in figs if not f.text]
    ts = lettered(valued, d.higher_is_better)
    unranked = [f"unranked: {_cell(f, d, label, None)}" for f in figs if f.text]
    if not ts and not unranked:
        return "nothing measured"
    best = ts[0][0] if ts else None
    shown = [f"{_cell(f, d, label, best)} ({cld})" for f, cld in ts]
    if all_assumed(valued) and len(valued) > 1:
        shown.append(NO_DIFFERENCE)
    return "; ".join([*shown, *unranked])


def _cell(f: Figure, d: Dimension, label: Callable[[str], str], best: Figure | None) -> str:
    v = f"{MARK} " if f.too_few else ""
    v += f"{DISTURBED} " if f.disturbed else ""
    v += f"{clientbound.MARK} " if f.client_bound else ""
    v += f"**{label(f.backend)}** " + (f.text or f"{num(f.value)} {d.unit}".rstrip())
    v += f" [{f.base}]" if f.base and not f.text else ""
    if not f.text and best is not None and f.value != best.value:
        bounded = ratio_from_zero(best.interval(), f.interval(), d.higher_is_better)
        ratio = ratio_text(ratio_to_best(best.value, f.value, d.higher_is_better), d.higher_is_better)
        v += f" {ratio if bounded is None else bounded}".rstrip()
    if f.unstable:
        v += " (unstable)"
    return v.rstrip()

def section(rd: RunData, out_dir: Path) -> str:
    """The Findings: per dimension the backends with their letters, best first (the decision summary's heatmap
    is their picture)."""
    return render_section(rd, lambda b: tables.label(rd, b))


def render_section(rd: RunData, label: Callable[[str], str], chart: str | None = None,
                   dims: list[Dimension] | None = None) -> str:
    dims = compute(rd) if dims is None else dims
    if not dims:
        return ""
    lines = [
        "## Findings", "",
        "Per dimension, backends best figure first, each with its letters in brackets: "
        f"{LETTER_MEANING}. ×N: N times the best's figure; ÷N: the best's divided by N.",
        "A backend is clearly better than another when both intervals are measured (lowest to highest round, "
        "widened to a percentile's 95% confidence interval), they do not overlap and its figure is the "
        "better.",
        f"Assumed intervals, never the ground of a clear difference: loads and peak memory are measured once "
        f"and taken to lie within {SINGLE_FACTOR['ingest']:g}x and {SINGLE_FACTOR['rss']:g}x of their value, "
        "a visibility lag within one poll; footprint, rows touched and any other figure measured once have "
        "no interval. † backends are lettered apart.",
        f"(unstable): rounds spread wider than the figure, ranked by that wide interval; {MARK}: fewer ops "
        "than the percentile needs in some round (its interval is open on its worse side, above for a "
        f"latency, down to zero for a rate: never clearly apart from another such figure); {DISTURBED}: "
        "other processes disturbed a phase even after re-runs. "
        'Each figure\'s interval and op count: appendix, "Every ranked figure".', f"{clientbound.LEGEND}.",
        ""]
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
