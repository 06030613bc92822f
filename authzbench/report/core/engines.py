"""The Zanzibar engines' settings as the run recorded them (provision/tiers.py): which tier the engines'
figures come from, and per engine its answer cache, freshness window, datastore pool and the read
consistency each phase used (the servers table's columns)."""

from __future__ import annotations

from typing import Any

from authzbench.report.core.data import RunData

NOT_RECORDED = "not recorded"


def settings(rd: RunData, backend: str) -> dict[str, Any]:
    """What the backend's deployment recorded about its tier; {} for non-engines and older runs."""
    return (getattr(rd.servers.get(backend), "endpoint", None) or {}).get("engine_settings") or {}


def _engine_settings(rd: RunData) -> list[tuple[str, dict[str, Any]]]:
    return [(b, s) for b in rd.servers if (s := settings(rd, b))]


def engine_tier(rd: RunData) -> str:
    """The tier the run's engine figures come from, e.g. "cached tier (5 s freshness window)" or
    "strict tier"; "" when no engine with recorded settings ran."""
    recorded = _engine_settings(rd)
    if not recorded:
        return ""
    tiers = sorted({str(s.get("tier")) for _, s in recorded})
    if len(tiers) > 1:  # servers kept from another run: say so rather than pick one
        return "mixed tiers (" + ", ".join(tiers) + ")"
    if tiers[0] != "cached":
        return f"{tiers[0]} tier"
    return f"cached tier ({_windows(recorded)})"


def _windows(recorded: list[tuple[str, dict[str, Any]]]) -> str:
    """Each engine's freshness window from the settings its server recorded, the servers table's source too:
    "5 s freshness window" when all share one, else per window its engines (Permify has none: its cache is
    keyed by snapshot, so claiming 5 s for every engine contradicted its row)."""
    by: dict[str, list[str]] = {}
    for b, s in recorded:
        w = s.get("freshness_s")
        by.setdefault(f"{float(w):g} s freshness window" if w else "no time window", []).append(b)
    if len(by) == 1:
        return next(iter(by))
    return "; ".join(f"{w}: {', '.join(bs)}" for w, bs in by.items())


def phase_consistency(rd: RunData, backend: str) -> str:
    """The read consistency the backend's phases used: the session mode for phases that named none, then
    the modes the write scenarios were re-run under."""
    session = rd.info(backend).get("consistency", "")
    ph = rd.phases
    modes: list[str] = []
    if not ph.empty and "consistency" in ph:
        modes = [m for m in dict.fromkeys(ph.loc[ph["backend"] == backend, "consistency"].fillna("")) if m]
    parts = [f"{session} (measured phases)"] if session else []
    if modes:
        parts.append("write scenarios also at " + ", ".join(modes))
    return "; ".join(parts) or "—"


def columns(rd: RunData, backend: str) -> dict[str, str]:
    """The servers table's tier columns for one backend ("—" for backends that have no such setting)."""
    s = settings(rd, backend)
    engine = bool(s) or bool(rd.info(backend).get("consistency"))
    if not s:
        blank = NOT_RECORDED if engine else "—"
        return {"cache": blank, "freshness": blank, "pool": blank,
                "consistency": phase_consistency(rd, backend) if engine else "—"}
    return {"cache": str(s.get("cache", NOT_RECORDED)), "freshness": str(s.get("freshness", NOT_RECORDED)),
            "pool": str(s.get("pool", NOT_RECORDED)), "consistency": phase_consistency(rd, backend)}
