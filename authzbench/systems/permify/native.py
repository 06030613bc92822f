"""Permify (the real server, HTTP + gRPC) built from Go source, on a private native PostgreSQL.

No registry ships a permify binary. Its go.mod has no `replace` directives, so on a machine whose Go
module proxy serves `github.com/Permify/permify` the SpiceDB route applies (provision/gobuild.py). Where
the proxy refuses it (as on these machines), the same build runs in the upstream source tree or release
tarball named by AUTHZBENCH_PERMIFY_SOURCE; every dependency still comes from the module proxy.
~3.5 min on 2 cores, once per machine.

v1.7.3 binds only its HTTP listener to --server-host: gRPC, the distributed invoker and the profiler
listen on every interface (`":" + port` in internal/servers/server.go). The build applies LOOPBACK_PATCH
to the writable copy so every listener follows --server-host (127.0.0.1 here), and fails loudly when
the source no longer has the lines the patch rewrites.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tarfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from authzbench.core.console import say
from authzbench.core.errors import BackendUnavailable
from authzbench.provision.base import Deployment, StartContext
from authzbench.provision.gobuild import GoModule, go_binary_ready
from authzbench.provision.images import health_probe
from authzbench.provision.native.goengine import GoEngine, start_engine
from authzbench.provision.tiers import CACHE_BYTES, POOL, EngineTier, settings, tier_of

PERMIFY_VERSION = "v1.7.3"
MODULE = "github.com/Permify/permify"
SOURCE_ENV = "AUTHZBENCH_PERMIFY_SOURCE"
SERVER_GO = "internal/servers/server.go"
# (what v1.7.3 has, what it becomes): each must occur exactly once.
LOOPBACK_PATCH = [
    ('net.Listen("tcp", ":"+srv.GRPC.Port)', 'net.Listen("tcp", net.JoinHostPort(srv.Host, srv.GRPC.Port))'),
    ('net.Listen("tcp", ":"+dst.Port)', 'net.Listen("tcp", net.JoinHostPort(srv.Host, dst.Port))'),
    ('Addr:         ":" + profiler.Port,', 'Addr:         net.JoinHostPort(srv.Host, profiler.Port),'),
]
BUILD_ID = f"{PERMIFY_VERSION} loopback-listeners"  # the stamp: a rebuild when either part changes
# pgx's default statement cache breaks under Permify's own cancellations: a union that short-circuits
# cancels its other branches' queries, and the connection they leave comes back with a stale deadline
# ("failed to deallocate cached statement(s): timeout: read tcp ... i/o timeout"), failing unrelated
# requests with ERROR_CODE_SCAN / EXECUTION / CANCELLED. On tiny, 19-35 of 90 lookups failed per pass with
# the default cache_statement mode, 0 of 180 with the simple protocol (Permify reads this URI parameter).
QUERY_MODE = "default_query_exec_mode=simple_protocol"
MAX_DATA_PER_WRITE = 10_000  # tuples a data/write may carry (Permify's default 1,000), for the load sweep
LOOPBACK_NOTE = ("built with the loopback patch: gRPC, invoker and profiler listeners follow --server-host "
                 "(upstream v1.7.3 binds them to every interface)")


def prepare_source(src: Path) -> None:
    """Module mode and the loopback patch. The release's go.work (`use .`) would put the build in
    workspace mode, which refuses the -mod=mod every cached build here runs with."""
    for name in ("go.work", "go.work.sum"):
        (src / name).unlink(missing_ok=True)
    apply_loopback_patch(src)


def apply_loopback_patch(src: Path) -> None:
    """Rewrite the three all-interface listeners of server.go to bind --server-host."""
    path = src / SERVER_GO
    text = path.read_text()
    for old, new in LOOPBACK_PATCH:
        if text.count(old) != 1:
            raise BackendUnavailable(
                f"permify: the loopback patch expects {old!r} once in {SERVER_GO}, found "
                f"{text.count(old)} (a different Permify version?)")
        text = text.replace(old, new)
    path.write_text(text)


def _check_source(src: Path, origin: str) -> None:
    gomod = src / "go.mod"
    info = src / "internal" / "info.go"
    if not gomod.is_file() or f"module {MODULE}" not in gomod.read_text():
        raise BackendUnavailable(f"permify: {origin} is not the source of {MODULE} (no go.mod naming it)")
    version = re.search(r'Version = "([^"]+)"', info.read_text()) if info.is_file() else None
    if not version or version.group(1) != PERMIFY_VERSION:
        raise BackendUnavailable(
            f"permify: {origin} is Permify {version.group(1) if version else 'of no version'}, "
            f"the recipe builds {PERMIFY_VERSION}")


def source_from_env(dest: Path, why: str) -> None:
    """Fill dest with the source tree or tarball AUTHZBENCH_PERMIFY_SOURCE names."""
    given = os.environ.get(SOURCE_ENV, "")
    if not given:
        raise BackendUnavailable(
            f"permify: {why}; set {SOURCE_ENV} to a Permify {PERMIFY_VERSION} source tree "
            "or .tar.gz to build from it")
    path = Path(given).expanduser()
    say(f"permify: the module proxy refuses {MODULE}; building from {path} ({SOURCE_ENV})")
    if path.is_dir():
        shutil.copytree(path, dest)
    elif path.is_file() and tarfile.is_tarfile(path):
        _unpack(path, dest)
    else:
        raise BackendUnavailable(f"permify: {SOURCE_ENV}={given} is neither a directory nor a tarball")
    _check_source(dest, f"{SOURCE_ENV}={given}")


def _unpack(tarball: Path, dest: Path) -> None:
    """The tarball's single top-level directory becomes dest."""
    tmp = dest.with_name(dest.name + ".unpack")
    shutil.rmtree(tmp, ignore_errors=True)
    with tarfile.open(tarball) as tf:
        tf.extractall(tmp, filter="data")
    tops = list(tmp.iterdir())
    (tops[0] if len(tops) == 1 and tops[0].is_dir() else tmp).rename(dest)
    shutil.rmtree(tmp, ignore_errors=True)


