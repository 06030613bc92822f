"""6 The mixed read/write workload: its phases, the SLO verdicts and the open-loop chart."""

from __future__ import annotations

from pathlib import Path

from authzbench.report.core import charts
from authzbench.report.core.data import RunData
from authzbench.report.core.figures import with_cells
from authzbench.report.core.frames import mixed_phases, slo, slo_verdicts
from authzbench.report.core.tables import fmt, fmt_pct, label, link_target, marked, table


def section(rd: RunData, out_dir: Path) -> str:
    m = mixed_phases(rd)
    m = with_cells(rd, m) if not m.empty else m
    if m.empty:
        return ""
    cfg = rd.manifest.get("config", {})
    objective = slo(rd)
    lines = ["## 6. Mixed read/write workload", "",
             f"Checks with {cfg.get('write_share', 0.01):.1%} relationship writes/deletes (scratch users only, so "
             f"read answers stay checkable). SLO: check p95 < {objective['check_p95_ms']} ms, write p95 < "
             f"{objective['write_p95_ms']} ms, success ≥ {objective['success']:.1%}.", ""]
    m["backend_l"] = [label(rd, b) for b in m["backend"]]
    m["success"] = m["ops"] / m["attempted"].where(m["attempted"] > 0)
    lines += [link_target("mixed"), table(marked(m.sort_values(["backend", "concurrency", "kind"])),
                                      {"backend_l": "Backend", "mode": "Loop", "concurrency": "Workers",
                                       "target_rate": "Target ops/s", "kind": "Op", "ops": "Ops",
                                       "ops_per_s": "Achieved ops/s", "p50_ms": "p50 (ms)", "p95_ms": "p95 (ms)",
                                       "p99_ms": "p99 (ms)", "errors": "Errors", "timeouts": "Timeouts",
                                       "success": "Success", "dropped": "Dropped (open loop)",
                                       "mismatches": "Mismatches"})]
    v_raw = slo_verdicts(rd)
    v = v_raw.copy()
    v["backend"] = [label(rd, b) for b in v["backend"]]
    # ⚠ by the smallest round behind the figure, as every percentile's; at the mixed table's precision (at 4
    # decimals postgres's check p95 read 0.9005 here and 0.900 there); the 4 decimals are the success ratio's,
    # whose SLO is 0.999
    for k in ("check", "write"):
        v[f"{k}_p95"] = [fmt_pct(x, n, 95, fmt) for x, n in zip(v[f"{k}_p95"], v[f"{k}_fewest"], strict=True)]
    lines += ["", "SLO verdicts:", "", link_target("slo"), table(v, {
        "backend": "Backend", "mode": "Loop", "concurrency": "Workers", "rate": "Target ops/s",
        "check_p95": "Check p95 (ms)", "check_ops": "Checks", "write_p95": "Write p95 (ms)", "write_ops": "Writes",
        "success": "Success (incl. dropped)", "verdict": "Verdict"}, 4)]
    opened = v[v["mode"] == "open"]
    for b, g in opened.groupby("backend", sort=False):
        passed = g[g["verdict"] == "PASS"]["rate"].dropna()
        best = f"**{passed.max():,.0f} ops/s**" if len(passed) else "none of the rates tried"
        lines.append(f"- {b}: highest open-loop rate that met the SLO: {best} (tried "
                     f"{', '.join(f'{r:,.0f}' for r in g['rate'].dropna())})")
    if chart := charts.open_loop(rd, v_raw, objective, charts.chart_dir(out_dir, rd.manifest["run_id"])):
        lines += ["", f"![check p95 against offered load]({chart})"]
    lines.append("")
    return "\n".join(lines)
