"""How much a figure moves by chance: the spread a difference must exceed to count as a difference.

With `--repeat N` the spread of a figure is its standard deviation across the repeats. With one repeat it
is estimated from the phase's own interval-to-interval variation: the figure recomputed per one-second
slice, whose standard deviation over k slices divided by sqrt(k) is what a whole phase's figure would vary
by from run to run if the slices are independent. A percentile's interval is at least its 95% confidence
interval from its op count (order statistics: with n ops the p95 is known only between the values at ranks
n*0.95 +- 1.96*sqrt(n*0.95*0.05)); it is asymmetric where the tail is long. Two figures differ clearly
when their intervals do not overlap.
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np
import pandas as pd

from authzbench.metrics import decode, merge, new_histogram

Z95 = 1.96


def min_ops(q: float) -> int:
    """Ops a percentile needs before it is more than the maximum: p50 2, p95 20, p99 100."""
    return math.ceil(1 / (1 - q / 100) - 1e-9)


def percentile_bounds(rows: pd.DataFrame, q: float, value: float) -> tuple[float, float] | None:
    """rows: the phase rows (one per repeat) of one backend, scenario, kind and load; value: the figure.
    The interval the figure could have landed in on another run; None when nothing says."""
    col = f"p{q:g}_ms"
    if len(rows) >= 2:
        v = rows[col].dropna().to_numpy(dtype=float)
        return (value - v.std(ddof=1), value + v.std(ddof=1)) if len(v) >= 2 else None
    row = rows.iloc[0]
    slots = _slot_values(tuple(row["hists"]), tuple(int(t) for t in row["iv_t"]), q)
    sd = float(np.std(slots, ddof=1) / math.sqrt(len(slots))) if len(slots) >= 2 else 0.0
    ci = order_stat_interval(tuple(row["hists"]), q)
    if ci is None and len(slots) < 2:
        return None
    lo, hi = ci or (value, value)
    return min(value - sd, lo), max(value + sd, hi)


def percentile_spread(rows: pd.DataFrame, q: float) -> float:
    """Half the width of percentile_bounds, for callers that want one number (NaN: not measurable)."""
    value = float(rows[f"p{q:g}_ms"].mean())
    b = percentile_bounds(rows, q, value)
    return (b[1] - b[0]) / 2 if b else float("nan")


def rate_spread(rows: pd.DataFrame) -> float:
    """Spread of ops/s: across repeats, or across the phase's full one-second slices."""
    if len(rows) >= 2:
        return float(rows["ops_per_s"].std(ddof=1))
    row = rows.iloc[0]
    t = np.floor(np.asarray(row["iv_t"], dtype=float)).astype(int)
    if len(t) == 0:
        return float("nan")
    per = pd.Series(np.asarray(row["iv_ops"], dtype=float)).groupby(t).sum()
    full = per.iloc[1:-1]  # the first and last slices are partial
    return float(full.std(ddof=1) / math.sqrt(len(full))) if len(full) >= 2 else float("nan")


@lru_cache(maxsize=4096)
def _slot_values(hists: tuple[str, ...], slots: tuple[int, ...], q: float) -> list[float]:
    by_slot: dict[int, list[str]] = {}
    for h, s in zip(hists, slots, strict=True):
        by_slot.setdefault(s, []).append(h)
    out = []
    for hs in by_slot.values():
        h = new_histogram()
        for x in hs:
            h.add(decode(x))
        if h.get_total_count() >= min_ops(q):  # a slice too small for this percentile says nothing
            out.append(h.get_value_at_percentile(q) / 1000)
    return out


@lru_cache(maxsize=4096)
def order_stat_interval(hists: tuple[str, ...], q: float) -> tuple[float, float] | None:
    """95% confidence interval (ms) of percentile q from the ops themselves."""
    h = merge(hists)
    n = h.get_total_count()
    if n < 2:
        return None
    p = q / 100
    half = Z95 * math.sqrt(n * p * (1 - p))
    lo, hi = max(1.0, n * p - half), min(float(n), n * p + half)
    return h.get_value_at_percentile(100 * lo / n) / 1000, h.get_value_at_percentile(100 * hi / n) / 1000


def overlap(a: tuple[float, float], b: tuple[float, float]) -> bool:
    """True when two figures' intervals overlap: their difference is within the noise."""
    return a[0] <= b[1] and b[0] <= a[1]
