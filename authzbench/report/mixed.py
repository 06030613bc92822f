"""6 The mixed read/write workload: its phases, the SLO verdicts and the open-loop chart; and the
main report's mixed-load digest (digest)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from authzbench.report import mixed_chart
from authzbench.report.core import charts, clientbound
from authzbench.report.core.data import RunData
from authzbench.report.core.figures import cell, with_cells
from authzbench.report.core.frames import mixed_phases, slo, slo_verdicts
from authzbench.report.core.ranking import Dimension, Figure, ints_text, worker_count
from authzbench.report.core.tables import (
    anchor,
    counted,
    fmt,
    fmt_pct,
    label,
    link_target,
    marked,
    num,
    table,
)
from authzbench.workloads.catalog import SCENARIOS


def section(rd: RunData, out_dir: Path) -> str:
    m = mixed_phases(rd)
    m = with_cells(rd, m) if not m.empty else m
    if m.empty:
        return ""
    cfg = rd.manifest.get("config", {})
    objective = slo(rd)
    lines = [
        "## 6. Mixed read/write workload", "",
        f"Checks with {cfg.get('write_share', 0.01):.1%} relationship writes/deletes (scratch users only, so "
        f"read answers stay checkable). SLO: check p95 < {objective['check_p95_ms']} ms, write p95 < "
        f"{objective['write_p95_ms']} ms, success ≥ {objective['success']:.1%}.", ""]
    m["backend_l"] = [label(rd, b) for b in m["backend"]]
    m["success"] = m["ops"] / m["attempted"].where(m["attempted"] > 0)
    lines += [link_target("mixed"),
              table(marked(m.sort_values(["backend", "concurrency", "kind"])),
                    {"backend_l": "Backend", "mode": "Loop", "concurrency": "Workers",
                     "target_rate": "Target ops/s", "kind": "Op", "ops": "Ops", "ops_per_s": "Achieved ops/s",
                     "p50_ms": "p50 (ms)", "p95_ms": "p95 (ms)", "p99_ms": "p99 (ms)",
                     "p999_ms": "p99.9 (ms)", "errors": "Errors", "timeouts": "Timeouts",
                     "success": "Success", "dropped": "Dropped (open loop)", "mismatches": "Mismatches"})]
    v_raw = slo_verdicts(rd)
    v = v_raw.copy()
    v["backend"] = [label(rd, b) for b in v["backend"]]
    # ⚠ by the smallest round behind the figure, as every percentile's; at the mixed table's precision (at 4
    # decimals postgres's check p95 read 0.9005 here and 0.900 there); the 4 decimals are the success ratio's,
    # whose SLO is 0.999
    for k in ("check", "write"):
        v[f"{k}_p95"] = [fmt_pct(x, n, 95, fmt) for x, n in zip(v[f"{k}_p95"], v[f"{k}_fewest"], strict=True)]
    lines += ["", "SLO verdicts:", "", link_target("slo"),
              table(v,
                    {"backend": "Backend", "mode": "Loop", "concurrency": "Workers", "rate": "Target ops/s",
                     "check_p95": "Check p95 (ms)", "check_ops": "Checks", "write_p95": "Write p95 (ms)",
                     "write_ops": "Writes", "success": "Success (incl. dropped)", "verdict": "Verdict"},
                    4)]
    opened = v[v["mode"] == "open"]
    for b, g in opened.groupby("backend", sort=False):
        passed = g[g["verdict"] == "PASS"]["rate"].dropna()
        best = f"**{passed.max():,.0f} ops/s**" if len(passed) else "none of the rates tried"
        lines.append(f"- {b}: highest open-loop rate that met the SLO: {best} (tried "
                     f"{', '.join(f'{r:,.0f}' for r in g['rate'].dropna())})")
    if chart := mixed_chart.open_loop(rd, v_raw, objective, charts.chart_dir(out_dir, rd.manifest["run_id"])):
        lines += ["", f"![check p95 against offered load]({chart})"]
    lines.append("")
    return "\n".join(lines)


def mixed_closed(rd: RunData) -> list[Dimension]:
    """The check throughput at the most workers whose merged rounds met the SLO: the same figure (median over
    rounds) the mixed table shows for that worker count."""
    v = slo_verdicts(rd)
    v = v[v["mode"] == "closed"] if not v.empty else v
    if v.empty:
        return []
    figs = []
    for b, g in v.groupby("backend", sort=False):
        ok = g[g["verdict"] == "PASS"]
        if ok.empty:
            figs.append(Figure(b, 0.0, text="no worker count met the SLO",
                               detail=f"tried {ints_text(g['concurrency'])} workers"))
            continue
        best = ok.loc[ok["concurrency"].idxmax()]
        c = int(best["concurrency"])
        x = cell(rd, b, str(best["scenario"]), c, "ops_per_s", "check")
        if x is None:
            continue
        # the verdict rests on its check and write p95s: ⚠ when either rests on too few ops in some round
        fewest = min(int(best["check_fewest"]), int(best["write_fewest"]) if best["write_ops"] else 10**9)
        figs.append(
            Figure(b, x.value, bounds=(x.lo, x.hi), unstable=x.unstable, disturbed=x.disturbed,
                   detail=f"up to {worker_count(c)}", q=95.0, n=int(best["check_ops"]), fewest=fewest,
                   worse_below=True, client_bound=clientbound.client_bound(rd, b, str(best["scenario"]), c)))
    return [Dimension("Under load", "Mixed workload (closed loop): check throughput at the most workers that "
                      "still met the SLO", "checks/s", True, figs, anchor("slo"), summary="mixed within SLO",
                      key="mixed_slo")]


def open_loop(rd: RunData) -> list[Dimension]:
    v = slo_verdicts(rd)
    v = v[v["mode"] == "open"] if not v.empty else v
    if v.empty:
        return []
    figs = []
    for b, g in v.groupby("backend", sort=False):
        ok = g[g["verdict"] == "PASS"]["rate"].dropna()
        figs.append(
            Figure(b, float(ok.max()) if len(ok) else 0.0, text="" if len(ok) else "no rate met the SLO",
                   detail=f"tried {ints_text(g['rate'].dropna())} ops/s"))
    return [Dimension("Under load", "Open loop: highest offered rate that met the SLO", "ops/s", True, figs,
                      anchor("slo"), "rate steps are discrete: the true limit lies between two steps",
                      summary="open-loop rate within SLO", key="open_loop")]


# the main report's digest --------------------------------------------------------------------------------

def digest(rd: RunData, out_dir: Path) -> str:
    v = slo_verdicts(rd)
    if v.empty:
        return ""
    o = slo(rd)
    lines = ["## 6. Mixed load", "",
             f"Checks with {rd.manifest.get('config', {}).get('write_share', 0.01):.0%} writes. SLO: check "
             f"p95 < {o['check_p95_ms']:g} ms, write p95 < {o['write_p95_ms']:g} ms, success ≥ "
             f"{o['success']:.1%}.", "", link_target("mixed"), link_target("slo")]
    closed, opened = v[v["mode"] == "closed"], v[v["mode"] == "open"]
    if not closed.empty:
        lines += ["Closed loop. Cell: checks/s (median over rounds), PASS or FAIL.", "",
                  _closed_table(rd, closed)]
    if not opened.empty:
        lines += ["" if closed.empty else "\n",
                  "Open loop (a fixed offered rate). Cell: check p95 (ms) at that rate, PASS or FAIL; the "
                  "SLO verdicts' every column: appendix.", "", _open_table(rd, opened)]
    return "\n".join([*lines, ""])



def _closed_table(rd: RunData, v: pd.DataFrame) -> str:
    rows = []
    for b, g in v.groupby("backend", sort=False):
        row = {"backend": label(rd, b)}
        for r in g.itertuples():
            x = cell(rd, b, str(_mixed_scenario(rd)), int(r.concurrency), "ops_per_s", "check")
            row[f"c{int(r.concurrency)}"] = f"{num(x.value) if x else '—'} {r.verdict}"
        rows.append(row)
    cols = sorted({k for r in rows for k in r if k != "backend"}, key=lambda k: int(k[1:]))
    return table(pd.DataFrame(rows), {"backend": "Backend", **{c: counted(c[1:], "worker") for c in cols}})



def _open_table(rd: RunData, v: pd.DataFrame) -> str:
    rows = []
    for b, g in v.groupby("backend", sort=False):
        row = {"backend": label(rd, b)}
        for r in g.itertuples():
            row[f"r{r.rate:g}"] = f"{fmt_pct(r.check_p95, r.check_fewest, 95.0, num)} {r.verdict}"
        rows.append(row)
    cols = sorted({k for r in rows for k in r if k != "backend"}, key=lambda k: float(k[1:]))
    return table(pd.DataFrame(rows),
                 {"backend": "Backend", **{c: f"{float(c[1:]):,.0f} ops/s" for c in cols}})



def _mixed_scenario(rd: RunData) -> str:
    return next((n for n, s in SCENARIOS.items() if s.op == "mixed" and n in set(rd.phases["scenario"])),
                "mixed")
