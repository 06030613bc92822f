"""A backend's adapter class, found through its system's declaration (authzbench/systems/<name>/system.py)
and imported lazily, so a missing driver disables only its backend.

What the harness knows of a backend without importing it (its models, drivers, pip extra, whether it runs in
process) is its declaration: `entry(name)` is that System. How its servers are started is provisioning's
(provision/manager.py reads the same declaration); run/servers.py hands the adapter to provisioning, and
neither package imports the other. docs/ADDING-A-BACKEND.md walks through a new backend.
"""

from __future__ import annotations

from importlib import metadata

from authzbench.core.errors import BackendUnavailable, UserError
from authzbench.systems import load, system, systems
from authzbench.systems.contract import System

load_symbol = load  # "module:attribute" -> the object, one line when its module cannot be imported


def entry(name: str) -> System:
    """`name`'s declaration, or one line naming the valid backends."""
    return system(name)


def missing_driver(name: str) -> str | None:
    """One line naming the extra to install when a driver of `name` is not installed, else None."""
    e = entry(name)
    for dist in e.drivers:
        try:
            metadata.version(dist)
        except metadata.PackageNotFoundError:
            return f"driver {dist} is not installed: pip install 'authzbench[{e.extra or name}]'"
    return None


def implementation(name: str) -> str:
    """The adapter's "module:Class", or one clear line when the backend has none yet or lacks its driver."""
    e = entry(name)
    if not e.adapter:
        raise UserError(f"{name}: {e.why_not_native}")
    if (why := missing_driver(name)) is not None:
        raise BackendUnavailable(why)
    return e.adapter


def backend_class(name: str):
    return load_symbol(implementation(name))


def extras() -> dict[str, set[str]]:
    """pip extra -> the driver distributions it must install (what pyproject.toml declares)."""
    out: dict[str, set[str]] = {}
    for e in systems().values():
        if e.extra:
            out.setdefault(e.extra, set()).update(e.drivers)
    return out
