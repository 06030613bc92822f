"""The churn sweep in the report: per backend and churn step, what the reads, the writes and the changes'
visibility became (workloads/churn.py runs it), each step's verdict by the one rule (churn.judged: held,
undecided or failed, the check p95 judged by its interval), each backend's sustainable churn (the highest rate
that held, any undecided ones above it, the first that did not hold) and the ranked figures of the steps that
held (one Dimension a rate: the decision summary's workload rows, the JSON and the appendix list them)."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from authzbench.core.records import Interval, PhaseSkipped
from authzbench.report import churn_chart
from authzbench.report.core import charts
from authzbench.report.core.data import RunData, derived, merged_summary
from authzbench.report.core.frames import slo
from authzbench.report.core.noise import min_ops, percentile_bounds
from authzbench.report.core.ranking import Dimension, Figure
from authzbench.report.core.staleness import rate_cell
from authzbench.report.core.tables import anchor, label, link_target, num, significant, table
from authzbench.workloads.churn import (
    CHURN_FRESHNESS_S,
    CHURN_RATES,
    CHURN_READ_RATE,
    CHURN_STEP_S,
    FAILED,
    HELD,
    UNDECIDED,
    interval_text,
    judged,
    step_of,
    why_not_held,
)

SCENARIO = "churn"
_RATE_IN_ID = re.compile(r"\+churn([0-9.e+-]+)/")  # phase_id ".../open8@100+churn10/r0"


def settings(rd: RunData) -> dict:
    """The sweep as the run configured it (manifest config.churn), churn.py's defaults where absent."""
    cfg = rd.manifest.get("config", {}).get("churn") or {}
    return {
        "rates": tuple(cfg.get("rates") or CHURN_RATES), "read_rate": cfg.get("read_rate", CHURN_READ_RATE),
        "step_s": cfg.get("step_s", CHURN_STEP_S), "writers": cfg.get("writers"),
        "freshness_s": cfg.get("freshness_s", CHURN_FRESHNESS_S)}


NOT_RUN = "not run"


def steps(rd: RunData) -> pd.DataFrame:
    """One row per (backend, churn rate): the step's figures, its state (HELD, UNDECIDED, FAILED or NOT_RUN)
    and verdict, skipped steps too. held: the step held clearly; went_on: the sweep's own point rule passed
    it. Computed once a run (the summary, the workload rows, the JSON, the ranked figures and the appendix
    read it; each step walks every record); a copy, so a caller's change stays its own."""
    return derived(rd, "churn_steps", lambda: _steps(rd)).copy()


def _steps(rd: RunData) -> pd.DataFrame:
    ph = rd.phases
    rows = []
    if not ph.empty and "churn_rate" in ph and (ph["scenario"] == SCENARIO).any():
        sub = ph[ph["scenario"] == SCENARIO]
        for (b, rate), g in sub.groupby(["backend", "churn_rate"], sort=False):
            rows.append(_step_row(rd, b, float(rate), g))
    stops: dict[str, dict] = {}  # backend -> its lowest step that ran and that the sweep did not go on from
    for r in rows:
        if not r["went_on"] and r["rate"] < stops.get(r["backend"], {}).get("rate", math.inf):
            stops[r["backend"]] = r
    rows += [_skipped_row(r, stops.get(r.backend)) for r in rd.skipped if r.scenario == SCENARIO]
    rows = [r for r in rows if r is not None]
    return (
        pd.DataFrame(rows).sort_values(["backend", "rate"]).reset_index(drop=True) if rows else pd.DataFrame()
    )


def _hists(g: pd.DataFrame, kind: str) -> tuple[str, ...]:
    return tuple(h for hs in g[g["kind"] == kind]["hists"] for h in hs)


def _extra(g: pd.DataFrame, key: str) -> int:
    return int(sum(e.get(key, 0) for e in g[g["kind"] == "write"]["extra"]))


def _p(hists: tuple[str, ...], metric: str) -> float:
    return float(getattr(merged_summary(list(hists)), metric)) if hists else math.nan


