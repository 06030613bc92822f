"""The read topic's charts (report/reads.py): the percentile spectrum per read scenario (latency against
50/90/99/99.9% on a log "nines" axis, as HdrHistogram's plotter and wrk2 draw it), throughput against
concurrency (log), latency against throughput over the worker sweep and the resource bars, with the caption
naming each backend a chart has no line for, and why. Drawn with report/core/charts.py's palette."""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from authzbench.core.metrics import merge, percentile
from authzbench.report.core.charts import _legend_below, _plain_ticks, _save, _style, colour, slo_label
from authzbench.report.core.data import RunData
from authzbench.report.core.tables import label
from authzbench.workloads.catalog import SCENARIOS

SPECTRUM_POINTS = 60  # points per line: smooth at the size a chart is pasted
MAX_NINES = 5  # the spectrum stops at 99.999% however many ops there are
NINES_TICKS = [(np.log10(2), "50%"), (1.0, "90%"), (2.0, "99%"), (3.0, "99.9%"), (4.0, "99.99%"),
               (5.0, "99.999%")]


def _nines(q: np.ndarray) -> np.ndarray:
    """A percentile on the "nines" axis: 50% -> 0.3, 90% -> 1, 99% -> 2, 99.9% -> 3."""
    return -np.log10(1 - q)


