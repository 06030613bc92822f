"""Frames derived from the run's tables that more than one section reads: the mixed workload's phases merged
over repeats with one SLO verdict per (backend, loop, workers, target rate) (the mixed section, the Findings,
the tiers table, the open-loop chart), and the server resources per 1,000 checks (the read section, the
Findings), and the write scenarios' figures per (backend, scenario, workers) (the write and freshness
sections, the Findings, the digest)."""

from __future__ import annotations

import math

import pandas as pd

from authzbench.report.core.data import RunData, derived, merged_summary
from authzbench.report.core.figures import cell
from authzbench.report.core.noise import rate_spread
from authzbench.report.core.tables import merge_repeats
from authzbench.workloads.catalog import SCENARIOS

SLO_DEFAULTS = {"check_p95_ms": 25.0, "write_p95_ms": 100.0, "success": 0.999}


def slo(rd: RunData) -> dict:
    return {**SLO_DEFAULTS, **(rd.manifest.get("config", {}).get("slo") or {})}


def mixed_phases(rd: RunData) -> pd.DataFrame:
    ph = rd.phases
    mixed = [n for n, s in SCENARIOS.items() if s.op == "mixed"]
    sub = ph[ph["scenario"].isin(mixed)] if not ph.empty else ph
    return merge_repeats(sub) if not sub.empty else sub


def slo_verdicts(rd: RunData, by_round: bool = False) -> pd.DataFrame:
    """One row per (backend, loop, workers, target rate) of the mixed workload: SLO figures and verdict;
    with by_round, one row per round of each (its column `repeat`), rounds not merged."""
    objective = slo(rd)
    if by_round:
        ph = rd.phases
        m = (ph[ph["scenario"].isin([n for n, s in SCENARIOS.items() if s.op == "mixed"])]
             if not ph.empty
             else ph)
    else:
        m = mixed_phases(rd)
    if m.empty:
        return pd.DataFrame()
    m = m.assign(target_rate=m["target_rate"].fillna(0.0))
    keys = ["backend", "concurrency", "mode", "target_rate", *(["repeat"] if by_round else [])]
    return pd.DataFrame(
        [{**_slo_row(rd, objective, g), **({"repeat": g["repeat"].iloc[0]} if by_round else {})}
         for _, g in m.groupby(keys, sort=False)])


def _slo_row(rd: RunData, objective: dict, g: pd.DataFrame) -> dict:
    b, c, mode, rate = (g[k].iloc[0] for k in ("backend", "concurrency", "mode", "target_rate"))
    chk, wr = g[g["kind"] == "check"], g[g["kind"] == "write"]
    att = g["attempted"].sum() + g["dropped"].max()
    success = g["ops"].sum() / att if att else float("nan")
    cp95 = _figure(rd, g, "check", "p95_ms", chk)
    wp95 = _figure(rd, g, "write", "p95_ms", wr)
    ok = cp95 < objective["check_p95_ms"] and (math.isnan(wp95) or wp95 < objective["write_p95_ms"]) and \
        success >= objective["success"]
    raw = rd.phases
    rows = raw[(raw["backend"] == b)
               & (raw["scenario"] == g["scenario"].iloc[0])
               & (raw["mode"] == mode)
               & (raw["concurrency"] == c)
               & (raw["kind"] == "check")
               & (raw["target_rate"].fillna(0.0) == rate)]
    return {
        "backend": b, "scenario": g["scenario"].iloc[0], "write_kind": write_kind(rd), "mode": mode,
        "concurrency": c, "rate": rate or None, "check_p95": cp95,
        "check_ops": int(chk["ops"].sum()) if not chk.empty else 0,
        "check_fewest": _fewest(rd, g, "check", chk), "write_p95": wp95,
        "write_ops": int(wr["ops"].sum()) if not wr.empty else 0, "write_fewest": _fewest(rd, g, "write", wr),
        "success": success, "verdict": "PASS" if ok else "FAIL",
        "check_ops_per_s": _figure(rd, g, "check", "ops_per_s", chk),
        "rate_spread": rate_spread(rows) if len(rows) else float("nan")}


def _closed_cell(rd: RunData, g: pd.DataFrame, kind: str, metric: str):
    """The one computed figure (median over rounds) of a closed-loop phase; None for an open-loop step."""
    from authzbench.report.core.figures import cell

    r = g.iloc[0]
    return (
        cell(rd, r["backend"], r["scenario"], int(r["concurrency"]), metric, kind)
        if r["mode"] == "closed"
        else None
    )


