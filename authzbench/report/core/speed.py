"""The machine-speed index of a run (authzbench/core/speed.py): its median and spread over the backend visits,
for the environment section, `report --compare` and any section that wants to say how fast the machine was.
Runs recorded before the index existed have none: every caller must take None."""

from __future__ import annotations

import statistics
from typing import NamedTuple

from authzbench.core.records import SpeedIndex as SpeedIndexRecord
from authzbench.core.speed import REF_CPU_S, REF_MACHINE, REF_RTT_US
from authzbench.report.core.data import RunData


class SpeedIndex(NamedTuple):
    median: float
    lo: float
    hi: float
    n: int  # visits measured


def _measured(rd: RunData) -> list[SpeedIndexRecord]:
    """The speed_index records that measured an index (not only an error)."""
    return [r for r in rd.records if isinstance(r, SpeedIndexRecord) and r.index]


def speed_index(rd: RunData) -> SpeedIndex | None:
    """Median, min and max of the run's speed_index records (1.0 = the index's base machine, higher =
    faster)."""
    vals = [float(r.index) for r in _measured(rd)]
    if not vals:
        return None
    return SpeedIndex(statistics.median(vals), min(vals), max(vals), len(vals))


def by_backend(rd: RunData) -> dict[str, list[float]]:
    """Each backend's indexes, one a visit in visit order (empty for a run without the index)."""
    out: dict[str, list[float]] = {}
    for r in _measured(rd):
        out.setdefault(r.backend, []).append(float(r.index))
    return out


def speed_parts(rd: RunData) -> dict[str, float] | None:
    """Medians of the index's parts (cpu seconds a unit, loopback round trip) over the visits."""
    recs = _measured(rd)
    if not recs:
        return None
    return {k: statistics.median(float(getattr(r, k)) for r in recs)
            for k in ("cpu_s", "rtt_p50_us", "cpu_score", "rtt_score")}


def speed_line(rd: RunData) -> str:
    """One line for a report, or '' for a run without the index."""
    si, parts = speed_index(rd), speed_parts(rd)
    if si is None or parts is None:
        return ""
    return (
        f"- Machine-speed index: **{si.median:.2f}** (median of {si.n} backend visit(s), range "
        f"{si.lo:.2f}-{si.hi:.2f}; higher = faster; the geometric mean of a "
        f"CPU score {parts['cpu_score']:.2f} ({parts['cpu_s'] * 1000:.1f} ms a unit of pure-Python and numpy "
        f"work) and a loopback score {parts['rtt_score']:.2f} ({parts['rtt_p50_us']:.1f} µs a 64-byte TCP "
        "round trip), measured before each visit's server started)\n" + _reference_line())


def _reference_line() -> str:
    """What 1.0 is and how a reader compares their own run: the index says how busy or fast a machine was,
    but between two hosts each backend moves by its own round trip, not by the index (report/transfer.py)."""
    return (
        f"- Index 1.0 = the index's base machine (not the reference report's laptop), {REF_MACHINE} "
        f"({REF_CPU_S * 1000:g} ms a CPU unit, {REF_RTT_US:g} µs a loopback round trip). To compare your "
        "run: `authzbench report --compare <this run> <yours>` scales each backend's figures by its own "
        "`roundtrip` p50 on each host (ingest by the CPU part) and says which kinds of figure then transfer.")
