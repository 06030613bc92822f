"""The systems: one folder each (authzbench/systems/<name>/), found by the loader below.

`systems()` imports every folder's `system.py` (declarations only: no driver is imported) and returns the
declared systems by name, in their declared order; `system(name)` is one of them or one line naming the valid
ones; `load("module:attribute")` imports what a declaration names, when it is used.
"""

from __future__ import annotations

import importlib
import pkgutil
from functools import cache
from pathlib import Path

from authzbench.core.errors import UserError
from authzbench.systems.contract import System

HERE = Path(__file__).parent


def folders() -> list[str]:
    """The system folders, in name order (a folder is a package holding a system.py)."""
    return sorted(m.name for m in pkgutil.iter_modules([str(HERE)])
                  if m.ispkg and (HERE / m.name / "system.py").exists())


@cache
def systems() -> dict[str, System]:
    """Every declared system by its backend name (a folder may declare several: `SYSTEMS`, or one:
    `SYSTEM`)."""
    found: list[System] = []
    for folder in folders():
        mod = importlib.import_module(f"authzbench.systems.{folder}.system")
        found.extend(getattr(mod, "SYSTEMS", None) or (mod.SYSTEM,))
    return {s.name: s for s in sorted(found, key=lambda s: (s.order, s.name))}


def system(name: str) -> System:
    try:
        return systems()[name]
    except KeyError:
        raise UserError(f"unknown backend {name!r}; valid: {', '.join(systems())}") from None


def load(path: str):
    """What a declaration's "module:attribute" string names, imported now (a missing driver: one line)."""
    module, _, attr = path.partition(":")
    try:
        mod = importlib.import_module(module)
    except ModuleNotFoundError as e:
        raise UserError(
            f"{path}: cannot import {e.name!r} ({e}); is the project installed with its extras?") from e
    return getattr(mod, attr)
