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
from authzbench.provision.gobuild import with_linked_version
from authzbench.provision.native.goengine import GoEngine, start_engine
from authzbench.provision.tiers import spicedb as tier_settings
from authzbench.provision.tiers import tier_of

SPICEDB_VERSION = "v1.56.2"  # the reference's v1.46.2 is not served by the Go module proxy; v1.57 needs Go 1.27
MODULE = "github.com/authzed/spicedb"
GO = with_linked_version("spicedb", MODULE, SPICEDB_VERSION, "./cmd/spicedb",
                         "github.com/jzelinskie/cobrautil/v2.Version", expect="5-25 min, ~1 GB of modules")


binary = GO.binary  # the cached spicedb binary, built if missing or built for another version


def binary_version(exe: Path) -> str:
    """What the binary says it is (`spicedb version`), e.g. 'v1.54.0'."""
    out = subprocess.run([str(exe), "version", "--skip-release-check"], capture_output=True, text=True, timeout=30)
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
        return f"SpiceDB {version} built from the Go module proxy (the reference's v1.46.2 is not served there)"


def start(ctx: StartContext) -> Deployment:
    return start_engine(ctx, SpiceDB(binary(), tier_settings(tier_of(ctx.options))))
