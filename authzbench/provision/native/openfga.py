"""OpenFGA (the real server, gRPC + HTTP) built from the Go module proxy, on a private native PostgreSQL.

No registry ships an openfga binary; v1.22.1's go.mod has no `replace` directives, so the SpiceDB route
applies (provision/gobuild.py): module download, writable copy, `go build ./cmd/openfga` with the
release's version ldflags. ~6.5 min on 2 cores, once per machine: the binary is reused while its stamp
names the pinned version and build.
"""

from __future__ import annotations

import json
import secrets
import time
from pathlib import Path

import psycopg

from authzbench.provision.base import (
    Deployment,
    StartContext,
    free_port,
    port_open,
    run,
    say,
    spawn,
    stop_pid,
    wait_until,
)
from authzbench.provision.gobuild import go_module_binary
from authzbench.provision.native.postgres import start_cluster
from authzbench.provision.tiers import openfga as tier_settings
from authzbench.provision.tiers import tier_of

OPENFGA_VERSION = "v1.22.1"
MODULE = "github.com/openfga/openfga"
# As upstream's .goreleaser.yaml: without it the server reports version "dev".
LDFLAGS = f"-s -w -X github.com/openfga/openfga/internal/build.Version={OPENFGA_VERSION}"
BUILD_ID = f"{OPENFGA_VERSION} ldflags-version"  # the stamp: a rebuild when either part changes


def binary() -> Path:
    """The cached openfga binary, built if missing or built for another version."""
    return go_module_binary("openfga", MODULE, OPENFGA_VERSION, BUILD_ID, "./cmd/openfga",
                            build_flags=["-ldflags", LDFLAGS], expect="~6.5 min")

# Every listener on loopback, nothing extra listening (the playground listens on all interfaces by
# default, metrics on :2112); no lookup is ever cut short by the server (result cap 0 = none, deadline
# 0 = none: a lookup is bounded by the client's timeout instead, which fails loudly); Write requests of
# up to 10,000 tuples for the bulk load (the default is 100). The request timeout must exceed the
# client's lookup timeout (60 s), or a long lookup would end server-side first.
RUN_FLAGS = ["--playground-enabled=false", "--metrics-enabled=false", "--profiler-enabled=false",
             "--datastore-metrics-enabled=false", "--trace-enabled=false", "--log-format", "json",
             "--listObjects-max-results", "0", "--listObjects-deadline", "0s", "--max-tuples-per-write", "10000",
             "--request-timeout", "300s"]
MAX_TUPLES_PER_WRITE = 10_000


def logged_version(log: Path) -> str:
    """The version the server logged at start ("starting openfga service...", JSON log)."""
    for line in reversed(log.read_text(errors="replace").splitlines()):
        if "starting openfga service" in line:
            try:
                return str(json.loads(line).get("version") or "unknown")
            except ValueError:
                break
    return "unknown"


def start(ctx: StartContext) -> Deployment:
    exe = binary()
    tier = tier_settings(tier_of(ctx.options))
    # Autovacuum looks every 5 s (default 60 s): a fresh tuple table has no planner statistics until its first
    # ANALYZE, and Write's per-tuple reads scan it meanwhile. Baseline's first load: 110.4 s with the default
    # (batches 3-6x slower until the first autovacuum, then as fast as a reload's), 26.6 s with 5 s.
    cluster = start_cluster(ctx, name="openfga-datastore", settings={"autovacuum_naptime": "5s"})
    dep = Deployment("openfga", "native", {}, pids=[], notes=[])
    dep.on_stop(cluster.stop)  # registered first so it runs last: OpenFGA stops before its datastore
    try:
        with psycopg.connect(cluster.dsn, autocommit=True) as conn:
            conn.execute("CREATE DATABASE openfga")
        key = secrets.token_hex(16)
        # Secrets through OpenFGA's OPENFGA_* environment, not argv, so `ps` does not show them.
        env = {"OPENFGA_DATASTORE_ENGINE": "postgres",
               "OPENFGA_DATASTORE_URI": cluster.dsn.rsplit("/", 1)[0] + "/openfga?sslmode=disable",
               "OPENFGA_AUTHN_METHOD": "preshared", "OPENFGA_AUTHN_PRESHARED_KEYS": key}
        log = ctx.dir("openfga") / "openfga.log"
        say("openfga: migrate")
        run([str(exe), "migrate"], env=env, log=log, what="openfga migrate")
        grpc_port, http_port = free_port(), free_port()
        t0 = time.monotonic()
        proc = spawn([str(exe), "run", "--grpc-addr", f"127.0.0.1:{grpc_port}",
                      "--http-addr", f"127.0.0.1:{http_port}", *RUN_FLAGS, *tier.flags], log=log, env=env)
        dep.on_stop(lambda: stop_pid(proc.pid, timeout=15))
        wait_until(lambda: port_open(http_port) and port_open(grpc_port), timeout=60, what="openfga run", proc=proc,
                   log=log)
        version = logged_version(log)
        say(f"openfga {version} serving HTTP on 127.0.0.1:{http_port}, gRPC on 127.0.0.1:{grpc_port} "
            f"(pid {proc.pid}, {time.monotonic() - t0:.1f} s)")
    except BaseException:
        dep.stop()
        raise
    dep.pids = [proc.pid, cluster.pid]
    # The datastore password travels as its own key so Deployment.public_endpoint() masks it.
    dep.endpoint = {"url": f"http://127.0.0.1:{http_port}", "grpc_addr": f"127.0.0.1:{grpc_port}",
                    "preshared_key": key, "max_results": 0, "deadline_s": 0,
                    "max_tuples_per_write": MAX_TUPLES_PER_WRITE, "datastore_version": cluster.version,
                    "datastore_dsn": f"postgresql://postgres@127.0.0.1:{cluster.port}/openfga",
                    "datastore_password": cluster.password, "openfga_version": version,
                    "engine_settings": {**tier.settings, "flags": tier.flags}}
    dep.notes = [f"OpenFGA {version} built from the Go module proxy; ListObjects cap and deadline lifted, "
                 f"Write up to {MAX_TUPLES_PER_WRITE:,} tuples",
                 f"datastore: native PostgreSQL {cluster.version.split()[0]}: {cluster.settings_line()}"]
    return dep
