"""PNG charts next to the report, drawn by the sections that show them: the percentile spectrum per read
scenario (latency against 50/90/99/99.9% on a log "nines" axis, as HdrHistogram's plotter and wrk2 draw it),
throughput vs concurrency (log), check p95 against offered load for open-loop rate steps (the hockey stick),
and the Findings summary with each figure's interval. Legends sit outside the plot area."""

from __future__ import annotations

from pathlib import Path

import matplotlib
import numpy as np
import pandas as pd

matplotlib.use("Agg")  # headless: reports are rendered on servers and in CI
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.colors import to_rgb  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter  # noqa: E402

from authzbench.core.metrics import merge, percentile  # noqa: E402
from authzbench.report.core.data import RunData  # noqa: E402
from authzbench.report.core.figures import cell, standing  # noqa: E402
from authzbench.report.core.tables import label  # noqa: E402
from authzbench.systems import systems  # noqa: E402
from authzbench.workloads.catalog import SCENARIOS  # noqa: E402

SPECTRUM_POINTS = 60  # points per line: smooth at the size a chart is pasted
MAX_NINES = 5  # the spectrum stops at 99.999% however many ops there are
NINES_TICKS = [(np.log10(2), "50%"), (1.0, "90%"), (2.0, "99%"), (3.0, "99.9%"), (4.0, "99.99%"), (5.0, "99.999%")]


# One colour and marker per backend in every chart of every report: each system's declared slot (`colour`).
FIXED = [s.name for s in sorted((s for s in systems().values() if s.colour >= 0), key=lambda s: s.colour)]
MARKERS = "osD^vP*Xhp<>"


def colour(b: str) -> str:
    b = b.rstrip(" †‡")
    i = FIXED.index(b) if b in FIXED else len(FIXED) + sum(map(ord, b)) % 9
    return plt.get_cmap("tab20")(2 * (i % 10) + (i >= 10))


def marker(b: str) -> str:
    b = b.rstrip(" †‡")
    return MARKERS[(FIXED.index(b) if b in FIXED else sum(map(ord, b))) % len(MARKERS)]


def _style(rd: RunData, b: str) -> dict:
    """The backend's fixed colour and marker; † backends dashed and hollow: never read as a networked
    server's line."""
    base = {"color": colour(b), "marker": marker(b)}
    return base if rd.kind(b) == "server" else {**base, "linestyle": "--", "markerfacecolor": "none"}


def _plain_ticks(ax, xs=None) -> None:
    """Log axes with plain numbers (300, 1,500), not 3×10², and ticks at the values measured."""
    plain = FuncFormatter(lambda v, _: f"{v:,.0f}" if v >= 10 else f"{v:g}")
    ax.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))  # labels on 1-2-5 steps
    ax.yaxis.set_major_formatter(plain)
    ax.yaxis.set_minor_formatter(NullFormatter())
    if xs is not None:
        ax.set_xticks(sorted(set(xs)))
        ax.xaxis.set_major_formatter(plain)
        ax.xaxis.set_minor_formatter(NullFormatter())


def _save(fig, chart_dir: Path, name: str, tight: bool = True) -> str:
    if tight:
        fig.tight_layout()
    p = chart_dir / f"{name}.png"
    fig.savefig(p, dpi=100)
    plt.close(fig)
    return f"{chart_dir.name}/{p.name}"


def chart_dir(out_dir: Path, run_id: str) -> Path:
    d = out_dir / f"{run_id}-charts"
    d.mkdir(parents=True, exist_ok=True)
    return d


