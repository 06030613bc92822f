"""SpiceDB (the real server, gRPC) built from the Go module proxy, on a private native PostgreSQL.

No registry ships a spicedb binary, and `go install` is refused (version-list lookup and replace
directives), so: `go mod download -json` the pinned module, copy it somewhere writable, `go build
./cmd/spicedb` with the release's version ldflag. ~1 GB of modules and 8-25 minutes on 2 cores,
once per machine: the binary is reused while its stamp names the pinned version and build.
"""

from __future__ import annotations

import secrets
import subprocess
import time
from pathlib import Path

import psycopg

from authzbench.provision.base import (
    Deployment,
    StartContext,
    free_port,
    grpc_serving,
    port_open,
    run,
    say,
    spawn,
    stop_pid,
    wait_until,
)
from authzbench.provision.gobuild import go_module_binary
from authzbench.provision.native.postgres import start_cluster
from authzbench.provision.tiers import spicedb as tier_settings
from authzbench.provision.tiers import tier_of

SPICEDB_VERSION = "v1.56.2"  # the reference's v1.46.2 is not served by the Go module proxy; v1.57 needs Go 1.27
MODULE = "github.com/authzed/spicedb"
# As upstream's .goreleaser.yml: without it the binary and the server call themselves "(devel)".
LDFLAGS = f"-s -w -X github.com/jzelinskie/cobrautil/v2.Version={SPICEDB_VERSION}"
BUILD_ID = f"{SPICEDB_VERSION} ldflags-version"  # the stamp: a rebuild when either part changes


def binary() -> Path:
    """The cached spicedb binary, built if missing or built for another version."""
    return go_module_binary("spicedb", MODULE, SPICEDB_VERSION, BUILD_ID, "./cmd/spicedb",
                            build_flags=["-ldflags", LDFLAGS], expect="5-25 min, ~1 GB of modules")


def binary_version(exe: Path) -> str:
    """What the binary says it is (`spicedb version`), e.g. 'v1.54.0'."""
    out = subprocess.run([str(exe), "version", "--skip-release-check"], capture_output=True, text=True, timeout=30)
    words = (out.stdout or out.stderr).split()
    return words[1] if len(words) >= 2 and words[0] == "spicedb" else "unknown"


def start(ctx: StartContext) -> Deployment:
    exe = binary()
    version = binary_version(exe)
    tier = tier_settings(tier_of(ctx.options))
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
                      "--skip-release-check", "--dispatch-cluster-enabled=false", *tier.flags], log=log, env=env)
        dep.on_stop(lambda: stop_pid(proc.pid, timeout=15))
        wait_until(lambda: port_open(port), timeout=60, what="spicedb serve", proc=proc, log=log)
        wait_until(lambda: grpc_serving(port, "authzed.api.v1.PermissionsService"), timeout=60,
                   what="spicedb health (PermissionsService SERVING)", proc=proc, log=log)
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
                    "datastore_password": cluster.password, "spicedb_version": version,
                    "engine_settings": {**tier.settings, "flags": tier.flags}}
    dep.notes = [f"SpiceDB {version} built from the Go module proxy (the reference's v1.46.2 is not served "
                 f"there)", f"datastore: native PostgreSQL {cluster.version.split()[0]}: {cluster.settings_line()}"]
    return dep
