"""Capacity at a target: the cores, memory and disk a backend needs for N ops/s over M relationships,
projected from what a run measured per op and per relationship.

Pure arithmetic on plain numbers: `report/basis.py` extracts a run's cost basis (per backend: server
core-seconds per check, lookup and write for every round, peak server RSS per round, footprint on disk),
`authzbench plan` and the report's "Capacity at a target" section call `project()`.

The model, stated once (the plan prints it as its assumptions):
- cores = rate x (sum over op kinds of share x server core-seconds per op) / utilization;
- a figure measured at size M0 grows to size M as (M / M0)^k, k the growth exponent a size sweep measured;
  without a sweep CPU per op is taken as flat (k = 0) and memory and disk as proportional (k = 1);
- every figure's interval runs from the lowest to the highest round (several runs of one size: every round
  of every run), an exponent's from the flattest to the steepest line through its sizes' intervals, and a
  projection's from the worst combination of both.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field

from authzbench.core.errors import UserError

KINDS = ("check", "lookup", "write")
# Growth assumed when a backend was measured at one size only (see the module docstring).
DEFAULT_EXPONENT = {"check": 0.0, "lookup": 0.0, "write": 0.0, "rss": 1.0, "disk": 1.0}


@dataclass(frozen=True)
class Range:
    """A figure and the interval it could have landed in on another run."""

    value: float
    low: float
    high: float

    @classmethod
    def of(cls, rounds: list[float]) -> Range | None:
        """The median over rounds, lowest to highest round; None without a usable round."""
        v = [x for x in rounds if x is not None and math.isfinite(x)]
        return cls(statistics.median(v), min(v), max(v)) if v else None

    def scaled(self, f: float) -> Range:
        return Range(self.value * f, self.low * f, self.high * f)

    def __add__(self, other: Range) -> Range:
        return Range(self.value + other.value, self.low + other.low, self.high + other.high)


@dataclass(frozen=True)
class Target:
    qps: float
    relationships: float
    write_share: float = 0.01
    lookup_share: float = 0.0
    utilization: float = 0.6  # the share of a core the projection lets a server use: the rest is headroom

    def validate(self) -> None:
        for name, v, ok in (("--qps", self.qps, self.qps > 0), ("--relationships", self.relationships,
                                                                  self.relationships >= 1),
                            ("--write-share", self.write_share, 0 <= self.write_share <= 1),
                            ("--lookup-share", self.lookup_share, 0 <= self.lookup_share <= 1),
                            ("--utilization", self.utilization, 0 < self.utilization <= 1)):
            if not (math.isfinite(v) and ok):
                raise UserError(f"{name}: out of range, got {v:g}")
        if self.write_share + self.lookup_share > 1:
            raise UserError(
                f"--write-share {self.write_share:g} and --lookup-share {self.lookup_share:g} add up to "
                "more than 1 (the rest are checks)")

    def shares(self) -> dict[str, float]:
        return {"check": 1 - self.write_share - self.lookup_share, "lookup": self.lookup_share,
                "write": self.write_share}


@dataclass
class SizePoint:
    """One backend's basis at one dataset size: from one run, or merged from several runs of that size."""

    runs: list[str]
    relationships: int
    profile: str
    cpu: dict[str, list[float]] = field(default_factory=dict)  # kind -> core-seconds per op, one per round
    concurrency: dict[str, list[int]] = field(default_factory=dict)  # kind -> workers of its phases
    ops: dict[str, int] = field(default_factory=dict)  # kind -> ops the figure rests on
    best_ops_per_s: float = math.nan  # the highest closed-loop check throughput measured
    rss: list[float] = field(default_factory=list)  # peak server RSS (bytes) over the read phases, per round
    disk: list[float] = field(default_factory=list)  # footprint on disk (bytes), one per run


@dataclass
class BackendBasis:
    backend: str
    label: str
    points: list[SizePoint]  # one per size, smallest first

    def figure(self, what: str) -> list[tuple[int, Range]]:
        """(size, its Range) for every size that measured `what` (a kind, "rss" or "disk")."""
        out = []
        for p in self.points:
            r = Range.of(p.cpu.get(what, []) if what in KINDS else getattr(p, what))
            if r is not None:
                out.append((p.relationships, r))
        return out


