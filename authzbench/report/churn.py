"""The churn sweep in the report: per backend and churn step, what the reads, the writes and the changes'
visibility became (scenarios/churn.py runs it), each step's verdict by the one rule (churn.why_not_held), and
each backend's sustainable churn: the highest rate that held, with the first rate that did not above it."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from authzbench.report import charts
from authzbench.report.data import RunData, merged_summary
from authzbench.report.frames import slo
from authzbench.report.noise import min_ops, order_stat_interval
from authzbench.report.tables import label
from authzbench.scenarios.churn import (
    CHURN_FRESHNESS_S,
    CHURN_RATES,
    CHURN_READ_RATE,
    CHURN_STEP_S,
    step_of,
    why_not_held,
)

SCENARIO = "churn"
_RATE_IN_ID = re.compile(r"\+churn([0-9.e+-]+)/")  # phase_id ".../open8@100+churn10/r0"


def settings(rd: RunData) -> dict:
    """The sweep as the run configured it (manifest config.churn), churn.py's defaults where absent."""
    cfg = rd.manifest.get("config", {}).get("churn") or {}
    return {"rates": tuple(cfg.get("rates") or CHURN_RATES), "read_rate": cfg.get("read_rate", CHURN_READ_RATE),
            "step_s": cfg.get("step_s", CHURN_STEP_S), "writers": cfg.get("writers"),
            "freshness_s": cfg.get("freshness_s", CHURN_FRESHNESS_S)}


def steps(rd: RunData) -> pd.DataFrame:
    """One row per (backend, churn rate): the step's figures and verdict ("" = held), skipped steps too."""
    ph = rd.phases
    rows = []
    if not ph.empty and "churn_rate" in ph and (ph["scenario"] == SCENARIO).any():
        sub = ph[ph["scenario"] == SCENARIO]
        for (b, rate), g in sub.groupby(["backend", "churn_rate"], sort=False):
            rows.append(_step_row(rd, b, float(rate), g))
    failed: dict[str, float] = {}  # backend -> its lowest step that ran and did not hold
    for r in rows:
        if not r["held"]:
            failed[r["backend"]] = min(failed.get(r["backend"], math.inf), r["rate"])
    rows += [_skipped_row(r, failed) for r in rd.skipped if r.get("scenario") == SCENARIO]
    rows = [r for r in rows if r is not None]
    return pd.DataFrame(rows).sort_values(["backend", "rate"]).reset_index(drop=True) if rows else pd.DataFrame()


def _hists(g: pd.DataFrame, kind: str) -> tuple[str, ...]:
    return tuple(h for hs in g[g["kind"] == kind]["hists"] for h in hs)


def _extra(g: pd.DataFrame, key: str) -> int:
    return int(sum(e.get(key, 0) for e in g[g["kind"] == "write"]["extra"]))


def _p(hists: tuple[str, ...], metric: str) -> float:
    return float(getattr(merged_summary(list(hists)), metric)) if hists else math.nan


def _step_row(rd: RunData, b: str, rate: float, g: pd.DataFrame) -> dict:
    """The step's figures for the table, and its verdict from the run's own rule on its interval records
    (churn.step_of), so the report judges a step exactly as the sweep did when it chose to go on."""
    chk, wr = g[g["kind"] == "check"], g[g["kind"] == "write"]
    reads = _hists(g, "check")
    phases = set(g["phase"])
    step = step_of(r for r in rd.records if r["type"] == "interval" and r["phase"] in phases)
    verdict = why_not_held(step, slo(rd)["check_p95_ms"], settings(rd)["freshness_s"])
    read_ops = int(chk["ops"].sum())
    return {"backend": b, "rate": rate, "read_ops": read_ops, "read_p50_ms": _p(reads, "p50_ms"),
            "read_p95_ms": _p(reads, "p95_ms"), "read_iv": order_stat_interval(reads, 95.0) if reads else None,
            "read_too_few": read_ops < min_ops(95.0), "write_ops": int(wr["ops"].sum()),
            # the step's figures pool its ops: ⚠ when the pool is under the p95's floor (6 changes at 1/s in 6 s)
            "write_too_few": int(wr["ops"].sum()) < min_ops(95.0),
            "lag_too_few": int(g[g["kind"] == "visibility"]["ops"].sum()) < min_ops(95.0),
            "write_p95_ms": _p(_hists(g, "write"), "p95_ms"), "lag_p95_ms": _p(_hists(g, "visibility"), "p95_ms"),
            "stale_allows": _extra(g, "stale_allows"), "scheduled": step.scheduled, "late": int(wr["late"].sum()),
            "unissued": _extra(g, "unissued"), "never_visible": step.never_visible, "held": not verdict,
            "verdict": verdict or "held"}


