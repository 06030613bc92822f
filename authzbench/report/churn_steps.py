"""The appendix's "Structural churn" table: every churn step of every backend, from the churn sweep's figures
(report/churn.py, a helper the decision summary and the JSON read too)."""

from __future__ import annotations

import math
from pathlib import Path

from authzbench.report.churn import settings, steps
from authzbench.report.data import RunData
from authzbench.report.frames import slo
from authzbench.report.noise import min_ops
from authzbench.report.tables import label, num, table


def section(rd: RunData, out_dir: Path) -> str:
    """The appendix's table of every churn step."""
    df = steps(rd)
    if df.empty:
        return ""
    cfg = settings(rd)
    df = df.assign(backend_l=[label(rd, b) for b in df["backend"]],
                   read_p95=[_marked(v, few) for v, few in zip(df["read_p95_ms"], df["read_too_few"], strict=True)],
                   read_p50=[_marked(v, n < min_ops(50.0)) for v, n in zip(df["read_p50_ms"], df["read_ops"], strict=True)],
                   write_p95=[_marked(v, few) for v, few in zip(df["write_p95_ms"], df["write_too_few"], strict=True)],
                   lag_p95=[_marked(v, few) for v, few in zip(df["lag_p95_ms"], df["lag_too_few"], strict=True)],
                   changes=[f"{r:g}" for r in df["rate"]],
                   late_unissued=[f"{a} / {b} of {c}" if c else "—" for a, b, c in
                                  zip(df["late"], df["unissued"], df["scheduled"], strict=True)])
    return "\n".join([
        "## Structural churn", "",
        f"Checks at {cfg['read_rate']:g}/s (open loop, latency from each check's intended start) while structural "
        f"changes arrive at each rate for {cfg['step_s']:g} s; a step above the first that did not hold is not run. "
        f"A step holds when check p95 is within the {slo(rd)['check_p95_ms']:g} ms SLO, no check failed, the "
        "writers kept to their schedule and every change became visible, its lag p95 within "
        f"{cfg['freshness_s']:g} s. Late: changes started late; unissued: never started in the step.", "",
        table(df, {"backend_l": "Backend", "changes": "Changes/s", "read_p50": "Check p50 (ms)",
                   "read_p95": "Check p95 (ms)", "write_p95": "Write p95 (ms)",
                   "lag_p95": "Visibility p95 (ms)", "stale_allows": "Stale allows",
                   "late_unissued": "Late / unissued", "verdict": "Verdict"}), ""])


def _marked(v: float, too_few: bool) -> str:
    return "—" if math.isnan(v) else f"{num(v)}{' ⚠' if too_few else ''}"
