"""Obtain a backend's servers in one of three modes and hand back a Deployment.

The native recipe of each backend is named here (NATIVE), its compose services in compose.py (SERVICES).
What a mode needs of the backend's adapter (its endpoint from a URL or from the compose file) comes in as
`adapter`: provisioning never imports backends/ (authzbench/run/stack.py joins the two)."""

from __future__ import annotations

import importlib
import os
import shutil
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any, Protocol

from authzbench.core.errors import BackendUnavailable, UserError
from authzbench.provision.base import Deployment, StartContext

if TYPE_CHECKING:
    from authzbench.provision.compose import ComposeFile

MODES = ("native", "compose", "external")

# Backend -> its module in provision/native/, whose start(StartContext) -> Deployment starts its servers here.
# A backend not listed cannot run natively; its registry entry's why_not_native says why (a unit test keeps
# the two in agreement). Imported only when asked for: a recipe imports its server's driver.
NATIVE: dict[str, str] = {
    "reference": "inprocess", "postgres": "postgres", "spicedb-pg": "spicedb", "openfga": "openfga",
    "permify": "permify", "scylla": "cassandra", "clickhouse": "chdb", "elasticsearch": "elasticsearch",
    "mongo": "ferretdb",
}


class Adapter(Protocol):
    """What provisioning asks of a backend's adapter class (backends/base.Backend has both)."""

    def endpoint_from_url(self, url: str) -> dict[str, Any]: ...

    def endpoint_from_compose(self, c: ComposeFile) -> dict[str, Any]: ...


def native_recipe(name: str) -> ModuleType | None:
    """The module of provision/native/ that starts `name`'s servers, or None when none can here."""
    module = NATIVE.get(name)
    return None if module is None else importlib.import_module(f"{__package__}.native.{module}")


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


def provision(name: str, mode: str, run_dir: Path, options: dict[str, Any], adapter: Adapter,
              why_not_native: str = "") -> Deployment:
    """`name`'s servers in `mode`; `why_not_native` is the line to show when it has no native recipe."""
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
        raise BackendUnavailable(f"{name} cannot run natively: {why_not_native}")
    run_dir.mkdir(parents=True, exist_ok=True)
    return recipe.start(StartContext(run_dir=run_dir, options=options))
