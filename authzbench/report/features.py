"""What each measured model gives a user beyond the benchmark's checks (consistency tokens, a change stream,
wildcards, conditions, a schema change without a reload), as each system declares it: declared, not measured,
so a reviewer sees what a closure built by hand does not give them."""

from __future__ import annotations

from pathlib import Path

from authzbench.report.core.data import RunData
from authzbench.report.core.declared import claims
from authzbench.report.core.tables import label


def section(rd: RunData, out_dir: Path) -> str:
    measured = [b for b in rd.servers if claims(b)]
    if not measured:
        return ""
    features = [c.feature for c in claims(measured[0])]
    head = ["Backend", *(f[:1].upper() + f[1:] for f in features)]
    rows = [f"| {label(rd, b)} | " + " | ".join(_mark(c) for c in claims(b)) + " |" for b in measured]
    lines = ["## What each model gives beyond the checks (declared, not measured)", "",
             "As each system's folder declares it (`authzbench/systems/<name>/system.py`), not measured "
             "by this run: yes / no, ✓ where a test against the real server exercises the claim (named "
             "below).", "",
             "| " + " | ".join(head) + " |", "|" + "---|" * len(head), *rows, ""]
    lines += [f"- **{label(rd, b)}**: {_hows(claims(b))}." for b in measured]
    return "\n".join(lines) + "\n"


def _hows(cl: tuple) -> str:
    """Each claim's how, or the one reason once where every claim shares it (a model built by hand)."""
    if len({c.how for c in cl}) == 1 and not any(c.has or c.test for c in cl):
        return cl[0].how
    return "; ".join(f"{c.feature}: {c.how}" + (f" (✓ `{c.test}`)" if c.test else "") for c in cl)


def _mark(c) -> str:
    return ("yes" if c.has else "no") + (" ✓" if c.test else "")
