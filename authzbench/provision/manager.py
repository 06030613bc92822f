"""Obtain a backend's servers in one of three modes and hand back a Deployment."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

from authzbench.backends.registry import backend_class, entry, implementation, load_symbol
from authzbench.errors import BackendUnavailable, UserError
from authzbench.provision.base import Deployment, StartContext

MODES = ("native", "compose", "external")


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


def provision(name: str, mode: str, run_dir: Path, options: dict[str, Any] | None = None) -> Deployment:
    if mode not in MODES:
        raise UserError(f"unknown provision mode {mode!r}; valid: {', '.join(MODES)}")
    e = entry(name)
    implementation(name)  # a backend without an adapter fails here, before any server is started
    options = options or {}
    if mode == "external":
        var = external_url_var(name)
        url = options.get("url") or os.environ.get(var)
        if not url:
            raise UserError(f"--provision external needs {var} (a DSN or URL of the running server)")
        return Deployment(name, "external", backend_class(name).endpoint_from_url(url))
    if mode == "compose":
        from authzbench.provision.compose import compose_up

        return compose_up(name, options)
    if e.native is None:
        raise BackendUnavailable(f"{name} cannot run natively: {e.why_not_native}")
    start = load_symbol(e.native)
    run_dir.mkdir(parents=True, exist_ok=True)
    return start(StartContext(run_dir=run_dir, options=options))
