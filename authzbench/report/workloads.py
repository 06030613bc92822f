"""The decision by workload, the decision summary's first table: for each workload a review names, the
backends that meet it, best first, computed from the churn sweep (report/churn.py), the revocations at 8
writers (report/freshness.py) and the via-group check figure. Each row states what "meets" means; the order is
the one display (figures.letters), † backends lettered among themselves after the networked ones."""

from __future__ import annotations

from authzbench.report import churn, freshness
from authzbench.report.core.data import RunData
from authzbench.report.core.figures import letters
from authzbench.report.core.frames import slo
from authzbench.report.core.ranking import Dimension, Figure
from authzbench.report.core.tables import label, num

READ_KEY = "check_p95/check_view_via_group_member"  # the Findings dimension a read-heavy workload rests on


def _listed(rd: RunData, figs: list[Figure], unit: str, order: dict[str, float] | None = None) -> str:
    """'a 1.2 ms (a), b 3 ms (b) ⚠, c † 0.1 ms (†a)': networked first, each group by first letter then value
    (or by `order` within one), ⚠ where the figure rests on too few ops; 'none' when no backend meets it."""
    out = []
    for net in (True, False):
        group = [f for f in figs if rd.comparable(f.backend) == net]
        r = letters(group, higher_is_better=False)
        key = order or {f.backend: f.value for f in group}
        for f in sorted(group, key=lambda f: (r.get(f.backend, "~"), key[f.backend], f.backend)):
            value = f.text or f"{num(f.value)}{unit}"
            out.append(f"{label(rd, f.backend)} {value} ({'' if net else '†'}{r.get(f.backend, '—')})"
                       + (" ⚠" if f.too_few else ""))
    return ", ".join(out) or "none"


def _read_heavy(rd: RunData, dims: list[Dimension]) -> tuple[str, str, str] | None:
    d = next((d for d in dims if d.key == READ_KEY), None)
    if d is None:
        return None
    objective = slo(rd)["check_p95_ms"]
    figs = [f for f in d.figures if not f.text and f.value < objective]
    return ("Read-heavy, rare changes", f"check p95 via a group at 1 worker, no change arriving, within the "
            f"{objective:g} ms SLO; by that p95", _listed(rd, figs, " ms"))


def _churn_rows(rd: RunData) -> list[tuple[str, str, str]]:
    df = churn.steps(rd)
    if df.empty:
        return []
    cfg = churn.settings(rd)
    meaning = (f"that step held: check p95 within the {slo(rd)['check_p95_ms']:g} ms SLO at "
               f"{cfg['read_rate']:g} checks/s, writers on schedule, changes visible within "
               f"{cfg['freshness_s']:g} s; by check p95 at that step")
    rows = []
    for rate, d in zip(sorted(set(cfg["rates"]) | set(df["rate"])), churn.dimensions(rd, df), strict=True):
        # a step whose check p95 interval lies across the SLO meets it no more than it misses it: named apart
        open_ = (f"; undecided (check p95 interval across the SLO): {und}"
                 if (und := churn.undecided_text(rd, rate, df))
                 else "")
        rows.append((f"Membership churn of {rate:g} change{'' if rate == 1 else 's'}/s", meaning,
                     _listed(rd, d.figures, " ms") + open_))
    return rows


def _no_stale(rd: RunData) -> tuple[str, str, str] | None:
    df = freshness.revocations(rd)
    if df.empty:
        return None
    clean = df[(df["stale_allows"] == 0) & (df["revocations"] > 0)].sort_values("hi_1k")
    best = clean.drop_duplicates("backend")  # a backend's mode with the tightest bound
    figs = [
        Figure(
            r["backend"], r["per_1k"], bounds=(r["lo_1k"], r["hi_1k"]),
            text=f"{freshness.mode_prefix(r['mode'])}0 of {r['revocations']:,}, "
                 f"≤ {num(r['hi_1k'])} per 1,000")
        for _, r in best.iterrows()]
    return ("No stale allow tolerated", f"no stale allow observed after a revocation at {freshness.WRITERS} "
            "concurrent writers in the mode named; by the upper bound of its 95% interval per 1,000 (more "
            "revocations, tighter)", _listed(rd, figs, "", {f.backend: f.interval()[1] for f in figs}))


def rows(rd: RunData, dims: list[Dimension]) -> list[tuple[str, str, str]]:
    """(workload, what meets means, backends best first); none when the run has no churn or revocation
    figures (older runs: the summary keeps its needs table alone)."""
    found = [*_churn_rows(rd), *([x] if (x := _no_stale(rd)) else [])]
    if not found:
        return []
    return [*([x] if (x := _read_heavy(rd, dims)) else []), *found]


def section_lines(rd: RunData, dims: list[Dimension]) -> list[str]:
    found = rows(rd, dims)
    if not found:
        return []
    return ["**The decision by workload** (letters in brackets, as in the table below):", "",
            "| Workload | Meets it when | Backends that meet it, best first |", "|---|---|---|",
            *(f"| {w} | {m} | {b} |" for w, m, b in found), ""]
