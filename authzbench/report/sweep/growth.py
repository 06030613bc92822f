"""Growth exponents with their uncertainty, and whether the points follow a power law at all.

A figure measured at several sizes (or values of a shape parameter) is fitted as value ~ x^k by least squares
of log(value) on log(x). Over three or more points k comes with its standard error and a 95% interval
(Student's t on n - 2 degrees of freedom); over two it is a two-point slope, with no interval to give.

A power law is a straight line in log-log, so two tests say where the points leave it (both need three or more
points, and each names itself in the statement it returns):
- *local slopes*: the slope between each pair of neighbouring points, with the interval the rounds allow
  (flattest to steepest line through the two points' round ranges); two that do not overlap mean the growth
  rate itself changes along the axis;
- *residuals*: at some point the fit's residual exceeds the spread of that point's rounds, i.e. the misfit
  is larger than the noise the rounds showed.
Both need the rounds' ranges; a series with one figure per point (a load, a footprint) is not tested.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

# Student's t, two-sided 95% (0.975 quantile), by degrees of freedom: numpy has no quantile function and the
# venv carries no scipy. Beyond 30 degrees of freedom the normal's 1.96 is within 2%.
T975 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262, 10: 2.228,
        12: 2.179, 15: 2.131, 20: 2.086, 25: 2.060, 30: 2.042}
# Slopes (and log residuals) closer than this are equal: float noise of an exact power law, not a kink.
TOL = 1e-9


def t975(dof: int) -> float:
    """The 0.975 quantile of Student's t at `dof` (the nearest tabulated dof at or below it)."""
    return T975[max(d for d in T975 if d <= dof)] if dof <= 30 else 1.96


@dataclass(frozen=True)
class Fit:
    """value ~ x^k over n points: k with its standard error and 95% interval (None over two points)."""

    k: float
    se: float | None
    low: float | None
    high: float | None
    n: int
    off: str = ""  # why the points do not follow a power law ("" when no test found it, or none could run)

    @property
    def two_point(self) -> bool:
        return self.n == 2

    def cell(self) -> str:
        """A table cell: "0.52 ± 0.04 [0.40, 0.64]" or "1.00 (2 points)"."""
        if self.se is None:
            return f"{self.k:.2f} (2 points)"
        return f"{self.k:.2f} ± {self.se:.2f} [{self.low:.2f}, {self.high:.2f}]"

    def text(self) -> str:
        """"x^0.52 ± 0.04 (95%: 0.40 to 0.64, 4 points)" or "x^0.52 (two-point slope, no interval)"."""
        if self.se is None:
            return f"^{self.k:.2f} (two-point slope, no interval)"
        return f"^{self.k:.2f} ± {self.se:.2f} (95%: {self.low:.2f} to {self.high:.2f}, {self.n} points)"


def _usable(xs, ys, lows, highs) -> tuple[np.ndarray, ...]:
    x, y = np.asarray(xs, float), np.asarray(ys, float)
    lo = np.asarray(lows, float) if lows is not None else y.copy()
    hi = np.asarray(highs, float) if highs is not None else y.copy()
    ok = (x > 0) & (y > 0) & np.isfinite(x) & np.isfinite(y)
    lo = np.where(np.isfinite(lo) & (lo > 0), lo, y)
    hi = np.where(np.isfinite(hi) & (hi > 0), hi, y)
    order = np.argsort(x[ok])
    return tuple(a[ok][order] for a in (x, y, np.minimum(lo, y), np.maximum(hi, y)))


def fit(xs, ys, lows=None, highs=None) -> Fit | None:
    """The power-law fit of ys on xs; lows/highs: each point's lowest and highest round (optional).
    None under two distinct usable points (non-positive or missing values are left out)."""
    x, y, lo, hi = _usable(xs, ys, lows, highs)
    if len(set(x)) < 2:
        return None
    lx, ly = np.log(x), np.log(y)
    k, c = np.polyfit(lx, ly, 1)
    n = len(x)
    if n == 2:
        return Fit(float(k), None, None, None, 2)
    resid = ly - (k * lx + c)
    sxx = float(((lx - lx.mean()) ** 2).sum())
    se = math.sqrt(float((resid ** 2).sum()) / (n - 2) / sxx)
    half = t975(n - 2) * se
    off = _power_law_break(x, lx, ly, k * lx + c, np.log(lo), np.log(hi))
    return Fit(float(k), se, float(k) - half, float(k) + half, n, off)


def segment(
    lx: np.ndarray, llo: np.ndarray, lhi: np.ndarray, ly: np.ndarray, i: int) -> tuple[float, float, float]:
    """Slope from point i to i+1 (log space): the value, flattest and steepest through their round ranges."""
    dx = lx[i + 1] - lx[i]
    return ((ly[i + 1] - ly[i]) / dx, (llo[i + 1] - lhi[i]) / dx, (lhi[i + 1] - llo[i]) / dx)


