"""The mixed load's chart (report/mixed.py): check p95 against offered load for the open-loop rate steps
(the hockey stick), the SLO drawn."""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd

from authzbench.report.core.charts import _legend_below, _plain_ticks, _save, _style, slo_label
from authzbench.report.core.data import RunData
from authzbench.report.core.tables import label


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
