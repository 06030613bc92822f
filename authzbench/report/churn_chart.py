"""The churn sweep's chart (report/churn.py): read p95 against churn rate, the check SLO drawn."""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd

from authzbench.report.core.charts import _legend_below, _plain_ticks, _save, _style, colour
from authzbench.report.core.data import RunData
from authzbench.report.core.tables import label


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
