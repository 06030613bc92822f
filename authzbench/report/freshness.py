"""Stale allows and freshness against latency: per backend, consistency mode and writer count, how many
revocations' first check still allowed (per 1,000 revocations, with a Wilson 95% interval: stale_allows),
and per engine what each of its modes costs in via-group check latency against the staleness it allowed as
measured (visibility lag, stale allows) in the same run."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd

from authzbench.core.records import PhaseEnd, PhaseStart
from authzbench.report import freshness_chart
from authzbench.report.core import charts
from authzbench.report.core.data import RunData, merged_summary
from authzbench.report.core.figures import cell
from authzbench.report.core.frames import revocations_of, session_mode, write_table
from authzbench.report.core.noise import Z95, min_ops
from authzbench.report.core.ranking import Dimension, Figure, worker_count
from authzbench.report.core.staleness import STALE_LABEL, STALE_UNIT, STRICT_PREFIXES, strict_stale_note
from authzbench.report.core.tables import anchor, label, num, table
from authzbench.workloads.catalog import SCENARIOS

REVOKE, VIA_GROUP, WRITERS = "revoke_then_check", "check_view_via_group_member", 8


def wilson(k: int, n: int) -> tuple[float, float]:
    """95% Wilson score interval of a proportion k/n (NaN for n = 0): unlike k/n ± z·se it stays inside [0, 1]
    and is not zero-width at k = 0, so 0 of 40 and 0 of 4,000 read differently."""
    if n <= 0:
        return math.nan, math.nan
    p, z2 = k / n, Z95 * Z95
    d = 1 + z2 / n
    centre, half = (p + z2 / (2 * n)) / d, Z95 * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / d
    # the bounds at k = 0 and k = n are exactly 0 and 1; in floats centre - half left 3.47e-15 at 0 of 94
    # (20261129-071003: "95% 3.47e-15-39.3"), a second value for a zero
    return (0.0 if k == 0 else max(0.0, centre - half)), (1.0 if k == n else min(1.0, centre + half))


def mode_name(rd: RunData, b: str, mode: str) -> str:
    return mode or session_mode(rd, b)


def mode_prefix(mode: str) -> str:
    """"fully_consistent " before a figure; nothing for a backend without modes (session_mode's "—")."""
    return "" if mode == "—" else f"{mode} "


# The write scenarios whose ops revoke (each grants, then revokes; revoke_then_check revokes a grant made
# untimed first). A churn step's revocations are not among them: they run at a scheduled rate beside the
# step's open-loop checks, another condition, shown per step in the churn table under their own label.
WRITE_KINDS = tuple(n for n, s in SCENARIOS.items() if s.op == "write")


def own_mode(rd: RunData, b: str) -> str:
    """The backend's session read consistency as its server record names it ("" for a backend without
    modes)."""
    return rd.info(b).get("consistency", "")


def stale_allows(rd: RunData) -> pd.DataFrame:
    """The one stale-allow quantity: per backend, read consistency and writer count, the stale allows among
    the revocations of every structural write phase (a stale allow: a revocation whose first check still
    allowed), per 1,000 with Wilson's 95% interval. A phase naming the backend's own mode joins its session
    phases (one mode, shown "x (session)"); `own` marks it."""
    ph = rd.phases
    sub = ph[ph["scenario"].isin(WRITE_KINDS) & (ph["kind"] == "write")] if not ph.empty else ph
    if sub.empty:
        return pd.DataFrame()
    sub = sub.assign(
        key=[c or own_mode(rd, b) for b, c in zip(sub["backend"], sub["consistency"], strict=True)])
    rows = []
    for (b, key, c), g in sub.groupby(["backend", "key", "concurrency"], sort=False):
        n = sum(revocations_of(*x) for x in zip(g["scenario"], g["extra"], g["ops"], strict=True))
        k = int(sum(e.get("stale_allows", 0) for e in g["extra"]))
        lo, hi = wilson(k, n)
        own = key == own_mode(rd, b)
        name = session_mode(rd, b) if own else key
        rows.append({"backend": b, "mode": name, "own": own, "strict": name.startswith(STRICT_PREFIXES),
                     "writers": int(c), "kinds": ", ".join(sorted(set(g["scenario"]))), "revocations": n,
                     "stale_allows": k, "per_1k": 1000 * k / n if n else math.nan, "lo_1k": 1000 * lo,
                     "hi_1k": 1000 * hi})
    return pd.DataFrame(rows).sort_values(["backend", "writers", "mode"]).reset_index(drop=True)


def revocations(rd: RunData) -> pd.DataFrame:
    """The stale-allow rows (stale_allows) at 8 writers, one per (backend, mode)."""
    df = stale_allows(rd)
    if df.empty or not (df["writers"] == WRITERS).any():
        return pd.DataFrame()
    return df[df["writers"] == WRITERS].sort_values(["backend", "mode"]).reset_index(drop=True)


def base_text(r) -> str:
    """"14 of 200 revocations": the count a rate per 1,000 rests on."""
    return f"{r['stale_allows']:,} of {r['revocations']:,} revocations"


def stale_text(r) -> str:
    """"1 writer: 96 of 96 revocations, 1,000 per 1,000 (95% 962-1,000)"."""
    return (
        f"{r['writers']} writer{'s' if r['writers'] != 1 else ''}: {base_text(r)}, {num(r['per_1k'])} per "
        f"1,000 (95% {num(r['lo_1k'])}-{num(r['hi_1k'])})")


def per_1k_text(r) -> str:
    """"9 of 800 (11 per 1,000, 95% 5.9-21)"."""
    return (f"{r['stale_allows']:,} of {r['revocations']:,} ({num(r['per_1k'])} per 1,000, 95% "
            f"{num(r['lo_1k'])}-{num(r['hi_1k'])})")


def citation(rd: RunData, df: pd.DataFrame) -> str:
    """Where a fully consistent mode still allowed after a revocation: the reproduction and upstream
    reports."""
    bad = df[df["strict"] & (df["stale_allows"] > 0)] if not df.empty else df
    return "" if bad.empty else strict_stale_note(rd, list(zip(bad["backend"], bad["mode"], strict=True)))


def not_run(rd: RunData) -> list[str]:
    """The revocation phases at 8 writers the planner left out, a sentence each with why, so a backend missing
    from the stale-allow figures reads as not measured, not as clean or failed."""
    out = []
    for r in rd.skipped:
        if r.scenario == REVOKE and r.concurrency == WRITERS:
            mode = str(r.phase).split("/")[1].partition("@")[2]
            name = f"{label(rd, r.backend)}{' ' + mode if mode else ''}"
            out.append(f"Not run at {WRITERS} writers, {name}: {r.reason}.")
    return out


def summary_lines(rd: RunData) -> list[str]:
    df, missing = revocations(rd), not_run(rd)
    lines = [" ".join(missing)] if missing else []
    if df.empty:
        return lines
    df = df.sort_values(["per_1k", "hi_1k", "backend"])
    parts = [f"{label(rd, r['backend'])} {mode_prefix(r['mode'])}{per_1k_text(r)}" for _, r in df.iterrows()]
    lines = [f"**{STALE_LABEL}, {WRITERS} concurrent writers, per mode** (a stale allow: a revocation whose "
             "first check, right after it returned, still allowed; fewest first): " + "; ".join(parts) + ".",
             *lines]
    return lines + ([c] if (c := citation(rd, df)) else [])


def _of_mode(df: pd.DataFrame, rd: RunData, b: str, mode: str) -> pd.DataFrame:
    """Rows of write_table or stale_allows for backend b in mode ("" = its session mode, which a phase naming
    that same mode joins)."""
    key = mode or own_mode(rd, b)
    name = session_mode(rd, b) if key == own_mode(rd, b) else key
    ours = df["consistency"] if "consistency" in df else df["mode"]
    same = (ours == name) | ((ours == key) if key == own_mode(rd, b) else False)
    return df[(df["backend"] == b) & same]


def freshness(rd: RunData) -> pd.DataFrame:
    """Per engine (a backend whose via-group check ran in a named mode) and mode: check p50 / p95 at 1 worker
    against that mode's staleness: the visibility lag p95 of its worst write kind at its fewest writers (the
    figure the Findings rank for the session mode) and its stale allows per 1,000 revocations per writer
    count."""
    ph = rd.phases
    if ph.empty:
        return pd.DataFrame()
    via = ph[(ph["scenario"] == VIA_GROUP) & (ph["concurrency"] == 1)]
    writes, stale = write_table(rd), stale_allows(rd)
    rows = []
    for b in [b for b, g in via.groupby("backend", sort=False) if (g["consistency"] != "").any()]:
        for mode in sorted(set(via[via["backend"] == b]["consistency"])):
            p50, p95 = (cell(rd, b, VIA_GROUP, 1, m, consistency=mode) for m in ("p50_ms", "p95_ms"))
            w = _of_mode(writes, rd, b, mode) if not writes.empty else writes
            first = w[w["concurrency"] == w["concurrency"].min()] if not w.empty else w
            st = _of_mode(stale, rd, b, mode) if not stale.empty else stale
            rows.append({"backend": b, "mode": mode_name(rd, b, mode),
                         "p50_ms": p50.value if p50 else math.nan, "p95_ms": p95.value if p95 else math.nan,
                         "too_few": bool(p95 and p95.too_few), "p50_too_few": bool(p50 and p50.too_few),
                         "lag_p95_ms": float(first["vis_p95_ms"].max()) if not first.empty else math.nan,
                         "lag_writers": int(first["concurrency"].min()) if not first.empty else 0,
                         # ⚠ by the ops of the smallest round behind the worst kind's lag
                         # (figures.Cell.too_few)
                         "lag_too_few": _lag_too_few(first),
                         "stale": "; ".join(stale_text(r) for _, r in st.iterrows()) or "—"})
    return pd.DataFrame(rows)


def _lag_too_few(first: pd.DataFrame) -> bool:
    """Whether the worst write kind's visibility p95 (the freshness table's lag) rests on a round under the
    p95's op floor: the rule the structural-writes tables mark by."""
    if first.empty or first["vis_p95_ms"].isna().all():
        return False
    return int(first.loc[first["vis_p95_ms"].idxmax(), "vis_fewest"]) < min_ops(95.0)


def _input_spans(rd: RunData, backend: str) -> list[dict]:
    """The backend's via-group check phases in start order, each with the inputs it checked: measured [offset,
    offset + ops) (a closed loop's workers take every n-th input from the offset, so together a contiguous
    run) and its warm-up's [0, warm-up ops) (worker._warm_up started at input 0 whatever the offset until it
    started at the offset: then inside the measured run whenever the phase ran more ops than warm-up)."""
    ends = {r.phase: r for r in rd.records if isinstance(r, PhaseEnd)}
    spans = []
    for r in rd.records:
        if not isinstance(r, PhaseStart) or r.backend != backend or r.scenario != VIA_GROUP:
            continue
        end = ends.get(r.phase)
        warm, ops = (int(end.warmup_ops), int(end.ops)) if end else (0, 0)  # ops: the measured ones
        off = int(r.input_offset or 0)
        spans.append({"phase": r.phase, "mode": r.consistency or "", "t0": r.ts,
                      "ranges": [(off, off + max(ops, 0)), (0, warm)]})
    return sorted(spans, key=lambda s: s["t0"])


def _overlap(a: tuple[int, int], ranges: list[tuple[int, int]]) -> int:
    """How many of the inputs in a are in any of ranges (half-open index ranges)."""
    hit = np.zeros(max(0, a[1] - a[0]), dtype=bool)
    for lo, hi in ranges:
        lo, hi = max(lo, a[0]), min(hi, a[1])
        if hi > lo:
            hit[lo - a[0]:hi - a[0]] = True
    return int(hit.sum())


def _first_second(rd: RunData, phase: str) -> tuple[int, float, int, float] | None:
    """The phase's first recorded interval (ops, p50 ms) and the rest's pooled (ops, p50 ms)."""
    ph = rd.phases
    row = ph[(ph["phase"] == phase) & (ph["kind"] == "check")]
    if row.empty or len(row.iloc[0]["hists"]) < 2:
        return None
    r = row.iloc[0]
    order = np.argsort(r["iv_t"])
    hists, ops = [r["hists"][i] for i in order], [r["iv_ops"][i] for i in order]
    return ops[0], merged_summary(hists[:1]).p50_ms, int(sum(ops[1:])), merged_summary(hists[1:]).p50_ms


def rechecks(rd: RunData) -> list[str]:
    """Why a named mode's check can measure faster than the session mode's, from the records: which of its
    inputs an earlier phase had already checked, and its first second against the rest. 20261129-201802's
    at_least_as_fresh (SpiceDB) and fully_consistent (Permify) phases started at input 0 seconds after the
    session mode's had checked inputs 0-996 and 0-399: their first second ran at p50 0.74 and 1.01 ms, the
    rest at about 4 and 10 ms."""
    parts = []
    for b in dict.fromkeys(r.backend for r in rd.records if isinstance(r, PhaseStart)
                           and r.scenario == VIA_GROUP and r.consistency):
        spans = _input_spans(rd, b)
        for i, s in enumerate(spans):
            if not s["mode"] or "/c1/" not in s["phase"]:
                continue
            n = s["ranges"][0][1] - s["ranges"][0][0]
            # earlier phases only: a phase's own warm-up re-asks its first inputs in every mode alike
            seen = _overlap(s["ranges"][0], [r for e in spans[:i] for r in e["ranges"]])
            text = (f"{label(rd, b)} {s['mode']}: {seen:,} of {n:,} ops "
                    "re-checked inputs an earlier phase checked")
            if first := [e["t0"] for e in spans[:i] if _overlap(s["ranges"][0], e["ranges"])]:
                text += f" (the earliest starting {s['t0'] - min(first):,.0f} s before)"
            if (split := _first_second(rd, s["phase"])) is not None:
                text += (
                    f"; its first second {split[0]:,} ops at p50 {num(split[1])} ms, the other {split[2]:,} "
                    f"at p50 {num(split[3])} ms")
            parts.append(text)
    if not parts:
        return []
    return ["Which inputs each named mode's phase met, from the phases' input offsets and op counts (a check "
            "asked again can be answered from a cache the first asking filled):", "",
            *(f"- {p}." for p in parts)]


def stale_dimensions(rd: RunData) -> list[Dimension]:
    """Stale allows per 1,000 revocations (freshness.stale_allows) in each backend's own read mode, one
    dimension per writer count, most writers first (the decision summary's row), each figure's base beside it.
    Ranked by Wilson's 95% interval: measured, so it may ground a clear difference; 0 of 3 (0-562) is apart
    from none but a rate near 1,000. None without a write phase (frames.write_table)."""
    if write_table(rd).empty:
        return []
    t = stale_allows(rd)
    t = t[t["own"] & (t["revocations"] > 0)] if not t.empty else t
    out = []
    for c in sorted(set(t["writers"]), reverse=True) if not t.empty else ():
        figs = [_stale_figure(r) for _, r in t[t["writers"] == c].iterrows()]
        out.append(
            Dimension("Writes", f"Stale allows, own read mode, {worker_count(c).replace('worker', 'writer')}",
                      STALE_UNIT, False, figs, anchor("structural-writes"), key=f"stale_allows/{c}"))
    return out


def _stale_figure(r: pd.Series) -> Figure:
    base, writers = (f"{r['stale_allows']:,} of {r['revocations']:,}",
                     worker_count(r["writers"]).replace("worker", "writer"))
    mode = "" if r["mode"] == "—" else f"{r['mode']}, "
    return Figure(
        r["backend"], float(r["per_1k"]), n=int(r["revocations"]), bounds=(r["lo_1k"], r["hi_1k"]), base=base,
        detail=f"{mode}{writers}: {base} revocations, 95% {num(r['lo_1k'])}-{num(r['hi_1k'])}")


def section(rd: RunData, out_dir: Path) -> str:
    """The appendix's tables: stale allows per 1,000 revocations per mode and writer count, and each engine's
    modes."""
    st, fr = stale_allows(rd), freshness(rd)
    lines: list[str] = []
    if not st.empty:
        # the rate as num() prints it everywhere else (82.9, not the table's default 82.873)
        st = st.assign(
            backend_l=[label(rd, b) for b in st["backend"]], base=[base_text(r) for _, r in st.iterrows()],
            rate=[num(v) for v in st["per_1k"]],
            iv=[f"{num(a)}-{num(b)}" for a, b in zip(st["lo_1k"], st["hi_1k"], strict=True)])
        lines += [
            f"## {STALE_LABEL}", "",
            "Every structural write phase's revocations per read consistency and writer count (`"
            f"{REVOKE}` at {WRITERS} concurrent writers in each mode): a stale allow is a revocation whose "
            "first check, right after the revocation returned, still allowed; the interval is Wilson's 95%. "
            "Churn steps' revocations are not counted here: they ran at a scheduled rate beside the step's "
            "open-loop checks, another condition (the churn table gives them per step).", "",
            table(st,
                  {"backend_l": "Backend", "mode": "Read consistency", "writers": "Writers",
                   "kinds": "Write kinds", "base": "Base (stale of revocations)", "rate": STALE_LABEL,
                   "iv": "95% interval"})]
        lines += [c, ""] if (c := citation(rd, revocations(rd))) else []
    if not fr.empty:
        fr = fr.assign(
            backend_l=[label(rd, b) for b in fr["backend"]],
            p50=[_marked(v, few) for v, few in zip(fr["p50_ms"], fr["p50_too_few"], strict=True)],
            p95=[_marked(v, few) for v, few in zip(fr["p95_ms"], fr["too_few"], strict=True)],
            lag=[_marked(v, few) for v, few in zip(fr["lag_p95_ms"], fr["lag_too_few"], strict=True)])
        lines += [
            "## Freshness against latency", "",
            f"Each engine's `{VIA_GROUP}` check at 1 worker in each of its consistency modes, beside the "
            "staleness that mode allowed in this run's write phases: the visibility lag p95 after a write "
            "returned, of its worst write kind at its fewest writers (the figure the Findings rank), and its "
            "stale allows per 1,000 revocations at each writer count.", "",
            table(fr,
                  {"backend_l": "Engine", "mode": "Read consistency", "p50": "Check p50 (ms)",
                   "p95": "Check p95 (ms)", "lag": "Visibility p95, worst write kind (ms)",
                   "lag_writers": "Writers (lag)", "stale": STALE_LABEL})]
        lines += ["", *r] if (r := rechecks(rd)) else []
        if chart := freshness_chart.freshness_modes(rd, fr, charts.chart_dir(out_dir, rd.manifest["run_id"])):
            lines += ["", f"![via-group check p95 against visibility lag p95, per engine and mode]({chart})"]
    return "\n".join([*lines, ""]) if lines else ""


def _marked(v: float, too_few: bool) -> str:
    """A percentile cell, ⚠ after it when the ops behind it are under its floor (noise.min_ops)."""
    return f"{num(v)}{' ⚠' if too_few else ''}" if v == v else "—"
