"""The appendix's "Structural churn" table: every churn step of every backend, from the churn sweep's figures
(report/churn.py, a helper the decision summary and the JSON read too)."""

from __future__ import annotations

import math
from pathlib import Path

from authzbench.report.churn import settings, steps
from authzbench.report.core.data import RunData
from authzbench.report.core.frames import slo
from authzbench.report.core.noise import min_ops
from authzbench.report.core.tables import label, link_target, num, table
from authzbench.report.freshness import rate_cell


def section(rd: RunData, out_dir: Path) -> str:
    """The appendix's table of every churn step."""
    df = steps(rd)
    if df.empty:
        return ""
    cfg = settings(rd)
    df = df.assign(backend_l=[label(rd, b) for b in df["backend"]],
                   read_p95=[_marked(v, few) for v, few in zip(df["read_p95_ms"], df["read_too_few"], strict=True)],
                   read_iv=[_interval(iv) for iv in df["read_iv"]],
                   read_p50=[_marked(v, n < min_ops(50.0)) for v, n in zip(df["read_p50_ms"], df["read_ops"], strict=True)],
                   write_p95=[_marked(v, few) for v, few in zip(df["write_p95_ms"], df["write_too_few"], strict=True)],
                   lag_p95=[_marked(v, few) for v, few in zip(df["lag_p95_ms"], df["lag_too_few"], strict=True)],
                   changes=[f"{r:g}" for r in df["rate"]],
                   stale=[rate_cell(k, n) for k, n in zip(df["stale_allows"], df["revocations"], strict=True)],
                   late_unissued=[f"{a} / {b} of {c}" if c else "—" for a, b, c in
                                  zip(df["late"], df["unissued"], df["scheduled"], strict=True)])
    return "\n".join([
        "## Structural churn", "",
        f"Checks at {cfg['read_rate']:g}/s (open loop, latency from each check's intended start) while structural "
        f"changes arrive at each rate for {cfg['step_s']:g} s; a step above the first that did not hold is not run. "
        f"A step holds when check p95 is within the {slo(rd)['check_p95_ms']:g} ms SLO, no check failed, the "
        "writers kept to their schedule and every change became visible, its lag p95 within "
        f"{cfg['freshness_s']:g} s. Late: changes started late; unissued: never started in the step. {CHURN_STALE}: "
        "the step's own revocations, a quantity apart from the structural writes' stale allows (these ran at a "
        "scheduled rate beside the step's checks).", "",
        "The check p95 is judged by its interval (its ops' order-statistics 95% interval widened by the spread of "
        "the step's one-second slices; the range of its rounds when the step was repeated): a step whose interval "
        "lies across the SLO is undecided, neither held nor failed, unless another condition failed it. The "
        "interval is within the one step: another run's step may land outside it.", "",
        link_target("churn"), table(df, {"backend_l": "Backend", "changes": "Changes/s", "read_p50": "Check p50 (ms)",
                   "read_p95": "Check p95 (ms)", "read_iv": "Check p95 interval (ms)", "write_p95": "Write p95 (ms)",
                   "lag_p95": "Visibility p95 (ms)", "stale": CHURN_STALE,
                   "late_unissued": "Late / unissued", "verdict": "Verdict"}), ""])


CHURN_STALE = "Stale allows under churn, per 1,000 of the step's revocations [stale of revocations]"


def _marked(v: float, too_few: bool) -> str:
    return "—" if math.isnan(v) else f"{num(v)}{' ⚠' if too_few else ''}"


def _interval(iv: tuple[float, float] | None) -> str:
    return "—" if iv is None else f"{num(iv[0])}-{num(iv[1])}"
