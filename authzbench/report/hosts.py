"""The report's load-host section (runs with `bench --workers-on`): per-host ops and latency, clock
offsets."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from authzbench.core.records import Clock, HostLost, Interval, LoadHosts, PhaseEnd, Record
from authzbench.report.core.data import RunData, merged_summary
from authzbench.report.core.tables import table


def host_table(recs: list[Record]) -> pd.DataFrame:
    """One row per (phase, host, kind), from the interval records that carry a host."""
    walls = {r.phase: r.wall_s for r in recs if isinstance(r, PhaseEnd)}
    groups: dict[tuple[str, str, str], list[Interval]] = {}
    for r in recs:
        if isinstance(r, Interval) and r.host is not None:
            groups.setdefault((r.phase, r.host, r.kind), []).append(r)
    rows = []
    for (phase, host, kind), ivs in groups.items():
        s = merged_summary([r.hist for r in ivs])
        ops = sum(r.ops for r in ivs)
        wall = walls.get(phase)
        rows.append({"phase": phase, "host": host, "kind": kind, "workers": len({r.worker for r in ivs}),
                     "ops": ops, "ops_per_s": ops / wall if wall else float("nan"),
                     "p50_ms": s.p50_ms, "p95_ms": s.p95_ms, "p99_ms": s.p99_ms, "max_ms": s.max_ms,
                     "failed": sum(r.timeouts + sum(r.errors.values()) for r in ivs),
                     "mismatches": sum(r.mismatches for r in ivs)})
    return pd.DataFrame(rows)


def clock_table(recs: list[Record]) -> pd.DataFrame:
    rows = [{"phase": r.phase, **h, "warn": f"over ±{r.warn_ms:g} ms" if h["warn"] else ""}
            for r in recs if isinstance(r, Clock) for h in r.hosts]
    return pd.DataFrame(rows)


def section(rd: RunData, out_dir: Path) -> str:
    ht = host_table(rd.records)
    if ht.empty:
        return ""
    lh = next((r for r in rd.records if isinstance(r, LoadHosts)), None)
    lines = [
        "## Load hosts", "",
        f"Workers spread over {ht['host'].nunique()} load host(s) of the Dask scheduler "
        f"`{lh.scheduler if lh else '?'}`; every host measured latency on its own monotonic clock from its "
        "own intended start times. Ops/s is each host's ops over the phase's measured window.", ""]
    lines.append(table(ht.sort_values(["phase", "host", "kind"]), {
        "phase": "Phase", "host": "Host", "kind": "Op", "workers": "Workers", "ops": "Ops",
        "ops_per_s": "Ops/s", "p50_ms": "p50 (ms)", "p95_ms": "p95 (ms)", "p99_ms": "p99 (ms)",
        "max_ms": "Max (ms)", "failed": "Errors + timeouts", "mismatches": "Mismatches"}))
    ct = clock_table(rd.records)
    if not ct.empty:
        lines += [
            "",
            "Clock offsets measured before each phase's synchronized start (host wall clock minus the "
            "coordinator's, from the probe with the lowest round trip; uncertainty = round trip / 2; start "
            "margin = how long before the start instant the host got the order):",
            "",
            table(ct,
                  {"phase": "Phase", "host": "Host", "offset_ms": "Offset (ms)", "uncertainty_ms": "± (ms)",
                   "rtt_ms": "Probe round trip (ms)", "start_margin_ms": "Start margin (ms)",
                   "warn": "Warning"},
                  3)]
    lost = [r for r in rd.records if isinstance(r, HostLost)]
    for r in lost:
        lines.append(f"- `{r.phase}`: {r.reason}")
    for m in lh.driver_mismatches if lh else []:
        lines.append(f"- driver version differs on a load host: {m}")
    return "\n".join(lines) + "\n"
