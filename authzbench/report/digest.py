"""The main report's compact sections: reads, mixed load, structural writes and correctness, one short
table and the charts each, every figure the one computed figure (figures.cell). The full per-phase tables
are the appendix's (document.APPENDIX)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd

from authzbench.report import churn, freshness, reads_chart
from authzbench.report.core import charts, staleness
from authzbench.report.core.data import RunData
from authzbench.report.core.figures import LETTER_MEANING, Cell, best_rate, cell, standing
from authzbench.report.core.frames import (
    peak_memory,
    resource_table,
    scenarios_measured,
    slo,
    slo_verdicts,
    write_table,
)
from authzbench.report.core.ranking import Dimension, ranked
from authzbench.report.core.tables import counted, fmt_pct, label, link_target, num, significant, table
from authzbench.report.dimensions import compute
from authzbench.workloads.catalog import SCENARIOS


def reads(rd: RunData, out_dir: Path) -> str:
    ph = rd.phases
    if ph.empty:
        return ""
    cdir = charts.chart_dir(out_dir, rd.manifest["run_id"])
    lines = ["## 5. Reads", "", "p50 / p95 at 1 worker (ms) and the best throughput over the worker counts "
             "(ops/s, at the workers named). Every phase's table, with p99, errors and monitors: appendix.", "",
             # the read scenarios' anchors, at the table of their figures: the mixed and churn ones sat here too
             *[link_target(s) for s in dict.fromkeys(ph["scenario"]) if s in READ_SCENARIOS], link_target("comparison"),
             comparison_table(rd)]
    objective = slo(rd).get("check_p95_ms")
    for s in scenarios_measured(rd, "check"):
        pts = {b: sweep(rd, b, s) for b in dict.fromkeys(ph[ph["scenario"] == s]["backend"])}
        if chart := reads_chart.latency_vs_throughput(rd, s, pts, objective, cdir):
            lines += [f"![{s}: latency against throughput]({chart})", "", *reads_chart.absent_caption(rd, s, None, 1)]
    for s in [*scenarios_measured(rd, "lookup")]:
        if spectrum := reads_chart.spectrum(rd, s, cdir):
            lines += [f"![{s}: latency by percentile]({spectrum})", "", *reads_chart.absent_caption(rd, s)]
    if bar := reads_chart.bars(rd, _bar_panels(rd), cdir):
        lines += [link_target("resources") + f"![ingest, footprint, CPU and memory]({bar})", ""]
    return "\n".join(lines)


def sweep(rd: RunData, b: str, s: str) -> list[tuple[float, float, float]]:
    """(ops/s, p50, p95) per worker count, each the one computed figure."""
    ph = rd.phases
    levels = sorted({int(c) for c in ph[(ph["backend"] == b) & (ph["scenario"] == s) & (ph["mode"] == "closed")]
                     ["concurrency"]})
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
    sub = rd.phases[(rd.phases["backend"] == b) & (rd.phases["scenario"] == s) & (rd.phases["mode"] == "closed")]
    if sub.empty:
        return "—"
    c = int(sub["concurrency"].min())
    p50, p95 = cell(rd, b, s, c, "p50_ms"), cell(rd, b, s, c, "p95_ms")
    best = best_rate(rd, b, s)
    if p50 is None or p95 is None or best is None:
        return "—"
    return f"{_marked(p50)} / {_marked(p95)}; {num(best[1].value)}/s @{best[0]}"


def _marked(x: Cell) -> str:
    """A percentile figure as the report writes it, ⚠ first when a round behind it was under its op floor."""
    return ("⚠ " if x.too_few else "") + num(x.value)


def _bar_panels(rd: RunData) -> list[tuple[str, dict[str, float]]]:
    ing = rd.ingest[rd.ingest["variant"] == ""] if not rd.ingest.empty else rd.ingest
    res = resource_table(rd)
    return [("ingest (relationships/s, higher is better)", {r.backend: float(r.rels_per_s) for r in ing.itertuples()}),
            ("footprint (bytes/relationship)", {r.backend: float(r.footprint_bytes) / r.relationships
                                                for r in ing.itertuples() if not pd.isna(r.footprint_bytes)}),
            ("server core-s per 1,000 checks", {} if res.empty else
             {r.backend: float(r.cpu_s_per_1k) for r in res.itertuples() if not math.isnan(r.cpu_s_per_1k)}),
            ("peak server memory (MiB)", peak_memory(rd))]


def mixed(rd: RunData, out_dir: Path) -> str:
    v = slo_verdicts(rd)
    if v.empty:
        return ""
    o = slo(rd)
    lines = ["## 6. Mixed load", "", f"Checks with {rd.manifest.get('config', {}).get('write_share', 0.01):.0%} "
             f"writes. SLO: check p95 < {o['check_p95_ms']:g} ms, write p95 < {o['write_p95_ms']:g} ms, success ≥ "
             f"{o['success']:.1%}.", "", link_target("mixed"), link_target("slo")]
    closed, opened = v[v["mode"] == "closed"], v[v["mode"] == "open"]
    if not closed.empty:
        lines += ["Closed loop. Cell: checks/s (median over rounds), PASS or FAIL.", "", _closed_table(rd, closed)]
    if not opened.empty:
        lines += ["" if closed.empty else "\n", "Open loop (a fixed offered rate). Cell: check p95 (ms) at that rate, PASS or FAIL; the SLO "
                  "verdicts' every column: appendix.", "", _open_table(rd, opened)]
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
    return table(pd.DataFrame(rows), {"backend": "Backend", **{c: f"{float(c[1:]):,.0f} ops/s" for c in cols}})


def _mixed_scenario(rd: RunData) -> str:
    return next((n for n, s in SCENARIOS.items() if s.op == "mixed" and n in set(rd.phases["scenario"])), "mixed")


def writes_digest(rd: RunData, out_dir: Path) -> str:
    df = write_table(rd)
    if df.empty:
        return ""
    df = df[df["session"] & (df["concurrency"] == df["concurrency"].min())]
    lines = ["## 7. Structural writes", "", "One worker, the backend's own read consistency: write p95 (ms), rows "
             "touched per write (mean), visibility lag p95 (ms) until a check reflects the write, and stale allows "
             f"{staleness.STALE_UNIT} [stale of revocations] (a stale allow: a revocation whose first check still "
             "allowed). Every consistency mode and worker count: appendix.",
             "", link_target("structural-writes")]
    rows = []
    for b, g in df.groupby("backend", sort=False):
        row = {"backend": label(rd, b)}
        for r in g.itertuples():
            short = r.scenario.replace("write_", "").replace("revoke_then_check", "revoke")
            row[short] = (f"{fmt_pct(r.write_p95_ms, r.write_fewest, 95.0, num)} ms; {counted(num(r.rows_mean), 'row')}; "
                          f"lag {fmt_pct(r.vis_p95_ms, r.vis_fewest, 95.0, num)} ms"
                          + (f"; stale {staleness.rate_cell(r.stale_allows, r.revocations)}" if r.revocations
                             else "") + f" (n={counted(f'{r.ops:,}', 'write')})")
        rows.append(row)
    cols = list(dict.fromkeys(k for r in rows for k in r if k != "backend"))
    lines.append(table(pd.DataFrame(rows), {"backend": "Backend", **{c: c for c in cols}}))
    return "\n".join([*lines, ""])


def correctness(rd: RunData, out_dir: Path) -> str:
    ph = rd.phases
    if ph.empty:
        return ""
    g = ph[ph["checked"] > 0].groupby("backend", sort=False).agg(checked=("checked", "sum"),
                                                                  mismatches=("mismatches", "sum")).reset_index()
    g["backend"] = [label(rd, b) for b in g["backend"]]
    return "\n".join(["## 8. Correctness", "", "Every answer compared with the oracle (per scenario, with the first "
                      "mismatches: appendix).", "", table(g, {"backend": "Backend", "checked": "Answers checked",
                                                              "mismatches": "Mismatches"}), ""])


def appendix_link(rd: RunData, out_dir: Path) -> str:
    run_id = rd.manifest["run_id"]
    return (f"## Appendix\n\n[`{run_id}-appendix.md`]({run_id}-appendix.md): every phase's table, monitors, "
            "structural writes in every mode, stability, validity and limitations, the reference report side by "
            f"side, the run timeline and every ranked figure with its interval. [`{run_id}.json`]({run_id}.json): "
            "the ranked figures, machine-readable.\n")


# the ranked figures, machine-readable ----------------------------------------------------------------

def figure_records(rd: RunData, dims: list[Dimension] | None = None) -> list[dict]:
    """Every ranked figure: dimension, backend, value, unit, interval (measured or assumed, with its basis),
    n, letters (figures.letters: sharing one = not clearly apart), standing (1 + its first letter's position:
    a = 1; never smaller for a worse figure) and flags; by default the ranking's dimensions and the churn
    steps' (the decision summary's workload rows letter those)."""
    out = []
    for d in dims if dims is not None else [*compute(rd), *churn.dimensions(rd)]:
        r = ranked(rd, d)
        for f in d.figures:
            if f.backend not in r:
                continue
            lo, hi = f.interval()
            out.append({"dimension": d.key, "title": d.title, "group": d.group, "backend": f.backend,
                        "value": _finite(f.value), "unit": d.unit, "interval": [_finite(lo), _finite(hi)],
                        # a figure shown as words ("no worker count met the SLO") has no interval to judge
                        "interval_kind": None if f.text else "assumed" if f.assumed else "measured",
                        "interval_basis": (f.assumed or None) if not f.text else None,
                        "n": f.n, "letters": r[f.backend][1],
                        "standing": standing(r[f.backend][1]) if r[f.backend][1] else None,
                        "networked": r[f.backend][2],
                        "higher_is_better": d.higher_is_better, "text": f.text or None,
                        "client_bound": f.client_bound,  # null: unknown or not a throughput
                        "base": f.base or None,  # the count a rate rests on ("14 of 200")
                        "flags": [k for k, on in (("unstable", f.unstable), ("too_few", f.too_few),
                                                  ("disturbed", f.disturbed), ("client_bound", bool(f.client_bound)),
                                                  ("stand_in", rd.kind(f.backend) == "stand-in"),
                                                  ("embedded", rd.kind(f.backend) == "embedded")) if on]})
    return out


def _finite(v: float) -> float | None:
    return significant(float(v)) if math.isfinite(v) else None


def _interval_text(lo: float | None, hi: float | None, too_few: bool) -> str:
    """"1.2 - 3.4"; "≥ 37,618" for a percentile from too few ops (open above), "≤ 837" for a rate resting on one
    (open down to 0, ranking.Figure.worse_below); "—" for an end not known."""
    if too_few and lo is not None and hi is None:
        return f"≥ {num(lo)}"
    if too_few and lo == 0 and hi is not None:
        return f"≤ {num(hi)}"
    return f"{num(lo) if lo is not None else '—'} - {num(hi) if hi is not None else '—'}"


def write_json(rd: RunData, path: Path) -> None:
    out = {"run_id": rd.manifest["run_id"], "figures": figure_records(rd)}
    # only runs with a churn sweep carry it: an older run's JSON stays as it was
    if sustainable := churn.json_records(rd):
        out["sustainable_churn"] = sustainable
    if not (st := freshness.stale_allows(rd)).empty:  # per mode and writer count, per 1,000 revocations
        out["stale_allows"] = [{k: _json_value(v) for k, v in r.items()} for r in st.to_dict("records")]
    path.write_text(json.dumps(out, indent=1) + "\n")


def _json_value(v: object) -> object:
    v = v.item() if hasattr(v, "item") else v  # numpy scalars from the frame: plain JSON numbers
    return _finite(v) if isinstance(v, float) else v


def figure_table(rd: RunData, out_dir: Path) -> str:
    """The appendix's table of every ranked figure with its interval and op count."""
    recs = figure_records(rd)
    if not recs:
        return ""
    df = pd.DataFrame(recs)
    df["backend"] = [label(rd, b) for b in df["backend"]]
    df["iv"] = [_interval_text(a, b, "too_few" in f) + (f" ({basis})" if isinstance(basis, str) and basis else "")
                for (a, b), f, basis in zip(df["interval"], df["flags"], df["interval_basis"], strict=True)]
    # a letter string, or "unranked" where there is no value: a numeric rank column with a None printed 1.000
    df["cld"] = [x if isinstance(x, str) and x else "unranked" for x in df["letters"]]
    # pandas stores a missing text as NaN (truthy) among strings: "t or num(v)" emptied 210 of 213 cells
    df["val"] = [t if isinstance(t, str) and t else num(v) for t, v in zip(df["text"], df["value"], strict=True)]
    df["flag"] = [", ".join(f) for f in df["flags"]]
    # a rate's base in its n column: "15 of 181" (revocations), the count it rests on
    df["n"] = [b if isinstance(b, str) else f"{int(x):,}" if x is not None and x == x else "—"
               for x, b in zip(df["n"], df["base"], strict=True)]
    return "\n".join(["## Every ranked figure", "", "Each figure of the Findings and the decision summary with its "
                      "interval and the ops it rests on (the same values as the JSON beside the report). Letters: "
                      f"{LETTER_MEANING}. An interval marked assumed is not measured (its basis follows it): it is "
                      "never the ground of a clear difference.", "",
                      table(df, {"title": "Dimension", "backend": "Backend", "val": "Figure", "unit": "Unit",
                                 "iv": "Interval", "n": "n", "cld": "Letters", "flag": "Flags"}), ""])

