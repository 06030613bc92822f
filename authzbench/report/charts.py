"""PNG charts next to the report: latency percentiles per scenario, throughput vs concurrency."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # headless: reports are rendered on servers and in CI
import matplotlib.pyplot as plt  # noqa: E402

from authzbench.report.data import RunData  # noqa: E402


def render_charts(rd: RunData, out_dir: Path, run_id: str) -> dict[str, str]:
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
        fig, ax = plt.subplots(figsize=(7, 3.5))
        for b, g in checks.groupby("backend"):
            s = g.groupby("concurrency")["ops_per_s"].mean()
            ax.plot(s.index, s.values, marker="o", label=b)
        ax.set_xscale("log", base=2)
        ax.set_xlabel("concurrent workers")
        ax.set_ylabel("checks/s (mean over check scenarios)")
        ax.legend(fontsize=7)
        fig.tight_layout()
        p = chart_dir / "throughput.png"
        fig.savefig(p, dpi=100)
        plt.close(fig)
        out["throughput"] = f"{chart_dir.name}/{p.name}"
    return out
