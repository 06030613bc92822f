"""The decision summary's heatmap (report/decision.py): needs x backends, each cell coloured by its first
letter alone."""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.colors import to_rgb
from matplotlib.patches import Patch

from authzbench.report.core.charts import _save, chart_dir
from authzbench.report.core.figures import standing

# The heatmap's colour is the cell's first letter (figures.letters), the same in every row: a, b, c, d or
# later, grey where nothing was lettered (none qualified, not measured), blues for stand-ins (†), lettered
# among themselves only. A better figure's first letter never comes after a worse one's, so a greener cell
# never holds a worse figure of its row; whether two cells are clearly apart is said by their letters.
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
    rgb = np.array([[to_rgb(cell_colour(standing(g) if g else None, texts[i][j].startswith("none"),
                                        stand_in[j]))
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
    ax.set_title("letters per need (sharing a letter: not clearly apart; colour: first letter; "
                 "† among † only)", fontsize=9)
    ax.legend(handles=_heatmap_legend(), loc="upper center",
              bbox_to_anchor=(0.5, -0.12 - 0.02 * len(needs) / 10), ncol=3, fontsize=6.5, frameon=False)
    return _save(fig, chart_dir(out_dir, run_id), "decision")


def _heatmap_legend() -> list:
    labels = ["first letter a (the best figure's)", "first letter b", "first letter c",
              "first letter d or later"]
    out = [Patch(color=c, label=t) for c, t in zip(RANK_COLOURS, labels, strict=True)]
    out += [Patch(color=STAND_IN_COLOURS[0], label="† first letter a among †"),
            Patch(color=STAND_IN_COLOURS[1], label="† first letter b+ (paler: later)"),
            Patch(color=UNRANKED, label="not ranked (none qualified / not measured)"),
            Patch(color="none", label="⚠ percentile from too few ops"),
            Patch(color="none", label="◐ client-bound (the summary's legend says when)")]
    return out