def _figure(rd: RunData, g: pd.DataFrame, kind: str, metric: str, merged: pd.DataFrame) -> float:
    """A closed-loop figure is the one computed figure (median over rounds); an open-loop step has one
    round."""
    if merged.empty:
        return float("nan")
    x = _closed_cell(rd, g, kind, metric)
    return x.value if x is not None else float(merged[metric].iloc[0])


def _fewest(rd: RunData, g: pd.DataFrame, kind: str, merged: pd.DataFrame) -> int:
    """Ops in the smallest round behind the figure: what its ⚠ reads, as every percentile's (Cell.too_few)."""
    if merged.empty:
        return 0
    x = _closed_cell(rd, g, kind, "p95_ms")
    return x.fewest if x is not None else int(merged["ops"].min())


def write_kind(rd: RunData) -> str:
    return rd.manifest.get("config", {}).get("write_kind", "acl")


def scenarios_measured(rd: RunData, op: str) -> list[str]:
    """Scenarios of this op kind that measured something, in catalog order."""
    ph = rd.phases
    present = set(ph[ph["ops"] > 0]["scenario"]) if not ph.empty else set()
    return [n for n, s in SCENARIOS.items() if s.op == op and n in present]


def _cpu_per_1k(g: pd.DataFrame) -> float:
    ops = g["ops"].sum()
    return float((g["cpu_mean"] / 100 * g["wall_s"]).sum() / ops * 1000) if ops else float("nan")


def peak_memory(rd: RunData) -> dict[str, float]:
    """Per backend, the peak server memory (MiB) over its read phases (ingest excluded): the one figure the
    Findings, the decision summary and the resources table show."""
    m = rd.monitor_phases
    if m.empty:
        return {}
    m = m[~m["phase"].str.contains("/ingest")]
    return {b: float(g["rss_max_mb"].max()) for b, g in m.groupby("backend", sort=False)}


def resource_table(rd: RunData) -> pd.DataFrame:
    """Per backend over its check phases: server CPU core-seconds per 1,000 checks, peak memory, client
    CPU."""
    m, ph = rd.monitor_phases, rd.phases
    if m.empty or ph.empty:
        return pd.DataFrame()
    checks = ph[ph["scenario"].isin(scenarios_measured(rd, "check")) & (ph["kind"] == "check")]
    j = checks.merge(m, on=["backend", "phase"], how="inner")
    rows = []
    for b, g in j.groupby("backend", sort=False):
        per_round = [_cpu_per_1k(r) for _, r in g.groupby("repeat")] if "repeat" in g else []
        rows.append(
            {"backend": b, "phases": len(g), "ops": int(g["ops"].sum()), "cpu_s_per_1k": _cpu_per_1k(g),
             "cpu_rounds": [v for v in per_round if not math.isnan(v)], "cpu_mean": g["cpu_mean"].mean(),
             "client_cpu_mean": g["client_cpu_mean"].mean(),
             "rss_max_mb": peak_memory(rd).get(b, float("nan"))})
    return pd.DataFrame(rows)


def write_table(rd: RunData) -> pd.DataFrame:
    """One row per (backend, write scenario, workers): write and visibility percentiles, rows touched,
    stale reads and allows, never-visible errors and mismatches, all summed over repeats."""
    return derived(rd, "write_table", lambda: _write_table(rd)).copy()


