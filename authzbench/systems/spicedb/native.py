"""SpiceDB (the real server, gRPC) built from the Go module proxy, on a private native PostgreSQL.

No registry ships a spicedb binary, and `go install` is refused (version-list lookup and replace
directives), so: `go mod download -json` the pinned module, copy it somewhere writable, `go build
./cmd/spicedb` with the release's version ldflag. ~1 GB of modules and 8-25 minutes on 2 cores,
once per machine: the binary is reused while its stamp names the pinned version and build.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from authzbench.provision.base import Deployment, StartContext
from authzbench.provision.gobuild import GoModule, go_binary_ready, with_linked_version
from authzbench.provision.images import health_probe
from authzbench.provision.native.goengine import GoEngine, start_engine
from authzbench.provision.tiers import CACHE_BYTES, FRESHNESS_S, EngineTier, settings, tier_of

# the reference's v1.46.2 is not served by the Go module proxy; v1.57.1 needs Go 1.26.9, which the build
# takes as GOTOOLCHAIN (provision/gobuild.NEWER_GO)
SPICEDB_VERSION = "v1.57.1"
MODULE = "github.com/authzed/spicedb"


def go_module(version: str = SPICEDB_VERSION) -> GoModule:
    """The build of one release (--backend spicedb-pg@VERSION), cached beside the others by its version."""
    return with_linked_version(
        "spicedb", MODULE, version, "./cmd/spicedb", "github.com/jzelinskie/cobrautil/v2.Version",
        expect="5-25 min, ~1 GB of modules")


GO = go_module()


binary = GO.binary  # the cached spicedb binary, built if missing or built for another version


def binary_version(exe: Path) -> str:
    """What the binary says it is (`spicedb version`), e.g. 'v1.54.0'."""
    out = subprocess.run(
        [str(exe), "version", "--skip-release-check"], capture_output=True, text=True, timeout=30)
    words = (out.stdout or out.stderr).split()
    return words[1] if len(words) >= 2 and words[0] == "spicedb" else "unknown"


@dataclass(frozen=True)
class SpiceDB(GoEngine):
    backend = "spicedb-pg"
    name = "spicedb"
    ports = ("grpc",)
    listening = ("grpc",)
    migrate = ("datastore", "migrate", "head")
    migrate_flags = ("--datastore-engine", "postgres", "--skip-release-check")
    health = "authzed.api.v1.PermissionsService"

    def arguments(self, ports: dict[str, int]) -> list[str]:
        # Defaults listen on all interfaces and send telemetry: loopback only, telemetry and extras off.
        return ["serve", "--datastore-engine", "postgres", "--grpc-addr", f"127.0.0.1:{ports['grpc']}",
                "--metrics-enabled=false", "--http-enabled=false", "--telemetry-endpoint", "",
                "--skip-release-check", "--dispatch-cluster-enabled=false"]

    def environment(self, database_uri: str, key: str) -> dict[str, str]:
        return {"SPICEDB_DATASTORE_CONN_URI": database_uri, "SPICEDB_GRPC_PRESHARED_KEY": key}

    def version(self, log: Path) -> str:
        return binary_version(self.exe)

    def endpoint(self, ports: dict[str, int], key: str, version: str) -> dict[str, Any]:
        return {"addr": f"127.0.0.1:{ports['grpc']}", "preshared_key": key, "datastore": "postgres",
                "spicedb_version": version}

    def note(self, version: str) -> str:
        return (
            f"SpiceDB {version} built from the Go module proxy (the reference's v1.46.2 is not served there)")


def start(ctx: StartContext) -> Deployment:
    return start_engine(ctx, SpiceDB(go_module(ctx.options.get("version") or SPICEDB_VERSION).binary(),
                                     tier(tier_of(ctx.options))))


def built() -> bool:
    """Nothing left to build: the cached binary is this version's (what `binary` would return at once)."""
    return go_binary_ready(GO)


def image_files() -> dict[str, Path]:
    """What its local image copies in (--local-images): the cached binary and the gRPC health probe."""
    return {"spicedb": binary(), "grpc_health_probe": health_probe()}


def image_versions() -> dict[str, str]:
    """versions.env's name with what the local image runs: the native build, not the official image's pin."""
    return {"SPICEDB_VERSION": SPICEDB_VERSION}


# SpiceDB splits its pool: the reads the report measures get 16, writes (1% of mixed ops, the write
# scenarios) 4, 20 in all like the others' single pool (provision/tiers.POOL).
READ_POOL, WRITE_POOL = 16, 4


def tier(tier: str) -> EngineTier:
    """SpiceDB: reads minimize_latency when cached, fully_consistent when strict; its dispatch cache bounded
    to CACHE_BYTES (its default is 30% of the machine's memory). Flags checked against `serve --help` of the
    pinned binary."""
    pool = [f"--datastore-conn-pool-read-max-open={READ_POOL}",
            f"--datastore-conn-pool-read-min-open={READ_POOL}",
            f"--datastore-conn-pool-write-max-open={WRITE_POOL}",
            f"--datastore-conn-pool-write-min-open={WRITE_POOL}"]
    pool_text = f"read {READ_POOL} + write {WRITE_POOL} connections"
    # Max staleness 0: without it SpiceDB may pick a revision up to 10% older than the window (5.5 s).
    window = [f"--datastore-revision-quantization-interval={FRESHNESS_S}s",
              "--datastore-revision-quantization-max-staleness-percent=0"]
    if tier == "strict":
        return EngineTier([*pool, *window, "--dispatch-cache-enabled=false"],
                          settings(tier, "off (dispatch cache disabled)", "none (fully_consistent reads: the "
                                    "head revision)", 0, pool_text, "fully_consistent"))
    return EngineTier(
        [*pool, *window, "--dispatch-cache-enabled=true", f"--dispatch-cache-max-cost={CACHE_BYTES}"],
        settings(
            tier, f"dispatch cache, {CACHE_BYTES}", f"{FRESHNESS_S} s (revision quantization)", FRESHNESS_S,
            pool_text, "minimize_latency"))
