"""5 Read performance: one table and chart per read scenario, throughput against concurrency, server
CPU and memory per 1,000 checks; and the main report's reads digest (digest: the comparison table,
latency against throughput, the resource bars)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd

from authzbench.report import reads_chart
from authzbench.report.core import charts, clientbound
from authzbench.report.core.data import RunData
from authzbench.report.core.figures import Cell, best_rate, cell, with_cells
from authzbench.report.core.frames import (
    longest_checks,
    peak_memory,
    resource_table,
    scenarios_measured,
    slo,
)
from authzbench.report.core.noise import spread_unstable
from authzbench.report.core.ranking import (
    Dimension,
    Figure,
    closed_phases,
    in_process,
    ints_text,
    pct_figures,
    single_basis,
    single_bounds,
    worker_count,
)
from authzbench.report.core.tables import (
    anchor,
    figure_mode,
    label,
    link_target,
    marked,
    merge_repeats,
    monitor_summary,
    num,
    table,
)
from authzbench.workloads.catalog import SCENARIOS

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
    for i, (name, sc) in enumerate(
        (n, s) for n, s in SCENARIOS.items() if s.op in ("check", "lookup", "roundtrip")):
        sub = ph[(ph["scenario"] == name) & (ph["mode"] == "closed")]
        if sub.empty:
            continue
        sub = figure_mode(sub)  # the ops column counts the ops of the figures beside it
        sub = clientbound.with_cpu(
            rd, with_cells(rd, merge_repeats(sub)).sort_values(["concurrency", "p50_ms"]))
        sub["backend"] = [label(rd, b) for b in sub["backend"]]
        lines += [f"### 5.{i + 1} `{name}`", "", sc.description, ""]
        cols = clientbound.beside_throughput(READ_COLS)
        if sc.op == "lookup":
            sub["per_iter"] = sub["results"] / sub["ops"].where(sub["ops"] > 0)
            sub["dups"] = sub["duplicates"]
            cols.update({"per_iter": "Resources/lookup", "dups": "Duplicates"})
        if sc.op == "check":
            cols = _with_tail(cols)
            sub["max_at"] = [at_text(v) for v in sub["longest_run_s"]]
            base = [rt.get(b.rstrip(" †‡"), float("nan")) for b in sub["backend"]]
            sub["vs_roundtrip"] = sub["p50_ms"] / pd.Series(base, index=sub.index)
            cols["vs_roundtrip"] = "p50 ÷ round-trip p50"
            if (sub["vs_roundtrip"] < 1).any():
                below = ", ".join(sorted(set(sub[sub["vs_roundtrip"] < 1]["backend"])))
                lines.append(f"For {below} the round-trip op took longer than these checks (ratio below 1): "
                             "its round trip is no floor for a check.\n")
        lines += [link_target(name), table(marked(sub), cols)]
        if spectrum := reads_chart.spectrum(rd, name, chart_dir):
            lines += ["", f"![{name} latency percentiles]({spectrum})", "",
                      *reads_chart.absent_caption(rd, name)]
        lines.append(monitor_summary(rd, name, f"Monitor summary: {name}"))
    if throughput := reads_chart.throughput(rd, chart_dir):
        lines += ["### Throughput vs concurrency", "", f"![throughput vs concurrency]({throughput})", ""]
    lines += [_resources(rd), clientbound.section(rd)]
    return "\n".join(lines)


def _with_tail(cols: dict[str, str]) -> dict[str, str]:
    """A check table's columns with the tail beside them: p99.9 after p99, when the longest op began after its
    length (Max)."""
    out: dict[str, str] = {}
    for k, v in cols.items():
        out[k] = v
        if k == "p99_ms":
            out["p999_ms"] = "p99.9 (ms)"
        if k == "max_ms":
            out["max_at"] = "Max at (s into the run)"
    return out


NOT_RECORDED = "not recorded"


def at_text(s: float) -> str:
    """When a longest op began, seconds into the run; "not recorded" for a run from before it was."""
    return NOT_RECORDED if s is None or math.isnan(s) else f"{s:,.1f}"


def _resources(rd: RunData) -> str:
    t = resource_table(rd)
    if t.empty:
        return ""
    t["backend"] = [label(rd, b) for b in t["backend"]]
    return "\n".join(
        ["### Server CPU and memory per 1,000 checks", "",
         "Over every check phase (all worker counts): server CPU core-seconds spent per 1,000 checks "
         '(the reference\'s "CPU% per 1K operations"), mean server and client CPU, peak server memory '
         '(PSS). '
         "In-process engines (†, thread workers) include the client.", "", link_target("resources"),
         table(t,
               {"backend": "Backend", "phases": "Phases", "ops": "Checks",
                "cpu_s_per_1k": "Server core-s per 1,000 checks", "cpu_mean": "Server CPU mean (%)",
                "client_cpu_mean": "Client CPU mean (%)", "rss_max_mb": "Peak server memory (MiB)"})])


def check_latency(rd: RunData) -> list[Dimension]:
    out = []
    for s in scenarios_measured(rd, "check"):
        if closed_phases(rd, s).empty:
            continue
        c = int(closed_phases(rd, s)["concurrency"].min())
        # p99 and p99.9: the tail a Zanzibar reader reads first (the paper gives all four); ⚠ where a round
        # had under 100 or 1,000 checks (noise.min_ops)
        for q, name in ((50, "p50"), (95, "p95"), (99, "p99"), (99.9, "p99.9")):
            out.append(Dimension("Checks", f"Check {name}, {s}, {worker_count(c)}", "ms", False,
                                 pct_figures(rd, s, q), anchor(s), summary=f"check {name}",
                                 key=f"check_{name.replace('.', '')}/{s}"))
    return out


def check_throughput(rd: RunData) -> list[Dimension]:
    out = []
    for s in scenarios_measured(rd, "check"):
        figs = []
        for b in dict.fromkeys(closed_phases(rd, s)["backend"]):
            best = best_rate(rd, b, s)
            if best is None:
                continue
            c, x = best
            figs.append(
                Figure(b, x.value, bounds=(x.lo, x.hi), unstable=x.unstable, disturbed=x.disturbed,
                       detail=f"at {worker_count(c)}", client_bound=clientbound.client_bound(rd, b, s, c)))
        # a scenario may run at 1 worker only
        levels = sorted(set(closed_phases(rd, s)["concurrency"].astype(int)))
        what = (f"Throughput at {worker_count(levels[0])}" if len(levels) == 1
                else f"Best throughput over {ints_text(pd.Series(levels))} workers")
        out.append(Dimension("Checks", f"{what}, {s}", "checks/s", True,
                             figs, anchor(s), summary="best check throughput", key=f"check_rate/{s}"))
    return out


def lookup_latency(rd: RunData) -> list[Dimension]:
    out = []
    for s in scenarios_measured(rd, "lookup"):
        def per_lookup(b: str, rows: pd.DataFrame) -> str:
            n = rows["ops"].sum()
            return f"{rows['results'].sum() / n:,.0f} resources per lookup" if n else ""

        if closed_phases(rd, s).empty:
            continue
        c = int(closed_phases(rd, s)["concurrency"].min())
        kind = "heavy" if "super" in s else "regular"
        out.append(
            Dimension("Lookups", f"Lookup p95 ({kind} user), {s}, {worker_count(c)}", "ms", False,
                      pct_figures(rd, s, 95, detail=per_lookup), anchor(s), summary=f"{kind} lookup p95",
                      key=f"lookup_p95/{s}"))
    return out


def server_memory(rd: RunData) -> list[Dimension]:
    peaks = peak_memory(rd)
    figs = [
        Figure(b, mb, detail=in_process(rd, b), bounds=single_bounds(mb, "rss"), basis=single_basis("rss"))
        for b, mb in peaks.items()]
    return [
        Dimension(
            "Resources", "Peak server memory over the read phases", "MiB", False, figs, anchor("resources"),
            summary="peak memory", key="memory")]


def cpu_per_1k(rd: RunData) -> list[Dimension]:
    """The reference's "CPU% per 1K operations", as server core-seconds per 1,000 checks."""
    t = resource_table(rd)
    if t.empty:
        return []
    # its interval: the lowest to the highest round's, as for latency (one value per round of every check
    # phase) unstable by the latency figures' rule (noise.spread_unstable): mongo's 3.23 rested on rounds of
    # 1.95-9.45
    figs = [Figure(r.backend, float(r.cpu_s_per_1k), detail=in_process(rd, r.backend),
                   bounds=(min(r.cpu_rounds), max(r.cpu_rounds)) if len(r.cpu_rounds) >= 2 else None,
                   unstable=spread_unstable(np.array(r.cpu_rounds), float(r.cpu_s_per_1k)))
            for r in t.itertuples() if not math.isnan(r.cpu_s_per_1k)]
    return [Dimension("Resources", "Server CPU per 1,000 checks (all check phases)", "core-seconds", False,
                      figs, anchor("resources"), summary="CPU per 1k checks", key="cpu_per_1k")]