def _power_law_break(x: np.ndarray, lx: np.ndarray, ly: np.ndarray, fitted: np.ndarray, llo: np.ndarray,
                     lhi: np.ndarray) -> str:
    """Either test's statement, or "". Both need the rounds' ranges: with one figure per point (a load, a
    footprint) any scatter would read as a kink, so such a series is not tested (the caller says so)."""
    if not (llo < lhi).any():
        return ""
    return _local_slopes(lx, ly, llo, lhi) or _residuals(x, ly, fitted, llo, lhi)


def _local_slopes(lx: np.ndarray, ly: np.ndarray, llo: np.ndarray, lhi: np.ndarray) -> str:
    """The local-slopes test's statement, or "" when every pair of neighbouring slopes overlaps."""
    segs = [segment(lx, llo, lhi, ly, i) for i in range(len(lx) - 1) if lx[i + 1] > lx[i]]
    for i, (a, b) in enumerate(zip(segs, segs[1:], strict=False)):
        if a[2] + TOL < b[1] or b[2] + TOL < a[1]:
            return (
                f"not a power law (local-slopes test): the slope between points {i + 1} and {i + 2} "
                f"({_seg(a)}) and between {i + 2} and {i + 3} ({_seg(b)}) disagree beyond what their rounds "
                "allow")
    return ""


def _seg(s: tuple[float, float, float]) -> str:
    return f"{s[0]:.2f}" if s[2] - s[1] < 0.005 else f"{s[0]:.2f}, {s[1]:.2f} to {s[2]:.2f}"


def _residuals(x: np.ndarray, ly: np.ndarray, fitted: np.ndarray, llo: np.ndarray, lhi: np.ndarray) -> str:
    """The residuals test's statement, or "": at some point the fit's residual exceeds the spread of that
    point's rounds (both in log, i.e. as factors), the point where it exceeds it most named."""
    spread = lhi - llo
    excess = np.where(spread > 0, np.abs(ly - fitted) - spread, -np.inf)
    i = int(np.argmax(excess))
    if excess[i] <= TOL:
        return ""
    return (
        f"not a power law (residuals test): at {x[i]:,.4g} the fit misses the measured figure by a factor "
        f"{math.exp(abs(ly[i] - fitted[i])):.2f}, beyond the spread of its rounds "
        f"(x{math.exp(spread[i]):.2f})")


def of(g: pd.DataFrame, x: str, m: str) -> Fit | None:
    """The fit of measure `m` on column `x` over one backend's rows (with its rounds' range where the frame
    has `m`_lo / `m`_hi)."""
    lo, hi = (g[f"{m}_{e}"].to_numpy(float) if f"{m}_{e}" in g else None for e in ("lo", "hi"))
    return fit(g[x].to_numpy(float), g[m].to_numpy(float), lo, hi)


def lines(df: pd.DataFrame, x: str, axis: str, measures: dict[str, str]) -> list[str]:
    """The growth table (one row per backend, one column per measure: its exponent on `x`), then one line per
    series that is not a power law, and per backend the measure that grows fastest."""
    out = [
        f"Exponent on {axis}: k ± its standard error [95% interval] over three or more points; over two, a "
        "two-point slope with no interval.", "", f"| backend | {' | '.join(measures.values())} |",
        "|---|" + "---:|" * len(measures)]
    breaks, fastest = [], []
    for b, g in df.groupby("backend", sort=False):
        fits = {m: of(g, x, m) for m in measures}
        out.append(f"| {b} | " + " | ".join(f.cell() if f else "—" for f in fits.values()) + " |")
        breaks += [f"- **{b}**, {measures[m]}: {f.off}." for m, f in fits.items() if f and f.off]
        if got := {m: f for m, f in fits.items() if f}:
            top = max(got, key=lambda m: got[m].k)
            fastest.append(f"{b}: {measures[top]} ({axis}{got[top].text()})")
    if breaks:
        out += ["", *breaks]
    if untested := [t for m, t in measures.items() if (df[m] > 0).any() and not _has_rounds(df, m)]:
        out += ["", f"Not tested for a power law (one figure per {axis}, no rounds to judge a kink by): "
                + ", ".join(untested) + "."]
    if fastest:
        out += ["", f"Fastest-growing measure with {axis}, per backend: " + "; ".join(fastest) + "."]
    return out


def _has_rounds(df: pd.DataFrame, m: str) -> bool:
    return f"{m}_lo" in df and bool((df[f"{m}_lo"] < df[f"{m}_hi"]).any())
