"""One backend's servers for the length of a command (Session), and their saved state between commands:
servers started by `prepare` / `up` keep running, their PIDs and endpoint in .authzbench/servers/NAME.json,
so `bench` reuses them and `down` stops them. Also what the monitor watches, and --pin's core split.

This is where a backend's adapter (backends/registry.py) meets its recipes (provision/manager.py):
provisioning is handed what it needs of the adapter (its endpoint from a URL or the compose file), and neither
package imports the other (tests/unit/test_imports.py holds them apart)."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import time
from pathlib import Path
from typing import Any

import psutil

from authzbench.backends.base import Backend
from authzbench.backends.registry import backend_class, entry, implementation, load_symbol
from authzbench.config import ServerChoice, own_options
from authzbench.core.console import say
from authzbench.core.errors import UserError
from authzbench.core.metrics import Monitor
from authzbench.provision import manager
from authzbench.provision.base import Deployment, pid_alive, stop_pid
from authzbench.workloads.spec import BackendFactory


def provision(name: str, mode: str, run_dir: Path, options: dict[str, Any] | None = None) -> Deployment:
    """`name`'s servers in `mode` (provision/manager.py), its adapter checked first: a backend without one,
    or without its driver, fails here before any server is started."""
    implementation(name)
    return manager.provision(name, mode, run_dir, options or {}, backend_class(name))


def compose_endpoint(name: str, spec: dict | None = None) -> dict[str, Any]:
    """`name`'s endpoint as read from the compose file (no engine needed), through its adapter's reader."""
    from authzbench.provision import compose

    return compose.endpoint(
        name, backend_class(name).endpoint_from_compose if entry(name).adapter else None, spec)


def why_not_native_here(name: str) -> str | None:
    """One line when `name` cannot run natively on this machine (no recipe, no adapter or driver, or its
    recipe says it cannot build here, as a Go engine with neither its module nor a source to build from), else
    None."""
    if not manager.runs_natively(name):
        return entry(name).why_not_native
    try:
        load_symbol(implementation(name))  # no adapter or a missing driver: one line naming the extra
        recipe = manager.native_recipe(name)
    except (UserError, AttributeError) as ex:
        return str(ex)
    return getattr(recipe, "unavailable", lambda: None)()


# server state between commands ----------------------------------------------------------------

def state_dir() -> Path:
    return Path(os.environ.get("AUTHZBENCH_STATE", ".authzbench"))


def state_file(name: str) -> Path:
    return state_dir() / "servers" / f"{name}.json"


def _save_state(name: str, dep: Deployment, run_dir: Path) -> None:
    p = state_file(name)
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(
        json.dumps(
            {"mode": dep.mode, "endpoint": dep.endpoint, "pids": dep.pids, "containers": dep.containers,
             "notes": dep.notes, "run_dir": str(run_dir)},
            indent=2))


def _load_state(name: str) -> dict | None:
    p = state_file(name)
    if not p.is_file():
        return None
    st = json.loads(p.read_text())
    if st["mode"] == "native" and not all(pid_alive(pid) for pid in st["pids"] if pid != os.getpid()):
        return None
    return st


def stop_saved(name: str) -> bool:
    """Stop servers a previous `prepare` left running. Only the PIDs we recorded are signalled."""
    p = state_file(name)
    if not p.is_file():
        return False
    st = json.loads(p.read_text())
    if st["mode"] == "native":
        for pid in st["pids"]:  # recorded in start order: the server before its datastore
            if pid != os.getpid():
                stop_pid(pid)
    elif st["mode"] == "compose":
        from authzbench.provision.compose import compose_down

        compose_down(name)
    p.unlink()
    return True


def _same_tier(st: dict, servers: ServerChoice) -> bool:
    """Saved servers serve this run only in its tier: an engine started cached is restarted for --tier
    strict (its caches and flags are fixed at start). Servers that record no tier have none to differ."""
    tier = (st.get("endpoint") or {}).get("engine_settings", {}).get("tier")
    return tier is None or tier == servers.tier


class Session:
    """One backend's servers for the duration of a command: started (or reused) as `servers` says, its
    adapters made with the run's options for the dataset's `model`."""

    def __init__(self, name: str, servers: ServerChoice, model: str, reuse: bool = True):
        self.name, self.servers = name, servers
        self.started_here = False
        st = _load_state(name) if reuse else None
        if st and st["mode"] == servers.provision and _same_tier(st, servers):
            self.dep = Deployment(name, st["mode"], st["endpoint"], st["pids"], st.get("containers", []),
                                  st.get("notes", []))
            say(f"{name}: reusing running servers (pids {st['pids']})")
        else:
            stop_saved(name)
            run_dir = state_dir() / "servers" / name
            shutil.rmtree(run_dir, ignore_errors=True)
            say(f"{name}: starting ({servers.provision})")
            t0 = time.perf_counter()
            self.dep = provision(
                name, servers.provision, run_dir.resolve(), {**servers.options, "tier": servers.tier})
            self.start_seconds = time.perf_counter() - t0
            self.started_here = True
            if not entry(name).in_process:
                _save_state(name, self.dep, run_dir)
        self.options = {**servers.options, "backend_name": name, "model": model}

    def backend(self, **extra: Any) -> Backend:
        cls = backend_class(self.name)
        return cls(self.dep.endpoint, own_options(cls.Options, {**self.options, **extra}))

    def factory(self, **extra: Any) -> BackendFactory:
        opts = own_options(backend_class(self.name).Options, {**self.options, **extra})
        return BackendFactory(implementation(self.name), self.dep.endpoint, opts)

    def stop(self) -> None:
        if entry(self.name).in_process:
            self.dep.stop()
            return
        if self.dep._stoppers:
            self.dep.stop()
            with contextlib.suppress(FileNotFoundError):
                state_file(self.name).unlink()
        else:
            stop_saved(self.name)


def monitor_for(sess: Session, sink, others: list[int] | None = None) -> Monitor:
    """psutil on native PIDs; the docker SDK's stats for compose containers; nothing for external.
    `others`: the other backends' servers this run keeps up between visits (their CPU is foreign)."""
    if sess.dep.mode == "compose" and sess.dep.containers:
        from authzbench.provision.compose import container_stats

        ids = list(sess.dep.containers)
        return Monitor([], sink, container_stats=lambda: container_stats(ids), others=others)
    return Monitor(sess.dep.pids if sess.dep.mode == "native" else [], sink, others=others)


