"""The stale-allow quantity as every topic writes it (the writes table, the churn steps, the freshness
tables, the decision summary): its unit and label, its cell with the base beside it, the modes whose stale
allow is a bug rather than a window, and the sentence citing where one was reproduced and reported."""

from __future__ import annotations

from authzbench.report.core.data import RunData
from authzbench.report.core.tables import label, num

# The one stale-allow quantity's unit and label, wherever it is shown; a cell's [k of n] is its base.
STALE_UNIT = "per 1,000 revocations"
STALE_LABEL = f"Stale allows {STALE_UNIT}"
STALE_COLUMN = f"{STALE_LABEL} [stale of revocations]"


# The modes that promise a read sees every committed write: a stale allow under one is a bug, not a window.
STRICT_PREFIXES = ("fully_consistent", "HIGHER")
# Upstream reports of fresh-mode reads missing a committed write, found for each engine (none for Permify): the
# three tools/newenemy_repro.py's docstring names for SpiceDB on PostgreSQL.
UPSTREAM = {"spicedb": ["https://github.com/authzed/spicedb/issues/1215",
                        "https://github.com/authzed/spicedb/issues/1130",
                        "https://github.com/authzed/spicedb/issues/3260"],
            "openfga": ["https://github.com/openfga/openfga/pull/2843"]}
# The engines tools/newenemy_repro.py reproduces on: it speaks SpiceDB's API only.
REPRODUCED = ("spicedb",)


def rate_cell(k: int, n: int) -> str:
    """A table cell of the quantity, its base beside it: "70 [14 of 200]"; "—" without a revocation."""
    return f"{num(1000 * k / n)} [{k:,} of {n:,}]" if n else "—"


def strict_stale_note(rd: RunData, bad: list[tuple[str, str]]) -> str:
    """One sentence for the (backend, mode) pairs whose fully consistent mode allowed after a revocation: which
    of them tools/newenemy_repro.py reproduces outside the suite (SpiceDB's only: 20261129-201802 claimed it
    for Permify too) and the upstream reports found for each engine (the same list in the report and the
    appendix, which cited two and three)."""
    names = ", ".join(f"{label(rd, b)} {m}" for b, m in bad)
    backends = list(dict.fromkeys(b for b, _ in bad))
    done = [label(rd, b) for b in backends if b.startswith(REPRODUCED)]
    not_done = [label(rd, b) for b in backends if not b.startswith(REPRODUCED)]
    parts = [f"{', '.join(done)}: reproduced outside the suite with SpiceDB's public API alone by "
             "`tools/newenemy_repro.py`"] if done else []
    if not_done:
        parts.append(f"{', '.join(not_done)}: not reproduced outside the suite (`tools/newenemy_repro.py` speaks "
                     "SpiceDB's API only)")
    urls = [u for b in backends for k, us in UPSTREAM.items() if b.startswith(k) for u in us]
    parts.append(f"upstream reports: {', '.join(urls)}" if urls else "no upstream report found")
    if none := [label(rd, b) for b in backends if not any(b.startswith(k) for k in UPSTREAM)]:
        parts[-1] += f" (none for {', '.join(none)})"
    return f"Stale allows under a fully consistent mode ({names}): " + "; ".join(parts) + "."