def _step_row(rd: RunData, b: str, rate: float, g: pd.DataFrame) -> dict:
    """The step's figures for the table, and its verdict from the run's own rule on its interval records
    (churn.step_of): went_on as the sweep judged it when it chose to go on (the p95 alone), the state with the
    p95's interval (churn.judged). The interval is the one any single-round figure has
    (noise.percentile_bounds: the p95's order-statistics interval widened by its one-second slices' spread;
    with a repeat, its rounds' range): it is within the one step, and says nothing of how far another run's
    step lands."""
    chk, wr = g[g["kind"] == "check"], g[g["kind"] == "write"]
    reads = _hists(g, "check")
    phases = set(g["phase"])
    step = step_of(r for r in rd.records if isinstance(r, Interval) and r.phase in phases)
    objective, fresh = slo(rd)["check_p95_ms"], settings(rd)["freshness_s"]
    read_ops, read_p95 = int(chk["ops"].sum()), _p(reads, "p95_ms")
    read_iv = percentile_bounds(chk[chk["ops"] > 0], 95.0, read_p95) if reads else None
    # a latency is never negative: the slices' spread took Elasticsearch's 42.7 ms to -26.1 (20261129-071003)
    read_iv = (max(0.0, read_iv[0]), read_iv[1]) if read_iv else None
    state, verdict = judged(step, objective, read_iv, fresh)
    return {
        "backend": b, "rate": rate, "read_ops": read_ops, "read_p50_ms": _p(reads, "p50_ms"),
        "read_p95_ms": read_p95, "read_iv": read_iv, "read_too_few": read_ops < min_ops(95.0),
        "write_ops": int(wr["ops"].sum()),
        # the step's figures pool its ops: ⚠ when the pool is under the p95's floor (6 changes at 1/s in 6
        # s)
        "write_too_few": int(wr["ops"].sum()) < min_ops(95.0),
        "lag_too_few": int(g[g["kind"] == "visibility"]["ops"].sum()) < min_ops(95.0),
        "write_p95_ms": _p(_hists(g, "write"), "p95_ms"), "lag_p95_ms": _p(_hists(g, "visibility"), "p95_ms"),
        "stale_allows": _extra(g, "stale_allows"), "revocations": _extra(g, "revocations"),
        "scheduled": step.scheduled, "late": int(wr["late"].sum()), "unissued": _extra(g, "unissued"),
        "never_visible": step.never_visible, "held": state == HELD, "state": state,
        "verdict": f"{UNDECIDED}: {verdict}" if state == UNDECIDED else verdict or HELD,
        "went_on": not why_not_held(step, objective, fresh), "after_stop": False}


def _skipped_row(r: PhaseSkipped, stop: dict | None) -> dict | None:
    """A step not run: no figure. Skipped because a lower step did not hold (stop), it names that step, whose
    row gives the figure (the run's stored reason repeats it in the run's own formatting: 1.89e+03 against the
    table's 1,885 in 20261129-015755); otherwise (foreseen) the run's reason."""
    rate = None  # a skipped step names its rate in its phase id only
    if m := _RATE_IN_ID.search(r.phase):
        rate = float(m.group(1))
    if rate is None:
        return None
    nan = math.nan
    after = stop is not None and stop["rate"] < float(rate)
    return {"backend": r.backend, "rate": float(rate), "read_ops": 0, "read_p50_ms": nan, "read_p95_ms": nan,
            "read_iv": None, "read_too_few": False, "write_ops": 0, "write_p95_ms": nan, "lag_p95_ms": nan,
            "write_too_few": False, "lag_too_few": False, "stale_allows": 0, "revocations": 0, "scheduled": 0,
            "late": 0, "unissued": 0, "never_visible": 0, "held": False, "state": NOT_RUN,
            "verdict": f"{NOT_RUN}: {_why_skipped(r, stop) if after else r.reason}", "went_on": False,
            "after_stop": after}


def _why_skipped(r: dict, stop: dict) -> str:
    if stop["state"] == UNDECIDED:  # the sweep stopped on the p95 alone; the interval leaves that step open
        return (f"the sweep stopped at the {stop['rate']:g}/s step "
                "(check p95 over the SLO, undecided on its interval)")
    return f"the {stop['rate']:g}/s step did not hold"


@dataclass(frozen=True)
class Sustainable:
    """A backend's sustainable churn: [held, failed), either end None when the sweep did not find it, and the
    rates between them whose check p95 lay across the SLO (undecided: the limit is somewhere among them)."""

    backend: str
    held: float | None  # the highest rate that held below the first that did not
    failed: float | None  # the first rate that did not hold
    lowest: float  # the sweep's lowest rate (the bound when none held)
    reason: str  # why the first failed step did not hold ("" when none failed)
    # (rate, why) of each undecided step between held and failed
    undecided: tuple[tuple[float, str], ...] = ()

    @property
    def text(self) -> str:
        if not self.undecided:
            if self.held is None:
                return f"under {self.lowest:g}/s"
            if self.failed is None:
                return f"at least {self.held:g}/s"
            return f"{self.held:g}/s, below {self.failed:g}/s"
        parts = [*([f"held {self.held:g}/s"] if self.held is not None else []),
                 *(f"{r:g}/s {UNDECIDED} ({why})" for r, why in self.undecided),
                 *([f"{self.failed:g}/s did not hold"] if self.failed is not None else [])]
        return ", ".join(parts)


