"""Validity and limitations, computed: stand-ins, shared cores and the client's CPU share, warm-up, incomplete
phases, sample sizes."""

from __future__ import annotations

from functools import partial
from pathlib import Path

import pandas as pd

from authzbench.report.core import tables
from authzbench.report.core.data import RunData
from authzbench.report.core.noise import min_ops
from authzbench.report.core.published import load_reference
from authzbench.report.core.tables import MARK


def section(rd: RunData, out_dir: Path) -> str:
    label, table = partial(tables.label, rd), tables.table
    lines = ["## 11. Validity and limitations", "",
             "Computed from the recorded server info, monitor samples and phase records.", ""]
    for part in (_stand_ins, _shared_cores, _interference, _warmup, _sample_sizes, _stops):
        lines += part(rd, label, table)
    return "\n".join(lines)


def _interference(rd: RunData, label, table) -> list[str]:
    """What else used the cores during each phase, which phases ran again, and what still rests on a
    disturbed one."""
    ph = rd.phases
    if ph.empty or "foreign_cpu" not in ph or ph["foreign_cpu"].isna().all():
        return []
    rows = pd.concat([rd.superseded, ph]) if not rd.superseded.empty else ph
    rows = rows.drop_duplicates("phase")
    lines = ["### Other processes on the cores", "",
             f"CPU of processes outside the run (% of one core, mean over each phase's measured window): "
             f"median {rows['foreign_cpu'].median():.1f}, 95th percentile "
             f"{rows['foreign_cpu'].quantile(0.95):.1f}, "
             f"max {rows['foreign_cpu'].max():.1f} over {len(rows)} phase runs; hypervisor steal max "
             f"{rows['steal'].max():.1f}. Phases disturbed (above the threshold): "
             f"{int(rows['disturbed'].sum())}; re-run: "
             f"{rd.superseded['phase'].nunique() if not rd.superseded.empty else 0}; "
             f"figures still resting on a disturbed phase (marked ⚡): "
             f"{int(ph.drop_duplicates('phase')['disturbed'].sum())}.", ""]
    bad = rows[rows["disturbed"]]
    if not bad.empty:
        bad = bad.assign(kept=~bad["phase"].isin(rd.superseded["phase"]) if not rd.superseded.empty else True)
        lines += [table(bad.sort_values("foreign_cpu", ascending=False).head(20),
                        {"phase": "Phase", "foreign_cpu": "Foreign CPU (%)", "steal": "Steal (%)",
                         "kept": "Figure rests on it"}), ""]
    return lines


def _stand_ins(rd: RunData, label, table) -> list[str]:
    ref = load_reference()["systems"]
    rows = []
    for b, s in rd.servers.items():
        info, r = s.info, ref.get(b)
        if r is None:
            continue
        text = f"{info.get('label', '')} {info.get('version', '')}".lower()
        same_product = r["product"].lower() in text and "standing in" not in text and "not " + \
            r["product"].lower() not in text and s.concurrency_model != "thread"
        same_version = str(r["version"]).lstrip("v") == str(info.get("version", "")).lstrip("v")
        verdict = "as the reference" if same_product and same_version else \
            "same product, other version" if same_product else "stand-in: another product or build"
        rows.append({"backend": label(b), "ours": f"{info.get('label')} ({info.get('version')})",
                     "theirs": f"{r['product']} {r['version']} (`{r['image']}`)", "verdict": verdict})
    if not rows:
        return []
    return ["### What answered, against what the reference ran", "",
            table(pd.DataFrame(rows), {"backend": "Backend", "ours": "Answered here (as it reports itself)",
                                       "theirs": "Reference ran", "verdict": "Comparison"}), ""]


def _shared_cores(rd: RunData, label, table) -> list[str]:
    cores = rd.manifest.get("environment", {}).get("cpu_logical", "?")
    lines = ["### Client and servers on the same cores", "",
             f"Client workers and servers shared this machine's {cores} logical cores. The client processes' "
             "own CPU, sampled with the servers', shows how much of the machine the load generator took "
             "(100% = one core):", ""]
    m = rd.monitor_phases
    if m.empty or m["client_cpu_mean"].isna().all():
        return [*lines,
                "_the monitor recorded no client CPU in this run (recorded since the monitor samples the "
                "client processes; in-process engines have no separate client)_",
                ""]
    m = m[m["client_cpu_mean"].notna()]  # in-process engines: client and engine are one process
    m = m.assign(stage=m["phase"].str.split("/").str[1], load=m["phase"].str.split("/").str[2])
    g = m.groupby(["backend", "stage", "load"], sort=False).agg(
        server=("cpu_mean", "mean"), client=("client_cpu_mean", "mean")).reset_index()
    g["cell"] = [f"{c / (c + s_):.0%} ({c:.0f} / {s_:.0f})" if c + s_ > 0 else "—"
                 for c, s_ in zip(g["client"], g["server"], strict=True)]
    g["backend"] = [label(b) for b in g["backend"]]
    piv = g.pivot(index=["backend", "stage"], columns="load", values="cell").fillna("")
    loads = sorted(piv.columns, key=lambda x: (not x.startswith("c"), len(x), x))  # c1, c8, c32, open...
    piv = piv[loads].reindex(list(dict.fromkeys(zip(g["backend"], g["stage"], strict=True)))).reset_index()
    return [*lines[:-2], lines[-2][:-1] + "; each cell: the client's share of the CPU used, then (client % / "
            "server %) per load:", "",
            table(piv, {"backend": "Backend", "stage": "Phase", **{x: x for x in loads}}),
            "_In-process engines (†, `thread` workers) are not listed: client and engine are one process._",
            ""]


