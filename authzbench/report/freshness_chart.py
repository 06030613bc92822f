"""The freshness topic's chart (report/freshness.py): each engine's consistency modes, check p95 against
the visibility lag each allowed."""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd

from authzbench.report.core.charts import _legend_below, _plain_ticks, _save, _style
from authzbench.report.core.data import RunData
from authzbench.report.core.tables import label


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
