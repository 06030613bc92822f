"""FerretDB 1.24.2 (MongoDB wire protocol, Go) on a private native PostgreSQL: the local stand-in for
MongoDB, which no reachable registry ships. It answers the same pymongo calls, so the `mongo` backend
is tested for correctness here; its speed is FerretDB's over PostgreSQL, not MongoDB's, and every
figure is labeled so.

Build: `go install` is refused (version-list lookup), so `go mod download -json` the pinned module,
copy it somewhere writable, write build/version/version.txt (FerretDB embeds it and panics at start
without it) and `go build ./cmd/ferretdb` inside the copy. Building inside the copy (not from a wrapper
module that `replace`s FerretDB with it) keeps FerretDB the main module of the binary: only then does
it read version.txt and report `ferretdbVersion: v1.24.2` in buildInfo instead of "unknown".
"""

from __future__ import annotations

import time
from pathlib import Path

import psycopg

from authzbench.core.console import say
from authzbench.provision.base import (
    Deployment,
    StartContext,
    free_port,
    spawn,
    stop_pid,
    wait_until,
)
from authzbench.provision.gobuild import GoModule, go_binary_ready
from authzbench.provision.pgcluster import start_cluster

FERRETDB_VERSION = "v1.24.2"  # the newest the Go module proxy serves (1.24.1, 1.24.2 on 2 Dec)
MODULE = "github.com/FerretDB/FerretDB"
BUILD_ID = f"{FERRETDB_VERSION} in-module version.txt"  # the stamp: rebuild when either part changes
DATABASE = "ferretdb"  # the PostgreSQL database FerretDB keeps its schemas (one per Mongo database) in
LABEL = "FerretDB 1.24 (MongoDB wire protocol) — not MongoDB performance"


def _write_version(src: Path) -> None:
    # What upstream's `task gen-version` writes from `git describe`; the module zip has no .git.
    (src / "build" / "version" / "version.txt").write_text(FERRETDB_VERSION + "\n")


GO = GoModule("ferretdb", MODULE, FERRETDB_VERSION, BUILD_ID, "./cmd/ferretdb", build_flags=("-trimpath",),
              prepare=_write_version, expect="~3-6 min")


binary = GO.binary  # the cached ferretdb binary, built if missing or built for another version


def _ping(port: int) -> bool:
    from pymongo import MongoClient

    with MongoClient("127.0.0.1", port, serverSelectionTimeoutMS=500, connectTimeoutMS=500) as c:
        c.admin.command("ping")
    return True


def start(ctx: StartContext) -> Deployment:
    """Native recipe of the `mongo` backend: PostgreSQL, then FerretDB's postgresql handler over it."""
    exe = binary()
    # FerretDB sends many small queries per command: no extra settings beyond the benchmark tuning.
    cluster = start_cluster(ctx, name="ferretdb-postgres")
    dep = Deployment("mongo", "native", {}, pids=[], notes=[])
    dep.on_stop(cluster.stop)  # registered first so it runs last: FerretDB stops before its PostgreSQL
    try:
        with psycopg.connect(cluster.dsn, autocommit=True, connect_timeout=10) as conn:
            conn.execute(f"CREATE DATABASE {DATABASE}")
        pg_url = cluster.dsn.rsplit("/", 1)[0] + f"/{DATABASE}"
        port = free_port()
        home = ctx.dir("ferretdb")
        log = home / "ferretdb.log"
        t0 = time.monotonic()
        # Loopback only; no debug/metrics HTTP listener (its default 127.0.0.1:8088 would also clash between
        # runs); telemetry off twice (the flag, and DO_NOT_TRACK which FerretDB also honours). The
        # PostgreSQL URL with its password travels in FERRETDB_POSTGRESQL_URL, not argv (`ps` shows argv).
        proc = spawn([str(exe), "--handler=postgresql", f"--listen-addr=127.0.0.1:{port}", "--debug-addr=-",
                      "--telemetry=disable", f"--state-dir={home}", "--log-level=WARN", "--log-format=text"],
                     log=log, env={"FERRETDB_POSTGRESQL_URL": pg_url, "DO_NOT_TRACK": "1"}, cwd=home)
        dep.on_stop(lambda: stop_pid(proc.pid, timeout=15))
        wait_until(lambda: _ping(port), timeout=60, what="ferretdb", proc=proc, log=log, interval=0.1)
        say(f"ferretdb {FERRETDB_VERSION} speaking the MongoDB wire protocol on 127.0.0.1:{port} "
            f"(pid {proc.pid}, {time.monotonic() - t0:.1f} s) over PostgreSQL {cluster.version.split()[0]}")
    except BaseException:
        dep.stop()
        raise
    dep.pids = [proc.pid, cluster.pid]
    # pg_dsn: the backend's index step creates the GIN expression indexes FerretDB cannot (its own
    # createIndexes makes btree indexes, which its `@>` pushdown filters do not use). The password is
    # its own key, so Deployment.public_endpoint() masks it in manifests.
    dep.endpoint = {"url": f"mongodb://127.0.0.1:{port}/", "engine": "ferretdb",
                    "pg_dsn": f"postgresql://postgres@127.0.0.1:{cluster.port}/{DATABASE}",
                    "pg_password": cluster.password, "pg_version": cluster.version,
                    "ferretdb_version": FERRETDB_VERSION}
    dep.notes = [
        LABEL,
        f"FerretDB {FERRETDB_VERSION} built from the Go module proxy; its storage: native PostgreSQL "
        f"{cluster.version.split()[0]}: {cluster.settings_line()}"]
    return dep


def built() -> bool:
    """Nothing left to build: the cached binary is this version's (what `binary` would return at once)."""
    return go_binary_ready(GO)

