"""Sections 7-10: the comparison summary, correctness against the oracle, stability across repeats,
incomplete phases and backend errors; and the main report's correctness digest (correctness_digest)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from authzbench.report.core.data import RunData, cv
from authzbench.report.core.tables import fmt, fmt_pct, label, link_target, merge_repeats, table
from authzbench.workloads.catalog import SCENARIOS


def comparison(rd: RunData, out_dir: Path) -> str:
    ph = rd.phases
    if ph.empty:
        return ""
    lines = [
        "## 7. Comparison summary", "",
        "p50 / p95 latency in ms at 1 worker (n = the ops they rest on), and the best throughput over all "
        "concurrency levels (ops/s). Backends marked † are shown apart: their figures are not a networked "
        "server's.", "", link_target("comparison")]
    mixed = ph["scenario"].map(lambda n: SCENARIOS[n].op == "mixed" if n in SCENARIOS else False)
    # write scenarios show their write latency; visibility lags and the mixed workload's writes are apart
    sub = ph[(ph["mode"] == "closed") & (ph["kind"] != "visibility") & ~(mixed & (ph["kind"] == "write"))]
    rows = []
    for (scen, b), g in sub.groupby(["scenario", "backend"], sort=False):
        one = merge_repeats(g[g["concurrency"] == g["concurrency"].min()]).iloc[0]
        n = int(one["ops"])
        rows.append({"scenario": scen, "backend": label(rd, b),
                     "cell": f"{fmt_pct(one['p50_ms'], n, 50, fmt)}"
                     f" / {fmt_pct(one['p95_ms'], n, 95, fmt)} (n={n:,}; {fmt(g['ops_per_s'].max())}/s)"})
    if not rows:
        return ""
    piv = (
        pd.DataFrame(rows).pivot(index="scenario", columns="backend", values="cell").reset_index().fillna("—")
    )
    order = {n: i for i, n in enumerate(SCENARIOS)}
    piv = piv.sort_values("scenario", key=lambda s: s.map(order))
    cols = {"scenario": "Scenario"}
    comparable = [c for c in piv.columns if c != "scenario" and not c.endswith("†")]
    apart = [c for c in piv.columns if c.endswith("†")]
    cols.update({c: c for c in comparable + apart})
    lines.append(table(piv, cols))
    return "\n".join(lines)


def correctness(rd: RunData, out_dir: Path) -> str:
    ph = rd.phases
    lines = ["## 8. Correctness (answers vs the oracle)", ""]
    if ph.empty:
        return "\n".join([*lines, "_nothing checked_", ""])
    sub = ph[ph["checked"] > 0]
    g = sub.groupby(["backend", "scenario"], sort=False).agg(checked=("checked", "sum"),
                                                              mismatches=("mismatches", "sum")).reset_index()
    g["rate"] = g["mismatches"] / g["checked"]
    ex = sub[sub["mismatches"] > 0].groupby(["backend", "scenario"])["examples"].first()
    g["example"] = [str(ex.get((b, s), [""])[0])[:160] if (b, s) in ex else "" for b, s in
                    zip(g["backend"], g["scenario"], strict=True)]
    g["backend"] = [label(rd, b) for b in g["backend"]]
    lines.append(table(g,
                       {"backend": "Backend", "scenario": "Scenario", "checked": "Answers checked",
                        "mismatches": "Mismatches", "rate": "Mismatch rate", "example": "First mismatch"},
                       4))
    return "\n".join(lines)


def stability(rd: RunData, out_dir: Path) -> str:
    ph = rd.phases
    if ph.empty or ph["repeat"].max() < 1:
        # Kept (not omitted) so sections keep their numbers from one report to the next.
        return (
            "## Stability across rounds\n\nNot measured: each phase ran in one round. Run with `--rounds N` "
            "for the coefficient of variation of every figure.\n")
    cfg = rd.manifest.get("config", {})
    lines = ["## Stability across rounds", "",
             f"Coefficient of variation (stddev / mean) of each figure across its rounds (this run: "
             f"{cfg.get('rounds', '?')} rounds of every phase over {cfg.get('visits', 1)} visits, "
             f"--repeat {cfg.get('repeat', 1)}).", ""]
    rows = []
    # A mixed phase's checks and writes, and a write scenario re-run under another read consistency, are
    # figures of their own: each row names its ops and mode (without them 23 rows read as the same twice).
    closed = ph[ph["mode"] == "closed"].assign(
        consistency=ph["consistency"].fillna("") if "consistency" in ph else "")
    for (b, s, c, k, m), g in closed.groupby(
        ["backend", "scenario", "concurrency", "kind", "consistency"], sort=False):
        if len(g) < 2:
            continue
        rows.append(
            {"backend": label(rd, b), "scenario": s, "concurrency": c, "kind": k, "mode": m or "session",
             "runs": len(g), "cv_p50": cv(g["p50_ms"].tolist()), "cv_p95": cv(g["p95_ms"].tolist()),
             "cv_ops": cv(g["ops_per_s"].tolist())})
    lines.append(table(pd.DataFrame(rows),
                       {"backend": "Backend", "scenario": "Scenario", "concurrency": "Workers", "kind": "Ops",
                        "mode": "Read consistency", "runs": "Runs", "cv_p50": "CV p50", "cv_p95": "CV p95",
                        "cv_ops": "CV ops/s"},
                       3))
    return "\n".join(lines)


def problems(rd: RunData, out_dir: Path) -> str:
    ph = rd.phases
    bad = ph[ph["status"] != "complete"].drop_duplicates("phase") if not ph.empty else ph
    if bad.empty and not rd.errors:
        return f"## 9. Incomplete phases and backend errors\n\n{_completed(rd)}\n"
    lines = ["## 9. Incomplete phases and backend errors", ""]
    if rd.skipped:
        lines.append(f"- {_not_run(rd)}")
    for e in rd.errors:
        lines.append(f"- **{e.backend}** ({e.stage}): {_short(str(e.message))}")
    for _, r in bad.head(MAX_LISTED).iterrows():
        lines.append(
            f"- `{r['phase']}`: **{r['status']}** — {_short(str(r['reason']))}{_by_type(ph, r['phase'])}")
    if len(bad) > MAX_LISTED:
        lines.append(
            f"- and {len(bad) - MAX_LISTED} more phases: "
            + ", ".join(f"{b} {n}" for b, n in bad.iloc[MAX_LISTED:]["backend"].value_counts().items()))
    return "\n".join(lines) + "\n"


def _completed(rd: RunData) -> str:
    """"Every phase completed" only when none was skipped: a phase predicted past its timeout is not run."""
    if not rd.skipped:
        return "None: every phase completed."
    return f"Every phase that ran completed; {_not_run(rd)}"


def _not_run(rd: RunData) -> str:
    per = pd.Series([str(r.phase).split("/")[0] for r in rd.skipped]).value_counts()
    return (f"{len(rd.skipped)} phase{'s' * (len(rd.skipped) != 1)} not run ("
            + ", ".join(f"{label(rd, b)} {n}" for b, n in per.items())
            + "); each one's cause: appendix, \"Phases stopped early\".")


def _by_type(ph: pd.DataFrame, phase: str) -> str:
    """The phase's failed ops by error type (every kind of op it ran), largest first: what the server said."""
    counts: dict[str, int] = {}
    for types in ph.loc[ph["phase"] == phase, "error_types"]:
        for k, v in (types or {}).items():
            counts[k] = counts.get(k, 0) + int(v)
    if not counts:
        return ""
    top = sorted(counts.items(), key=lambda kv: -kv[1])[:3]
    return "; errors by type: " + ", ".join(f"{k} {v:,}" for k, v in top)


MAX_LISTED = 12  # a main report stays readable; every phase's status is in the appendix's tables


def _short(text: str, limit: int = 300) -> str:
    return text if len(text) <= limit else text[:limit - 1] + "…"


# the main report's digest --------------------------------------------------------------------------------

def correctness_digest(rd: RunData, out_dir: Path) -> str:
    ph = rd.phases
    if ph.empty:
        return ""
    g = ph[ph["checked"] > 0].groupby("backend", sort=False).agg(
        checked=("checked", "sum"), mismatches=("mismatches", "sum")).reset_index()
    g["backend"] = [label(rd, b) for b in g["backend"]]
    return "\n".join(["## 8. Correctness", "", "Every answer compared with the oracle (per scenario, with "
                      "the first mismatches: appendix).", "",
                      table(g, {"backend": "Backend", "checked": "Answers checked",
                                "mismatches": "Mismatches"}), ""])
