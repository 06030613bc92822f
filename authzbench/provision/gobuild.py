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
import shutil
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

from authzbench.errors import BackendUnavailable
from authzbench.provision.base import build_lock, cache_dir, go_env, require_go, say, stamp_ok, write_stamp

PROGRESS_EVERY_S = 30.0


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
                say(f"{what}: {time.monotonic() - t0:.0f} s, {fetched} modules fetched, {built} packages compiled")
    if proc.returncode != 0:
        raise BackendUnavailable(f"{what} failed with exit code {proc.returncode} (see {log})")


def go_binary_ready(name: str, version: str, build_id: str) -> bool:
    """True when go_module_binary would reuse the cached binary (nothing to build)."""
    root = cache_dir() / name
    return (root / f"{name}-{version}").is_file() and stamp_ok(root / f"{name}-{version}.stamp", build_id)


def go_module_binary(name: str, module: str, version: str, build_id: str, package: str, *,
                     build_flags: list[str] | None = None, prepare: Callable[[Path], None] | None = None,
                     expect: str = "", fallback: Callable[[Path, str], None] | None = None) -> Path:
    """cache_dir()/NAME/NAME-VERSION, built from MODULE@VERSION's PACKAGE if missing or stamped for
    another build id. `prepare(src)` edits the writable copy before the build; `expect` is the duration
    announced to the user. Where the proxy refuses the module, `fallback(src, why)` fills src with the
    module's source from elsewhere (or raises one line saying how to provide it)."""
    root = cache_dir() / name
    exe = root / f"{name}-{version}"
    if go_binary_ready(name, version, build_id):
        return exe
    go = require_go()
    with build_lock(root, name):
        if go_binary_ready(name, version, build_id):  # built by whoever held the lock
            return exe
        stamp = root / f"{name}-{version}.stamp"
        env = go_env()
        log = root / "build.log"
        t0 = time.monotonic()
        say(f"building {name} {version} from the Go module proxy (once per machine; {expect or 'a few minutes'} "
            f"on 2 cores; modules in {env['GOMODCACHE']}; log {log})")
        out = subprocess.run([go, "mod", "download", "-json", f"{module}@{version}"], capture_output=True,
                             text=True, env={**os.environ, **env})
        src = root / f"src-{version}"
        shutil.rmtree(src, ignore_errors=True)
        if out.returncode != 0:
            last = ((out.stderr or out.stdout).strip().splitlines() or ["no output"])[-1]
            why = f"go mod download {module}@{version} failed: {last[:300]}"
            if fallback is None:
                raise BackendUnavailable(why)
            fallback(src, why)
        else:
            shutil.copytree(json.loads(out.stdout)["Dir"], src)
        for p in [src, *src.rglob("*")]:
            p.chmod(p.stat().st_mode | 0o200)  # the module cache is read-only
        if prepare:
            prepare(src)
        say(f"{name}: go build {package} (dependencies are fetched on the way)")
        tmp = exe.with_suffix(".tmp")
        go_with_progress([go, "build", "-v", *(build_flags or []), "-o", str(tmp), package], cwd=src, env=env,
                         log=log, what=f"{name}: go build")
        tmp.replace(exe)  # atomic: a server still running from the old file keeps its inode
        write_stamp(stamp, build_id)
        shutil.rmtree(src, ignore_errors=True)  # only the binary is reused
        say(f"{name} {version} built in {time.monotonic() - t0:.0f} s: {exe}")
    return exe