def pin_cores(sess: Session) -> None:
    """The isolation experiment (--pin): the server's processes on the last core, this process and its
    workers (forked from it, they inherit it) on the others. Nothing to split for an in-process engine."""
    if sess.dep.mode != "native" or entry(sess.name).in_process:
        return
    cores = sorted(os.sched_getaffinity(0) | {c for c in range(os.cpu_count() or 1)})
    server, client = {cores[-1]}, set(cores[:-1])
    pinned = set()
    for pid in sess.dep.pids:
        with contextlib.suppress(psutil.Error, OSError):
            for p in [psutil.Process(pid), *psutil.Process(pid).children(recursive=True)]:
                p.cpu_affinity(list(server))
                pinned.add(p.pid)
    me = psutil.Process()
    for p in [me, *me.children(recursive=True)]:  # the forkserver and workers; the servers are not Python
        with contextlib.suppress(psutil.Error, OSError):
            if p.pid not in pinned and (p.pid == me.pid or "python" in p.name()):
                p.cpu_affinity(list(client))


def down(names: list[str]) -> list[str]:
    stopped = []
    for name in names:
        if stop_saved(name):
            stopped.append(name)
    return stopped


def running() -> list[str]:
    d = state_dir() / "servers"
    return sorted(p.stem for p in d.glob("*.json") if not p.name.endswith(".load.json")) if d.is_dir() else []


def running_pids(but: str) -> list[int]:
    """PIDs of the native servers the state dir keeps running, other than `but`'s: those a size sweep keeps
    up between sizes, including any not yet visited at this size."""
    out: list[int] = []
    for name in running():
        if name != but and (st := _load_state(name)) and st["mode"] == "native":
            out += [pid for pid in st["pids"] if pid != os.getpid()]
    return out