def spectrum_points(encoded: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """(percentile as a fraction, latency in ms) from the 50th up to the percentile the op count supports
    (1 - 1/n: beyond it a percentile is the maximum), as HdrHistogram's percentile plotter draws it."""
    h = merge(encoded)
    n = h.get_total_count()
    if n < 2:
        return np.array([]), np.array([])
    top = min(np.log10(n), MAX_NINES)
    q = 1 - 10 ** -np.linspace(np.log10(2), top, SPECTRUM_POINTS)
    return q, np.array([percentile(h, 100 * x) / 1000 for x in q])


def spectrum(rd: RunData, scenario: str, chart_dir: Path) -> str | None:
    """Latency against percentile on a log nines axis, one line per backend; one panel at 1 worker (the
    fewest measured) and one at the most workers, when the scenario ran at more than one."""
    ph = rd.phases
    g = ph[(ph["scenario"] == scenario) & (ph["mode"] == "closed") & (ph["ops"] > 0)]
    if g.empty:
        return None
    if "consistency" in g:  # phases re-run under another read consistency mode are reported apart
        g = g[g["consistency"] == ""] if (g["consistency"] == "").any() else g
    if not g[~g["kind"].isin(["write", "visibility"])].empty:
        g = g[~g["kind"].isin(["write", "visibility"])]
    levels = sorted({int(c) for c in g["concurrency"]})  # every worker count measured
    fig, axes = plt.subplots(1, len(levels), figsize=(3.6 * len(levels) + 0.6, 3.4), squeeze=False,
                             sharey=True)
    backends = list(dict.fromkeys(g["backend"]))
    top, missing = 0.0, absent(rd, scenario, levels)
    for ax, c in zip(axes[0], levels, strict=True):
        if names := [b for b, cc in missing if cc == c]:  # the caption says why (absent_caption)
            ax.text(0.98, 0.03, "no line: " + ", ".join(names), transform=ax.transAxes, ha="right",
                    fontsize=7)
        for b in backends:
            rows = g[(g["backend"] == b) & (g["concurrency"] == c)]
            q, ms = spectrum_points([h for hs in rows["hists"] for h in hs])
            if len(q):
                ax.plot(_nines(q), ms, label=label(rd, b), linewidth=1.6,
                        markevery=12, markersize=4, **_style(rd, b))
                top = max(top, float(_nines(q)[-1]))
        ax.set_title(f"{c} worker" + ("" if c == 1 else "s"), fontsize=9)
        ax.set_xlabel("percentile", fontsize=8)
        ax.grid(True, which="both", alpha=0.3)
    for ax in axes[0]:
        ticks = [t for t in NINES_TICKS if t[0] <= max(top, 1.0) + 1e-9]
        ax.set_xticks([t[0] for t in ticks], [t[1] for t in ticks], fontsize=8)
        ax.set_xlim(NINES_TICKS[0][0], max(top, 1.0))
    axes[0][0].set_yscale("log")
    axes[0][0].set_ylabel("latency (ms)", fontsize=8)
    _plain_ticks(axes[0][0])
    fig.suptitle(f"{scenario}: latency by percentile", fontsize=10)
    _legend_below(fig, axes[0][0], len(backends))
    return _save(fig, chart_dir, scenario, tight=False)


def throughput(rd: RunData, chart_dir: Path) -> str | None:
    """Checks/s against concurrent workers (both log), one line per backend."""
    ph = rd.phases
    closed = ph[(ph["mode"] == "closed") & (ph["ops"] > 0)]
    checks = closed[closed["kind"] == "check"]
    if checks["concurrency"].nunique() <= 1:
        return None
    fig, ax = plt.subplots(figsize=(7, 3.8))
    for b, g in checks.groupby("backend"):
        s = g.groupby("concurrency")["ops_per_s"].mean()
        ax.plot(s.index, s.values, label=label(rd, b), **_style(rd, b))
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")  # a linear axis flattens every backend under the fastest one
    ax.set_xlabel("concurrent workers")
    ax.set_ylabel("checks/s (mean over check scenarios)")
    _plain_ticks(ax, checks["concurrency"])
    ax.grid(True, which="both", alpha=0.3)
    _legend_below(fig, ax, checks["backend"].nunique())
    return _save(fig, chart_dir, "throughput", tight=False)


def latency_vs_throughput(rd: RunData, scenario: str, points: dict[str, list[tuple[float, float, float]]],
                          slo_ms: float | None, chart_dir: Path) -> str | None:
    """p50 (hollow) and p95 (filled) against achieved checks/s over the concurrency sweep, one colour per
    backend, the mixed-load SLO's p95 line drawn where it applies: where a curve turns up is the backend's
    useful capacity. points: backend -> [(ops/s, p50, p95)] in worker order, each the report's one figure."""
    if not any(len(v) >= 2 for v in points.values()):
        return None
    fig, ax = plt.subplots(figsize=(7, 3.8))
    drawn = {b: pts for b, pts in points.items() if pts}
    for b, pts in drawn.items():
        x, p50, p95 = zip(*pts, strict=True)
        st = _style(rd, b)
        ax.plot(x, p95, label=label(rd, b), **st)
        ax.plot(x, p50, **{**st, "markerfacecolor": "none", "linestyle": ":", "alpha": 0.8})
    if (line := slo_line(scenario, slo_ms)) is not None:
        ax.axhline(line, color="red", linewidth=1, linestyle="--", label=slo_label(line))
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("achieved checks/s (one point per worker count run: "
                  f"{workers_text(swept_workers(rd, scenario))})")
    ax.set_ylabel("latency (ms): p95 solid, p50 dotted")
    ax.set_title(f"{scenario}: latency against throughput", fontsize=10)
    _plain_ticks(ax)
    ax.grid(True, which="both", alpha=0.3)
    _legend_below(fig, ax, len(drawn) + (line is not None))
    return _save(fig, chart_dir, f"{scenario}-latency-throughput", tight=False)


def swept_workers(rd: RunData, scenario: str) -> list[int]:
    """The worker counts at which some backend measured this scenario's closed loop (not the plan's list:
    a chart named 32 workers that no run of the default plan measured)."""
    ph = rd.phases
    if ph.empty:
        return []
    g = ph[(ph["scenario"] == scenario) & (ph["mode"] == "closed") & (ph["ops"] > 0)]
    return sorted({int(c) for c in g["concurrency"]})


def workers_text(levels: list[int]) -> str:
    return ", ".join(map(str, levels)) + (" worker" if levels == [1] else " workers")


def slo_line(scenario: str, slo_ms: float | None) -> float | None:
    """The SLO's check p95 where it applies: the mixed load's phases, the only ones it is judged on."""
    sc = SCENARIOS.get(scenario)
    return slo_ms if slo_ms and sc is not None and sc.op == "mixed" else None


def absent(rd: RunData, scenario: str, levels: list[int], need: int = 2) -> dict[tuple[str, int], str]:
    """(backend, workers) -> why it has no line in a chart of this scenario at that worker count (fewer than
    `need` ops, or the phase not run), from the records; every backend the run measured is expected."""
    ph = rd.phases
    expected = list(dict.fromkeys([*(ph["backend"] if not ph.empty else []),
                                   *(r.backend for r in rd.skipped)]))
    out = {}
    for b in expected:
        for c in levels:
            rows = ph[(ph["backend"] == b) & (ph["scenario"] == scenario) & (ph["mode"] == "closed")
                      & (ph["concurrency"] == c)] if not ph.empty else ph
            n = int(rows["ops"].sum()) if len(rows) else 0
            if n < need:
                out[(b, c)] = _absent_reason(rd, rows, n, need, b, scenario, c)
    return out


def _absent_reason(rd: RunData, rows: pd.DataFrame, n: int, need: int, b: str, scenario: str, c: int) -> str:
    skipped = dict.fromkeys(r.reason for r in rd.skipped
                            if (r.backend, r.scenario, int(r.concurrency)) == (b, scenario, c))
    parts = [f"{n} op{'' if n == 1 else 's'} measured (a line needs {need})"] if len(rows) else []
    parts += [f"not run: {why}" for why in skipped]
    if not parts:
        parts = ["no phase recorded"]
    return "; ".join(parts)


def absent_caption(rd: RunData, scenario: str, levels: list[int] | None = None, need: int = 2) -> list[str]:
    """Markdown lines naming each backend the chart has no line for, and why, then a blank line (nothing when
    every backend is drawn)."""
    miss = absent(rd, scenario, swept_workers(rd, scenario) if levels is None else levels, need)
    return ([*(f"- No line for {b} at {workers_text([c])}: {why}." for (b, c), why in miss.items()), ""]
            if miss else [])


def bars(rd: RunData, panels: list[tuple[str, dict[str, float]]], chart_dir: Path) -> str | None:
    """One horizontal bar panel per measure (ingest, footprint, CPU per 1,000 checks, memory), log axis,
    each backend in its fixed colour, † hatched."""
    panels = [(t, v) for t, v in panels if v]
    if not panels:
        return None
    fig, axes = plt.subplots(1, len(panels), figsize=(3.4 * len(panels), 3.2), squeeze=False)
    for ax, (title, vals) in zip(axes[0], panels, strict=True):
        names = list(vals)[::-1]
        ax.barh(range(len(names)), [vals[b] for b in names], color=[colour(b) for b in names],
                hatch=None, edgecolor=["black" if rd.kind(b) != "server" else "none" for b in names])
        for i, b in enumerate(names):
            if rd.kind(b) != "server":
                ax.patches[i].set_hatch("//")
        ax.set_yticks(range(len(names)), [label(rd, b) for b in names], fontsize=8)
        ax.set_xscale("log")
        ax.set_title(title, fontsize=9)
        ax.grid(True, axis="x", which="both", alpha=0.3)
    return _save(fig, chart_dir, "resources")
