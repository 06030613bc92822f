"""Servers built from the Go module proxy (SpiceDB, FerretDB), once per machine, into the cache dir.

`go install module@version` is refused here (version-list lookup, `replace` directives), so: `go mod
download -json` the pinned module, copy it somewhere writable (the module cache is read-only), let
the recipe prepare the copy, and `go build` the command inside it, so the server stays the main
module of its binary and reports its own version. The binary is reused while its stamp names the
same build id; long builds say every 30 s how far they got.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from authzbench.core.console import say
from authzbench.core.errors import BackendUnavailable
from authzbench.provision.base import build_lock, cache_dir, go_env, require_go, stamp_ok, write_stamp

PROGRESS_EVERY_S = 30.0
# The one newer Go these machines may use: the go command fetches it like a module (~76 MB, ~10 s) when
# GOTOOLCHAIN names it. Set only for a module whose go.mod needs more than the local Go (SpiceDB v1.57.1
# needs 1.26.9; the machines have 1.26.8), so every other build keeps the Go it was cached with.
NEWER_GO = "go1.27.3"


def go_with_progress(cmd: list[str], *, cwd: Path, env: dict[str, str], log: Path, what: str) -> None:
    """Run a long `go build -v`, saying every 30 s how far it got (modules fetched, packages built)."""
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
                say(f"{what}: {time.monotonic() - t0:.0f} s, {fetched} modules fetched, {built} packages "
                    "compiled")
    if proc.returncode != 0:
        raise BackendUnavailable(f"{what} failed with exit code {proc.returncode} (see {log})")


@dataclass(frozen=True)
class GoModule:
    """What one Go binary is built from: cache_dir()/NAME/NAME-VERSION, from MODULE@VERSION's PACKAGE, reused
    while its stamp names BUILD_ID. `prepare(src)` edits the writable copy before the build; `expect` is the
    duration announced to the user. Where the proxy refuses the module, `fallback(src, why)` fills src with
    the module's source from elsewhere (or raises one line saying how to provide it)."""

    name: str
    module: str
    version: str
    build_id: str
    package: str
    build_flags: tuple[str, ...] = ()
    prepare: Callable[[Path], None] | None = None
    expect: str = ""
    fallback: Callable[[Path, str], None] | None = None

    def binary(self) -> Path:
        """The cached binary, built if missing or built for another version."""
        return go_module_binary(self)


def with_linked_version(name: str, module: str, version: str, package: str, version_var: str,
                        expect: str) -> GoModule:
    """A release that links its version into the Go variable `version_var` (as its goreleaser file does):
    without it the binary calls itself "(devel)" or "dev". The stamp names the version and this flag."""
    return GoModule(name, module, version, f"{version} ldflags-version", package,
                    build_flags=("-ldflags", f"-s -w -X {version_var}={version}"), expect=expect)


def go_binary_ready(m: GoModule) -> bool:
    """True when go_module_binary would reuse the cached binary (nothing to build)."""
    root = cache_dir() / m.name
    return (root / f"{m.name}-{m.version}").is_file() and stamp_ok(
        root / f"{m.name}-{m.version}.stamp", m.build_id)


def go_module_binary(m: GoModule) -> Path:
    """The cached binary of `m`, built if missing or stamped for another build id."""
    root = cache_dir() / m.name
    exe = root / f"{m.name}-{m.version}"
    if go_binary_ready(m):
        return exe
    go = require_go()
    with build_lock(root, m.name):
        if go_binary_ready(m):  # built by whoever held the lock
            return exe
        env = go_env()
        log = root / "build.log"
        t0 = time.monotonic()
        say(f"building {m.name} {m.version} from the Go module proxy (once per machine; "
            f"{m.expect or 'a few minutes'} on 2 cores; modules in {env['GOMODCACHE']}; log {log})")
        src = _writable_source(m, go, env, root / f"src-{m.version}")
        say(f"{m.name}: go build {m.package} (dependencies are fetched on the way)")
        tmp = exe.with_suffix(".tmp")
        go_with_progress([go, "build", "-v", *m.build_flags, "-o", str(tmp), m.package], cwd=src, env=env,
                         log=log, what=f"{m.name}: go build")
        tmp.replace(exe)  # atomic: a server still running from the old file keeps its inode
        write_stamp(root / f"{m.name}-{m.version}.stamp", m.build_id)
        shutil.rmtree(src, ignore_errors=True)  # only the binary is reused
        say(f"{m.name} {m.version} built in {time.monotonic() - t0:.0f} s: {exe}")
    return exe


