"""The structural writes' chart (report/writes.py): write p95 and visibility-lag p95 per write kind, a bar
per backend in its fixed colour."""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd

from authzbench.report.core.charts import _legend_below, _plain_ticks, _save, colour
from authzbench.report.core.data import RunData
from authzbench.report.core.figures import cell
from authzbench.report.core.tables import label

WRITE_PANELS = {"write_p95_ms": ("write", "write p95 (ms)"),
                "vis_p95_ms": ("visibility", "visibility lag p95 (ms)")}


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


def _write_panel(rd: RunData, ax, bars: dict[str, dict[str, tuple[float, bool]]],
                 backends: list[str]) -> None:
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
