"""The charts' shared machinery: the palette (one colour and marker per backend in every chart), the line
style († dashed and hollow), plain log ticks, the legend below the plot, the generic log-log chart and where
a chart is saved. Each topic draws its own chart in its chart module (reads_chart.py, writes_chart.py,
sweep/chart.py, ...) with these; importing this module selects the headless backend before any of them
draws."""

from __future__ import annotations

from pathlib import Path

import matplotlib
import pandas as pd

matplotlib.use("Agg")  # headless: reports are rendered on servers and in CI
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter  # noqa: E402

from authzbench.report.core.data import RunData  # noqa: E402
from authzbench.report.core.tables import label  # noqa: E402
from authzbench.systems import systems  # noqa: E402

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


def slo_label(slo_ms: float) -> str:
    return f"mixed-load SLO: check p95 < {slo_ms:g} ms"


def _loglog(rd: RunData, df: pd.DataFrame, x: tuple[str, str, str], measures: dict[str, str], chart_dir: Path,
            prefix: str) -> dict[str, str]:
    """A log-log chart per measure against column x = (column, axis label, title word), one line per
    backend."""
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
