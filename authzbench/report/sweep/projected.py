"""The reader's size: a size sweep's figures carried to `--target-relationships`, and the method checked.

Both carry a figure along its growth exponent as `authzbench.core.projection.carry` does for `plan`: from the
largest size measured, with a range from the worst combination of that size's rounds and the exponent's
range: the flattest and steepest line through the sizes' round ranges, widened to the fit's 95% interval
where three or more sizes give one (round ranges alone ignore how far the sizes stray from one line).
- `check_table`: on our own data, each size from the third up projected from the smaller ones, beside
  what it measured: the error says how far to trust a projection of the reader's size.
- `at_target`: the decision summary's lines: each backend's projected figures at the target, and which are
  projected to leave the SLO or to outgrow the machine's free disk.
"""

from __future__ import annotations

import math

import pandas as pd

from authzbench.core.numbers import num
from authzbench.core.projection import Grown, Range, carry
from authzbench.core.projection import exponent as projection_exponent
from authzbench.report.core.data import RunData
from authzbench.report.core.frames import slo
from authzbench.report.sweep import growth

# need -> (size-table measure, its title, the exponent assumed over one size: see projection.DEFAULT_EXPONENT)
NEEDS = {
    "check": ("check_p95_ms", "check p95 (ms)", 0.0),
    "lookup": ("lookup_p95_ms", "heavy lookup p95 (ms)", 0.0),
    "write": ("write_p95_ms", "structural write p95 (ms)", 0.0), "load": ("ingest_s", "load time (s)", 1.0),
    "disk": ("footprint_mib", "footprint (MiB)", 1.0)}


def points(g: pd.DataFrame, m: str) -> list[tuple[int, Range]]:
    """(relationships, Range over its rounds) of every size with a positive figure of measure `m`."""
    out = []
    for _, r in g.iterrows():
        v = r.get(m)
        if v is None or not math.isfinite(v) or v <= 0:
            continue
        lo, hi = r.get(f"{m}_lo", v), r.get(f"{m}_hi", v)
        lo = lo if lo is not None and math.isfinite(lo) and lo > 0 else v
        hi = hi if hi is not None and math.isfinite(hi) else v
        out.append((int(r["relationships"]), Range(v, min(lo, v), max(hi, v))))
    return sorted(out, key=lambda p: p[0])


def exponent(pts: list[tuple[int, Range]]) -> Range | None:
    """The exponent's range: the flattest to steepest line through the sizes' rounds (projection.exponent),
    widened to the least-squares fit's 95% interval where three or more sizes give one."""
    k = projection_exponent(pts)
    f = growth.fit([s for s, _ in pts], [r.value for _, r in pts])
    if k is None or f is None or f.se is None:
        return k
    return Range(k.value, min(k.low, f.low), max(k.high, f.high))


def grown(pts: list[tuple[int, Range]], k0: float, size: float) -> Grown | None:
    return carry(pts, k0, size, exponent(pts))


def check_rows(df: pd.DataFrame) -> list[dict]:
    """Per backend and need: every size from the third up projected from the sizes below it, and measured (so
    a sweep to xl checks `large` from tiny and baseline, the issue's test, as well as xl from all three)."""
    rows = []
    for b, g in df.groupby("backend", sort=False):
        for m, title, k0 in NEEDS.values():
            pts = points(g, m)
            for i in range(2, len(pts)):
                size, measured = pts[i]
                if (got := grown(pts[:i], k0, size)) is None:
                    continue
                # a need with one figure per size (a load, a footprint) has no rounds: its range is a point,
                # which no other measurement lands on: it has an error, not an inside/outside
                ranged = got.at.low < got.at.high
                rows.append({"backend": b, "need": title, "size": size, "from": i, "projected": got.at,
                             "measured": measured.value, "error": got.at.value / measured.value - 1,
                             "inside": got.at.low <= measured.value <= got.at.high if ranged else None})
    return rows


def check_table(df: pd.DataFrame) -> list[str]:
    """The check's markdown (a paragraph and a table), or [] when no backend has three sizes of a need."""
    rows = check_rows(df)
    if not rows:
        return []
    ranged = [r for r in rows if r["inside"] is not None]
    worst = max(rows, key=lambda r: abs(r["error"]))
    point = (f"; {len(rows) - len(ranged)} more have no range (one figure per size)"
             if len(ranged) < len(rows)
             else "")
    out = [
        "### The projection checked: each size projected from the smaller ones", "",
        "Each backend's sizes from the third up, each projected from the sizes below it, as a target size "
        "would be. The measured figure lies inside the projected range for "
        f"{sum(r['inside'] for r in ranged)} of {len(ranged)} projections with a range{point}; the largest "
        f"error is {worst['error']:+.0%} ({worst['backend']}, {worst['need']} at {worst['size']:,}).", "",
        "| backend | need | size | from sizes | projected (range) | measured | error | inside the range |",
        "|---|---|---:|---:|---:|---:|---:|---|"]
    out += [f"| {r['backend']} | {r['need']} | {r['size']:,} | {r['from']} | {_range(r['projected'])} | "
            f"{_n(r['measured'])} | {r['error']:+.0%} | {_inside(r['inside'])} |" for r in rows]
    return out


def at_target(rd: RunData, df: pd.DataFrame) -> list[str]:
    """The decision summary's lines on the reader's size (needs --target-relationships and two sizes)."""
    target = (rd.manifest.get("config") or {}).get("target_relationships")
    if not target or df.empty or df["relationships"].nunique() < 2:
        return []
    limits = slo(rd)
    free = (rd.manifest.get("environment") or {}).get("disk_free_bytes")
    out = [
        f"- At the target size, {target:,.0f} relationships ({target / df['relationships'].max():,.3g}x the "
        "largest measured), projected along each backend's growth exponent (range: the largest size's "
        "rounds x the exponent's range, which spans its 95% interval over three or more sizes):"]
    for b, g in df.groupby("backend", sort=False):
        at = {need: grown(points(g, m), k0, target) for need, (m, _, k0) in NEEDS.items()}
        figs = [f"{NEEDS[n][1]} {_range(x.at)}{'' if not x.assumed else ' (one size: exponent assumed)'}"
                for n, x in at.items() if x]
        verdicts = _verdicts(at, limits, free)
        out.append(f"  - {b}: " + "; ".join(figs) + (f". **{'; '.join(verdicts)}**" if verdicts else ""))
    return out


def _verdicts(grown: dict[str, Grown | None], limits: dict, free: float | None) -> list[str]:
    out = []
    for need, key in (("check", "check_p95_ms"), ("write", "write_p95_ms")):
        if (x := grown.get(need)) and limits.get(key):
            if x.at.value > limits[key]:
                out.append(f"projected to leave the {need} p95 SLO ({limits[key]:g} ms)")
            elif x.at.high > limits[key]:
                out.append(f"may leave the {need} p95 SLO ({limits[key]:g} ms) within its range")
    if (d := grown.get("disk")) and free and d.at.value * 2**20 > free:
        out.append(f"projected to outgrow the machine's free disk ({free / 2**30:,.0f} GiB)")
    return out


def _inside(inside: bool | None) -> str:
    return "no range" if inside is None else ("yes" if inside else "no")


def _n(v: float) -> str:
    return num(v)


def _range(r: Range) -> str:
    return f"{_n(r.value)} ({_n(r.low)}-{_n(r.high)})"
