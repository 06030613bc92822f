"""The start recipe of the three Go engines (SpiceDB, OpenFGA, Permify), written once: a private native
PostgreSQL, a database named after the engine, a fresh preshared key, the engine's migration when it has
one, the server spawned on loopback ports and awaited, and the endpoint with its datastore's facts.

Each engine's recipe (spicedb.py, openfga.py, permify.py) subclasses GoEngine with only what differs: its
arguments, environment, ports, endpoint keys and first note. Secrets always travel in the environment the
engine's `environment` returns, never in argv, so `ps` does not show them.
"""

from __future__ import annotations

import secrets
import subprocess
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import psycopg

from authzbench.core.console import say
from authzbench.provision.base import (
    Deployment,
    StartContext,
    free_port,
    grpc_serving,
    port_open,
    run,
    spawn,
    stop_pid,
    wait_until,
)
from authzbench.provision.pgcluster import PgCluster, start_cluster
from authzbench.provision.tiers import EngineTier

LABELS = {"http": "HTTP", "grpc": "gRPC"}  # how the start line names a listener


@dataclass(frozen=True)
class GoEngine(ABC):
    """One engine's parameters: the built binary and its tier's settings, the rest declared by the
    subclass."""

    exe: Path
    tier: EngineTier
    backend: ClassVar[str]  # the registry's name, the Deployment's
    name: ClassVar[str]  # of its database, its log, its datastore and its start lines
    ports: ClassVar[tuple[str, ...]]  # a free loopback port picked for each
    listening: ClassVar[tuple[str, ...]]  # the ports awaited and announced, in that order
    # the migration's subcommand, run before the server (none: itself)
    migrate: ClassVar[tuple[str, ...]] = ()
    migrate_flags: ClassVar[tuple[str, ...]] = ()
    health: ClassVar[str] = ""  # a gRPC service that must report SERVING before the engine counts as up
    datastore_settings: ClassVar[dict[str, str] | None] = None  # over postgres.BENCH_SETTINGS

    @abstractmethod
    def arguments(self, ports: dict[str, int]) -> list[str]:
        """The server's command line after the binary (its subcommand first), without the tier's flags."""

    @abstractmethod
    def environment(self, database_uri: str, key: str) -> dict[str, str]:
        """The engine's datastore URI (from postgresql://.../NAME) and preshared key, as its variables."""

    @abstractmethod
    def version(self, log: Path) -> str:
        """What the running engine says it is."""

    @abstractmethod
    def endpoint(self, ports: dict[str, int], key: str, version: str) -> dict[str, Any]:
        """The adapter's keys; the datastore's and the tier's are added by start_engine."""

    @abstractmethod
    def note(self, version: str) -> str:
        """The deployment's first note (the second is the datastore's)."""


def start_engine(ctx: StartContext, eng: GoEngine) -> Deployment:
    cluster = start_cluster(ctx, name=f"{eng.name}-datastore", settings=eng.datastore_settings)
    dep = Deployment(eng.backend, "native", {}, pids=[], notes=[])
    dep.on_stop(cluster.stop)  # registered first so it runs last: the engine stops before its datastore
    try:
        with psycopg.connect(cluster.dsn, autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {eng.name}")
        key = secrets.token_hex(16)
        env = eng.environment(cluster.dsn.rsplit("/", 1)[0] + f"/{eng.name}", key)
        log = ctx.dir(eng.name) / f"{eng.name}.log"
        if eng.migrate:
            say(f"{eng.name}: {' '.join(eng.migrate)}")
            run([str(eng.exe), *eng.migrate, *eng.migrate_flags], env=env, log=log,
                what=f"{eng.name} {' '.join(eng.migrate)}")
        ports = {p: free_port() for p in eng.ports}
        proc, seconds = _serve(eng, ports, env, log, dep)
        version = eng.version(log)
        say(f"{eng.name} {version} serving "
            + ", ".join(f"{LABELS.get(p, p)} on 127.0.0.1:{ports[p]}" for p in eng.listening)
            + f" (pid {proc.pid}, {seconds:.1f} s)")
    except BaseException:
        dep.stop()
        raise
    dep.pids = [proc.pid, cluster.pid]
    dep.endpoint = {**eng.endpoint(ports, key, version), **_datastore(eng.name, cluster),
                    "engine_settings": {**eng.tier.settings, "flags": eng.tier.flags}}
    dep.notes = [eng.note(version),
                 f"datastore: native PostgreSQL {cluster.version.split()[0]}: {cluster.settings_line()}"]
    return dep


def _serve(eng: GoEngine, ports: dict[str, int], env: dict[str, str], log: Path,
           dep: Deployment) -> tuple[subprocess.Popen, float]:
    """The server spawned (stopped with the deployment) and awaited: its listeners open, its health SERVING.
    Returns it and the seconds from spawn to ready."""
    t0 = time.monotonic()
    args = eng.arguments(ports)
    proc = spawn([str(eng.exe), *args, *eng.tier.flags], log=log, env=env)
    dep.on_stop(lambda: stop_pid(proc.pid, timeout=15))
    wait_until(
        lambda: all(port_open(ports[p]) for p in eng.listening), timeout=60, what=f"{eng.name} {args[0]}",
        proc=proc, log=log)
    if eng.health:
        wait_until(lambda: grpc_serving(ports["grpc"], eng.health), timeout=60,
                   what=f"{eng.name} health ({eng.health.rsplit('.', 1)[-1]} SERVING)", proc=proc, log=log)
    return proc, time.monotonic() - t0


def _datastore(name: str, cluster: PgCluster) -> dict[str, Any]:
    """The datastore's endpoint keys; the password is its own key, so Deployment.public_endpoint() masks
    it."""
    return {"datastore_version": cluster.version,
            "datastore_dsn": f"postgresql://postgres@127.0.0.1:{cluster.port}/{name}",
            "datastore_password": cluster.password}
