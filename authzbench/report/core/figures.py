"""The one computed table: every latency / throughput figure the report shows, computed once per
(backend, scenario, workers, kind, metric), and the letters every ranking shows.

A figure is the median over its rounds with its interval (noise.round_figure); every section (the decision
summary, the Findings, the per-scenario tables, the comparison table, the charts) reads it from `cell`, so
one (backend, scenario, workers, metric) shows one value everywhere. `clearly_better` is the one pairwise rule
(measured intervals apart) and `letters` its one display: two figures share a letter exactly when they are
not clearly apart, and a better figure's first letter never comes after a worse one's."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Protocol

import pandas as pd

from authzbench.report.core.data import RunData, merged_summary
from authzbench.report.core.noise import min_ops, overlap, round_figure, unstable

METRICS = {"p50_ms": 50.0, "p95_ms": 95.0, "p99_ms": 99.0, "p999_ms": 99.9, "ops_per_s": None}


@dataclass(frozen=True)
class Cell:
    value: float
    lo: float
    hi: float
    n: int  # ops the figure rests on, over all its rounds
    q: float | None  # the percentile it is; None for a rate
    unstable: bool
    disturbed: bool
    # ops in its smallest round (a phase row): the figure is a median of per-round percentiles
    fewest: int = 0

    @property
    def too_few(self) -> bool:
        """One rule for ⚠ everywhere: a percentile is from too few ops when any round behind it had fewer ops
        than it needs (noise.min_ops), the rule the appendix's sample-size table applies per phase row."""
        return self.q is not None and self.fewest < min_ops(self.q)


def rows_of(rd: RunData, backend: str, scenario: str, concurrency: int, kind: str | None,
            mode: str = "closed", consistency: str = "") -> pd.DataFrame:
    """The phase rows (one per round) of one figure; kind None: the op kinds a read figure is made of."""
    sub = _index(rd).get((backend, scenario, mode, int(concurrency), consistency))
    if sub is None:
        return pd.DataFrame()
    return sub[sub["kind"] == kind] if kind else sub[~sub["kind"].isin(["write", "visibility"])]


def _index(rd: RunData) -> dict[tuple, pd.DataFrame]:
    """The measured phase rows grouped once per run: a figure's lookup is a dict access, not a scan of every
    phase (a report asks for some thousands of figures)."""
    if "_phase_index" not in rd.__dict__:
        ph = rd.phases
        if ph.empty:
            rd.__dict__["_phase_index"] = {}
        else:
            ph = ph[ph["ops"] > 0]
            cons = ph["consistency"] if "consistency" in ph else pd.Series("", index=ph.index)
            keys = [ph["backend"], ph["scenario"], ph["mode"], ph["concurrency"].astype(int), cons]
            rd.__dict__["_phase_index"] = {tuple(k): g for k, g in ph.groupby(keys, sort=False)}
    return rd.__dict__["_phase_index"]


def cell(rd: RunData, backend: str, scenario: str, concurrency: int, metric: str, kind: str | None = None,
         mode: str = "closed", consistency: str = "") -> Cell | None:
    """One figure, computed once per run (cached on the RunData); None when nothing was measured."""
    key = (backend, scenario, int(concurrency), metric, kind, mode, consistency)
    cache = rd.__dict__.setdefault("_cells", {})
    if key not in cache:
        cache[key] = _compute(rows_of(rd, backend, scenario, concurrency, kind, mode, consistency), metric)
    return cache[key]


def _compute(rows: pd.DataFrame, metric: str) -> Cell | None:
    if rows.empty:
        return None
    q = METRICS[metric]
    if q is None:
        merged = float(rows["ops_per_s"].median())
    else:
        merged = float(getattr(merged_summary([h for hs in rows["hists"] for h in hs]), metric))
    value, bounds = round_figure(rows, q, merged)
    lo, hi = bounds if bounds is not None else (value, value)
    disturbed = bool(rows["disturbed"].any()) if "disturbed" in rows else False
    fewest = int(rows["ops"].min())
    if q is not None and fewest < min_ops(q):
        # a round below the percentile's op count shows at most its slowest op: the figure may lie anywhere
        # above its low end, so two such figures are never clearly apart (figures.clearly_better, letters)
        hi = math.inf
    return Cell(
        value, min(lo, value), max(hi, value), int(rows["ops"].sum()), q, unstable(rows, q), disturbed, fewest
    )


def mean_ms(rd: RunData, backend: str, scenario: str, concurrency: int, kind: str | None = None,
            mode: str = "closed", consistency: str = "") -> float | None:
    """The mean as the same kind of figure as a percentile: the median of its rounds' means. Pooled over
    every op it was a different quantity, weighted to the longest round: mongo's check_negative showed a
    mean of 2.73 ms beside a p50 of 18.4 ms, the p50 being the median of a 54-op and a 1,468-op round."""
    rows = rows_of(rd, backend, scenario, concurrency, kind, mode, consistency)
    v = rows["mean_ms"].dropna() if not rows.empty else rows
    return float(v.median()) if len(v) else None


def with_cells(rd: RunData, merged: pd.DataFrame) -> pd.DataFrame:
    """A merged phase table (tables.merge_repeats) with its closed-loop mean, percentiles and ops/s replaced
    by the one computed figure, so a per-phase table shows what the Findings and the summary show."""
    out = merged.copy()
    for i, r in out.iterrows():
        if r.get("mode") != "closed":
            continue
        key = (r["backend"], r["scenario"], int(r["concurrency"]))
        cons = r.get("consistency") or ""
        for m in METRICS:
            x = cell(rd, *key, m, r["kind"], consistency=cons)
            if x is not None and m in out:
                out.at[i, m] = x.value
        if "mean_ms" in out and (mean := mean_ms(rd, *key, r["kind"], consistency=cons)) is not None:
            out.at[i, "mean_ms"] = mean
    return out