def _skipped_row(r: dict, failed: dict[str, float]) -> dict | None:
    """A step not run: no figure. Skipped because a lower step did not hold, it names that step, whose row
    gives the figure (the run's stored reason repeats it in the run's own formatting: 1.89e+03 against the
    table's 1,885 in 20261129-015755); otherwise (foreseen) the run's reason."""
    rate = r.get("churn_rate")
    if rate is None and (m := _RATE_IN_ID.search(r.get("phase", ""))):
        rate = float(m.group(1))
    if rate is None:
        return None
    nan = math.nan
    return {"backend": r["backend"], "rate": float(rate), "read_ops": 0, "read_p50_ms": nan, "read_p95_ms": nan,
            "read_iv": None, "read_too_few": False, "write_ops": 0, "write_p95_ms": nan, "lag_p95_ms": nan,
            "write_too_few": False, "lag_too_few": False,
            "stale_allows": 0, "scheduled": 0, "late": 0, "unissued": 0, "never_visible": 0, "held": False,
            "verdict": f"not run: {_why_skipped(r, float(rate), failed.get(r['backend']))}"}


def _why_skipped(r: dict, rate: float, failed_at: float | None) -> str:
    return f"the {failed_at:g}/s step did not hold" if failed_at is not None and failed_at < rate else \
        r.get("reason", "")


@dataclass(frozen=True)
class Sustainable:
    """A backend's sustainable churn: [held, failed), either end None when the sweep did not find it."""

    backend: str
    held: float | None  # the highest rate that held below the first that did not
    failed: float | None  # the first rate that did not hold
    lowest: float  # the sweep's lowest rate (the bound when none held)
    reason: str  # why the first failed step did not hold ("" when none failed)

    @property
    def text(self) -> str:
        if self.held is None:
            return f"under {self.lowest:g}/s"
        if self.failed is None:
            return f"at least {self.held:g}/s"
        return f"{self.held:g}/s, below {self.failed:g}/s"


def sustainable(rd: RunData, df: pd.DataFrame | None = None) -> dict[str, Sustainable]:
    """backend -> its sustainable churn, from its steps in rate order: the sweep stops at the first step
    that does not hold, so only rates below that step count as held."""
    df = steps(rd) if df is None else df
    out: dict[str, Sustainable] = {}
    lowest = min(settings(rd)["rates"])
    for b, g in (df.groupby("backend", sort=False) if not df.empty else []):
        g = g.sort_values("rate")
        bad = g[~g["held"]]
        failed = float(bad["rate"].iloc[0]) if not bad.empty else None
        ok = g[g["held"] & (g["rate"] < failed if failed is not None else True)]
        out[b] = Sustainable(b, float(ok["rate"].max()) if not ok.empty else None, failed,
                             min(lowest, float(g["rate"].min())), bad["verdict"].iloc[0] if not bad.empty else "")
    return out


def json_records(rd: RunData) -> list[dict]:
    """Sustainable churn per backend for the JSON beside the report (empty when the run had no sweep)."""
    return [{"backend": s.backend, "held_per_s": s.held, "failed_per_s": s.failed, "text": s.text,
             "limit": s.reason or None} for s in sustainable(rd).values()]


def summary_lines(rd: RunData, out_dir: Path) -> list[str]:
    """The decision summary's churn lines: sustainable churn per backend, best first, and the chart."""
    df = steps(rd)
    if df.empty:
        return []
    sus = sorted(sustainable(rd, df).values(), key=lambda s: (-(s.held or 0), -(s.failed or math.inf), s.backend))
    cfg = settings(rd)
    parts = [f"{label(rd, s.backend)} {s.text}" + (f" ({s.reason})" if s.reason else "") for s in sus]
    lines = [f"**Sustainable churn** (the highest rate of structural changes at which checks at "
             f"{cfg['read_rate']:g}/s held the {slo(rd)['check_p95_ms']:g} ms p95 SLO, the writers kept to their "
             f"schedule and changes became visible within {cfg['freshness_s']:g} s; in brackets why the next step "
             f"did not hold): " + "; ".join(parts) + "."]
    if chart := charts.churn_reads(rd, df, slo(rd)["check_p95_ms"], charts.chart_dir(out_dir, rd.manifest["run_id"])):
        lines.append(f"![check p95 against churn rate, per backend, the SLO drawn]({chart})")
    return lines
