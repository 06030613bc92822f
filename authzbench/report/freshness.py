"""Stale allows and freshness against latency: per backend, consistency mode and writer count, how many
revocations' first check still allowed (per 1,000 revocations, with a Wilson 95% interval: stale_allows),
and per engine what each of its modes costs in via-group check latency against the staleness it allowed as
measured (visibility lag, stale allows) in the same run."""

from __future__ import annotations

import math

import pandas as pd

from authzbench.report.data import RunData
from authzbench.report.figures import cell
from authzbench.report.frames import revocations_of, session_mode, write_table
from authzbench.report.noise import Z95
from authzbench.report.tables import label, num
from authzbench.scenarios.catalog import SCENARIOS

REVOKE, VIA_GROUP, WRITERS = "revoke_then_check", "check_view_via_group_member", 8
# The one stale-allow quantity's unit and label, wherever it is shown; a cell's [k of n] is its base.
STALE_UNIT = "per 1,000 revocations"
STALE_LABEL = f"Stale allows {STALE_UNIT}"
STALE_COLUMN = f"{STALE_LABEL} [stale of revocations]"
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


# The write scenarios whose ops revoke (each grants, then revokes; revoke_then_check revokes a grant made
# untimed first). A churn step's revocations are not among them: they run at a scheduled rate beside the step's
# open-loop checks, another condition, shown per step in the churn table under their own label.
WRITE_KINDS = tuple(n for n, s in SCENARIOS.items() if s.op == "write")


def own_mode(rd: RunData, b: str) -> str:
    """The backend's session read consistency as its server record names it ("" for a backend without modes)."""
    return rd.servers.get(b, {}).get("info", {}).get("consistency", "")


def stale_allows(rd: RunData) -> pd.DataFrame:
    """The one stale-allow quantity: per backend, read consistency and writer count, the stale allows among the
    revocations of every structural write phase (a stale allow: a revocation whose first check still allowed),
    per 1,000 with Wilson's 95% interval. A phase naming the backend's own mode joins its session phases (one
    mode, shown "x (session)"); `own` marks it."""
    ph = rd.phases
    sub = ph[ph["scenario"].isin(WRITE_KINDS) & (ph["kind"] == "write")] if not ph.empty else ph
    if sub.empty:
        return pd.DataFrame()
    sub = sub.assign(key=[c or own_mode(rd, b) for b, c in zip(sub["backend"], sub["consistency"], strict=True)])
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


def rate_cell(k: int, n: int) -> str:
    """A table cell of the quantity, its base beside it: "70 [14 of 200]"; "—" without a revocation."""
    return f"{num(1000 * k / n)} [{k:,} of {n:,}]" if n else "—"


def base_text(r) -> str:
    """"14 of 200 revocations": the count a rate per 1,000 rests on."""
    return f"{r['stale_allows']:,} of {r['revocations']:,} revocations"


def stale_text(r) -> str:
    """"1 writer: 96 of 96 revocations, 1,000 per 1,000 (95% 962-1,000)"."""
    return (f"{r['writers']} writer{'s' if r['writers'] != 1 else ''}: {base_text(r)}, {num(r['per_1k'])} per "
            f"1,000 (95% {num(r['lo_1k'])}-{num(r['hi_1k'])})")


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
    lines = [f"**{STALE_LABEL}, {WRITERS} concurrent writers, per mode** (a stale allow: a revocation whose "
             "first check, right after it returned, still allowed; fewest first): " + "; ".join(parts) + ".", *lines]
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
    figure the Findings rank for the session mode) and its stale allows per 1,000 revocations per writer count."""
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
                         "too_few": bool(p95 and p95.too_few),
                         "lag_p95_ms": float(first["vis_p95_ms"].max()) if not first.empty else math.nan,
                         "lag_writers": int(first["concurrency"].min()) if not first.empty else 0,
                         "stale": "; ".join(stale_text(r) for _, r in st.iterrows()) or "—"})
    return pd.DataFrame(rows)
