"""A backend's adapter (backends/registry.py) and its servers' recipes (provision/) joined: the one place that
knows both, so neither package imports the other (tests/unit/test_imports.py holds them apart).

provision/ is handed what it needs of the adapter (its endpoint from a URL or the compose file); an endpoint
gets from here the tools the adapter runs that provisioning builds (Scylla's SSTable helper)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from authzbench.backends.registry import backend_class, entry, implementation, load_symbol
from authzbench.core.errors import UserError
from authzbench.provision import compose, manager
from authzbench.provision.base import Deployment
from authzbench.systems.scylla import native as cassandra

# Tools an adapter runs beside its server, by backend: added to an endpoint that does not name them already
# (a native recipe names the built tool; compose and external endpoints get one that builds it when first run).
TOOLS: dict[str, Callable[[], dict[str, Any]]] = {"scylla": lambda: {"bulk_cmd": cassandra.helper_command()}}


def provision(name: str, mode: str, run_dir: Path, options: dict[str, Any] | None = None) -> Deployment:
    """`name`'s servers in `mode` (provision/manager.py), its adapter checked first: a backend without one,
    or without its driver, fails here before any server is started."""
    implementation(name)
    dep = manager.provision(name, mode, run_dir, options or {}, backend_class(name), entry(name).why_not_native)
    for key, value in (TOOLS[name]() if name in TOOLS else {}).items():
        dep.endpoint.setdefault(key, value)
    return dep


def compose_endpoint(name: str, spec: dict | None = None) -> dict[str, Any]:
    """`name`'s endpoint as read from the compose file (no engine needed)."""
    return compose.endpoint(name, _reader(name), spec)


def _reader(name: str) -> compose.Reader | None:
    return backend_class(name).endpoint_from_compose if entry(name).impl else None


def compose_services(name: str) -> tuple[str, ...]:
    return compose.SERVICES.get(name, ())


def runs_natively(name: str) -> bool:
    """A native recipe exists for it (whether it can build here is why_not_native_here's question)."""
    return name in manager.NATIVE


def why_not_native_here(name: str) -> str | None:
    """One line when `name` cannot run natively on this machine (no recipe, no adapter or driver, or its recipe
    says it cannot build here, as Permify without a module or a source to build from), else None."""
    if not runs_natively(name):
        return entry(name).why_not_native
    try:
        load_symbol(implementation(name))  # no adapter or a missing driver: one line naming the extra
        recipe = manager.native_recipe(name)
    except (UserError, AttributeError) as ex:
        return str(ex)
    return getattr(recipe, "unavailable", lambda: None)()
