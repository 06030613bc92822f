"""What the report states about one system, read from its declaration (authzbench/systems/<name>/system.py),
so that no topic names a system: the upstream reports of its fresh-mode stale reads and whether
tools/newenemy_repro.py reproduces them, the engine titles older runs recorded for a stand-in, and what its
server CPU counts."""

from __future__ import annotations

from authzbench.systems import declared, systems


def stale_reports(backend: str) -> tuple[str, ...]:
    """The upstream reports of the backend's fresh-mode reads missing a committed write (() = none found)."""
    s = declared(backend)
    return s.stale_reports if s is not None else ()


def stale_reproduced(backend: str) -> bool:
    s = declared(backend)
    return s is not None and s.stale_reproduced


def repro_api() -> str:
    """The product whose API tools/newenemy_repro.py speaks: the first that declares it reproduces there."""
    return next(s.aliases[0] for s in systems().values() if s.stale_reproduced)


def legacy_stand_ins() -> dict[str, str]:
    """The engine a run recorded before the server record named its product -> the product it stands in
    for."""
    return {t: s.aliases[0] for s in systems().values() for t in s.legacy_titles}


def cpu_example() -> str:
    """"for PRODUCT: what its server CPU counts", of the first system whose server CPU counts more than it."""
    s = next(s for s in systems().values() if s.cpu_counts)
    return f"for {s.aliases[0]}: {s.cpu_counts}"


def claims(backend: str) -> tuple:
    """What the backend's model gives a user beyond the checks, as its system declares it (() = none
    declared)."""
    s = declared(backend)
    return s.claims if s is not None else ()
