"""Each backend's needs judged on a stage's recorded data: meets, fails or undecided (the figure's interval
lies across the threshold), from the report core's figures (figures.cell, frames.resource_table) and the
churn and freshness topics' one definitions of sustainable churn and of stale allows at 8 writers.

- checks: the via-group check's p95 at 1 worker (no queue of the client's own: the floor of its latency at
  any load) against the check SLO;
- throughput: checks per server core-second (1,000 / the server's CPU core-seconds per 1,000 checks over the
  check phases) against the target's rate over --max-cores;
- churn: the churn step at the target's change rate, in its mix and mode (the sweep's rule: its reads within
  the SLO by their interval, its writes on schedule, its changes visible within the freshness bound);
- stale (no-stale only): stale allows per 1,000 revocations at 8 writers in the session's mode, with
  Wilson's interval, against 0;
- lookups (a lookup rate asked): the median user's lookups/s at the best worker count per this machine's
  core against the target's lookup rate over --max-cores.

Evidence is what a stage measured, per backend and need; judge() is pure arithmetic on it."""

from __future__ import annotations

import math
import os
from dataclasses import asdict, dataclass

from authzbench.core.numbers import num
from authzbench.decide.target import Target

CHECK, LOOKUP, CHURN, REVOKE = (
    "check_view_via_group_member", "lookup_resources_view_regular", "churn", "revoke_then_check")
# The scenario each need is measured by: a repeat of an undecided need runs only these.
SCENARIO_OF = {"checks": CHECK, "throughput": CHECK, "churn": CHURN, "stale": REVOKE, "lookups": LOOKUP}
# The cores a deployment may give the target: 3 machines of 8 cores (issue 66's example deployment).
DEFAULT_MAX_CORES = 24


@dataclass(frozen=True)
class Figure:
    """One measured figure with its interval; note: how it was measured (shown in the verdict's reason)."""

    value: float | None
    lo: float | None = None
    hi: float | None = None
    note: str = ""
    failed: str = ""  # a measured failure without a figure (no churn step held, no lookup offered)
    undecided: str = ""  # why the measurement decides nothing (an undecided churn step, no revocation)


@dataclass(frozen=True)
class Verdict:
    stage: str
    backend: str
    need: str
    status: str  # meets | fails | undecided
    measured: float | None
    interval: list[float] | None
    threshold: float
    unit: str
    reason: str

    def as_json(self) -> dict:
        return {k: (None if isinstance(v, float) and not math.isfinite(v) else v)
                for k, v in asdict(self).items()}


def needs_of(target: Target) -> list[str]:
    out = ["checks", "throughput"]
    out += ["churn"] if target.changes_per_s > 0 else []
    out += ["stale"] if target.freshness == "no-stale" else []
    return out + (["lookups"] if target.lookups_per_s > 0 else [])


def _band(f: Figure, threshold: float, higher_is_better: bool) -> str:
    lo = f.value if f.lo is None else f.lo
    hi = f.value if f.hi is None else f.hi
    good, bad = (lo >= threshold, hi < threshold) if higher_is_better else (hi <= threshold, lo > threshold)
    return "meets" if good else "fails" if bad else "undecided"


THRESHOLDS = {  # need -> (threshold of the target, unit, higher is better)
    "checks": (lambda t, c: t.check_p95_ms, "ms check p95 at 1 worker", False),
    "throughput": (lambda t, c: t.checks_per_s / c, "checks/s per server core", True),
    "churn": (lambda t, c: t.changes_per_s, "changes/s held", True),
    "stale": (lambda t, c: 0.0, "stale allows per 1,000 revocations at 8 writers", False),
    "lookups": (lambda t, c: t.lookups_per_s / c, "lookups/s per core", True),
}


def judge(stage: str, backend: str, need: str, f: Figure | None, target: Target,
          max_cores: int = DEFAULT_MAX_CORES) -> Verdict:
    make, unit, higher = THRESHOLDS[need]
    threshold = float(make(target, max_cores))
    if f is None or (f.value is None and not f.failed):
        why = f.undecided if f is not None and f.undecided else "not measured at this stage"
        return Verdict(stage, backend, need, "undecided", None, None, threshold, unit, why)
    iv = [f.lo, f.hi] if f.lo is not None and f.hi is not None else None
    if f.failed:
        return Verdict(stage, backend, need, "fails", f.value, iv, threshold, unit, f.failed)
    if f.undecided:
        return Verdict(stage, backend, need, "undecided", f.value, iv, threshold, unit, f.undecided)
    # a stale allow seen is a failure (Wilson's low end is then above 0); none in n revocations meets, its
    # interval's high end saying how many could hide in n
    status = ("meets" if f.value == 0 else "fails") if need == "stale" else _band(f, threshold, higher)
    rel = {"meets": "within", "fails": "misses", "undecided": "straddles"}[status]
    shown = "" if iv is None else f" [{num(iv[0])}-{num(iv[1])}]"
    reason = f"{num(f.value)}{shown} {unit} {rel} the target's {num(threshold)}" + (
        f" ({f.note})" if f.note else "")
    return Verdict(stage, backend, need, status, f.value, iv, threshold, unit, reason)


