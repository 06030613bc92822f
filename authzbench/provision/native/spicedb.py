"""SpiceDB (the real server, gRPC) built from the Go module proxy, on a private native PostgreSQL.

No registry ships a spicedb binary, and `go install` is refused (version-list lookup and replace
directives), so: `go mod download -json` the pinned module, copy it somewhere writable, `go build
./cmd/spicedb`. ~1 GB of modules and 8-25 minutes on 2 cores, once per machine: the binary is
reused while its stamp names the pinned version.
"""

from __future__ import annotations

import json
import secrets
import shutil
import subprocess
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


def binary() -> Path:
    """The cached spicedb binary, built if missing or built for another version."""
    root = cache_dir() / "spicedb"
    exe = root / f"spicedb-{SPICEDB_VERSION}"
    stamp = root / f"spicedb-{SPICEDB_VERSION}.stamp"
    if exe.is_file() and (stamp_ok(stamp, SPICEDB_VERSION) or not stamp.exists()):
        write_stamp(stamp, SPICEDB_VERSION)
        return exe
    go = require_go()
    env = go_env()
    log = root / "build.log"
    root.mkdir(parents=True, exist_ok=True)
    say(f"building spicedb {SPICEDB_VERSION} from the Go module proxy (once per machine; 8-25 min on 2 cores; "
        f"log {log})")
    out = subprocess.run([go, "mod", "download", "-json", f"{MODULE}@{SPICEDB_VERSION}"], capture_output=True,
                         text=True, env={**__import__("os").environ, **env})
    if out.returncode != 0:
        raise BackendUnavailable(f"go mod download {MODULE}@{SPICEDB_VERSION} failed: "
                                 f"{(out.stderr or out.stdout).strip().splitlines()[-1:]}")
    src = root / f"src-{SPICEDB_VERSION}"
    shutil.rmtree(src, ignore_errors=True)
    shutil.copytree(json.loads(out.stdout)["Dir"], src)
    for p in [src, *src.rglob("*")]:
        p.chmod(p.stat().st_mode | 0o200)  # the module cache is read-only
    say("spicedb: go build ./cmd/spicedb (progress in the log)")
    tmp = exe.with_suffix(".tmp")
    run([go, "build", "-o", str(tmp), "./cmd/spicedb"], cwd=src, env=env, log=log, what="go build spicedb")
    tmp.replace(exe)
    write_stamp(stamp, SPICEDB_VERSION)
    say(f"spicedb {SPICEDB_VERSION} built: {exe}")
    return exe


def start(ctx: StartContext) -> Deployment:
    exe = binary()
    cluster = start_cluster(ctx, name="spicedb-datastore")
    dep = Deployment("spicedb-pg", "native", {}, pids=[], notes=[])
    dep.on_stop(cluster.stop)
    try:
        with psycopg.connect(cluster.dsn, autocommit=True) as conn:
            conn.execute("CREATE DATABASE spicedb")
        ds_uri = cluster.dsn.rsplit("/", 1)[0] + "/spicedb"
        log = ctx.dir("spicedb") / "spicedb.log"
        say("spicedb: datastore migrate head")
        run([str(exe), "datastore", "migrate", "head", "--datastore-engine", "postgres",
             "--datastore-conn-uri", ds_uri, "--skip-release-check"], log=log, what="spicedb migrate")
        port, key = free_port(), secrets.token_hex(16)
        # Defaults listen on all interfaces and send telemetry: loopback only, telemetry and extras off.
        proc = spawn([str(exe), "serve", "--grpc-preshared-key", key, "--datastore-engine", "postgres",
                      "--datastore-conn-uri", ds_uri, "--grpc-addr", f"127.0.0.1:{port}",
                      "--metrics-enabled=false", "--http-enabled=false", "--telemetry-endpoint", "",
                      "--skip-release-check", "--dispatch-cluster-enabled=false"], log=log)
        dep.on_stop(lambda: stop_pid(proc.pid, timeout=15))
        secs = wait_until(lambda: port_open(port), timeout=60, what="spicedb serve", proc=proc, log=log)
        say(f"spicedb {SPICEDB_VERSION} serving gRPC on 127.0.0.1:{port} (pid {proc.pid}, {secs:.1f} s)")
    except BaseException:
        dep.stop()
        raise
    dep.pids = [proc.pid, cluster.pid]
    dep.endpoint = {"addr": f"127.0.0.1:{port}", "preshared_key": key, "datastore": "postgres",
                    "datastore_version": cluster.version, "datastore_dsn": ds_uri,
                    "spicedb_version": SPICEDB_VERSION}
    dep.notes = [f"SpiceDB {SPICEDB_VERSION} built from the Go module proxy (the reference's v1.46.2 is not "
                 f"served there)", f"datastore: native PostgreSQL {cluster.version.split()[0]}: "
                 f"{cluster.settings_line()}"]
    return dep
