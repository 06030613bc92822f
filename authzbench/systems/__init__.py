"""The systems: one folder each (authzbench/systems/<name>/), found by the loader below.

`systems()` imports every folder's `system.py` (declarations only: no driver is imported) and returns the
declared systems by name, in their declared order; `system(name)` is one of them or one line naming the valid
ones; `load("module:attribute")` imports what a declaration names, when it is used.

A backend may be named at a version, `NAME@vX.Y.Z` (a label: two versions of one engine run side by side as
two backends); `system(label)` and `declared(label)` are NAME's declaration, `split(label)` the two parts.
"""

from __future__ import annotations

import importlib
import pkgutil
import re
from functools import cache
from pathlib import Path

from authzbench.core.errors import UserError
from authzbench.systems.contract import System

HERE = Path(__file__).parent
VERSION = re.compile(r"v\d+\.\d+\.\d+")  # what NAME@VERSION accepts: a release tag, vX.Y.Z


def split(label: str) -> tuple[str, str]:
    """'spicedb-pg@v1.57.1' -> ('spicedb-pg', 'v1.57.1'); a plain name -> (name, '')."""
    name, _, version = label.partition("@")
    return name, version


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
    """The declaration of `name` (a label NAME@VERSION: NAME's), or one line naming the valid ones."""
    try:
        return systems()[split(name)[0]]
    except KeyError:
        raise UserError(f"unknown backend {split(name)[0]!r}; valid: {', '.join(systems())}") from None


def declared(name: str) -> System | None:
    """The declaration of `name` (a label: its system's), None for a name no system declares."""
    return systems().get(split(name)[0])


def load(path: str):
    """What a declaration's "module:attribute" string names, imported now (a missing driver: one line)."""
    module, _, attr = path.partition(":")
    try:
        mod = importlib.import_module(module)
    except ModuleNotFoundError as e:
        raise UserError(
            f"{path}: cannot import {e.name!r} ({e}); is the project installed with its extras?") from e
    return getattr(mod, attr)