def sustainable(rd: RunData, df: pd.DataFrame | None = None) -> dict[str, Sustainable]:
    """backend -> its sustainable churn, from its steps in rate order: the sweep stops at the first step
    that does not hold, so only rates below that step count as held; the undecided steps above the highest
    held one are listed. A step not run because the sweep stopped at an undecided one fails nothing."""
    df = steps(rd) if df is None else df
    out: dict[str, Sustainable] = {}
    lowest = min(settings(rd)["rates"])
    for b, g in (df.groupby("backend", sort=False) if not df.empty else []):
        g = g.sort_values("rate")
        bad = g[~g["held"] & (g["state"] != UNDECIDED) & ~g["after_stop"]]
        failed = float(bad["rate"].iloc[0]) if not bad.empty else None
        below = g[g["rate"] < failed] if failed is not None else g
        ok = below[below["held"]]
        held = float(ok["rate"].max()) if not ok.empty else None
        open_ = below[(below["state"] == UNDECIDED) & (below["rate"] > (held or 0))]
        out[b] = Sustainable(b, held, failed, min(lowest, float(g["rate"].min())),
                             bad["verdict"].iloc[0] if not bad.empty else "",
                             tuple((float(r), v.removeprefix(f"{UNDECIDED}: "))
                                   for r, v in zip(open_["rate"], open_["verdict"], strict=True)))
    return out


def deciding(df: pd.DataFrame, b: str) -> pd.DataFrame:
    """The steps of backend b that decide its sustainable churn: the highest that held, the undecided ones
    above it and the first that ran and did not hold (each with its check p95 and interval)."""
    g = df[(df["backend"] == b) & (df["state"] != NOT_RUN)].sort_values("rate")
    failed = g[g["state"] == FAILED]["rate"].min()
    below = g[g["rate"] < failed] if not math.isnan(failed) else g
    held = below[below["held"]]["rate"].max()
    top = below[below["rate"] >= held] if not math.isnan(held) else below
    return pd.concat([top, g[g["rate"] == failed]]).drop_duplicates("rate")


def json_records(rd: RunData) -> list[dict]:
    """Sustainable churn per backend for the JSON beside the report (empty when the run had no sweep), with
    its deciding steps' check p95 and interval."""
    df = steps(rd)
    return [{"backend": s.backend, "held_per_s": s.held, "failed_per_s": s.failed,
             "undecided_per_s": [r for r, _ in s.undecided], "text": s.text, "limit": s.reason or None,
             "deciding_steps": [
                 {"rate_per_s": float(r.rate), "state": r.state, "check_p95_ms": _plain(r.read_p95_ms),
                  "interval_ms": [_plain(x) for x in r.read_iv] if r.read_iv else None,
                  "checks": int(r.read_ops)}
                 for r in deciding(df, s.backend).itertuples()]}
            for s in sustainable(rd, df).values()]


def _plain(v: float) -> float | None:
    return significant(float(v)) if math.isfinite(v) else None


def summary_lines(rd: RunData, out_dir: Path) -> list[str]:
    """The decision summary's churn lines: sustainable churn per backend, best first, and the chart."""
    df = steps(rd)
    if df.empty:
        return []
    sus = sorted(
        sustainable(rd, df).values(), key=lambda s: (-(s.held or 0), -(s.failed or math.inf), s.backend))
    cfg = settings(rd)
    parts = [f"{label(rd, s.backend)} {s.text}" + (f" ({s.reason})" if s.reason else "") for s in sus]
    lines = [link_target("churn").rstrip("\n"),
             f"**Sustainable churn** (the highest rate of structural changes at which checks at "
             f"{cfg['read_rate']:g}/s held the {slo(rd)['check_p95_ms']:g} ms p95 SLO, the writers kept "
             f"to their schedule and changes became visible within {cfg['freshness_s']:g} s; in brackets "
             f"why the next step did not hold; undecided: the step's check p95 interval, in square brackets, "
             f"lies across the SLO, so one {cfg['step_s']:g} s step cannot say): " + "; ".join(parts) + "."]
    if chart := churn_chart.churn_reads(rd, df, slo(rd)["check_p95_ms"],
                                        charts.chart_dir(out_dir, rd.manifest["run_id"])):
        lines.append(f"![check p95 with its interval against churn rate, per backend, the SLO drawn]"
                     f"({chart})")
    return lines


