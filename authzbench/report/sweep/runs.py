"""The runs of one `bench --profiles` size sweep and their figures per (backend, size): the table the size
sweep's section (scaling.py), the shapes section, the capacity section, the decision summary and the ranking
model's growth dimensions all read. A helper, so that none of those sections imports another."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import pandas as pd

from authzbench.core.records import IngestBounded
from authzbench.report.core.data import RunData, merged_summary, sweep_runs
from authzbench.report.core.noise import round_value
from authzbench.report.core.ranking import Dimension, Figure
from authzbench.report.core.tables import label
from authzbench.workloads.catalog import SCENARIOS

HEAVY_LOOKUP = "lookup_resources_manage_super"
# measure -> its title in the table, the charts and the slope sentences
MEASURES = {
    "ingest_s": "ingest time (s)", "rels_per_s": "relationships/s", "rows": "rows written",
    "footprint_mib": "footprint (MiB)", "bytes_per_rel": "bytes per relationship",
    "check_p50_ms": "check p50 (ms)", "check_p95_ms": "check p95 (ms)",
    "lookup_p50_ms": "heavy lookup p50 (ms)", "lookup_p95_ms": "heavy lookup p95 (ms)",
    "write_p50_ms": "structural write p50 (ms)", "write_p95_ms": "structural write p95 (ms)",
}
# The default run's structural writes: a user joins a group, a group joins a group.
STRUCTURAL = ("write_membership", "write_hierarchy")


def labelled(runs: list[RunData], df: pd.DataFrame) -> pd.DataFrame:
    """The size table with each backend named as the reports name it (‡ a stand-in, † embedded), from the
    first run of the sweep that measured it (a backend that did not load at the largest size is still
    marked)."""
    def one(b: str) -> str:
        return next((label(r, b) for r in runs if b in r.servers), b)

    return df.assign(backend=df["backend"].map(one)) if not df.empty else df


def _latency(
    ph: pd.DataFrame, backend: str, scenarios: list[str], kind: str, prefix: str) -> dict[str, float]:
    """{prefix}_p50_ms / _p95_ms as every figure is taken (noise.round_value: the median over rounds, each
    round being its scenarios' ops merged), and each one's lowest and highest round (_lo, _hi: the spread the
    growth fit's power-law tests and the projections' ranges rest on). Pooled over every op instead, the
    figure leaned to the longest round and disagreed with the same run's own tables."""
    sub = ph[(ph["backend"] == backend) & ph["scenario"].isin(scenarios) & (ph["kind"] == kind)
             & (ph["mode"] == "closed")]
    if sub.empty:
        return {}
    sub = sub[sub["concurrency"] == sub["concurrency"].min()]
    pooled = merged_summary([h for hs in sub["hists"] for h in hs])
    rounds = pd.DataFrame([_round(g) for _, g in sub.groupby("repeat")])
    out: dict[str, float] = {}
    for q in ("p50", "p95"):
        v = rounds[f"{q}_ms"]
        out[f"{prefix}_{q}_ms"] = round_value(rounds, float(q[1:]), getattr(pooled, f"{q}_ms"))
        out[f"{prefix}_{q}_ms_lo"], out[f"{prefix}_{q}_ms_hi"] = float(v.min()), float(v.max())
    return out


def _round(g: pd.DataFrame) -> dict:
    """One round of a measure over several scenarios: their ops merged, as a phase row reads."""
    hists = [h for hs in g["hists"] for h in hs]
    s = merged_summary(hists)
    return {"hists": hists, "ops": int(g["ops"].sum()), "p50_ms": s.p50_ms, "p95_ms": s.p95_ms}


def size_table(runs: list[RunData]) -> pd.DataFrame:
    """One row per (backend, size) with every measure; NaN where a run has no figure."""
    checks = [n for n, s in SCENARIOS.items() if s.op == "check" and s.model == "rebac"]
    rows = []
    for rd in runs:
        ds = rd.manifest.get("dataset") or {}
        rels = ds.get("relationships") or 0
        bounded = {r.backend: r for r in rd.records if isinstance(r, IngestBounded) and not r.variant}
        ing = rd.ingest[rd.ingest["variant"] == ""] if not rd.ingest.empty else rd.ingest
        backends = list(dict.fromkeys([*ing.get("backend", []), *bounded,
                                       *(rd.phases["backend"] if not rd.phases.empty else [])]))
        for b in backends:
            row = {"backend": b, "profile": ds.get("profile"), "relationships": rels, "run": rd.path.name}
            one = ing[ing["backend"] == b] if not ing.empty else ing
            if not one.empty:
                r = one.iloc[-1]
                fp = r["footprint_bytes"]
                row.update(ingest_s=r["total_s"], rels_per_s=r["rels_per_s"], rows=r["rows"],
                           footprint_mib=fp / 2**20 if fp else math.nan,
                           bytes_per_rel=fp / rels if fp and rels else math.nan)
            if b in bounded:
                x = bounded[b]
                row["note"] = _bounded_note(x)
            if not rd.phases.empty:
                row.update(_latency(rd.phases, b, checks, "check", "check"))
                row.update(_latency(rd.phases, b, [HEAVY_LOOKUP], "lookup", "lookup"))
                row.update(_latency(rd.phases, b, list(STRUCTURAL), "write", "write"))
            rows.append(row)
    df = pd.DataFrame(rows)
    for m in [*MEASURES, *(f"{m}_{e}" for m in MEASURES for e in ("lo", "hi"))]:
        if m not in df:
            df[m] = math.nan
    return df


def _bounded_note(x: IngestBounded) -> str:
    """Why a load stopped: its time bound, or the machine's memory floor (with what was left)."""
    rate = f"{x.rels_per_s:,.0f}/s" if x.rels_per_s else "before its first relationship"
    if x.memory_left_bytes is not None:
        return (f"load stopped after {x.seconds / 60:,.1f} min with {x.memory_left_bytes / 2**30:.1f} GiB of "
                f"the machine's memory left: {rate}")
    projected = (
        f", projected {x.projected_seconds / 60:,.1f} min" if math.isfinite(x.projected_seconds) else "")
    return f"load stopped at the bound ({x.bound_seconds / 60:g} min): {rate}{projected}"


def slope(sizes: np.ndarray, values: np.ndarray) -> float | None:
    """Least-squares slope of log(value) on log(size): value ~ size^slope. None under two usable points."""
    ok = (sizes > 0) & (values > 0) & np.isfinite(values)
    if ok.sum() < 2 or len(set(sizes[ok])) < 2:
        return None
    return float(np.polyfit(np.log(sizes[ok]), np.log(values[ok]), 1)[0])


def answers_line(r: RunData) -> str:
    """"126,965 answers, 0 mismatches": every size's answers were checked as in its own report."""
    ph = r.phases
    checked, mism = (0, 0) if ph.empty else (int(ph["checked"].sum()), int(ph["mismatches"].sum()))
    return f"{checked:,} answers, {mism:,} mismatches"


def mismatch_lines(
    runs: list[RunData], name: Callable[[RunData], str] | None = None, what: str = "size") -> list[str]:
    """A bold line naming each size (or point: `name`) and backend with a wrong answer (a sweep's last report
    is the one read)."""
    name = name or (lambda r: f"`{r.manifest['dataset']['profile']}`")
    where = []
    for r in runs:
        if r.phases.empty:
            continue
        per = r.phases.groupby("backend")["mismatches"].sum()
        where += [f"{name(r)} {label(r, b)} {int(n):,}" for b, n in per.items() if n]
    if not where:
        return []
    return [
        f"**Wrong answers at some {what} of the sweep: {'; '.join(where)}** (each in its {what}'s run: the "
        "report's Correctness section and its appendix's first mismatches).",
        ""]


GROWTH = ("check_p95_ms", "lookup_p95_ms", "bytes_per_rel")  # size-sweep measures ranked by growth exponent


def size_growth(rd: RunData) -> list[Dimension]:
    """Growth exponents of a `--profiles` size sweep (authzbench.report.sweep.runs), when this run ends
    one."""
    runs = sweep_runs(rd)
    df = size_table(runs) if len(runs) >= 2 else pd.DataFrame()
    out = []
    for m in GROWTH if not df.empty else ():
        figs = []
        for b, g in df.groupby("backend", sort=False):
            k = slope(g["relationships"].to_numpy(float), g[m].to_numpy(float))
            if k is not None:
                figs.append(Figure(b, k, detail=f"{g['relationships'].nunique()} sizes"))
        out.append(Dimension("Growth with size", f"Growth of {MEASURES[m]} with the dataset (exponent: "
                             "1 = linear, 0 = flat)", "", False, figs, "how-cost-grows-with-size",
                             key=f"growth/{m}"))
    return out