def judge_all(stage: str, evidence: dict[str, dict[str, Figure]], target: Target,
              max_cores: int = DEFAULT_MAX_CORES) -> list[Verdict]:
    return [judge(stage, b, n, ev.get(n), target, max_cores) for b, ev in evidence.items()
            for n in needs_of(target)]


# --- evidence from a stage's records -------------------------------------------------------------------


def evidence(rd, target: Target) -> dict[str, dict[str, Figure]]:
    """backend -> need -> Figure, from one stage's RunData (report/core's typed records)."""
    from authzbench.report.core.frames import resource_table

    cpu = resource_table(rd)
    cpu = {r["backend"]: r for _, r in cpu.iterrows()} if not cpu.empty else {}
    backends = sorted(set(rd.phases["backend"])) if not rd.phases.empty else []
    churn, stale = _churn(rd, target), _stale(rd)
    out = {}
    for b in backends:
        ev = {"checks": _check(rd, b), "throughput": _throughput(cpu.get(b))}
        if target.changes_per_s > 0:
            ev["churn"] = churn.get(b) or Figure(None, undecided="no churn step recorded")
        if target.freshness == "no-stale":
            ev["stale"] = stale.get(b) or Figure(None, undecided="no revocation at 8 writers recorded")
        if target.lookups_per_s > 0:
            ev["lookups"] = _lookups(rd, b)
        out[b] = ev
    return out


def _check(rd, b: str) -> Figure:
    from authzbench.report.core.figures import cell

    c = cell(rd, b, CHECK, 1, "p95_ms")
    if c is None:
        return Figure(None, undecided="no via-group check at 1 worker recorded")
    note = f"{c.n:,} checks" + (", too few ops for a p95" if c.too_few else "") + (
        ", disturbed by other processes' CPU" if c.disturbed else "")
    return Figure(c.value, c.lo, c.hi, note)


def _throughput(row) -> Figure:
    if row is None or not row["cpu_s_per_1k"] > 0:
        return Figure(None, undecided="no server CPU recorded over the check phases")
    rounds = [1000 / v for v in row["cpu_rounds"] if v > 0]
    value = 1000 / row["cpu_s_per_1k"]
    lo, hi = (min(rounds), max(rounds)) if len(rounds) >= 2 else (None, None)
    return Figure(value, lo if lo is None else min(lo, value), hi if hi is None else max(hi, value),
                  f"server CPU over {int(row['ops']):,} checks")


def _churn(rd, target: Target) -> dict[str, Figure]:
    from authzbench.report.churn import steps, sustainable

    df = steps(rd)
    if df.empty:
        return {}
    out = {}
    for b, s in sustainable(rd, df).items():
        if s.undecided:
            out[b] = Figure(None, undecided=f"the step at {s.undecided[0][0]:g}/s is undecided: "
                                            f"{s.undecided[0][1]}")
        elif s.held is not None and s.held >= target.changes_per_s:
            out[b] = Figure(s.held, note=f"its step held: {s.text}")
        else:
            out[b] = Figure(s.held, failed=f"the step at {s.failed or s.lowest:g} changes/s did not hold: "
                                           f"{s.reason or s.text}")
    return out


def _stale(rd) -> dict[str, Figure]:
    from authzbench.report.freshness import revocations

    df = revocations(rd)
    out = {}
    for _, r in (df[df["own"]].iterrows() if not df.empty else []):
        if not r["revocations"]:
            out[r["backend"]] = Figure(None, undecided=f"no revocation in {r['mode']} at 8 writers")
            continue
        out[r["backend"]] = Figure(float(r["per_1k"]), float(r["lo_1k"]), float(r["hi_1k"]),
                                   f"{int(r['stale_allows'])} of {int(r['revocations'])} revocations in "
                                   f"{r['mode'] if r['mode'] != '—' else 'its one read mode'}")
    return out


def _lookups(rd, b: str) -> Figure:
    from authzbench.report.core.figures import best_rate
    from authzbench.run.orchestrate import not_offered

    if why := not_offered(b, "lookup"):
        return Figure(None, failed=f"no reverse lookup: {why}")
    best = best_rate(rd, b, LOOKUP)
    if best is None:
        return Figure(None, undecided="no lookup phase recorded")
    workers, c = best
    cores = os.cpu_count() or 1
    return Figure(c.value / cores, c.lo / cores, c.hi / cores,
                  f"{c.value:.3g} lookups/s at {workers} workers over this machine's {cores} cores")
