"""SpiceDB (the real server, gRPC) built from the Go module proxy, on a private native PostgreSQL.

No registry ships a spicedb binary, and `go install` is refused (version-list lookup and replace
directives), so: `go mod download -json` the pinned module, copy it somewhere writable, `go build
./cmd/spicedb` with the release's version ldflag. ~1 GB of modules and 8-25 minutes on 2 cores,
once per machine: the binary is reused while its stamp names the pinned version and build.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import secrets
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
    port_open,
    require_go,
    run,
    say,
    spawn,
    stamp_ok,
    stop_pid,
    wait_until,
    write_stamp,
)
from authzbench.provision.native.postgres import start_cluster

SPICEDB_VERSION = "v1.54.0"  # the reference's v1.46.2 is not served by the Go module proxy
MODULE = "github.com/authzed/spicedb"
# As upstream's .goreleaser.yml: without it the binary and the server call themselves "(devel)".
LDFLAGS = f"-s -w -X github.com/jzelinskie/cobrautil/v2.Version={SPICEDB_VERSION}"
BUILD_ID = f"{SPICEDB_VERSION} ldflags-version"  # the stamp: a rebuild when either part changes
PROGRESS_EVERY_S = 30.0


@contextlib.contextmanager
def _build_lock(root: Path) -> Iterator[None]:
    """One build per machine: a second start waits for the first build instead of racing it."""
    root.mkdir(parents=True, exist_ok=True)
    with open(root / "build.lock", "w") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            say("spicedb: another process is building it; waiting for that build")
            fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _go_with_progress(cmd: list[str], *, cwd: Path, env: dict[str, str], log: Path, what: str) -> None:
    """Run a long `go build -v`, saying every 30 s how far it got (modules fetched, packages built)."""
    log.parent.mkdir(parents=True, exist_ok=True)
    start = log.stat().st_size if log.exists() else 0
    t0 = time.monotonic()
    with open(log, "ab") as fh:
        proc = subprocess.Popen(cmd, cwd=cwd, env={**os.environ, **env}, stdout=fh, stderr=subprocess.STDOUT)
        next_say = t0 + PROGRESS_EVERY_S
        while proc.poll() is None:
            time.sleep(1.0)
            if time.monotonic() >= next_say:
                next_say += PROGRESS_EVERY_S
                with open(log, "rb") as rd:
                    rd.seek(start)
                    lines = rd.read().decode(errors="replace").splitlines()
                fetched = sum(ln.startswith("go: downloading") for ln in lines)
                built = sum(1 for ln in lines if ln and not ln.startswith(("go: ", "#", " ")))
                say(f"spicedb: {what}: {time.monotonic() - t0:.0f} s, {fetched} modules fetched, "
                    f"{built} packages compiled")
    if proc.returncode != 0:
        raise BackendUnavailable(f"{what} failed with exit code {proc.returncode} (see {log})")


def binary() -> Path:
    """The cached spicedb binary, built if missing or built for another version."""
    root = cache_dir() / "spicedb"
    exe = root / f"spicedb-{SPICEDB_VERSION}"
    stamp = root / f"spicedb-{SPICEDB_VERSION}.stamp"
    if exe.is_file() and stamp_ok(stamp, BUILD_ID):
        return exe
    with _build_lock(root):
        if exe.is_file() and stamp_ok(stamp, BUILD_ID):  # built by whoever held the lock
            return exe
        go = require_go()
        env = go_env()
        log = root / "build.log"
        t0 = time.monotonic()
        say(f"building spicedb {SPICEDB_VERSION} from the Go module proxy (once per machine; 8-25 min on "
            f"2 cores; ~1 GB of modules in {env['GOMODCACHE']}; log {log})")
        out = subprocess.run([go, "mod", "download", "-json", f"{MODULE}@{SPICEDB_VERSION}"], capture_output=True,
                             text=True, env={**os.environ, **env})
        if out.returncode != 0:
            last = ((out.stderr or out.stdout).strip().splitlines() or ["no output"])[-1]
            raise BackendUnavailable(f"go mod download {MODULE}@{SPICEDB_VERSION} failed: {last[:300]}")
        src = root / f"src-{SPICEDB_VERSION}"
        shutil.rmtree(src, ignore_errors=True)
        shutil.copytree(json.loads(out.stdout)["Dir"], src)
        for p in [src, *src.rglob("*")]:
            p.chmod(p.stat().st_mode | 0o200)  # the module cache is read-only
        say("spicedb: go build ./cmd/spicedb (dependencies are fetched on the way)")
        tmp = exe.with_suffix(".tmp")
        _go_with_progress([go, "build", "-v", "-ldflags", LDFLAGS, "-o", str(tmp), "./cmd/spicedb"], cwd=src,
                          env=env, log=log, what="go build")
        # rename is atomic: a spicedb still running from the old file keeps its inode.
        tmp.replace(exe)
        write_stamp(stamp, BUILD_ID)
        say(f"spicedb {SPICEDB_VERSION} built in {time.monotonic() - t0:.0f} s: {exe}")
    return exe


def binary_version(exe: Path) -> str:
    """What the binary says it is (`spicedb version`), e.g. 'v1.54.0'."""
    out = subprocess.run([str(exe), "version", "--skip-release-check"], capture_output=True, text=True, timeout=30)
    words = (out.stdout or out.stderr).split()
    return words[1] if len(words) >= 2 and words[0] == "spicedb" else "unknown"


def start(ctx: StartContext) -> Deployment:
    exe = binary()
    version = binary_version(exe)
    cluster = start_cluster(ctx, name="spicedb-datastore")
    dep = Deployment("spicedb-pg", "native", {}, pids=[], notes=[])
    dep.on_stop(cluster.stop)  # registered first so it runs last: SpiceDB stops before its datastore
    try:
        with psycopg.connect(cluster.dsn, autocommit=True) as conn:
            conn.execute("CREATE DATABASE spicedb")
        ds_uri = cluster.dsn.rsplit("/", 1)[0] + "/spicedb"
        key = secrets.token_hex(16)
        # Secrets through SpiceDB's SPICEDB_* environment, not argv, so `ps` does not show them.
        env = {"SPICEDB_DATASTORE_CONN_URI": ds_uri, "SPICEDB_GRPC_PRESHARED_KEY": key}
        log = ctx.dir("spicedb") / "spicedb.log"
        say("spicedb: datastore migrate head")
        run([str(exe), "datastore", "migrate", "head", "--datastore-engine", "postgres", "--skip-release-check"],
            env=env, log=log, what="spicedb datastore migrate head")
        port = free_port()
        t0 = time.monotonic()
        # Defaults listen on all interfaces and send telemetry: loopback only, telemetry and extras off.
        proc = spawn([str(exe), "serve", "--datastore-engine", "postgres", "--grpc-addr", f"127.0.0.1:{port}",
                      "--metrics-enabled=false", "--http-enabled=false", "--telemetry-endpoint", "",
                      "--skip-release-check", "--dispatch-cluster-enabled=false"], log=log, env=env)
        dep.on_stop(lambda: stop_pid(proc.pid, timeout=15))
        wait_until(lambda: port_open(port), timeout=60, what="spicedb serve", proc=proc, log=log)
        say(f"spicedb {version} serving gRPC on 127.0.0.1:{port} (pid {proc.pid}, "
            f"{time.monotonic() - t0:.1f} s)")
    except BaseException:
        dep.stop()
        raise
    dep.pids = [proc.pid, cluster.pid]
    # The datastore password travels as its own key so Deployment.public_endpoint() masks it.
    dep.endpoint = {"addr": f"127.0.0.1:{port}", "preshared_key": key, "datastore": "postgres",
                    "datastore_version": cluster.version,
                    "datastore_dsn": f"postgresql://postgres@127.0.0.1:{cluster.port}/spicedb",
                    "datastore_password": cluster.password, "spicedb_version": version}
    dep.notes = [f"SpiceDB {version} built from the Go module proxy (the reference's v1.46.2 is not served "
                 f"there)", f"datastore: native PostgreSQL {cluster.version.split()[0]}: {cluster.settings_line()}"]
    return dep