def best_rate(rd: RunData, backend: str, scenario: str, kind: str | None = None) -> tuple[int, Cell] | None:
    """(workers, figure) of a backend's highest throughput over the concurrency sweep of a scenario."""
    ph = rd.phases
    if ph.empty:
        return None
    levels = sorted(set(ph[(ph["backend"] == backend) & (ph["scenario"] == scenario) &
                           (ph["mode"] == "closed")]["concurrency"]))
    cells = [(int(c), cell(rd, backend, scenario, int(c), "ops_per_s", kind)) for c in levels]
    cells = [(c, x) for c, x in cells if x is not None]
    return max(cells, key=lambda t: t[1].value) if cells else None


# ranking ---------------------------------------------------------------------------------------------

class Ranked(Protocol):
    backend: str
    value: float

    def interval(self) -> tuple[float, float]: ...


def assumed(f: Ranked) -> bool:
    """An interval not measured (a factor or a width set by hand, or none at all): never the ground of a
    clear difference. A figure without the attribute (a table's Cell) has a measured interval."""
    return bool(getattr(f, "assumed", ""))


def clearly_better(a: Ranked, b: Ranked, higher_is_better: bool) -> bool:
    """The one pairwise rule: a is clearly better than b when both intervals are measured, they (each widened
    to hold its value) do not overlap (noise.overlap) and a's value lies on the better side."""
    if assumed(a) or assumed(b) or a.value == b.value or overlap(_hull(a), _hull(b)):
        return False
    return (a.value > b.value) == higher_is_better


def _hull(f: Ranked) -> tuple[float, float]:
    lo, hi = f.interval()
    return min(lo, f.value), max(hi, f.value)


LETTER_MEANING = (
    "figures sharing a letter are not clearly apart; a figure with no letter in common with another "
    "is clearly apart from it; a is the best figure's letter, and a better figure's first letter "
    "never comes after a worse one's")


def best_first(figs: list, higher_is_better: bool) -> list:
    """The figures with a value, best value first (ties in their given order). NaN figures are left out."""
    ok = [f for f in figs if not math.isnan(f.value)]
    return sorted(ok, key=lambda f: -f.value if higher_is_better else f.value)


def letters(figs: list, higher_is_better: bool) -> dict[str, str]:
    """backend -> its letters (a compact letter display): two figures share a letter exactly when they are not
    clearly apart (clearly_better either way), and a better figure's first letter never comes after a worse
    one's. Ranks (1 + the number clearly better) allowed mongo 9.58 ms rank 2 above openfga 3.61 ms rank 4
    (20261129-201802): 8 such cases in one report, each read as an error."""
    ordered = best_first(figs, higher_is_better)
    n = len(ordered)
    near = [{j for j in range(n) if j != i and not clearly_better(ordered[i], ordered[j], higher_is_better)
             and not clearly_better(ordered[j], ordered[i], higher_is_better)} for i in range(n)]
    sets = _letter_sets(_cliques(near), n)
    return {f.backend: "".join(_name(k) for k, s in enumerate(sets) if i in s) for i, f in enumerate(ordered)}


def standing(letters_of: str) -> int:
    """1 + the position of a figure's first letter (a = 1): the JSON's numeric field. A smaller standing never
    belongs to a worse figure; whether two figures are clearly apart is said by their letters alone."""
    return _NAMES.index(letters_of[0]) + 1


_NAMES = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"


def _name(k: int) -> str:
    return _NAMES[k] if k < len(_NAMES) else f"<{k + 1}>"


def _cliques(near: list[set[int]]) -> list[frozenset[int]]:
    """The maximal sets of figures no two of which are clearly apart (Bron-Kerbosch; a dimension has at
    most a dozen backends). Sharing one of them is exactly being not clearly apart."""
    out: list[frozenset[int]] = []

    def grow(r: set[int], p: set[int], x: set[int]) -> None:
        if not p and not x:
            out.append(frozenset(r))
        for v in sorted(p):
            grow(r | {v}, p & near[v], x & near[v])
            p, x = p - {v}, x | {v}

    grow(set(), set(range(len(near))), set())
    return sorted(out, key=sorted)


def _letter_sets(cliques: list[frozenset[int]], n: int) -> list[set[int]]:
    """The letters in order, walking the figures best first: a set opens when its best member is reached.
    Where a set opened earlier would give a figure a first letter before the one of a better figure (the
    worse figure near the best, the better one not: intervals of uneven width), the set is reopened as a new
    letter from here, the members before keeping the old one: every pair still shares a letter, and the first
    letters stay in order."""
    sets: list[set[int]] = []
    floor = 0  # the previous figure's first letter
    for i in range(n):
        sets += [set(c) for c in cliques if min(c) == i]
        while (k := min(k for k, s in enumerate(sets) if i in s)) < floor:
            sets.append(set(sets[k]))
            sets[k] = {m for m in sets[k] if m < i}
        floor = k
    unique: list[set[int]] = []
    for s in sets:  # a set reopened whole twice, or emptied: one letter
        if s and s not in unique:
            unique.append(s)
    return unique