def go_version(text: str) -> tuple[int, ...]:
    """'go1.26.8' / '1.26' / '1.27rc1' as numbers, for ordering: (1, 26, 8), (1, 26), (1, 27)."""
    m = re.match(r"(?:go)?(\d+(?:\.\d+)*)", text.strip())
    if not m:
        raise ValueError(f"not a Go version: {text!r}")
    return tuple(int(p) for p in m.group(1).split("."))


def required_go(gomod: str) -> str:
    """The `go` directive of a go.mod's text ('1.26.9'), or '' when it has none."""
    m = re.search(r"^go\s+(\S+)", gomod, flags=re.MULTILINE)
    return m.group(1) if m else ""


def toolchain_for(required: str, local: str) -> str:
    """GOTOOLCHAIN for a module that needs Go `required` on a machine whose Go is `local`: 'local' when it
    suffices, NEWER_GO when that does, else one line saying no Go here builds it."""
    if not required or go_version(required) <= go_version(local):
        return "local"
    if go_version(required) <= go_version(NEWER_GO):
        return NEWER_GO
    raise BackendUnavailable(f"needs Go {required}, newer than the local {local} and {NEWER_GO}")


def local_go(go: str, env: dict[str, str]) -> str:
    """The machine's own Go ('go1.26.8'), whatever GOTOOLCHAIN the caller's shell exports."""
    out = subprocess.run([go, "env", "GOVERSION"], capture_output=True, text=True,
                         env={**os.environ, **env, "GOTOOLCHAIN": "local"}, timeout=60)
    return out.stdout.strip() or "go0"


def _download(m: GoModule, go: str, env: dict[str, str]) -> tuple[subprocess.CompletedProcess[str], str]:
    """`go mod download -json` of m with the Go it needs: a module needing a newer Go than the local one
    still gets its go.mod (the Error names the version), which picks GOTOOLCHAIN for a second try."""
    cmd = [go, "mod", "download", "-json", f"{m.module}@{m.version}"]
    out = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, **env})
    try:
        gomod = Path(json.loads(out.stdout).get("GoMod") or "")
    except ValueError:
        return out, "local"
    need = required_go(gomod.read_text()) if gomod.is_file() else ""
    chain = toolchain_for(need, local_go(go, env))
    if out.returncode != 0 and chain != "local":
        out = subprocess.run(cmd, capture_output=True, text=True,
                             env={**os.environ, **env, "GOTOOLCHAIN": chain})
    return out, chain


def _writable_source(m: GoModule, go: str, env: dict[str, str], src: Path) -> Path:
    """The module's source copied to `src` (from the proxy, else from `m.fallback`), writable and prepared;
    env's GOTOOLCHAIN becomes the one its go.mod needs (toolchain_for)."""
    out, chain = _download(m, go, env)
    shutil.rmtree(src, ignore_errors=True)
    if out.returncode != 0:
        last = ((out.stderr or out.stdout).strip().splitlines() or ["no output"])[-1]
        why = f"go mod download {m.module}@{m.version} failed: {last[:300]}"
        if m.fallback is None:
            raise BackendUnavailable(why)
        m.fallback(src, why)
        chain = toolchain_for(required_go((src / "go.mod").read_text()), local_go(go, env))
    else:
        shutil.copytree(json.loads(out.stdout)["Dir"], src)
    env["GOTOOLCHAIN"] = chain
    if chain != "local":
        say(f"{m.name} {m.version} needs a newer Go than this machine's: GOTOOLCHAIN={chain} (the go command "
            "fetches it from the module proxy, ~76 MB, once)")
    for p in [src, *src.rglob("*")]:
        p.chmod(p.stat().st_mode | 0o200)  # the module cache is read-only
    if m.prepare:
        m.prepare(src)
    return src


def not_served(m: GoModule) -> str | None:
    """One line when the Go module proxy does not serve m's version (and no build of it is cached), else None:
    asked before any build starts, so a typo in NAME@VERSION does not cost the other builds first."""
    if go_binary_ready(m):
        return None
    out = subprocess.run([require_go(), "list", "-m", "-versions", m.module], capture_output=True, text=True,
                         env={**os.environ, **go_env()}, timeout=120)
    served = out.stdout.split()[1:] if out.returncode == 0 else []
    if m.version in served:
        return None
    if out.returncode != 0:
        return f"the Go module proxy lists no version of {m.module} (go list -m -versions failed)"
    return (f"the Go module proxy does not serve {m.module} {m.version} (newest served: "
            f"{', '.join(served[-3:]) or 'none'})")