def dimensions(rd: RunData, df: pd.DataFrame | None = None) -> list[Dimension]:
    """One ranked dimension a churn rate: the check p95 of the backends whose step held clearly, each with its
    interval (the workload rows rank them; the JSON and the appendix's ranked-figure list show them)."""
    df = steps(rd) if df is None else df
    if df.empty:
        return []
    cfg = settings(rd)
    out = []
    for rate in sorted(set(cfg["rates"]) | set(df["rate"])):
        held = df[(df["rate"] == rate) & df["held"]]
        figs = [Figure(r.backend, r.read_p95_ms, n=r.read_ops, q=95.0, bounds=r.read_iv)
                for r in held.itertuples()]
        out.append(
            Dimension(
                "Under load",
                f"Check p95 at {cfg['read_rate']:g} checks/s under {rate:g} structural "
                f"change{'' if rate == 1 else 's'}/s (steps that held)", "ms", False, figs, anchor("churn"),
                key=f"churn_p95/{rate:g}"))
    return out


def undecided_text(rd: RunData, rate: float, df: pd.DataFrame | None = None) -> str:
    """'openfga 25.7 ms [23.1-28.4]': the backends whose step at this rate was undecided ('' when none)."""
    df = steps(rd) if df is None else df
    und = df[(df["rate"] == rate) & (df["state"] == UNDECIDED)] if not df.empty else df
    return ", ".join(f"{label(rd, r.backend)} {num(r.read_p95_ms)} ms{interval_text(r.read_iv)}"
                     for r in und.itertuples())


def section(rd: RunData, out_dir: Path) -> str:
    """The appendix's table of every churn step."""
    df = steps(rd)
    if df.empty:
        return ""
    cfg = settings(rd)
    df = df.assign(
        backend_l=[label(rd, b) for b in df["backend"]],
        read_p95=[_marked(v, few) for v, few in zip(df["read_p95_ms"], df["read_too_few"], strict=True)],
        read_iv=[_interval(iv) for iv in df["read_iv"]],
        read_p50=[
            _marked(v, n < min_ops(50.0)) for v, n in zip(df["read_p50_ms"], df["read_ops"], strict=True)],
        write_p95=[_marked(v, few) for v, few in zip(df["write_p95_ms"], df["write_too_few"], strict=True)],
        lag_p95=[_marked(v, few) for v, few in zip(df["lag_p95_ms"], df["lag_too_few"], strict=True)],
        changes=[f"{r:g}" for r in df["rate"]],
        stale=[rate_cell(k, n) for k, n in zip(df["stale_allows"], df["revocations"], strict=True)],
        late_unissued=[f"{a} / {b} of {c}" if c else "—"
                       for a, b, c in zip(df["late"], df["unissued"], df["scheduled"], strict=True)])
    return "\n".join(
        ["## Structural churn", "",
         f"Checks at {cfg['read_rate']:g}/s (open loop, latency from each check's intended start) while "
         f"structural changes arrive at each rate for {cfg['step_s']:g} s; a step above the first that did "
         f"not hold is not run. A step holds when check p95 is within the {slo(rd)['check_p95_ms']:g} ms "
         "SLO, no check failed, the writers kept to their schedule and every change became visible, its lag "
         f"p95 within {cfg['freshness_s']:g} s. Late: changes started late; unissued: never started in the "
         f"step. {CHURN_STALE}: the step's own revocations, a quantity apart from the structural writes' "
         "stale allows (these ran at a scheduled rate beside the step's checks).", "",
         "The check p95 is judged by its interval (its ops' order-statistics 95% interval widened by the "
         "spread of the step's one-second slices; the range of its rounds when "
         "the step was repeated): a step whose interval lies across the SLO is "
         "undecided, neither held nor failed, unless another condition failed "
         "it. The interval is within the one step: another run's step may land "
         "outside it.", "", link_target("churn"),
         table(df,
               {"backend_l": "Backend", "changes": "Changes/s", "read_p50": "Check p50 (ms)",
                "read_p95": "Check p95 (ms)", "read_iv": "Check p95 interval (ms)",
                "write_p95": "Write p95 (ms)", "lag_p95": "Visibility p95 (ms)", "stale": CHURN_STALE,
                "late_unissued": "Late / unissued", "verdict": "Verdict"}),
         ""])


CHURN_STALE = "Stale allows under churn, per 1,000 of the step's revocations [stale of revocations]"


def _marked(v: float, too_few: bool) -> str:
    return "—" if math.isnan(v) else f"{num(v)}{' ⚠' if too_few else ''}"


def _interval(iv: tuple[float, float] | None) -> str:
    return "—" if iv is None else f"{num(iv[0])}-{num(iv[1])}"
