"""Against the scale load test's tiers: the SpiceDB-on-CockroachDB test's T1/T2 (10M relationships of its
social graph, 1,000 and 10,000 requests/s of which 1% writes) laid out as its results table, our open-loop
mixed phases beside its published rows. Shown for social-model runs with open-loop mixed phases."""

from __future__ import annotations

import math
from functools import partial
from pathlib import Path

import pandas as pd

from authzbench.report.core import tables
from authzbench.report.core.data import RunData
from authzbench.report.core.frames import mixed_phases, slo_verdicts
from authzbench.report.core.published import load_published

SAME_SIZE = 0.10  # a run within 10% of a tier's relationship count is that tier's size


def published() -> list[dict]:
    """T1/T2's published rows (SCALE-REFERENCE.md, section A, in published_figures.json): latencies, cache hit
    and the cluster each ran on."""
    return load_published()["scale"]["results"]


def default_on(rd: RunData) -> bool:
    return rd.manifest.get("dataset", {}).get("model") == "social" and not _open_rows(rd).empty


def _open_rows(rd: RunData) -> pd.DataFrame:
    m = mixed_phases(rd)
    return m[m["mode"] == "open"] if not m.empty else m


def tier_of(relationships: int, rate: float) -> str:
    for p in published():
        if p["rate"] == rate and abs(relationships - p["relationships"]) <= SAME_SIZE * p["relationships"]:
            return p["test"]
    return "—"


def rows(rd: RunData) -> pd.DataFrame:
    """One row per (backend, target rate) of the open-loop mixed phases, with the SLO verdict."""
    m, v = _open_rows(rd), slo_verdicts(rd)
    rels = int(sum(rd.manifest.get("dataset", {}).get("counts", {}).values()))
    out = []
    for (b, rate), g in m.groupby(["backend", "target_rate"], sort=False):
        chk, wr = g[g["kind"] == "check"], g[g["kind"] == "write"]
        verdict = v[(v["backend"] == b) & (v["mode"] == "open") & (v["rate"] == rate)]
        out.append({"test": tier_of(rels, rate), "backend": b, "relationships": rels, "rate": rate,
                    "achieved": g["ops_per_s"].sum(), "dropped": int(g["dropped"].max()),
                    "check_p50": _first(chk, "p50_ms"), "check_p95": _first(chk, "p95_ms"),
                    "check_ops": int(chk["ops"].sum()), "write_p50": _first(wr, "p50_ms"),
                    "write_p95": _first(wr, "p95_ms"), "write_ops": int(wr["ops"].sum()),
                    "success": float(verdict["success"].iloc[0]) if len(verdict) else math.nan,
                    "verdict": verdict["verdict"].iloc[0] if len(verdict) else "—"})
    return pd.DataFrame(out)


def _first(df: pd.DataFrame, col: str) -> float:
    return float(df[col].iloc[0]) if len(df) else math.nan


def section(rd: RunData, out_dir: Path) -> str:
    if not default_on(rd):
        return ""
    label = partial(tables.label, rd)
    fmt_pct = partial(tables.fmt_pct, fmt=lambda y: tables.fmt(y, 4))
    table = tables.table
    ours = rows(rd)
    ours["backend"] = ours["backend"].map(label)
    for k in ("check", "write"):
        for p in (50, 95):
            ours[f"{k}_p{p}"] = [
                fmt_pct(x, n, p) for x, n in zip(ours[f"{k}_p{p}"], ours[f"{k}_ops"], strict=True)]
    pub = pd.DataFrame(published())
    scale = load_published()["scale"]
    lines = [
        "## Against the scale load test's tiers (T1/T2)", "",
        f"The {scale['engine']}-on-{scale['datastore']} load test (SCALE-REFERENCE.md, section A) ran its "
        "social graph at 10M relationships with 1,000 (T1) and 10,000 (T2) requests/s, 1% of them writes, "
        "checks at minimize_latency. Our open-loop mixed phases on the social model, laid out as its "
        "results table: a row is a tier when the run has its relationship count (within 10%) and its target "
        "rate. Ours run client and servers on this one machine (section 1), theirs on a cluster; the "
        "published rows are its figures as printed (no success rate published). Latencies in ms.", "",
        table(ours,
              {"test": "Test", "backend": "Backend", "relationships": "Relationships",
               "rate": "Target ops/s", "achieved": "Achieved ops/s", "dropped": "Dropped",
               "check_p95": "P95 check", "check_p50": "P50 check", "write_p95": "P95 write",
               "write_p50": "P50 write", "success": "Success", "verdict": "SLO"},
              4),
        "", "Published:", "",
        table(pub,
              {"test": "Test", "relationships": "Relationships", "rate": "Target ops/s",
               "cache_hit": "Cache hit", "check_p95": "P95 check", "check_p50": "P50 check",
               "write_p95": "P95 write", "write_p50": "P50 write", "setup": "Setup"},
              4),
        ""]
    return "\n".join(lines)
