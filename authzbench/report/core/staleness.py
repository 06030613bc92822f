"""The stale-allow quantity as every topic writes it (the writes table, the churn steps, the freshness
tables, the decision summary): its unit and label, its cell with the base beside it, the modes whose stale
allow is a bug rather than a window, and the sentence citing where one was reproduced and reported."""

from __future__ import annotations

from authzbench.report.core.data import RunData
from authzbench.report.core.declared import repro_api, stale_reports, stale_reproduced
from authzbench.report.core.tables import label, num

# The one stale-allow quantity's unit and label, wherever it is shown; a cell's [k of n] is its base.
STALE_UNIT = "per 1,000 revocations"
STALE_LABEL = f"Stale allows {STALE_UNIT}"
STALE_COLUMN = f"{STALE_LABEL} [stale of revocations]"


# The modes that promise a read sees every committed write: a stale allow under one is a bug, not a window.
STRICT_PREFIXES = ("fully_consistent", "HIGHER")


def rate_cell(k: int, n: int) -> str:
    """A table cell of the quantity, its base beside it: "70 [14 of 200]"; "—" without a revocation."""
    return f"{num(1000 * k / n)} [{k:,} of {n:,}]" if n else "—"


def strict_stale_note(rd: RunData, bad: list[tuple[str, str]]) -> str:
    """One sentence for the (backend, mode) pairs whose fully consistent mode allowed after a revocation:
    which of them tools/newenemy_repro.py reproduces outside the suite (only the systems declaring it:
    20261129-201802 claimed it for Permify too) and the upstream reports each engine declares (the same list
    in the report and the appendix, which cited two and three)."""
    names = ", ".join(f"{label(rd, b)} {m}" for b, m in bad)
    backends = list(dict.fromkeys(b for b, _ in bad))
    done = [label(rd, b) for b in backends if stale_reproduced(b)]
    not_done = [label(rd, b) for b in backends if not stale_reproduced(b)]
    parts = [f"{', '.join(done)}: reproduced outside the suite with {repro_api()}'s public API alone by "
             "`tools/newenemy_repro.py`"] if done else []
    if not_done:
        parts.append(
            f"{', '.join(not_done)}: not reproduced outside the suite (`tools/newenemy_repro.py` speaks "
            f"{repro_api()}'s API only)")
    urls = list(dict.fromkeys(u for b in backends for u in stale_reports(b)))  # two releases: one list
    parts.append(f"upstream reports: {', '.join(urls)}" if urls else "no upstream report found")
    if none := [label(rd, b) for b in backends if not stale_reports(b)]:
        parts[-1] += f" (none for {', '.join(none)})"
    return f"Stale allows under a fully consistent mode ({names}): " + "; ".join(parts) + "."