# the main report's digest --------------------------------------------------------------------------------

def digest(rd: RunData, out_dir: Path) -> str:
    ph = rd.phases
    if ph.empty:
        return ""
    cdir = charts.chart_dir(out_dir, rd.manifest["run_id"])
    lines = ["## 5. Reads", "", "p50 / p95 at 1 worker (ms), a check's p99 / p99.9 after them, and the best "
             "throughput over the worker counts (ops/s, at the workers named). Every phase's table, with "
             "errors and monitors: appendix.", "",
             # the read scenarios' anchors, at the table of their figures: the mixed and churn ones sat
             # here too
             *[link_target(s) for s in dict.fromkeys(ph["scenario"]) if s in READ_SCENARIOS],
             link_target("comparison"), comparison_table(rd), *longest_table(rd)]
    objective = slo(rd).get("check_p95_ms")
    for s in scenarios_measured(rd, "check"):
        pts = {b: sweep(rd, b, s) for b in dict.fromkeys(ph[ph["scenario"] == s]["backend"])}
        if chart := reads_chart.latency_vs_throughput(rd, s, pts, objective, cdir):
            lines += [f"![{s}: latency against throughput]({chart})", "",
                      *reads_chart.absent_caption(rd, s, None, 1)]
    for s in [*scenarios_measured(rd, "lookup")]:
        if spectrum := reads_chart.spectrum(rd, s, cdir):
            lines += [f"![{s}: latency by percentile]({spectrum})", "", *reads_chart.absent_caption(rd, s)]
    if bar := reads_chart.bars(rd, _bar_panels(rd), cdir):
        lines += [link_target("resources") + f"![ingest, footprint, CPU and memory]({bar})", ""]
    return "\n".join(lines)



