"""The appendix's "Revocations under concurrency" and "Freshness against latency" tables, from the figures of
report/freshness.py (a helper the decision summary and the JSON read too)."""

from __future__ import annotations

from pathlib import Path

from authzbench.report import charts
from authzbench.report.data import RunData
from authzbench.report.freshness import REVOKE, VIA_GROUP, WRITERS, citation, freshness, revocations
from authzbench.report.tables import label, num, table


def section(rd: RunData, out_dir: Path) -> str:
    """The appendix's tables: revocations at 8 writers per mode, and each engine's modes."""
    rev, fr = revocations(rd), freshness(rd)
    lines: list[str] = []
    if not rev.empty:
        rev = rev.assign(backend_l=[label(rd, b) for b in rev["backend"]],
                         iv=[f"{num(a)}-{num(b)}" for a, b in zip(rev["lo_1k"], rev["hi_1k"], strict=True)])
        lines += ["## Revocations under concurrency", "",
                  f"`{REVOKE}` with {WRITERS} concurrent writers in each consistency mode: a stale allow is a check "
                  "that still allowed right after its revocation returned; the interval is Wilson's 95%.", "",
                  table(rev, {"backend_l": "Backend", "mode": "Read consistency", "revocations": "Revocations",
                              "stale_allows": "Stale allows", "per_1k": "Per 1,000", "iv": "95% interval"})]
        lines += [c, ""] if (c := citation(rd, rev)) else []
    if not fr.empty:
        fr = fr.assign(backend_l=[label(rd, b) for b in fr["backend"]],
                       p50=[_marked(v, few) for v, few in zip(fr["p50_ms"], fr["p50_too_few"], strict=True)],
                       p95=[_marked(v, few) for v, few in zip(fr["p95_ms"], fr["too_few"], strict=True)],
                       lag=[_marked(v, few) for v, few in zip(fr["lag_p95_ms"], fr["lag_too_few"], strict=True)])
        lines += ["## Freshness against latency", "",
                  f"Each engine's `{VIA_GROUP}` check at 1 worker in each of its consistency modes, beside the "
                  "staleness that mode allowed in this run's write phases (visibility lag p95 after a write "
                  "returned; stale allows after a revocation).", "",
                  table(fr, {"backend_l": "Engine", "mode": "Read consistency", "p50": "Check p50 (ms)",
                             "p95": "Check p95 (ms)", "lag": "Visibility p95 (ms)",
                             "stale_allows": "Stale allows", "writes": "Writes"})]
        if chart := charts.freshness_modes(rd, fr, charts.chart_dir(out_dir, rd.manifest["run_id"])):
            lines += ["", f"![via-group check p95 against visibility lag p95, per engine and mode]({chart})"]
    return "\n".join([*lines, ""]) if lines else ""


def _marked(v: float, too_few: bool) -> str:
    """A percentile cell, ⚠ after it when the ops behind it are under its floor (noise.min_ops)."""
    return f"{num(v)}{' ⚠' if too_few else ''}" if v == v else "—"
