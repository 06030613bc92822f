"""5 Read performance: one table and chart per read scenario, throughput against concurrency, server
CPU and memory per 1,000 checks."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from authzbench.report.core import charts, clientbound
from authzbench.report.core.data import RunData
from authzbench.report.core.figures import with_cells
from authzbench.report.core.frames import resource_table
from authzbench.report.core.tables import (
    figure_mode,
    label,
    link_target,
    marked,
    merge_repeats,
    monitor_summary,
    table,
)
from authzbench.scenarios.catalog import SCENARIOS

READ_COLS = {"backend": "Backend", "concurrency": "Workers", "ops": "Ops", "mean_ms": "Mean (ms)",
             "p50_ms": "p50 (ms)", "p95_ms": "p95 (ms)", "p99_ms": "p99 (ms)", "max_ms": "Max (ms)",
             "ops_per_s": "Ops/s", "errors": "Errors", "timeouts": "Timeouts", "mismatches": "Mismatches",
             "status": "Status"}


def section(rd: RunData, out_dir: Path) -> str:
    lines = ["## 5. Read performance by scenario", ""]
    ph = rd.phases
    if ph.empty:
        return "\n".join([*lines, "_no read phases recorded_", ""])
    chart_dir = charts.chart_dir(out_dir, rd.manifest["run_id"])
    # one round trip per backend: with rounds, the 1-worker round trip has a phase per round, merged as every
    # figure is (indexed unmerged, each check row's cell held a pandas Series printed into the table)
    rt = ph[(ph["scenario"] == "roundtrip") & (ph["mode"] == "closed")]
    if not rt.empty:  # at its fewest workers: 1 in the default run (phase_plan runs it at no other count)
        rt = with_cells(rd, merge_repeats(rt))
        rt = rt[rt["concurrency"] == rt["concurrency"].min()].set_index("backend")["p50_ms"]
    for i, (name, sc) in enumerate((n, s) for n, s in SCENARIOS.items() if s.op in ("check", "lookup", "roundtrip")):
        sub = ph[(ph["scenario"] == name) & (ph["mode"] == "closed")]
        if sub.empty:
            continue
        sub = figure_mode(sub)  # the ops column counts the ops of the figures beside it
        sub = clientbound.with_cpu(rd, with_cells(rd, merge_repeats(sub)).sort_values(["concurrency", "p50_ms"]))
        sub["backend"] = [label(rd, b) for b in sub["backend"]]
        lines += [f"### 5.{i + 1} `{name}`", "", sc.description, ""]
        cols = clientbound.beside_throughput(READ_COLS)
        if sc.op == "lookup":
            sub["per_iter"] = sub["results"] / sub["ops"].where(sub["ops"] > 0)
            sub["dups"] = sub["duplicates"]
            cols.update({"per_iter": "Resources/lookup", "dups": "Duplicates"})
        if sc.op == "check":
            base = [rt.get(b.rstrip(" †‡"), float("nan")) for b in sub["backend"]]
            sub["vs_roundtrip"] = sub["p50_ms"] / pd.Series(base, index=sub.index)
            cols["vs_roundtrip"] = "p50 ÷ round-trip p50"
            if (sub["vs_roundtrip"] < 1).any():
                below = ", ".join(sorted(set(sub[sub["vs_roundtrip"] < 1]["backend"])))
                lines.append(f"For {below} the round-trip op took longer than these checks (ratio below 1): "
                             "its round trip is no floor for a check.\n")
        lines += [link_target(name), table(marked(sub), cols)]
        if spectrum := charts.spectrum(rd, name, chart_dir):
            lines += ["", f"![{name} latency percentiles]({spectrum})", "", *charts.absent_caption(rd, name)]
        lines.append(monitor_summary(rd, name, f"Monitor summary: {name}"))
    if throughput := charts.throughput(rd, chart_dir):
        lines += ["### Throughput vs concurrency", "", f"![throughput vs concurrency]({throughput})", ""]
    lines += [_resources(rd), clientbound.section(rd)]
    return "\n".join(lines)


def _resources(rd: RunData) -> str:
    t = resource_table(rd)
    if t.empty:
        return ""
    t["backend"] = [label(rd, b) for b in t["backend"]]
    return "\n".join(["### Server CPU and memory per 1,000 checks", "",
                      "Over every check phase (all worker counts): server CPU core-seconds spent per 1,000 checks "
                      "(the reference's \"CPU% per 1K operations\"), mean server and client CPU, peak server memory (PSS). "
                      "In-process engines (†, thread workers) include the client.", "", link_target("resources"),
                      table(t, {"backend": "Backend", "phases": "Phases", "ops": "Checks",
                                "cpu_s_per_1k": "Server core-s per 1,000 checks", "cpu_mean": "Server CPU mean (%)",
                                "client_cpu_mean": "Client CPU mean (%)", "rss_max_mb": "Peak server memory (MiB)"})])