def sweep(rd: RunData, b: str, s: str) -> list[tuple[float, float, float]]:
    """(ops/s, p50, p95) per worker count, each the one computed figure."""
    ph = rd.phases
    levels = sorted({int(c) for c in ph[(ph["backend"] == b) & (ph["scenario"] == s)
                                        & (ph["mode"] == "closed")]["concurrency"]})
    out = []
    for c in levels:
        r, p50, p95 = (cell(rd, b, s, c, m) for m in ("ops_per_s", "p50_ms", "p95_ms"))
        if r and p50 and p95:
            out.append((r.value, p50.value, p95.value))
    return out



READ_SCENARIOS = [n for n, s in SCENARIOS.items() if s.op in ("check", "lookup", "roundtrip")]



def comparison_table(rd: RunData) -> str:
    ph = rd.phases
    names = READ_SCENARIOS
    backends = sorted(set(ph["backend"]), key=lambda b: (not rd.comparable(b), b))
    rows = []
    for s in [n for n in names if n in set(ph["scenario"])]:
        row = {"scenario": f"`{s}`"}
        for b in backends:
            row[b] = _comparison_cell(rd, b, s)
        rows.append(row)
    return table(pd.DataFrame(rows), {"scenario": "Scenario", **{b: label(rd, b) for b in backends}})



