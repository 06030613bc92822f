"""The appendix's "Stale allows per 1,000 revocations" and "Freshness against latency" tables, from the figures of
report/freshness.py (a helper the decision summary and the JSON read too)."""

from __future__ import annotations

from pathlib import Path

from authzbench.report.core import charts
from authzbench.report.core.data import RunData
from authzbench.report.core.tables import label, num, table
from authzbench.report.freshness import (
    REVOKE,
    STALE_LABEL,
    VIA_GROUP,
    WRITERS,
    base_text,
    citation,
    freshness,
    rechecks,
    revocations,
    stale_allows,
)


def section(rd: RunData, out_dir: Path) -> str:
    """The appendix's tables: stale allows per 1,000 revocations per mode and writer count, and each engine's
    modes."""
    st, fr = stale_allows(rd), freshness(rd)
    lines: list[str] = []
    if not st.empty:
        # the rate as num() prints it everywhere else (82.9, not the table's default 82.873)
        st = st.assign(backend_l=[label(rd, b) for b in st["backend"]], base=[base_text(r) for _, r in st.iterrows()],
                       rate=[num(v) for v in st["per_1k"]],
                       iv=[f"{num(a)}-{num(b)}" for a, b in zip(st["lo_1k"], st["hi_1k"], strict=True)])
        lines += [f"## {STALE_LABEL}", "",
                  "Every structural write phase's revocations per read consistency and writer count (`"
                  f"{REVOKE}` at {WRITERS} concurrent writers in each mode): a stale allow is a revocation whose "
                  "first check, right after the revocation returned, still allowed; the interval is Wilson's 95%. "
                  "Churn steps' revocations are not counted here: they ran at a scheduled rate beside the step's "
                  "open-loop checks, another condition (the churn table gives them per step).", "",
                  table(st, {"backend_l": "Backend", "mode": "Read consistency", "writers": "Writers",
                             "kinds": "Write kinds", "base": "Base (stale of revocations)",
                             "rate": STALE_LABEL, "iv": "95% interval"})]
        lines += [c, ""] if (c := citation(rd, revocations(rd))) else []
    if not fr.empty:
        fr = fr.assign(backend_l=[label(rd, b) for b in fr["backend"]],
                       p50=[_marked(v, few) for v, few in zip(fr["p50_ms"], fr["p50_too_few"], strict=True)],
                       p95=[_marked(v, few) for v, few in zip(fr["p95_ms"], fr["too_few"], strict=True)],
                       lag=[_marked(v, few) for v, few in zip(fr["lag_p95_ms"], fr["lag_too_few"], strict=True)])
        lines += ["## Freshness against latency", "",
                  f"Each engine's `{VIA_GROUP}` check at 1 worker in each of its consistency modes, beside the "
                  "staleness that mode allowed in this run's write phases: the visibility lag p95 after a write "
                  "returned, of its worst write kind at its fewest writers (the figure the Findings rank), and its "
                  "stale allows per 1,000 revocations at each writer count.", "",
                  table(fr, {"backend_l": "Engine", "mode": "Read consistency", "p50": "Check p50 (ms)",
                             "p95": "Check p95 (ms)", "lag": "Visibility p95, worst write kind (ms)",
                             "lag_writers": "Writers (lag)", "stale": STALE_LABEL})]
        lines += ["", *r] if (r := rechecks(rd)) else []
        if chart := charts.freshness_modes(rd, fr, charts.chart_dir(out_dir, rd.manifest["run_id"])):
            lines += ["", f"![via-group check p95 against visibility lag p95, per engine and mode]({chart})"]
    return "\n".join([*lines, ""]) if lines else ""


def _marked(v: float, too_few: bool) -> str:
    """A percentile cell, ⚠ after it when the ops behind it are under its floor (noise.min_ops)."""
    return f"{num(v)}{' ⚠' if too_few else ''}" if v == v else "—"
