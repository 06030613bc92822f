"""Revocations under concurrency and freshness against latency: per backend and consistency mode, how many
checks still allowed right after a revocation with 8 writers at once (per 1,000, with a Wilson 95% interval),
and per engine what each of its modes costs in via-group check latency against the staleness it allowed as
measured (visibility lag, stale allows) in the same run."""

from __future__ import annotations

import math

import pandas as pd

from authzbench.report.data import RunData, merged_summary
from authzbench.report.figures import cell
from authzbench.report.frames import session_mode
from authzbench.report.noise import Z95, min_ops
from authzbench.report.tables import label, num
from authzbench.scenarios.catalog import SCENARIOS

REVOKE, VIA_GROUP, WRITERS = "revoke_then_check", "check_view_via_group_member", 8
# The modes that promise a read sees every committed write: a stale allow under one is a bug, not a window.
STRICT_PREFIXES = ("fully_consistent", "HIGHER")
# Upstream reports of fresh-mode reads missing a committed write, found for each engine (none for Permify).
UPSTREAM = {"spicedb": ["https://github.com/authzed/spicedb/issues/1215",
                        "https://github.com/authzed/spicedb/issues/3260"],
            "openfga": ["https://github.com/openfga/openfga/pull/2843"]}


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


def revocations(rd: RunData) -> pd.DataFrame:
    """One row per (backend, mode) of revoke_then_check at 8 writers: revocations, stale allows, per 1,000."""
    ph = rd.phases
    if ph.empty:
        return pd.DataFrame()
    sub = ph[(ph["scenario"] == REVOKE) & (ph["concurrency"] == WRITERS) & (ph["kind"] == "write")]
    rows = []
    for (b, mode), g in sub.groupby(["backend", "consistency"], sort=False):
        # runs before the count was recorded: every op of the scenario is one revocation
        n = int(sum(e.get("revocations", ops) for e, ops in zip(g["extra"], g["ops"], strict=True)))
        k = int(sum(e.get("stale_allows", 0) for e in g["extra"]))
        lo, hi = wilson(k, n)
        name = mode_name(rd, b, mode)
        rows.append({"backend": b, "mode": name, "strict": name.startswith(STRICT_PREFIXES), "revocations": n,
                     "stale_allows": k, "per_1k": 1000 * k / n if n else math.nan, "lo_1k": 1000 * lo,
                     "hi_1k": 1000 * hi})
    return pd.DataFrame(rows).sort_values(["backend", "mode"]).reset_index(drop=True) if rows else pd.DataFrame()


def per_1k_text(r) -> str:
    """"9 of 800 (11 per 1,000, 95% 5.9-21)"."""
    return (f"{r['stale_allows']:,} of {r['revocations']:,} ({num(r['per_1k'])} per 1,000, 95% "
            f"{num(r['lo_1k'])}-{num(r['hi_1k'])})")


def citation(rd: RunData, df: pd.DataFrame) -> str:
    """Where a fully consistent mode still allowed after a revocation: the reproduction and upstream reports."""
    bad = df[df["strict"] & (df["stale_allows"] > 0)] if not df.empty else df
    if bad.empty:
        return ""
    names = ", ".join(f"{label(rd, b)} {m}" for b, m in zip(bad["backend"], bad["mode"], strict=True))
    urls = [u for b in dict.fromkeys(bad["backend"]) for k, us in UPSTREAM.items() if b.startswith(k) for u in us]
    upstream = f"; upstream reports: {', '.join(urls)}" if urls else ""
    return (f"Stale allows under a fully consistent mode ({names}): reproduced outside the suite with the "
            f"public API alone by `tools/newenemy_repro.py`{upstream}.")


def not_run(rd: RunData) -> list[str]:
    """The revocation phases at 8 writers the planner left out, a sentence each with why, so a backend missing
    from the stale-allow figures reads as not measured, not as clean or failed."""
    out = []
    for r in rd.skipped:
        if r.get("scenario") == REVOKE and r.get("concurrency") == WRITERS:
            mode = str(r["phase"]).split("/")[1].partition("@")[2]
            name = f"{label(rd, r['backend'])}{' ' + mode if mode else ''}"
            out.append(f"Not run at {WRITERS} writers, {name}: {r['reason']}.")
    return out


def summary_lines(rd: RunData) -> list[str]:
    df, missing = revocations(rd), not_run(rd)
    lines = [" ".join(missing)] if missing else []
    if df.empty:
        return lines
    df = df.sort_values(["per_1k", "hi_1k", "backend"])
    parts = [f"{label(rd, r['backend'])} {mode_prefix(r['mode'])}{per_1k_text(r)}" for _, r in df.iterrows()]
    lines = [f"**Stale allows after a revocation, {WRITERS} concurrent writers** (checks that still allowed "
             "right after the revocation returned, per mode; fewest first): " + "; ".join(parts) + ".", *lines]
    return lines + ([c] if (c := citation(rd, df)) else [])


def _writes_of(rd: RunData, b: str, mode: str) -> pd.DataFrame:
    ph = rd.phases
    names = [n for n, s in SCENARIOS.items() if s.op == "write"]
    return ph[(ph["backend"] == b) & ph["scenario"].isin(names) & (ph["consistency"] == mode)]


def freshness(rd: RunData) -> pd.DataFrame:
    """Per engine (a backend whose via-group check ran in a named mode) and mode: check p50 / p95 at 1 worker
    against the visibility lag p95 and stale allows of that mode's write phases."""
    ph = rd.phases
    if ph.empty:
        return pd.DataFrame()
    via = ph[(ph["scenario"] == VIA_GROUP) & (ph["concurrency"] == 1)]
    rows = []
    for b in [b for b, g in via.groupby("backend", sort=False) if (g["consistency"] != "").any()]:
        for mode in sorted(set(via[via["backend"] == b]["consistency"])):
            p50, p95 = (cell(rd, b, VIA_GROUP, 1, m, consistency=mode) for m in ("p50_ms", "p95_ms"))
            w = _writes_of(rd, b, mode)
            vis = [h for hs in w[w["kind"] == "visibility"]["hists"] for h in hs]
            rows.append({"backend": b, "mode": mode_name(rd, b, mode),
                         "p50_ms": p50.value if p50 else math.nan, "p95_ms": p95.value if p95 else math.nan,
                         "too_few": bool(p95 and p95.too_few), "p50_too_few": bool(p50 and p50.too_few),
                         "lag_p95_ms": merged_summary(vis).p95_ms if vis else math.nan,
                         # the lag pools the mode's write phases: ⚠ when the pool is under a p95's op floor
                         "lag_too_few": int(w[w["kind"] == "visibility"]["ops"].sum()) < min_ops(95.0),
                         "stale_allows": int(sum(e.get("stale_allows", 0) for e in w[w["kind"] == "write"]["extra"])),
                         "writes": int(w[w["kind"] == "write"]["ops"].sum())})
    return pd.DataFrame(rows)
