"""OpenFGA (the real server, gRPC + HTTP) built from the Go module proxy, on a private native PostgreSQL.

No registry ships an openfga binary; v1.22.1's go.mod has no `replace` directives, so the SpiceDB route
applies (provision/gobuild.py): module download, writable copy, `go build ./cmd/openfga` with the
release's version ldflags. ~6.5 min on 2 cores, once per machine: the binary is reused while its stamp
names the pinned version and build.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from authzbench.provision.base import Deployment, StartContext
from authzbench.provision.gobuild import GoModule, go_binary_ready, with_linked_version
from authzbench.provision.images import health_probe
from authzbench.provision.native.goengine import GoEngine, start_engine
from authzbench.provision.tiers import FRESHNESS_S, POOL, EngineTier, settings, tier_of

OPENFGA_VERSION = "v1.22.1"
MODULE = "github.com/openfga/openfga"


def go_module(version: str = OPENFGA_VERSION) -> GoModule:
    """The build of one release (--backend openfga@VERSION), cached beside the others by its version."""
    return with_linked_version(
        "openfga", MODULE, version, "./cmd/openfga", f"{MODULE}/internal/build.Version", expect="~6.5 min")


GO = go_module()


binary = GO.binary  # the cached openfga binary, built if missing or built for another version

# Every listener on loopback, nothing extra listening (the playground listens on all interfaces by
# default, metrics on :2112); no lookup is ever cut short by the server (result cap 0 = none, deadline
# 0 = none: a lookup is bounded by the client's timeout instead, which fails loudly); Write requests of
# up to 10,000 tuples for the bulk load (the default is 100). The request timeout must exceed the
# client's lookup timeout (60 s), or a long lookup would end server-side first.
RUN_FLAGS = [
    "--playground-enabled=false", "--metrics-enabled=false", "--profiler-enabled=false",
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


@dataclass(frozen=True)
class OpenFGA(GoEngine):
    backend = "openfga"
    name = "openfga"
    ports = ("grpc", "http")
    listening = ("http", "grpc")
    migrate = ("migrate",)
    # Autovacuum looks every 5 s (default 60 s): a fresh tuple table has no planner statistics until its first
    # ANALYZE, and Write's per-tuple reads scan it meanwhile. Baseline's first load: 110.4 s with the default
    # (batches 3-6x slower until the first autovacuum, then as fast as a reload's), 26.6 s with 5 s.
    datastore_settings = {"autovacuum_naptime": "5s"}

    def arguments(self, ports: dict[str, int]) -> list[str]:
        return [
            "run", "--grpc-addr", f"127.0.0.1:{ports['grpc']}", "--http-addr", f"127.0.0.1:{ports['http']}",
            *RUN_FLAGS]

    def environment(self, database_uri: str, key: str) -> dict[str, str]:
        return {
            "OPENFGA_DATASTORE_ENGINE": "postgres",
            "OPENFGA_DATASTORE_URI": database_uri + "?sslmode=disable", "OPENFGA_AUTHN_METHOD": "preshared",
            "OPENFGA_AUTHN_PRESHARED_KEYS": key}

    def version(self, log: Path) -> str:
        return logged_version(log)

    def endpoint(self, ports: dict[str, int], key: str, version: str) -> dict[str, Any]:
        return {"url": f"http://127.0.0.1:{ports['http']}", "grpc_addr": f"127.0.0.1:{ports['grpc']}",
                "preshared_key": key, "max_results": 0, "deadline_s": 0,
                "max_tuples_per_write": MAX_TUPLES_PER_WRITE, "openfga_version": version}

    def note(self, version: str) -> str:
        return (f"OpenFGA {version} built from the Go module proxy; ListObjects cap and deadline lifted, "
                f"Write up to {MAX_TUPLES_PER_WRITE:,} tuples")


def start(ctx: StartContext) -> Deployment:
    return start_engine(ctx, OpenFGA(go_module(ctx.options.get("version") or OPENFGA_VERSION).binary(),
                                     tier(tier_of(ctx.options))))


def built() -> bool:
    """Nothing left to build: the cached binary is this version's (what `binary` would return at once)."""
    return go_binary_ready(GO)


def image_files() -> dict[str, Path]:
    """What its local image copies in (--local-images): the cached binary and the gRPC health probe."""
    return {"openfga": binary(), "grpc_health_probe": health_probe()}


def image_versions() -> dict[str, str]:
    """versions.env's name with what the local image runs: the native build, not the official image's pin."""
    return {"OPENFGA_VERSION": OPENFGA_VERSION}


# OpenFGA bounds its check cache by entries, not bytes: 10,000 (its default check cache limit).
CACHE_ENTRIES = 10_000


def tier(tier: str) -> EngineTier:
    """OpenFGA: reads MINIMIZE_LATENCY when cached, HIGHER_CONSISTENCY when strict; cache TTLs (10 s by
    default) set to the freshness window. Flags checked against `run --help` of the pinned binary."""
    pool = [f"--datastore-max-open-conns={POOL}", f"--datastore-min-open-conns={POOL}",
            f"--datastore-max-idle-conns={POOL}", f"--datastore-min-idle-conns={POOL}"]
    pool_text = f"{POOL} connections"
    if tier == "strict":
        off = ["--check-query-cache-enabled=false", "--check-iterator-cache-enabled=false",
               "--list-objects-iterator-cache-enabled=false"]
        return EngineTier([*pool, *off], settings(tier, "off (check query and iterator caches)",
                                                   "none (HIGHER_CONSISTENCY reads)", 0, pool_text,
                                                   "HIGHER_CONSISTENCY"))
    ttl = f"{FRESHNESS_S}s"
    # The cache controller would drop entries older than the store's last write; off, the TTL alone bounds
    # staleness, as SpiceDB's quantization window does.
    on = ["--check-query-cache-enabled=true", f"--check-query-cache-ttl={ttl}",
          f"--check-cache-limit={CACHE_ENTRIES}", "--check-iterator-cache-enabled=true",
          f"--check-iterator-cache-ttl={ttl}", "--list-objects-iterator-cache-enabled=true",
          f"--list-objects-iterator-cache-ttl={ttl}", "--cache-controller-enabled=false"]
    return EngineTier(
        [*pool, *on],
        settings(
            tier, f"check query + iterator caches, {CACHE_ENTRIES:,} entries", f"{FRESHNESS_S} s (cache TTL)",
            FRESHNESS_S, pool_text, "MINIMIZE_LATENCY"))