GO = GoModule(
    "permify", MODULE, PERMIFY_VERSION, BUILD_ID, "./cmd/permify", build_flags=("-ldflags", "-s -w"),
    prepare=prepare_source, expect="~3.5 min", fallback=source_from_env)


def unavailable() -> str | None:
    """One line when Permify can be neither reused nor built here, else None (asks the module proxy only
    when no binary is cached and no source is named)."""
    from authzbench.provision.base import cache_dir, go_env, stamp_ok

    root = cache_dir() / "permify"
    if (root / f"permify-{PERMIFY_VERSION}").is_file() and stamp_ok(root / f"permify-{PERMIFY_VERSION}.stamp",
                                                                     BUILD_ID):
        return None
    if not shutil.which("go"):
        return "permify: no Go toolchain to build it (install Go >= 1.25)"
    if os.environ.get(SOURCE_ENV):
        return None
    out = subprocess.run(
        ["go", "mod", "download", "-json", f"{MODULE}@{PERMIFY_VERSION}"], capture_output=True, text=True,
        env={**os.environ, **go_env()}, timeout=300)
    if out.returncode == 0:
        return None
    return (
        f"permify: the Go module proxy refuses {MODULE}@{PERMIFY_VERSION} and {SOURCE_ENV} names no source "
        "tree or tarball to build it from")


binary = GO.binary  # the cached permify binary, built if missing or built for another version


def reported_version(exe: Path) -> str:
    out = subprocess.run([str(exe), "version"], capture_output=True, text=True, timeout=30)
    m = re.search(r"v\d+\.\d+\.\d+\S*", out.stdout + out.stderr)
    return m.group(0) if m else "unknown"


