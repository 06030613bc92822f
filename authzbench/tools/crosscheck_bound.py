"""A cross-check row (ours and the tool's side of one backend, scenario and worker count), and whether its
throughput is client-bound by report.clientbound's rule on its CPU per op: how busy client + server kept the
cores, our client's share of that, the server-only bound, and the rate the same server CPU predicts with the
tool's client CPU (on saturated shared cores throughput ~ cores / (client + server CPU per op))."""

from __future__ import annotations

from dataclasses import dataclass

from authzbench.report.core.clientbound import MARK, SATURATED, SHARE, judge, server_only_bound


@dataclass(frozen=True)
class Side:
    p50_ms: float
    p95_ms: float
    throughput: float
    ops: int
    errors: int
    client_cpu_ms: float | None = None  # CPU per measured op over the rounds (runs that recorded it)
    server_cpu_ms: float | None = None


OUR_SIDES = {"ours": "ours", "ours-grpc": "ours over gRPC"}  # our sides as the tables name them


@dataclass(frozen=True)
class Row:
    backend: str
    scenario: str
    concurrency: int
    tool: str
    ours: Side
    theirs: Side
    p50_ratio_range: tuple[float, float]  # the rounds' lowest and highest ours / theirs p50
    rounds: int
    side: str = "ours"  # which of our sides (OUR_SIDES): OpenFGA's runner over HTTP, or over gRPC

    def ratio(self, what: str) -> float:
        return getattr(self.ours, what) / getattr(self.theirs, what)


def machine(side: Side, cores: int) -> tuple[float, float]:
    """(how busy client + server kept the cores: throughput x CPU per op / cores, the client's share of
    it)."""
    c, s = side.client_cpu_ms or 0.0, side.server_cpu_ms or 0.0
    return side.throughput * (c + s) / 1000 / cores, c / (c + s) if c + s else float("nan")


def client_bound(side: Side, cores: int | None) -> bool | None:
    """clientbound's rule on a side's CPU per op and throughput (core-seconds per second); None:
    unrecorded."""
    if side.client_cpu_ms is None or side.server_cpu_ms is None or not cores:
        return None
    rate = side.throughput
    return judge(rate * side.client_cpu_ms / 1000, rate * side.server_cpu_ms / 1000, 1.0, cores)


def bound_reason(r: Row, cores: int | None) -> str:
    """Why a row's throughput is low as its CPU measured it: how busy the machine was, our client's share of
    it, the server-only bound, and the rate the same server CPU predicts at the tool's client CPU per op."""
    oc, os_ = r.ours.client_cpu_ms, r.ours.server_cpu_ms
    if oc is None or os_ is None:
        return "not flagged: the run recorded no client and server CPU apart."
    if not cores:
        return "not judged: the run recorded no core count."
    busy, part = machine(r.ours, cores)
    cpu = (
        f"the machine {busy:.0%} busy, our client {part:.0%} of it ({oc:.4f} ms of CPU per op, the server "
        f"{os_:.4f} ms); the server alone on the {cores} cores: up to {server_only_bound(os_, cores):,.0f}/s"
        + _at_tools_cpu(r, cores)
        + ".")
    if client_bound(r.ours, cores):
        return f"{MARK} client-bound: {cpu}"
    why = f"under {SATURATED:.0%} busy" if busy < SATURATED else f"our client under {SHARE:.0%} of it"
    return f"not client-bound ({why}): {cpu}"


def _at_tools_cpu(r: Row, cores: int) -> str:
    """On saturated cores throughput ~ cores / (client + server CPU per op): the rate with the tool's
    client."""
    tc, os_ = r.theirs.client_cpu_ms, r.ours.server_cpu_ms
    if tc is None or not os_:
        return ""
    return (f"; with the tool's client CPU ({tc:.4f} ms per op) the same server CPU predicts "
            f"{cores * 1000 / (tc + os_):,.0f}/s, the tool measured {r.theirs.throughput:,.0f}/s")