def _warmup(rd: RunData, label, table) -> list[str]:
    ph = rd.phases
    if ph.empty:
        return []
    one = ph.drop_duplicates("phase")
    g = one.groupby(["backend", "scenario"], sort=False)["warmup_ops"].sum().reset_index()
    per = "; ".join(f"{label(b)} {int(x['warmup_ops'].sum()):,}" for b, x in g.groupby("backend", sort=False))
    return ["### Warm-up", "", f"Warm-up ops run before each phase and excluded from every figure: "
            f"{int(g['warmup_ops'].sum()):,} in all ({per}).", ""]


def _sample_sizes(rd: RunData, label, table) -> list[str]:
    ph = rd.phases
    if ph.empty:
        return []
    rows = []
    for r in ph[ph["ops"] > 0].itertuples():
        short = [f"p{q:g}" for q in (95.0, 99.0) if r.ops < min_ops(q)]
        if short:
            rows.append({"phase": f"`{r.phase}` ({r.kind})", "ops": r.ops, "short": ", ".join(short)})
    lines = [
        "### Sample sizes", "",
        "A percentile is the median of its rounds' percentiles, or, where a round has fewer ops than it "
        "needs, the percentile of every round's ops pooled (the Ops columns count them all). A p95 needs at "
        "least 20 ops and a p99 at least 100 before it is more than the maximum; cells resting on fewer are "
        f"marked {MARK}.{_p999_short(ph)}"]
    if not rows:
        return [*lines[:-1], lines[-1] + " No percentile in this run rests on too few ops.", ""]
    return [*lines[:-1], lines[-1] + f" {len(rows)} phase figures rest on too few ops:", "",
            table(pd.DataFrame(rows), {"phase": "Phase", "ops": "Ops", "short": "Marked percentiles"}), ""]


def _p999_short(ph: pd.DataFrame) -> str:
    """A check's p99.9 needs 1,000 ops a round: most 1-worker rounds of a slower backend have fewer, so they
    are counted here, not listed (the tables mark each)."""
    checks = ph[(ph["ops"] > 0) & (ph["kind"] == "check")]
    n = int((checks["ops"] < min_ops(99.9)).sum())
    return (f" A check's p99.9 needs {min_ops(99.9):,}: {n:,} of {len(checks):,} check phase figures have "
            f"fewer (each marked {MARK} where shown, not listed below)." if n else "")


def _stops(rd: RunData, label, table) -> list[str]:
    ph = rd.phases
    if ph.empty and not rd.skipped:
        return []
    one = (ph.drop_duplicates("phase")
           if not ph.empty
           else pd.DataFrame(columns=["phase", "status", "reason", "ops"]))
    budget = one[(one["status"] == "complete") & one["reason"].str.contains("time budget", na=False)]
    bad = one[one["status"] != "complete"]
    lines = ["### Phases stopped early", ""]
    if len(budget):
        per = budget["phase"].str.split("/").str[0].value_counts()
        lines.append(
            f"- {len(budget):,} phases reached their time budget before their op count, as intended (a "
            "phase stops at whichever comes first): " + ", ".join(f"{b} {n}" for b, n in per.items()) + ".")
    lines += [f"- `{p}` incomplete, its figures cover only what ran: {_short(str(r))}"
              for p, r in zip(bad["phase"], bad["reason"], strict=True)]
    for r in rd.skipped:
        cause = _skip_cause(str(r.reason), r.scenario, _last_step(rd, r.backend))
        lines.append(f"- `{r.phase}` not run: {cause}: {_short(str(r.reason))}")
    lines += [f"- backend error, {e.backend} ({e.stage}): {_short(str(e.message))}" for e in rd.errors]
    if len(lines) == 2:
        lines.append("- None: every phase ran to its op count.")
    return [*lines, ""]


def _skip_cause(reason: str, scenario: str = "", last_step: float | None = None) -> str:
    """Why the planner left a phase out (phase_plan.Pace, workloads/churn.ChurnSweep), from its recorded
    reason: 20261129-201802 gave every churn and 8-writer skip the timeout prediction, beside a churn table
    that said "the 1/s step did not hold"."""
    if reason.startswith("bounded by op count"):
        return "an earlier round measured its op count (one op outlasted the round's budget)"
    if reason.startswith("under its op floor"):
        return "a lower worker count's op time predicted one op a worker, fewer than the round's op floor"
    if scenario == "churn" and reason.startswith("foreseen"):
        return "its 1-writer write phases showed this step's changes could not start on time"
    if scenario == "churn":
        step = f"the {last_step:g}/s step" if last_step is not None else "a lower rate's step"
        return f"{step} did not hold, and no higher rate holds better"
    if reason.startswith("at 1 writer the phase took"):
        return "its 1-writer phase ran far past its budget"
    return "a lower worker count's op time predicted every op past its timeout"


def _last_step(rd: RunData, backend: str) -> float | None:
    """The highest churn rate (changes/s) of the backend's steps that ran: the one a skipped step's reason
    is."""
    ph = rd.phases
    rates = ph[(ph["backend"] == backend) & (ph["scenario"] == "churn")]["churn_rate"] if not ph.empty else []
    return float(max(rates)) if len(rates) else None


def _short(text: str, limit: int = 300) -> str:
    return text if len(text) <= limit else text[:limit - 1] + "…"