def _slope(xs: list[float], ys: list[float]) -> float:
    """Least-squares slope of log(y) on log(x)."""
    lx, ly = [math.log(x) for x in xs], [math.log(y) for y in ys]
    mx, my = statistics.fmean(lx), statistics.fmean(ly)
    return sum((a - mx) * (b - my) for a, b in zip(lx, ly, strict=True)) / sum((a - mx) ** 2 for a in lx)


def exponent(points: list[tuple[int, Range]]) -> Range | None:
    """Growth exponent k of value ~ size^k over two or more sizes, with the flattest and the steepest fit
    through the sizes' intervals (the smaller sizes at their highest and the larger at their lowest, and
    the reverse); None under two sizes or where a figure is not positive."""
    pts = sorted(points, key=lambda p: p[0])
    if len({s for s, _ in pts}) < 2 or any(r.low <= 0 for _, r in pts):
        return None
    xs, rs = [float(s) for s, _ in pts], [r for _, r in pts]
    mid = statistics.median(xs)

    def line(small: str, large: str) -> float:
        return _slope(xs,
                      [getattr(r, small if x < mid else large if x > mid else "value")
                       for x, r in zip(xs, rs, strict=True)])

    steep, flat = line("low", "high"), line("high", "low")
    return Range(_slope(xs, [r.value for r in rs]), min(flat, steep), max(flat, steep))


@dataclass
class Grown:
    """A figure carried from its largest measured size to the target's."""

    at: Range  # at the target size
    base: Range  # as measured
    base_size: int
    k: Range  # the exponent used
    assumed: bool  # True: k is DEFAULT_EXPONENT (one size measured, or a round at 0 leaves no log-log fit)


def grow(basis: BackendBasis, what: str, size: float) -> Grown | None:
    return carry(basis.figure(what), DEFAULT_EXPONENT[what], size)


def carry(
    pts: list[tuple[int, Range]], default_k: float, size: float, k: Range | None = None) -> Grown | None:
    """A figure measured at the sizes `pts` carried to `size` along its exponent (`k` when given, else
    exponent(pts), default_k without one); the range from the worst combination of the largest size's rounds
    and the exponent's interval."""
    if not pts:
        return None
    base_size, base = max(pts, key=lambda p: p[0])
    k = k or exponent(pts)
    assumed = k is None
    if k is None:
        k = Range(default_k, default_k, default_k)
    ratio = size / base_size
    corners = [b * ratio ** e for b in (base.low, base.high) for e in (k.low, k.high)]
    return Grown(Range(base.value * ratio**k.value, min(corners), max(corners)), base, base_size, k, assumed)


def missing(basis: BackendBasis, target: Target) -> str | None:
    """Why this backend has no basis for the target (one phrase), or None."""
    for kind, share in target.shares().items():
        if share > 0 and not basis.figure(kind):
            return f"no {kind} phase measured server CPU (the target has {share:.4g} {kind}s per op)"
    return None


@dataclass
class Projection:
    backend: str
    label: str
    cores: Range
    demand: Range  # cores busy at the target rate, before the utilization headroom
    memory: Grown | None
    disk: Grown | None
    cpu: dict[str, Grown]  # kind -> its per-op cost at the target size (kinds with a share only)
    size_ratio: float  # target relationships / the largest size measured
    rate_ratio: float  # target ops/s / the highest check throughput measured
    basis: SizePoint  # the largest size measured


def project(basis: BackendBasis, target: Target) -> Projection:
    """The target's needs on this backend; refuses (UserError) where the basis lacks a needed op kind."""
    if why := missing(basis, target):
        raise UserError(f"{basis.backend}: {why}")
    cpu: dict[str, Grown] = {}
    demand = Range(0.0, 0.0, 0.0)
    for kind, share in target.shares().items():
        if share > 0 and (g := grow(basis, kind, target.relationships)) is not None:
            cpu[kind] = g
            demand = demand + g.at.scaled(target.qps * share)
    top = basis.points[-1]
    best = max((p.best_ops_per_s for p in basis.points if math.isfinite(p.best_ops_per_s)), default=math.nan)
    return Projection(
        basis.backend, basis.label, demand.scaled(1 / target.utilization), demand,
        grow(basis, "rss", target.relationships), grow(basis, "disk", target.relationships), cpu,
        target.relationships / top.relationships, target.qps / best if best > 0 else math.nan, top)
