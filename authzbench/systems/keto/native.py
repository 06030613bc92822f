"""Ory Keto (the real server, REST + gRPC) built from the Go module proxy, on a private native PostgreSQL.

No registry ships a keto binary. v0.13.0-alpha.0 is the newest release that builds from the registries
alone: its go.mod replaces `github.com/ory/keto/proto` with `./proto`, a directory the module zip lacks
(it is a module of its own), and the proxy serves that module at the same version, so the build drops the
replace and requires it (`prepare_source`). v0.14.0 is served too, but its proto module at the matching
commit is not (v0.13.0-alpha.0's lacks the CheckResponseWithError and BatchCheckResponse it needs);
v25.x is not served. ~1 min of compiling on 2 cores once the modules are fetched, once per machine.

Keto has four listeners (read, write, OPL syntax check, metrics), each bound to 127.0.0.1 on a free port
by the config file `arguments` writes beside keto.yml; it has no authentication of its own (Ory's deployments
put it behind a gateway), so loopback is its only guard here.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from authzbench.provision.base import Deployment, StartContext, require_go
from authzbench.provision.gobuild import GoModule, go_binary_ready
from authzbench.provision.native.goengine import GoEngine, start_engine
from authzbench.provision.tiers import POOL, EngineTier, tier_of

KETO_VERSION = "v0.13.0-alpha.0"
MODULE = "github.com/ory/keto"
PROTO = f"{MODULE}/proto"
BUILDINFO = f"{MODULE}/internal/driver/config"  # where its goreleaser file links version, commit and date
OPL = Path(__file__).with_name("namespaces.keto.ts")  # the rebac model in the Ory Permission Language
SETTINGS = Path(__file__).with_name("keto.yml")  # read limits and log (the migration needs a config file too)


def prepare_source(src: Path) -> None:
    """The proto module from the proxy instead of the missing ./proto directory."""
    subprocess.run([require_go(), "mod", "edit", f"-dropreplace={PROTO}", f"-require={PROTO}@{KETO_VERSION}"],
                   cwd=src, check=True)


GO = GoModule("keto", MODULE, KETO_VERSION, f"{KETO_VERSION} proto-from-proxy ldflags-version", ".",
              build_flags=("-ldflags", f"-s -w -X {BUILDINFO}.Version={KETO_VERSION}"),
              prepare=prepare_source, expect="~1-3 min")
binary = GO.binary  # the cached keto binary, built if missing or built for another version


def built() -> bool:
    """Nothing left to build: the cached binary is this version's (what `binary` would return at once)."""
    return go_binary_ready(GO)


def tier(name: str) -> EngineTier:
    """The same in both tiers: Keto has no answer cache and no snapshot reads to switch (every check reads the
    datastore's latest committed tuples), so "cached" and "strict" start the same server."""
    return EngineTier([], {"tier": name, "cache": "none (Keto has no answer cache)",
                           "cache_on": False,
                           "freshness": "none (every check reads the latest committed tuples)",
                           "freshness_s": 0, "pool": f"{POOL} connections", "pool_total": POOL,
                           "reads": "latest committed (no consistency modes)"})


def binary_version(exe: Path) -> str:
    """What the binary says it is (`keto version` prints "Version:    v0.13.0-alpha.0" among other lines)."""
    out = subprocess.run([str(exe), "version"], capture_output=True, text=True, timeout=30)
    for line in (out.stdout + out.stderr).splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "Version" and value.strip():
            return value.strip()
    return "unknown"


def listeners(ports: dict[str, int]) -> str:
    """The second config file: every listener on loopback, on the ports picked for this run."""
    apis = {"read": ports["http"], "write": ports["write"], "opl": ports["opl"], "metrics": ports["metrics"]}
    return "serve:\n" + "".join(f"  {api}:\n    host: 127.0.0.1\n    port: {port}\n"
                                 for api, port in apis.items())


@dataclass(frozen=True)
class Keto(GoEngine):
    backend = "keto"
    name = "keto"
    # "http" is the read API (HTTP and gRPC on one port): goengine's start line names only http and grpc
    # listeners, so the write API's port is awaited by the adapter's connect (ready on both) instead.
    ports = ("http", "write", "opl", "metrics")
    listening = ("http",)
    migrate = ("migrate", "up")
    migrate_flags = ("--yes", "--config", str(SETTINGS))
    run_dir: Path = Path(".")  # where the listeners' config file is written
    opl: Path = OPL  # the model file the server serves (and watches: an edit is served without a restart)

    def arguments(self, ports: dict[str, int]) -> list[str]:
        # Written here because the ports are picked just before the server starts.
        path = self.run_dir / "listeners.yml"
        path.write_text(listeners(ports))
        return ["serve", "--config", f"{SETTINGS},{path}", "--sqa-opt-out"]

    def environment(self, database_uri: str, key: str) -> dict[str, str]:
        # Keto has no preshared key (the key is unused); the pool size is a DSN parameter of Ory's SQL layer.
        return {"DSN": f"{database_uri}?sslmode=disable&max_conns={POOL}&max_idle_conns={POOL}",
                "NAMESPACES_LOCATION": f"file://{self.opl}", "SQA_OPT_OUT": "true"}

    def version(self, log: Path) -> str:
        return binary_version(self.exe)

    def endpoint(self, ports: dict[str, int], key: str, version: str) -> dict[str, Any]:
        return {"read_url": f"http://127.0.0.1:{ports['http']}",
                "write_url": f"http://127.0.0.1:{ports['write']}",
                "keto_version": version}

    def note(self, version: str) -> str:
        return (f"Ory Keto {version} built from the Go module proxy (its proto module from the proxy; "
                "v0.14.0's is not served); read depth 64, width 65,535, strict mode off (keto.yml)")


def start(ctx: StartContext) -> Deployment:
    return start_engine(ctx, Keto(binary(), tier(tier_of(ctx.options)), run_dir=ctx.dir("keto")))
