"""PNG charts next to the report: latency percentiles per scenario, throughput vs concurrency (log), check
p95 against offered load for open-loop rate steps (the hockey stick), and the Findings summary."""

from __future__ import annotations

from pathlib import Path

import matplotlib
import numpy as np
import pandas as pd

matplotlib.use("Agg")  # headless: reports are rendered on servers and in CI
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter  # noqa: E402

from authzbench.report.data import RunData  # noqa: E402


def _style(rd: RunData, b: str) -> dict:
    """† backends dashed and hollow: never read as a networked server's line."""
    return {} if rd.comparable(b) else {"linestyle": "--", "markerfacecolor": "none"}


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


def _save(fig, chart_dir: Path, name: str) -> str:
    fig.tight_layout()
    p = chart_dir / f"{name}.png"
    fig.savefig(p, dpi=100)
    plt.close(fig)
    return f"{chart_dir.name}/{p.name}"


def render_charts(rd: RunData, out_dir: Path, run_id: str, verdicts: pd.DataFrame | None = None,
                  slo: dict | None = None) -> dict[str, str]:
    """Returns chart key -> path relative to out_dir."""
    ph = rd.phases
    if ph.empty:
        return {}
    chart_dir = out_dir / f"{run_id}-charts"
    chart_dir.mkdir(parents=True, exist_ok=True)
    out: dict[str, str] = {}
    closed = ph[(ph["mode"] == "closed") & (ph["ops"] > 0)]
    for scen, g in closed.groupby("scenario", sort=False):
        one = g[g["concurrency"] == g["concurrency"].min()].groupby("backend")[["p50_ms", "p95_ms", "p99_ms"]].mean()
        if one.empty:
            continue
        fig, ax = plt.subplots(figsize=(7, 3.5))
        one.plot.bar(ax=ax)
        ax.set_ylabel("latency (ms)")
        ax.set_yscale("log")
        ax.set_title(f"{scen}: latency at {int(g['concurrency'].min())} worker(s)")
        ax.tick_params(axis="x", rotation=20)
        fig.tight_layout()
        p = chart_dir / f"{scen}.png"
        fig.savefig(p, dpi=100)
        plt.close(fig)
        out[scen] = f"{chart_dir.name}/{p.name}"
    checks = closed[closed["kind"] == "check"]
    if checks["concurrency"].nunique() > 1:
        fig, ax = plt.subplots(figsize=(7, 3.8))
        for b, g in checks.groupby("backend"):
            s = g.groupby("concurrency")["ops_per_s"].mean()
            ax.plot(s.index, s.values, marker="o", label=b + ("" if rd.comparable(b) else " †"), **_style(rd, b))
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")  # a linear axis flattens every backend under the fastest one
        ax.set_xlabel("concurrent workers")
        ax.set_ylabel("checks/s (mean over check scenarios)")
        _plain_ticks(ax, checks["concurrency"])
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)
        out["throughput"] = _save(fig, chart_dir, "throughput")
    if verdicts is not None and not verdicts.empty and (verdicts["mode"] == "open").any():
        out["open_loop"] = _open_loop(rd, verdicts[verdicts["mode"] == "open"], slo or {}, chart_dir)
    return out


def _open_loop(rd: RunData, v: pd.DataFrame, slo: dict, chart_dir: Path) -> str:
    """Check p95 against offered load, one line per backend, the SLO threshold drawn."""
    fig, ax = plt.subplots(figsize=(7, 3.8))
    for b, g in v.sort_values("rate").groupby("backend", sort=False):
        ax.plot(g["rate"], g["check_p95"], marker="o", label=b + ("" if rd.comparable(b) else " †"), **_style(rd, b))
    if "check_p95_ms" in slo:
        ax.axhline(slo["check_p95_ms"], color="red", linewidth=1, linestyle=":",
                   label=f"SLO: check p95 < {slo['check_p95_ms']:g} ms")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("offered load (ops/s, open loop)")
    ax.set_ylabel("check p95 (ms, from intended start)")
    _plain_ticks(ax, v["rate"])
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7)
    return _save(fig, chart_dir, "open_loop")


def render_summary_chart(matrix: pd.DataFrame, lo: pd.DataFrame, hi: pd.DataFrame, *, out_dir: Path,
                         run_id: str) -> str | None:
    """Findings at a glance: per dimension, how many times worse than the best each backend is (1 = best),
    with a bar over its interval (lo / hi: the ratios of the interval's ends), networked servers and †
    backends in separate panels (each measured against its own group)."""
    if matrix.empty:
        return None
    chart_dir = out_dir / f"{run_id}-charts"
    chart_dir.mkdir(parents=True, exist_ok=True)
    groups = [[c for c in matrix.columns if not c.endswith("†")], [c for c in matrix.columns if c.endswith("†")]]
    groups = [g for g in groups if len(g) >= 2]  # a lone backend is its own best everywhere: nothing to show
    if not groups:
        return None
    fig, axes = plt.subplots(1, len(groups), figsize=(5.5 * len(groups), 0.4 * len(matrix) + 1.8), squeeze=False,
                             sharey=True)
    rows = list(matrix.index)[::-1]
    finite = matrix.to_numpy(dtype=float)
    top = float(np.nanmax(np.where(np.isfinite(finite), finite, np.nan)))
    edge = max(2.0, top * 1.5)  # where "did not qualify" (no rate met the SLO: infinitely far) is drawn
    for ax, cols in zip(axes[0], groups, strict=True):
        for i, b in enumerate(cols):
            off = (i - (len(cols) - 1) / 2) * min(0.15, 0.7 / len(cols))
            vals = [matrix.loc[r, b] for r in rows]
            pts = ax.scatter([v if np.isfinite(v) else np.nan for v in vals], [y + off for y in range(len(rows))],
                             label=b, s=30, zorder=3, marker="o" if not b.endswith("†") else "D")
            _interval_bars(ax, rows, b, off, lo, hi, edge, pts.get_facecolor()[0])
            out = [(edge, y + off) for y, v in enumerate(vals) if np.isinf(v)]
            if out:
                ax.scatter(*zip(*out, strict=True), marker="x", s=40, zorder=3, color=pts.get_facecolor()[0])
        ax.set_xscale("log")
        ax.set_xlim(min(0.9, _low_edge(lo)), edge * 1.2)
        ax.axvline(1, color="black", linewidth=0.8)
        ax.set_yticks(range(len(rows)), rows)
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}×"))
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.set_xlabel("times worse than the best (log)\n1× = best; x at the right = did not qualify", fontsize=8)
        ax.set_title("networked servers" if not cols[0].endswith("†") else "† apart (each against the † best)",
                     fontsize=9)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=min(4, len(cols)))
    return _save(fig, chart_dir, "findings")


def _interval_bars(ax, rows: list[str], b: str, off: float, lo: pd.DataFrame, hi: pd.DataFrame, edge: float,
                   color) -> None:
    """A horizontal bar over each figure's interval (an end that is infinitely far drawn to the edge)."""
    for y, r in enumerate(rows):
        if r not in lo.index or b not in lo.columns:
            continue
        a, z = float(lo.loc[r, b]), float(hi.loc[r, b])
        if np.isnan(a) or np.isnan(z) or np.isinf(a):
            continue
        ax.hlines(y + off, a, min(z, edge), color=color, linewidth=1.2, alpha=0.6, zorder=2)


def _low_edge(lo: pd.DataFrame) -> float:
    v = lo.to_numpy(dtype=float)
    v = v[np.isfinite(v)]
    return float(v.min()) * 0.9 if v.size else 0.9
