"""FerretDB 1.24.0 (MongoDB wire protocol, Go) on a private native PostgreSQL: the local stand-in for
MongoDB, which no reachable registry ships. It answers the same pymongo calls, so the `mongo` backend
is tested for correctness here; its speed is FerretDB's over PostgreSQL, not MongoDB's, and every
figure is labeled so.

Build: `go install` is refused (version-list lookup), so `go mod download -json` the pinned module,
copy it somewhere writable, write build/version/version.txt (FerretDB embeds it and panics at start
without it) and `go build ./cmd/ferretdb` inside the copy. Building inside the copy (not from a wrapper
module that `replace`s FerretDB with it) keeps FerretDB the main module of the binary: only then does
it read version.txt and report `ferretdbVersion: v1.24.0` in buildInfo instead of "unknown".
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg

from authzbench.errors import BackendUnavailable
from authzbench.provision.base import (
    Deployment,
    StartContext,
    cache_dir,
    free_port,
    go_env,
    require_go,
    say,
    spawn,
    stamp_ok,
    stop_pid,
    wait_until,
    write_stamp,
)
from authzbench.provision.native.postgres import start_cluster

FERRETDB_VERSION = "v1.24.0"
MODULE = "github.com/FerretDB/FerretDB"
BUILD_ID = f"{FERRETDB_VERSION} in-module version.txt"  # the stamp: rebuild when either part changes
DATABASE = "ferretdb"  # the PostgreSQL database FerretDB keeps its schemas (one per Mongo database) in
LABEL = "FerretDB 1.24 (MongoDB wire protocol) — not MongoDB performance"
PROGRESS_EVERY_S = 30.0


@contextlib.contextmanager
def _build_lock(root: Path) -> Iterator[None]:
    """One build per machine: a second start waits for the first build instead of racing it."""
    root.mkdir(parents=True, exist_ok=True)
    with open(root / "build.lock", "w") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            say("ferretdb: another process is building it; waiting for that build")
            fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _go(cmd: list[str], *, cwd: Path, env: dict[str, str], log: Path, what: str) -> None:
    """Run a go command, saying every 30 s how far it got (modules fetched, packages compiled)."""
    log.parent.mkdir(parents=True, exist_ok=True)
    start = log.stat().st_size if log.exists() else 0
    t0 = time.monotonic()
    with open(log, "ab") as fh:
        proc = subprocess.Popen(cmd, cwd=cwd, env={**os.environ, **env}, stdout=fh, stderr=subprocess.STDOUT)
        next_say = t0 + PROGRESS_EVERY_S
        while proc.poll() is None:
            time.sleep(0.5)
            if time.monotonic() >= next_say:
                next_say += PROGRESS_EVERY_S
                with open(log, "rb") as rd:
                    rd.seek(start)
                    lines = rd.read().decode(errors="replace").splitlines()
                fetched = sum(ln.startswith("go: downloading") for ln in lines)
                built = sum(1 for ln in lines if ln and not ln.startswith(("go: ", "#", " ")))
                say(f"ferretdb: {what}: {time.monotonic() - t0:.0f} s, {fetched} modules fetched, "
                    f"{built} packages compiled")
    if proc.returncode != 0:
        raise BackendUnavailable(f"ferretdb: {what} failed with exit code {proc.returncode} (see {log})")


def binary() -> Path:
    """The cached ferretdb binary, built if missing or built for another version."""
    root = cache_dir() / "ferretdb"
    exe = root / f"ferretdb-{FERRETDB_VERSION}"
    stamp = root / f"ferretdb-{FERRETDB_VERSION}.stamp"
    if exe.is_file() and stamp_ok(stamp, BUILD_ID):
        return exe
    go = require_go()
    with _build_lock(root):
        if exe.is_file() and stamp_ok(stamp, BUILD_ID):  # built by whoever held the lock
            return exe
        env = go_env()
        log = root / "build.log"
        t0 = time.monotonic()
        say(f"building ferretdb {FERRETDB_VERSION} from the Go module proxy (once per machine; ~3-6 min on "
            f"2 cores; modules in {env['GOMODCACHE']}; log {log})")
        out = subprocess.run([go, "mod", "download", "-json", f"{MODULE}@{FERRETDB_VERSION}"], capture_output=True,
                             text=True, env={**os.environ, **env})
        if out.returncode != 0:
            last = ((out.stderr or out.stdout).strip().splitlines() or ["no output"])[-1]
            raise BackendUnavailable(f"go mod download {MODULE}@{FERRETDB_VERSION} failed: {last[:300]}")
        src = root / f"src-{FERRETDB_VERSION}"
        shutil.rmtree(src, ignore_errors=True)
        shutil.copytree(json.loads(out.stdout)["Dir"], src)
        for p in [src, *src.rglob("*")]:
            p.chmod(p.stat().st_mode | 0o200)  # the module cache is read-only
        # What upstream's `task gen-version` writes from `git describe`; the module zip has no .git.
        (src / "build" / "version" / "version.txt").write_text(FERRETDB_VERSION + "\n")
        say("ferretdb: go build ./cmd/ferretdb (dependencies are fetched on the way)")
        tmp = exe.with_suffix(".tmp")
        _go([go, "build", "-v", "-trimpath", "-o", str(tmp), "./cmd/ferretdb"], cwd=src, env=env, log=log,
            what="go build")
        tmp.replace(exe)  # atomic: a ferretdb still running from the old file keeps its inode
        write_stamp(stamp, BUILD_ID)
        shutil.rmtree(src, ignore_errors=True)  # only the binary is reused
        say(f"ferretdb {FERRETDB_VERSION} built in {time.monotonic() - t0:.0f} s: {exe}")
    return exe


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
    dep.notes = [LABEL, f"FerretDB {FERRETDB_VERSION} built from the Go module proxy; its storage: native PostgreSQL "
                 f"{cluster.version.split()[0]}: {cluster.settings_line()}"]
    return dep
