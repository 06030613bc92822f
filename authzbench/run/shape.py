"""`bench --shape depth=1,2,4,8 --shape fanout=2,4,8 --shape acl=3,11,33` (or `--shape all`): the graph's
shape swept at one size.

Each value of each parameter is an ordinary run (results dir, report) of the default scenarios at `--profile`,
with that one generator parameter overridden and every other as the profile has it; every run's manifest
lists the sweep's points so far (`shape_sweep`), so the last report's "How cost grows with the graph's shape"
covers every point. The parameters, as the generator's overrides (`--set`):
- depth: `group_depth`, one chain of nested groups per org exactly this deep (in place of the profile's random
  nesting), which a check through the hierarchy walks;
- fanout: `groups_per_user`, the groups a user joins in each org, i.e. the direct members per group;
- acl: `viewer_users_per_res`, the users granted view on each resource, i.e. the ACL density.
Loads and phases are bounded as in any run (`--max-load-minutes`, the phases' budgets).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from authzbench.config import BenchConfig
from authzbench.core.console import say
from authzbench.core.errors import UserError
from authzbench.generator.profiles import resolve
from authzbench.generator.shape_params import PARAMS

MIN_VALUES = 3  # a fit with an interval needs three points


@dataclass(frozen=True)
class Point:
    """One run of the sweep: `param` at `value`, the generator's overrides that make it."""

    param: str
    value: float
    overrides: dict[str, str]

    @property
    def label(self) -> str:
        return f"{self.param}={self.value:g}"


def parse_shapes(items: list[str]) -> dict[str, list[float]]:
    """--shape items ("all", or PARAM=V1,V2,V3) -> parameter -> values; bad input is a UserError."""
    if items == ["all"]:
        return {p: list(v) for p, (_, v) in PARAMS.items()}
    out: dict[str, list[float]] = {}
    for item in items:
        name, sep, raw = item.partition("=")
        name = name.strip()
        if item == "all":
            raise UserError("--shape all runs every parameter: give it alone")
        if not sep or name not in PARAMS:
            raise UserError(f"--shape expects all or PARAM=V1,V2,V3 with PARAM one of {', '.join(PARAMS)}; "
                            f"got {item!r}")
        if name in out:
            raise UserError(f"--shape: {name} is given more than once; name each once")
        out[name] = _values(name, raw)
    return out


def _values(name: str, raw: str) -> list[float]:
    try:
        values = [float(x) for x in raw.split(",")]
    except ValueError:
        raise UserError(f"--shape {name}={raw}: expected comma-separated numbers") from None
    if len(set(values)) != len(values) or len(values) < MIN_VALUES:
        raise UserError(f"--shape {name}: {MIN_VALUES} or more distinct values, got {raw!r}")
    if any(not v > 0 for v in values):  # the fit is log-log: a value of 0 has no place on its axis
        raise UserError(f"--shape {name}: values must be > 0, got {raw!r}")
    return sorted(values)


def plan(cfg: BenchConfig, shapes: dict[str, list[float]]) -> list[Point]:
    """Every run of the sweep, each checked against the generator's own rules before anything starts."""
    if cfg.data.model != "rebac":
        raise UserError("--shape: the shape sweep varies the rebac graph; --model social has no groups")
    points = []
    for name, values in shapes.items():
        key = PARAMS[name][0]
        if key in cfg.data.overrides:
            raise UserError(f"--shape {name} varies {key}: leave it out of --set")
        for v in values:
            over = {**cfg.data.overrides, key: f"{v:g}"}
            try:
                resolve(cfg.data.profile, over, cfg.data.model)  # e.g. depth 12 with 11 groups an org
            except UserError as e:
                raise UserError(f"--shape {name}={v:g}: {str(e).removeprefix('--set ')}") from None
            points.append(Point(name, v, over))
    return points


def shaped(cfg: BenchConfig, point: Point) -> BenchConfig:
    """The run of one point: the same options with its overrides (the other parts shared, not copied)."""
    return replace(cfg, data=replace(cfg.data, overrides=dict(point.overrides)))


def eta(started: float, done: int, total: int, now: float) -> str:
    """"3/9 points, 41 min elapsed, ~82 min left": the points left at the mean wall time of those done."""
    elapsed = now - started
    left = f", ~{elapsed / done * (total - done) / 60:,.0f} min left" if done else ""
    return f"shape sweep: {done}/{total} points, {elapsed / 60:,.0f} min elapsed{left}"


def run_shape(cfg: BenchConfig, points: list[Point], results_dir: Path | None,
              render: Callable[[Path], Path] | None) -> list[str]:
    """bench at every point in order; returns the failures of all points (one line each)."""
    from authzbench.run.sweep import run_each

    t0 = time.monotonic()
    done: list[dict] = []

    def manifest(run_id: str, i: int) -> dict:
        done.append({"run": run_id, "param": points[i].param, "value": points[i].value})
        say(f"{eta(t0, i, len(points), time.monotonic())}; next {points[i].label}")
        return {"shape_sweep": {
                    "plan": [{"param": q.param, "value": q.value} for q in points], "points": list(done)}}

    return run_each([(p.label, shaped(cfg, p)) for p in points], cfg, results_dir, render, manifest)