def _write_table(rd: RunData) -> pd.DataFrame:
    ph = rd.phases
    names = [n for n, s in SCENARIOS.items() if s.op == "write"]
    if ph.empty or not ph["scenario"].isin(names).any():
        return pd.DataFrame()
    rows = []
    sub = ph[ph["scenario"].isin(names)]
    for (b, scen, mode, c), g in sub.groupby(
        ["backend", "scenario", "consistency", "concurrency"], sort=False):
        w, v = g[g["kind"] == "write"], g[g["kind"] == "visibility"]
        ws, vs = (merged_summary([h for hs in w["hists"] for h in hs]),
                  merged_summary([h for hs in v["hists"] for h in hs]))
        extra: dict[str, int] = {}
        for e in w["extra"]:
            for k, x in e.items():
                extra[k] = max(extra.get(k, 0), x) if k.endswith("_max") else extra.get(k, 0) + x
        counted = extra.get("rows_counted", 0)
        # percentiles: the one computed figure (median over rounds), as every other section shows them
        wc = {
            m: cell(rd, b, scen, int(c), m, "write", consistency=mode) for m in ("p50_ms", "p95_ms", "p99_ms")
        }
        vc = {m: cell(rd, b, scen, int(c), m, "visibility", consistency=mode) for m in ("p50_ms", "p95_ms")}
        rows.append({
            "backend": b, "scenario": scen, "consistency": mode or session_mode(rd, b), "session": not mode,
            "concurrency": c, "ops": int(w["ops"].sum()),
            "write_p50_ms": _v(wc["p50_ms"], ws.p50_ms), "write_p95_ms": _v(wc["p95_ms"], ws.p95_ms),
            "write_p99_ms": _v(wc["p99_ms"], ws.p99_ms),
            "vis_p50_ms": _v(vc["p50_ms"], vs.p50_ms), "vis_p95_ms": _v(vc["p95_ms"], vs.p95_ms),
            "vis_max_ms": vs.max_ms, "vis_ops": int(v["ops"].sum()),
            # ops in the smallest round behind each kind's percentiles: what their ⚠ reads
            # (figures.Cell.too_few)
            "write_fewest": _fewest_of(wc["p50_ms"]), "vis_fewest": _fewest_of(vc["p50_ms"]),
            "rows_mean": extra.get("rows", 0) / counted if counted else float("nan"),
            "rows_max": extra.get("rows_max") if counted else float("nan"),
            "stale_reads": extra.get("stale_reads", 0), "stale_allows": extra.get("stale_allows", 0),
            "revocations": sum(revocations_of(scen, e, o) for e, o in zip(w["extra"], w["ops"], strict=True)),
            "never_visible": int(sum(e.get("NeverVisible", 0) for e in w["error_types"])),
            "errors": int(w["errors"].sum()), "mismatches": int(w["mismatches"].sum()),
            "checked": int(w["checked"].sum()),
        })
    return pd.DataFrame(rows)


def revocations_of(scenario: str, extra: dict, ops: int) -> int:
    """The revocations a write phase made. Recorded since ae16102; before, each revoke_then_check op was one
    revocation and each other write op two timed writes, a grant and its revocation (20261128-083444: openfga
    write_membership 4 writes, 2 stale allows)."""
    return int(extra.get("revocations", ops if scenario == "revoke_then_check" else ops // 2))


def _v(c, fallback: float) -> float:
    return c.value if c is not None else fallback


def _fewest_of(c) -> int:
    return c.fewest if c is not None else 0  # nothing measured: no percentile to trust


def session_mode(rd: RunData, backend: str) -> str:
    """The consistency of a phase that named none: the backend's session mode, as its server record says
    (runs recorded before servers named it, and backends without modes: "—")."""
    mode = rd.info(backend).get("consistency", "")
    return f"{mode} (session)" if mode else "—"


LONGEST_COLS = [
    "backend", "scenario", "concurrency", "phase", "longest_ms", "longest_phase_s", "longest_run_s"]


def longest_checks(rd: RunData) -> pd.DataFrame:
    """Per (backend, check scenario, workers): its longest check over the rounds (closed loop, the backend's
    own read mode), the phase it was in and when it began (seconds into the phase's measured window and into
    the run), so a stall one percentile cannot show is named with its time. Only phases that recorded it
    (data.longest_op): empty for a run before issue 70."""
    ph = rd.phases
    if ph.empty or "longest_ms" not in ph:
        return pd.DataFrame(columns=LONGEST_COLS)
    sub = ph[ph["scenario"].isin(scenarios_measured(rd, "check")) & (ph["mode"] == "closed")
             & (ph["kind"] == "check") & ph["longest_ms"].notna()]
    if "consistency" in sub:  # the figures' own mode: other modes' re-runs are the freshness section's
        sub = sub[sub["consistency"] == ""]
    if sub.empty:
        return pd.DataFrame(columns=LONGEST_COLS)
    top = sub.groupby(["backend", "scenario", "concurrency"], sort=False)["longest_ms"].idxmax()
    return sub.loc[top, LONGEST_COLS].reset_index(drop=True)