def _legend_below(fig, ax, n: int) -> None:
    """The legend under the plot, never over the lines (a chart is read at the width it is pasted)."""
    handles, labels = ax.get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=min(4, max(1, n)), fontsize=8, frameon=False)
    fig.tight_layout(rect=(0, 0.03 + 0.07 * (1 + (n - 1) // 4), 1, 1))


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
    fig, axes = plt.subplots(1, len(levels), figsize=(3.6 * len(levels) + 0.6, 3.4), squeeze=False, sharey=True)
    backends = list(dict.fromkeys(g["backend"]))
    top, missing = 0.0, absent(rd, scenario, levels)
    for ax, c in zip(axes[0], levels, strict=True):
        if names := [b for b, cc in missing if cc == c]:  # the caption says why (absent_caption)
            ax.text(0.98, 0.03, "no line: " + ", ".join(names), transform=ax.transAxes, ha="right", fontsize=7)
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


def open_loop(rd: RunData, verdicts: pd.DataFrame, slo: dict, chart_dir: Path) -> str | None:
    """Check p95 against offered load for the open-loop rate steps (the hockey stick), when there are any."""
    if verdicts.empty or not (verdicts["mode"] == "open").any():
        return None
    return _open_loop(rd, verdicts[verdicts["mode"] == "open"], slo, chart_dir)


def _open_loop(rd: RunData, v: pd.DataFrame, slo: dict, chart_dir: Path) -> str:
    """Check p95 against offered load, one line per backend, the SLO threshold drawn."""
    fig, ax = plt.subplots(figsize=(7, 3.8))
    for b, g in v.sort_values("rate").groupby("backend", sort=False):
        ax.plot(g["rate"], g["check_p95"], label=label(rd, b), **_style(rd, b))
    if "check_p95_ms" in slo:
        ax.axhline(slo["check_p95_ms"], color="red", linewidth=1, linestyle=":",
                   label=slo_label(slo["check_p95_ms"]))
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("offered load (ops/s, open loop)")
    ax.set_ylabel("check p95 (ms, from intended start)")
    _plain_ticks(ax, v["rate"])
    ax.grid(True, which="both", alpha=0.3)
    _legend_below(fig, ax, v["backend"].nunique() + ("check_p95_ms" in slo))
    return _save(fig, chart_dir, "open_loop", tight=False)


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
    ax.set_xlabel(f"achieved checks/s (one point per worker count run: {workers_text(swept_workers(rd, scenario))})")
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


def slo_label(slo_ms: float) -> str:
    return f"mixed-load SLO: check p95 < {slo_ms:g} ms"


def absent(rd: RunData, scenario: str, levels: list[int], need: int = 2) -> dict[tuple[str, int], str]:
    """(backend, workers) -> why it has no line in a chart of this scenario at that worker count (fewer than
    `need` ops, or the phase not run), from the records; every backend the run measured is expected."""
    ph = rd.phases
    expected = list(dict.fromkeys([*(ph["backend"] if not ph.empty else []), *(r.backend for r in rd.skipped)]))
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
    return [*(f"- No line for {b} at {workers_text([c])}: {why}." for (b, c), why in miss.items()), ""] if miss else []


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


# The heatmap's colour is the cell's first letter (figures.letters), the same in every row: a, b, c, d or later,
# grey where nothing was lettered (none qualified, not measured), blues for stand-ins (†), lettered among
# themselves only. A better figure's first letter never comes after a worse one's, so a greener cell never
# holds a worse figure of its row; whether two cells are clearly apart is said by their letters.
RANK_COLOURS = ("#1a9850", "#fee08b", "#fc8d59", "#d73027")
STAND_IN_COLOURS = ("#2166ac", "#67a9cf", "#d1e5f0", "#f7f7f7")
UNRANKED = "#bdbdbd"


def cell_colour(first: int | None, unranked: bool, stand_in: bool) -> str:
    """The colour of one heatmap cell from its first letter's position alone (figures.standing: a = 1), never
    from the other cells of its row."""
    if first is None or unranked:
        return UNRANKED
    return (STAND_IN_COLOURS if stand_in else RANK_COLOURS)[min(first, 4) - 1]


def decision_heatmap(matrix, out_dir: Path, run_id: str) -> str | None:
    """Needs x backends, each cell coloured by its first letter (cell_colour) and labelled with its figure and
    letters."""
    needs, backends, groups, texts, stand_in = matrix
    if not needs or len(backends) < 2:
        return None
    rgb = np.array([[to_rgb(cell_colour(standing(g) if g else None, texts[i][j].startswith("none"), stand_in[j]))
                     for j, g in enumerate(row)] for i, row in enumerate(groups)])
    fig, ax = plt.subplots(figsize=(1.05 * len(backends) + 3.2, 0.36 * len(needs) + 1.8))
    ax.imshow(rgb, aspect="auto")
    for i in range(len(needs)):
        for j in range(len(backends)):
            if texts[i][j]:
                rank = "\nunranked" if groups[i][j] is None else f"\n({groups[i][j]})"  # no value, no letter
                ax.text(j, i, texts[i][j] + rank, ha="center", va="center", fontsize=6.5)
    ax.set_xticks(range(len(backends)), backends, fontsize=8, rotation=30, ha="right")
    ax.set_yticks(range(len(needs)), needs, fontsize=8)
    ax.set_title("letters per need (sharing a letter: not clearly apart; colour: first letter; † among † only)",
                 fontsize=9)
    ax.legend(handles=_heatmap_legend(), loc="upper center", bbox_to_anchor=(0.5, -0.12 - 0.02 * len(needs) / 10),
              ncol=3, fontsize=6.5, frameon=False)
    return _save(fig, chart_dir(out_dir, run_id), "decision")


# charts drawn for the structural writes and the size sweep, in the same fixed colours ------------------

WRITE_PANELS = {"write_p95_ms": ("write", "write p95 (ms)"), "vis_p95_ms": ("visibility", "visibility lag p95 (ms)")}


def write_bars(rd: RunData, df: pd.DataFrame, col: str) -> dict[str, dict[str, tuple[float, bool]]]:
    """One panel of the structural-write chart: write kind -> backend -> (p95, too few ops), at the fewest
    workers in the run's own consistency mode. Too few is the figure's own rule (figures.Cell.too_few), the
    one its ⚠ in the tables follows."""
    one = df[(df["concurrency"] == df["concurrency"].min()) & df["session"]]
    kind = WRITE_PANELS[col][0]
    out: dict[str, dict[str, tuple[float, bool]]] = {}
    for r in one.itertuples():
        v = getattr(r, col)
        if v == v:  # NaN: nothing measured for this kind
            c = cell(rd, r.backend, r.scenario, int(r.concurrency), "p95_ms", kind)
            out.setdefault(r.scenario, {})[r.backend] = (float(v), bool(c is not None and c.too_few))
    return out


def structural_writes(rd: RunData, df: pd.DataFrame, chart_dir: Path) -> str | None:
    """Write p95 and visibility-lag p95 per write kind, a bar per backend in its fixed colour († hatched),
    ⚠ over a bar whose p95 rests on too few ops (it is then near the slowest op seen), log scale."""
    if df.empty:
        return None
    fig, axes = plt.subplots(1, 2, figsize=(11, 3.8))
    backends = list(dict.fromkeys(df["backend"]))
    for ax, col in zip(axes, WRITE_PANELS, strict=True):
        _write_panel(rd, ax, write_bars(rd, df, col), backends)
        ax.set_yscale("log")
        ax.set_title(WRITE_PANELS[col][1], fontsize=9)
        ax.grid(True, axis="y", which="both", alpha=0.3)
    _plain_ticks(axes[0])
    _plain_ticks(axes[1])
    fig.text(0.99, 0.01, "⚠ p95 from too few ops (near the slowest op)", ha="right", fontsize=7)
    _legend_below(fig, axes[0], len(backends))
    return _save(fig, chart_dir, "structural_writes", tight=False)


def _write_panel(rd: RunData, ax, bars: dict[str, dict[str, tuple[float, bool]]], backends: list[str]) -> None:
    width, labelled = 0.8 / max(1, len(backends)), set()
    for i, kind in enumerate(bars):
        for j, b in enumerate(backends):
            if b not in bars[kind]:
                continue
            (v, few), x = bars[kind][b], i - 0.4 + width * (j + 0.5)
            net = rd.kind(b) == "server"
            ax.bar(x, max(v, 0.001), width, color=colour(b), hatch=None if net else "//",
                   edgecolor="none" if net else "black", label=None if b in labelled else label(rd, b))
            labelled.add(b)
            if few:
                ax.text(x, max(v, 0.001), "⚠", ha="center", va="bottom", fontsize=7)
    ax.set_xticks(range(len(bars)), list(bars), fontsize=7, rotation=15)


def size_sweep(rd: RunData, df: pd.DataFrame, measures: dict[str, str], chart_dir: Path) -> dict[str, str]:
    """The size sweep's log-log chart per measure (scaling.py): one line per backend in its fixed colour and
    marker, † dashed and hollow. measure -> chart path, for the measures some backend has a value of."""
    return _loglog(rd, df, ("relationships", "relationships", "size"), measures, chart_dir, "scaling-")


def _loglog(rd: RunData, df: pd.DataFrame, x: tuple[str, str, str], measures: dict[str, str], chart_dir: Path,
            prefix: str) -> dict[str, str]:
    """A log-log chart per measure against column x = (column, axis label, title word), one line per backend."""
    column, xlabel, word = x
    out = {}
    for m, title in measures.items():
        if not (df[m] > 0).any():
            continue
        fig, ax = plt.subplots(figsize=(6, 3.5))
        for b, g in df.groupby("backend", sort=False):
            g = g[g[m] > 0].sort_values(column)
            if not g.empty:
                ax.plot(g[column], g[m], label=label(rd, b), **_style(rd, b))
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel(xlabel)
        ax.set_ylabel(title)
        ax.set_title(f"{title} vs {word} (log-log)")
        ax.legend(fontsize=7)
        out[m] = _save(fig, chart_dir, f"{prefix}{m}")
    return out


def _heatmap_legend() -> list:
    labels = ["first letter a (the best figure's)", "first letter b", "first letter c", "first letter d or later"]
    out = [Patch(color=c, label=t) for c, t in zip(RANK_COLOURS, labels, strict=True)]
    out += [Patch(color=STAND_IN_COLOURS[0], label="† first letter a among †"),
            Patch(color=STAND_IN_COLOURS[1], label="† first letter b+ (paler: later)"),
            Patch(color=UNRANKED, label="not ranked (none qualified / not measured)"),
            Patch(color="none", label="⚠ percentile from too few ops"),
            Patch(color="none", label="◐ client-bound (the summary's legend says when)")]
    return out


def churn_reads(rd: RunData, steps: pd.DataFrame, slo_ms: float, chart_dir: Path) -> str | None:
    """Read p95 against churn rate (report/churn.py's steps), one line per backend in its fixed colour, each
    point's interval as a bar, the check SLO drawn: where a line crosses it is where that backend's reads stop
    holding under churn, and a bar across it is an undecided step."""
    drawn = steps.dropna(subset=["read_p95_ms"])
    if drawn.empty:
        return None
    fig, ax = plt.subplots(figsize=(7, 3.8))
    for b, g in drawn.sort_values("rate").groupby("backend", sort=False):
        ax.plot(g["rate"], g["read_p95_ms"], label=label(rd, b), **_style(rd, b))
        bars = [(r, p, iv) for r, p, iv in zip(g["rate"], g["read_p95_ms"], g["read_iv"], strict=True) if iv]
        if bars:
            r, p, iv = zip(*bars, strict=True)
            ax.errorbar(r, p, yerr=[[v - lo for v, (lo, _) in zip(p, iv, strict=True)],
                                    [hi - v for v, (_, hi) in zip(p, iv, strict=True)]],
                        fmt="none", ecolor=colour(b), elinewidth=1, capsize=3)
    ax.axhline(slo_ms, color="red", linewidth=1, linestyle=":", label=f"check SLO: p95 < {slo_ms:g} ms")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("structural changes per second (log)")
    ax.set_ylabel("check p95 (ms, from intended start)")
    _plain_ticks(ax, drawn["rate"])
    ax.grid(True, which="both", alpha=0.3)
    _legend_below(fig, ax, drawn["backend"].nunique() + 1)
    return _save(fig, chart_dir, "churn", tight=False)


def freshness_modes(rd: RunData, modes: pd.DataFrame, chart_dir: Path) -> str | None:
    """Each engine's consistency modes (report/freshness.py): via-group check p95 against the visibility lag
    p95 that mode allowed, one point per mode labelled with it, one colour per engine: fresher modes sit left,
    what they cost shows as height."""
    drawn = modes.dropna(subset=["p95_ms", "lag_p95_ms"])
    if drawn.empty:
        return None
    fig, ax = plt.subplots(figsize=(7, 3.8))
    for b, g in drawn.groupby("backend", sort=False):
        ax.plot(g["lag_p95_ms"], g["p95_ms"], linestyle="none", label=label(rd, b), **_style(rd, b))
        for x, y, m in zip(g["lag_p95_ms"], g["p95_ms"], g["mode"], strict=True):
            ax.annotate(m, (x, y), fontsize=6, xytext=(3, 3), textcoords="offset points")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("visibility lag p95 after a write (ms, log)")
    ax.set_ylabel("via-group check p95, 1 worker (ms)")
    _plain_ticks(ax)
    ax.grid(True, which="both", alpha=0.3)
    _legend_below(fig, ax, drawn["backend"].nunique())
    return _save(fig, chart_dir, "freshness", tight=False)


def shape_sweep(rd: RunData, df: pd.DataFrame, param: str, measures: dict[str, str], chart_dir: Path) -> dict[str, str]:
    """The shape sweep's log-log chart per measure against one parameter's values (report/shapes.py), drawn as
    size_sweep draws against relationships. measure -> chart path."""
    return _loglog(rd, df, ("value", param, param), measures, chart_dir, f"shape-{param}-")
