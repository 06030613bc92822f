"""How much a figure moves by chance: the interval a difference must leave to count as a difference.

The unit of evidence is a round (phase_plan.phase_specs): every phase runs in several rounds, interleaved
with the other phases and spread over the backend's visits, so what moves a figure between runs (other
processes, JVM and cache state, a slow period of the machine) moves its rounds apart too. A figure is the
median over its rounds; its interval runs from the lowest to the highest round, widened to the percentile's
95% confidence interval from its op count (order statistics: with n ops the p95 is known only between the
values at ranks n*0.95 +- 1.96*sqrt(n*0.95*0.05)). A figure whose rounds spread wider than UNSTABLE_RANGE
times its value is unstable: shown, never ranked. Two figures differ clearly when their intervals do not
overlap. With one round (--rounds 1) the interval falls back to the phase's one-second slices (their standard
deviation / sqrt(slices)), which assumes the slices independent and is known to be too narrow.
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np
import pandas as pd

from authzbench.core.metrics import decode, merge, new_histogram, percentile

Z95 = 1.96


def min_ops(q: float) -> int:
    """Ops a percentile needs before it is more than the maximum: p50 2, p95 20, p99 100, p99.9 1,000."""
    return math.ceil(1 / (1 - q / 100) - 1e-9)


def column(q: float) -> str:
    """The phase table's column of percentile q: p50_ms, p95_ms, p99_ms, p999_ms (p99.9)."""
    return f"p{q:g}_ms".replace(".", "")


# Rounds whose lowest and highest figure lie further apart than the figure itself: no ranking rests on it.
# Three quiet make bench runs here had round ranges mostly within 0.3 of the value; a CPU-bound process
# landing on one round moved it by 1-3x.
UNSTABLE_RANGE = 1.0


def round_values(rows: pd.DataFrame, q: float | None) -> np.ndarray:
    """Per-round figures of one backend, scenario, kind and load (percentile q, or ops/s when q is None);
    empty when fewer than two rounds measured enough ops for it."""
    if len(rows) < 2:
        return np.empty(0)
    if q is None:
        v = rows["ops_per_s"].to_numpy(dtype=float)
    elif (rows["ops"] >= min_ops(q)).all():
        v = rows[column(q)].to_numpy(dtype=float)
    else:
        return np.empty(0)
    v = v[~np.isnan(v)]
    return v if len(v) >= 2 else np.empty(0)


def round_value(rows: pd.DataFrame, q: float | None, merged: float) -> float:
    """The figure alone: the median over rounds, or the merged figure when the rounds cannot carry it."""
    v = round_values(rows, q)
    return float(np.median(v)) if len(v) else merged


def round_figure(
    rows: pd.DataFrame, q: float | None, merged: float) -> tuple[float, tuple[float, float] | None]:
    """(the figure, its interval): the median over rounds with their range, widened by the percentile's
    confidence interval; the merged figure when the rounds cannot carry it alone."""
    v = round_values(rows, q)
    if len(v) == 0:
        return merged, (percentile_bounds(rows, q, merged) if q is not None else _slice_bounds(rows, merged))
    value = round_value(rows, q, merged)
    lo, hi = float(v.min()), float(v.max())
    if q is not None and (ci := order_stat_interval(tuple(h for hs in rows["hists"] for h in hs), q)):
        lo, hi = min(lo, ci[0]), max(hi, ci[1])
    return value, (lo, hi)


def unstable(rows: pd.DataFrame, q: float | None) -> bool:
    v = round_values(rows, q)
    return len(v) >= 2 and spread_unstable(v, float(np.median(v)))


def spread_unstable(rounds: np.ndarray, value: float) -> bool:
    """The one unstable rule: the rounds' lowest and highest lie further apart than UNSTABLE_RANGE times the
    figure shown (a latency's median over rounds, a CPU per 1,000 checks' pooled figure)."""
    v = np.asarray(rounds, dtype=float)
    return len(v) >= 2 and value > 0 and float(v.max() - v.min()) / value > UNSTABLE_RANGE


def _slice_bounds(rows: pd.DataFrame, value: float) -> tuple[float, float] | None:
    s = rate_spread(rows)
    return None if math.isnan(s) else (value - s, value + s)


def percentile_bounds(rows: pd.DataFrame, q: float, value: float) -> tuple[float, float] | None:
    """rows: the phase rows (one per round or repeat) of one backend, scenario, kind and load; value: the
    figure. The interval the figure could have landed in on another run; None when nothing says. A figure
    from a single op has an interval open above: two of them are never ranked apart (one revoke at 1.95 ms and
    one at 2.03 ms were, and the next run reversed it: 20261128-075802, -081629). Opening every percentile
    from too few ops (under 20 for a p95) chained whole write rows into one group (2.98 ms and 3,377 ms with
    no clear difference), since most stores' write phases have 2-16 ops: from 2 ops on, the interval is the
    order statistics' (it ends at the slowest op, marked ⚠)."""
    if int(rows["ops"].sum()) < 2:
        # one op: no spread to take an interval from, and the percentile may lie above it
        return value, math.inf
    col = column(q)
    if len(rows) >= 2:
        v = rows[col].dropna().to_numpy(dtype=float)
        ci = order_stat_interval(tuple(h for hs in rows["hists"] for h in hs), q)
        if len(v) < 2:
            return ci
        lo, hi = float(v.min()), float(v.max())
        return (min(lo, ci[0]), max(hi, ci[1])) if ci else (lo, hi)
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
    value = float(rows[column(q)].mean())
    b = percentile_bounds(rows, q, value)
    return (b[1] - b[0]) / 2 if b else float("nan")


def rate_spread(rows: pd.DataFrame) -> float:
    """Spread of ops/s: half the range across rounds or repeats, or across the phase's full one-second
    slices."""
    if len(rows) >= 2:
        v = rows["ops_per_s"].dropna()
        return float(v.max() - v.min()) / 2 if len(v) >= 2 else float("nan")
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
            out.append(percentile(h, q) / 1000)
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
    return percentile(h, 100 * lo / n) / 1000, percentile(h, 100 * hi / n) / 1000


def overlap(a: tuple[float, float], b: tuple[float, float]) -> bool:
    """True when two figures' intervals overlap: their difference is within the noise."""
    return a[0] <= b[1] and b[0] <= a[1]