def _comparison_cell(rd: RunData, b: str, s: str) -> str:
    sub = rd.phases[(rd.phases["backend"] == b) & (rd.phases["scenario"] == s)
                    & (rd.phases["mode"] == "closed")]
    if sub.empty:
        return "—"
    c = int(sub["concurrency"].min())
    # a check's tail beside its p50 / p95 (issue 70); a lookup's rounds rarely hold the ops a p99 needs
    metrics = CHECK_PCTS if SCENARIOS[s].op == "check" else ("p50_ms", "p95_ms")
    pcts = [cell(rd, b, s, c, m) for m in metrics]
    best = best_rate(rd, b, s)
    if None in pcts or best is None:
        return "—"
    return " / ".join(_marked(x) for x in pcts if x is not None) + f"; {num(best[1].value)}/s @{best[0]}"


CHECK_PCTS = ("p50_ms", "p95_ms", "p99_ms", "p999_ms")


def longest_table(rd: RunData) -> list[str]:
    """The main report's longest single check per scenario and backend, over every worker count and round,
    with when it began: a stall (a GC pause, a compaction) that no percentile shows. One line where the run
    did not record it."""
    t = longest_checks(rd)
    if rd.phases.empty or not scenarios_measured(rd, "check"):
        return []
    if t.empty:
        return [f"Longest single check with its time in the run: {NOT_RECORDED} (this run predates it).",
                ""]
    backends = sorted(set(t["backend"]), key=lambda b: (not rd.comparable(b), b))
    rows = []
    for s, g in t.groupby("scenario", sort=False):
        top = g.loc[g.groupby("backend")["longest_ms"].idxmax()].set_index("backend")
        rows.append({"scenario": f"`{s}`", **{b: _longest_cell(r) for b, r in top.iterrows()}})
    return ["Longest single check (ms) over every round and worker count, when it began (seconds into the "
            "run) and at how many workers:", "", link_target("longest-check"),
            table(pd.DataFrame(rows), {"scenario": "Scenario", **{b: label(rd, b) for b in backends}})]


def _longest_cell(r: pd.Series) -> str:
    """"48.2 at 1,234 s @8": the longest check, when it began in the run, at how many workers."""
    at = "" if math.isnan(r["longest_run_s"]) else f" at {r['longest_run_s']:,.0f} s"
    return f"{num(r['longest_ms'])}{at} @{int(r['concurrency'])}"


def _marked(x: Cell) -> str:
    """A percentile figure as the report writes it, ⚠ first when a round behind it was under its op floor."""
    return ("⚠ " if x.too_few else "") + num(x.value)



def _bar_panels(rd: RunData) -> list[tuple[str, dict[str, float]]]:
    ing = rd.ingest[rd.ingest["variant"] == ""] if not rd.ingest.empty else rd.ingest
    res = resource_table(rd)
    return [("ingest (relationships/s, higher is better)",
             {r.backend: float(r.rels_per_s) for r in ing.itertuples()}),
            ("footprint (bytes/relationship)", {r.backend: float(r.footprint_bytes) / r.relationships
                                                for r in ing.itertuples() if not pd.isna(r.footprint_bytes)}),
            ("server core-s per 1,000 checks", {} if res.empty else
             {r.backend: float(r.cpu_s_per_1k) for r in res.itertuples() if not math.isnan(r.cpu_s_per_1k)}),
            ("peak server memory (MiB)", peak_memory(rd))]