@dataclass(frozen=True)
class Permify(GoEngine):
    backend = "permify"
    name = "permify"
    ports = ("http", "grpc", "invoker")
    listening = ("http", "grpc")

    def arguments(self, ports: dict[str, int]) -> list[str]:
        return ["serve", "--server-host", "127.0.0.1", "--http-port", str(ports["http"]),
                "--grpc-port", str(ports["grpc"]), "--distributed-port", str(ports["invoker"]),
                "--database-engine", "postgres", "--database-auto-migrate=true",
                "--database-max-data-per-write", str(MAX_DATA_PER_WRITE),
                "--authn-enabled=true", "--authn-method", "preshared", "--profiler-enabled=false",
                "--log-output", "json"]

    def environment(self, database_uri: str, key: str) -> dict[str, str]:
        return {"PERMIFY_DATABASE_URI": database_uri + "?sslmode=disable&" + QUERY_MODE,
                "PERMIFY_AUTHN_PRESHARED_KEYS": key}

    def version(self, log: Path) -> str:
        return reported_version(self.exe)

    def endpoint(self, ports: dict[str, int], key: str, version: str) -> dict[str, Any]:
        return {"url": f"http://127.0.0.1:{ports['http']}", "grpc_addr": f"127.0.0.1:{ports['grpc']}",
                "preshared_key": key, "permify_version": version, "max_data_per_write": MAX_DATA_PER_WRITE}

    def note(self, version: str) -> str:
        return f"Permify {version} {LOOPBACK_NOTE}; data/write up to {MAX_DATA_PER_WRITE:,} tuples"


def start(ctx: StartContext) -> Deployment:
    return start_engine(ctx, Permify(binary(), tier(tier_of(ctx.options))))


def built() -> bool:
    """Nothing left to build: the cached binary is this version's (what `binary` would return at once)."""
    return go_binary_ready(GO)


def image_files() -> dict[str, Path]:
    """What its local image copies in (--local-images): the cached binary and the gRPC health probe."""
    return {"permify": binary(), "grpc_health_probe": health_probe()}


def image_versions() -> dict[str, str]:
    """versions.env's name with what the local image runs: the native build, not the official image's pin."""
    return {"PERMIFY_VERSION": PERMIFY_VERSION}


CACHE_COUNTERS = 100_000  # Ristretto's advice: ~10x the entries kept; Permify's default is 10,000
# Permify's check cache cannot be switched off: a 1-byte bound makes Ristretto refuse every entry (an entry
# costs its key's length, > 1), so nothing is ever served from it.
NO_CACHE = "1B"


def tier(tier: str) -> EngineTier:
    """Permify: reads at_least_as_fresh (its last write's snap token) when cached, no snap token (its head
    snapshot) when strict; check cache bounded to CACHE_BYTES (default 10 MiB). Flags checked against the
    pinned version's pkg/cmd/serve.go."""
    pool = [f"--database-max-connections={POOL}", f"--database-min-connections={POOL}"]
    pool_text = f"{POOL} connections"
    if tier == "strict":
        return EngineTier(
            [*pool, f"--service-permission-cache-max-cost={NO_CACHE}"],
            settings(tier, "off (check cache bounded to 1 byte: holds nothing)",
                     "none (no snap token: the head snapshot)", 0, pool_text, "fully_consistent"))
    # Permify keys its cache by snapshot: an answer is never older than the snapshot the request reads
    # (the client's last write token, else the head), so it has no time window to set.
    return EngineTier(
        [*pool, f"--service-permission-cache-max-cost={CACHE_BYTES}",
         f"--service-permission-cache-number-of-counters={CACHE_COUNTERS}"],
        settings(
            tier, f"check cache (Ristretto), {CACHE_BYTES}",
            "no time window: snapshot-keyed (reads at the client's last write token, else the head)", None,
            pool_text, "at_least_as_fresh"))
