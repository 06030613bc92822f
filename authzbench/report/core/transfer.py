"""How fast host B is for each figure of a backend, relative to host A: the scale `report --compare` divides a
B / A ratio by to compare two machines' runs.

The machine-speed index (authzbench/core/speed.py) is one number per machine; a backend's figures are not one
machine-wide multiple of it. Between two hosts of the same 2-vCPU kind (reports/data/20261128-083444, Intel
Xeon, against ../shared/runs/20261128-115554, AMD EPYC) the index's loopback part moved 6.8x while the
backends' check p50 moved 1.0-3.7x, each by a different amount, so dividing by the index took the p50,
throughput and ingest figures within ±25% from 15 of 77 to 3 of 77. What did follow each backend was its own
`roundtrip` phase on the same host (a trivial request on the same connection: SELECT 1, ping): postgres'
round trip moved 4.1x and its check p50 3.7x, openfga's 2.0x and 2.1x, clickhouse's 0.87x and 1.0x. That
round trip goes through the same client library, driver, loopback and server request path as every read of
that backend, and nothing of the benchmark's data: it is the part of a figure that is the host, per backend.
So each backend's latency and throughput ratios are divided by its own round-trip ratio. Ingest and server
CPU per op are bulk CPU work with few round trips (a bulk load is a handful of requests): they use the
index's CPU part, which moved 1.05x while ingest rates moved 0.75-0.97x. On that pair this took the share
within ±25% from 15 to 45 of 77; on two runs of one host (20261128-075802 vs 20261128-083444) from 72 to 75.
Nothing here is fitted to either pair: every scale is a measurement each run made of its own host, so the
method applies to any two runs that recorded a `roundtrip` phase and the index."""

from __future__ import annotations

import statistics
from typing import NamedTuple

from authzbench.report.core.data import RunData
from authzbench.report.core.speed import speed_index, speed_parts

# Figures whose work is CPU on the host rather than requests over a connection: scaled by the CPU part.
CPU_UNITS = frozenset({"relationships/s", "core-seconds"})


class Scales(NamedTuple):
    """B's speed over A's (above 1: B faster): per backend from its round trip, the CPU part, the index."""
    roundtrip: dict[str, float]
    cpu: float | None
    machine: float | None


def roundtrip_p50(rd: RunData) -> dict[str, float]:
    """Each backend's median round-trip p50 (ms) over its closed-loop `roundtrip` phases at its fewest workers
    (the round trip alone, without queueing behind other workers)."""
    ph = rd.phases
    if ph.empty:
        return {}
    rt = ph[(ph["scenario"] == "roundtrip") & (ph["mode"] == "closed") & (ph["p50_ms"] > 0)]
    return {b: float(statistics.median(g[g["concurrency"] == g["concurrency"].min()]["p50_ms"]))
            for b, g in rt.groupby("backend")}


def scales(ra: RunData, rb: RunData) -> Scales | None:
    """The scales between two runs; None when neither run pair measured anything to scale by."""
    rta, rtb = roundtrip_p50(ra), roundtrip_p50(rb)
    per_backend = {b: rta[b] / rtb[b] for b in rta.keys() & rtb.keys()}
    pa, pb, sa, sb = speed_parts(ra), speed_parts(rb), speed_index(ra), speed_index(rb)
    cpu = pa["cpu_s"] / pb["cpu_s"] if pa and pb and pb["cpu_s"] > 0 else None
    machine = sb.median / sa.median if sa and sb and sa.median > 0 else None
    if not per_backend and cpu is None and machine is None:
        return None
    return Scales(per_backend, cpu, machine)


def scale_for(s: Scales | None, backend: str, unit: str) -> float | None:
    """The scale of one figure: CPU work by the CPU part, the rest by the backend's own round trip; the
    machine index where the run lacks that part (a run without a `roundtrip` phase for that backend)."""
    if s is None:
        return None
    own = s.cpu if unit in CPU_UNITS else s.roundtrip.get(backend)
    return own if own is not None else s.machine


def how(s: Scales) -> str:
    """One sentence saying what the normalization divided by, from what the two runs measured."""
    parts = []
    if s.roundtrip:
        lo, hi = min(s.roundtrip.values()), max(s.roundtrip.values())
        parts.append("each backend's latency and throughput by its own `roundtrip` p50 on each host "
                     f"({len(s.roundtrip)} "
                     f"backend(s); B at {lo:.2f}-{hi:.2f}x A's speed)")
    if s.cpu is not None:
        parts.append(f"ingest and server CPU per op by the index's CPU part (B at {s.cpu:.2f}x)")
    if s.machine is not None:
        parts.append(f"anything else by the machine-speed index (B at {s.machine:.2f}x)")
    return "A normalized ratio divides out how fast each host is for that figure: " + "; ".join(parts) + "."
