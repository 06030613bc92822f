"""Obtain a backend's servers in one of three modes and hand back a Deployment.

A backend's native recipe, its compose services and the tools its adapter runs beside its server are its
declaration's (systems/<name>/system.py: `native`, `services`, `tools`). What a mode needs of the backend's
adapter (its endpoint from a URL or from the compose file) comes in as `adapter`: provisioning never imports
an adapter (the run layer, run/servers.py, hands it over)."""

from __future__ import annotations

import importlib
import os
import shutil
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any, Protocol

from authzbench.core.errors import BackendUnavailable, UserError
from authzbench.provision.base import Deployment, StartContext
from authzbench.systems import load, split, system

if TYPE_CHECKING:
    from authzbench.provision.compose import ComposeFile

MODES = ("native", "compose", "external")


class Adapter(Protocol):
    """What provisioning asks of a backend's adapter class (backends/base.Backend has both)."""

    def endpoint_from_url(self, url: str) -> dict[str, Any]: ...

    def endpoint_from_compose(self, c: ComposeFile) -> dict[str, Any]: ...


def runs_natively(name: str) -> bool:
    """A native recipe exists for it (whether it can build here is the recipe's `unavailable`'s question)."""
    return bool(system(name).native)


def native_recipe(name: str) -> ModuleType | None:
    """The recipe module that starts `name`'s servers here, or None when it has none."""
    module = system(name).native
    return importlib.import_module(module) if module else None


def default_mode() -> str:
    """native where no Docker engine answers (these machines), compose where one does. An engine
    authzbench started itself (provision/engine.py, on its own socket) does not count: it is for
    --provision compose asked for by name."""
    if os.environ.get("AUTHZBENCH_PROVISION"):
        return os.environ["AUTHZBENCH_PROVISION"]
    from authzbench.provision.engine import USER_SOCKET, answers

    return "compose" if shutil.which("docker") and USER_SOCKET.exists() and answers(USER_SOCKET) else "native"


def external_url_var(name: str) -> str:
    return "AUTHZBENCH_" + name.upper().replace("-", "_") + "_URL"


def provision(name: str, mode: str, run_dir: Path, options: dict[str, Any], adapter: Adapter) -> Deployment:
    """`name`'s servers in `mode`, with the tools its adapter runs beside them (its declaration's `tools`)
    added to an endpoint that does not name them already."""
    dep = _obtain(name, mode, run_dir, options, adapter)
    for key, value in (load(system(name).tools)() if system(name).tools else {}).items():
        dep.endpoint.setdefault(key, value)
    return dep


def _obtain(name: str, mode: str, run_dir: Path, options: dict[str, Any], adapter: Adapter) -> Deployment:
    if mode not in MODES:
        raise UserError(f"unknown provision mode {mode!r}; valid: {', '.join(MODES)}")
    if mode == "external":
        var = external_url_var(name)
        url = options.get("url") or os.environ.get(var)
        if not url:
            raise UserError(f"--provision external needs {var} (a DSN or URL of the running server)")
        return Deployment(name, "external", adapter.endpoint_from_url(url))
    if mode == "compose":
        from authzbench.provision.compose import compose_up

        return compose_up(name, adapter.endpoint_from_compose)
    recipe = native_recipe(name)
    if recipe is None:
        raise BackendUnavailable(f"{name} cannot run natively: {system(name).why_not_native}")
    run_dir.mkdir(parents=True, exist_ok=True)
    version = split(name)[1]  # NAME@VERSION: the recipe starts that release's build (its `versioned`)
    return recipe.start(StartContext(run_dir=run_dir, options={**options, **({"version": version} if version
                                                                            else {})}))
