"""Shared provisioning machinery: the cache dir, process control, tool checks, registry installs.

Every native recipe (provision/native/<name>.py) exposes `start(ctx: StartContext) -> Deployment`.
Servers listen on 127.0.0.1 only, on private ports, with data under the run dir, and are stopped by
the PIDs we started (never by name).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import random
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from authzbench.core.console import say
from authzbench.core.errors import BackendUnavailable, UserError


def cache_dir() -> Path:
    """The one directory that holds every download and build (pip, apt is system-wide, Go, Maven)."""
    p = Path(os.environ.get("AUTHZBENCH_CACHE", "~/.cache/authzbench")).expanduser()
    p.mkdir(parents=True, exist_ok=True)
    return p


@dataclass
class Deployment:
    """Running servers behind one backend, and how to reach them."""

    backend: str
    mode: str  # native | compose | external
    endpoint: dict[str, Any]  # passed to the Backend constructor
    pids: list[int] = field(default_factory=list)  # for the monitor (native)
    containers: list[str] = field(default_factory=list)  # for the monitor (compose)
    notes: list[str] = field(default_factory=list)
    _stoppers: list[Callable[[], None]] = field(default_factory=list, repr=False)

    def on_stop(self, fn: Callable[[], None]) -> None:
        self._stoppers.append(fn)

    def stop(self) -> None:
        # Reverse order: SpiceDB before the Postgres under it.
        while self._stoppers:
            fn = self._stoppers.pop()
            with contextlib.suppress(Exception):
                fn()

    def public_endpoint(self) -> dict[str, Any]:
        """The endpoint without credentials, for manifests and reports."""
        return {k: ("***" if any(s in k.lower() for s in ("password", "key", "secret", "token")) else v)
                for k, v in self.endpoint.items()}


@dataclass
class StartContext:
    run_dir: Path  # private data/log dirs go below this
    options: dict[str, Any] = field(default_factory=dict)

    def dir(self, *parts: str) -> Path:
        p = self.run_dir.joinpath(*parts)
        p.mkdir(parents=True, exist_ok=True)
        return p


# tools -----------------------------------------------------------------------------------------

def require_tool(tool: str, install_hint: str) -> str:
    path = shutil.which(tool)
    if not path:
        raise BackendUnavailable(f"{tool} not found on PATH: {install_hint}")
    return path


def run(cmd: list[str], *, cwd: Path | None = None, env: dict[str, str] | None = None,
        log: Path | None = None, what: str | None = None, timeout: float | None = None) -> None:
    """Run a build/install step; on failure, one line naming the step and the log to read."""
    full_env = {**os.environ, **(env or {})}
    if log:
        log.parent.mkdir(parents=True, exist_ok=True)
        with open(log, "ab") as fh:
            rc = run_group(cmd, cwd=cwd, env=full_env, stdout=fh, stderr=subprocess.STDOUT, timeout=timeout)
    else:
        rc = run_group(cmd, cwd=cwd, env=full_env, timeout=timeout)
    if rc != 0:
        where = f" (see {log})" if log else ""
        raise BackendUnavailable(f"{what or cmd[0]} failed with exit code {rc}{where}")


def apt_install(packages: list[str]) -> None:
    """Idempotent: installs only what dpkg does not already have."""
    missing = [p for p in packages
               if subprocess.run(["dpkg", "-s", p], capture_output=True).returncode != 0]
    if not missing:
        return
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        raise BackendUnavailable(
            f"missing Debian packages {' '.join(missing)}: install them with apt-get (as root)")
    say(f"apt-get install {' '.join(missing)}")
    log = cache_dir() / "logs" / "apt.log"
    run(["apt-get", "update", "-q"], log=log, what="apt-get update")
    run(["apt-get", "install", "-y", "-q", *missing], log=log, what=f"apt-get install {' '.join(missing)}",
        env={"DEBIAN_FRONTEND": "noninteractive"})


# processes -------------------------------------------------------------------------------------

_given_ports: set[int] = set()


def _ephemeral_low() -> int:
    """The kernel's first ephemeral port: outgoing connections take their local ports from there up."""
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768  # Linux's default


def free_port() -> int:
    """A loopback port free now, below the ephemeral range and not handed out before by this process.
    Why not bind(0): it picks from the ephemeral range, where any outgoing connection on the host (other
    containers share this network namespace) may take the port before the server binds it; Cassandra,
    started ~10 s after its ports were picked, failed with 'storage_port is in use by another process'.
    And three bind(0) calls in a row may return the same port twice."""
    low, floor = _ephemeral_low(), 10000  # below 10000: well-known services' ports
    for _ in range(200 if low > floor + 1000 else 0):
        port = random.randrange(floor, low)
        if port in _given_ports:
            continue
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        _given_ports.add(port)
        return port
    with socket.socket() as s:  # every try taken: the kernel's choice, as before
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def spawn(cmd: list[str], *, log: Path, env: dict[str, str] | None = None, cwd: Path | None = None,
          user: str | None = None) -> subprocess.Popen:
    """Start a server in its own session (so Ctrl-C in the terminal does not hit it first)."""
    if user:
        cmd = ["runuser", "-u", user, "--", *cmd]
    log.parent.mkdir(parents=True, exist_ok=True)
    fh = open(log, "ab")  # noqa: SIM115 - owned by the child
    return subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT, env={**os.environ, **(env or {})},
                            cwd=cwd, start_new_session=True)


def run_group(cmd: list[str], *, timeout: float | None = None, **popen: Any) -> int:
    """subprocess.run for a step that spawns its own children (initdb runs `postgres --single`, go build
    its compilers): in its own process group, and if the wait is cut short (a signal, the timeout) the
    whole group is killed and waited for. subprocess.run kills only the direct child: a SIGINT during
    initdb once left its orphaned `postgres --single` running on the data dir."""
    proc = subprocess.Popen(cmd, start_new_session=True, **popen)
    try:
        return proc.wait(timeout=timeout)
    except BaseException:
        kill_group(proc)
        raise


def kill_group(proc: subprocess.Popen) -> None:
    """SIGKILL a process started in its own session and every member of its group, then wait for them."""
    import psutil

    try:
        members = psutil.Process(proc.pid).children(recursive=True)
    except psutil.Error:
        members = []
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(ProcessLookupError):
        proc.kill()
    proc.wait()
    psutil.wait_procs(members, timeout=10)


def stop_pid(pid: int, timeout: float = 30.0) -> None:
    """SIGTERM the process we started, then SIGKILL if it lingers. Never touches other processes."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not pid_alive(pid):
            return
        time.sleep(0.1)
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)


def pid_alive(pid: int) -> bool:
    try:
        # Reap our own children so they do not linger as zombies that look alive.
        with contextlib.suppress(ChildProcessError):
            if os.waitpid(pid, os.WNOHANG)[0] == pid:
                return False
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def wait_until(ready: Callable[[], bool], *, timeout: float, what: str, proc: subprocess.Popen | None = None,
               log: Path | None = None, interval: float = 0.2) -> float:
    """Poll `ready` until true; fail fast with the log's tail if the process dies. Returns seconds waited."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        if proc is not None and proc.poll() is not None:
            raise BackendUnavailable(f"{what} exited with code {proc.returncode} during start{_tail(log)}")
        with contextlib.suppress(Exception):
            if ready():
                return time.monotonic() - t0
        time.sleep(interval)
    raise BackendUnavailable(f"{what} not ready after {timeout:.0f} s{_tail(log)}")


def port_open(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex((host, port)) == 0


def grpc_serving(port: int, service: str, host: str = "127.0.0.1") -> bool:
    """grpc.health.v1.Health/Check of `service` answers SERVING. An open port is not readiness: SpiceDB
    accepts connections before its health manager has seen the datastore ready, and a schema write in
    that gap failed a CI run. The request and reply are two-field protobufs, encoded by hand."""
    import grpc

    name = service.encode()
    request = b"\x0a" + bytes([len(name)]) + name if name else b""  # field 1 (service), length-delimited
    with grpc.insecure_channel(f"{host}:{port}") as channel:
        reply = channel.unary_unary("/grpc.health.v1.Health/Check")(request, timeout=2)
    return reply == b"\x08\x01"  # field 1 (status) = 1, SERVING


def _tail(log: Path | None, lines: int = 1) -> str:
    if not log or not log.exists():
        return ""
    tail = [ln for ln in log.read_text(errors="replace").splitlines() if ln.strip()][-lines:]
    return f"; last log line: {tail[-1][:300]!r} (log: {log})" if tail else f" (log: {log})"


# Go and Maven builds, cached -------------------------------------------------------------------

def go_env() -> dict[str, str]:
    c = cache_dir()
    return {"GOMODCACHE": str(c / "go" / "mod"), "GOCACHE": str(c / "go" / "build"),
            "GOTOOLCHAIN": "local", "GOFLAGS": "-mod=mod"}


def require_go() -> str:
    return require_tool("go", "install Go 1.22+ (e.g. apt-get install golang, or the official tarball)")


def require_java() -> tuple[str, str]:
    java = require_tool("java", "install a JDK 17 (apt-get install openjdk-17-jdk-headless)")
    mvn = require_tool("mvn", "install Maven (apt-get install maven)")
    return java, mvn


def stamp_ok(stamp: Path, expected: str) -> bool:
    """A build is reused only when its stamp names exactly the pinned version we want."""
    return stamp.is_file() and stamp.read_text().strip() == expected


def write_stamp(stamp: Path, value: str) -> None:
    stamp.parent.mkdir(parents=True, exist_ok=True)
    stamp.write_text(value + "\n")


def ensure_dir_owned(path: Path, user: str) -> None:
    path.mkdir(parents=True, exist_ok=True)
    shutil.chown(path, user=user, group=None)
    shutil.chown(path, user=user)


def check_user_exists(user: str) -> None:
    import pwd

    try:
        pwd.getpwnam(user)
    except KeyError:
        raise UserError(
            f"system user {user!r} does not exist (install the Debian package that creates it)") from None


@contextlib.contextmanager
def build_lock(root: Path, what: str) -> Iterator[None]:
    """One build per machine: a second start (another pytest, a bench) waits for the first build
    instead of racing it."""
    root.mkdir(parents=True, exist_ok=True)
    with open(root / "build.lock", "w") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            say(f"{what}: another process is building it; waiting for that build")
            fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def build_once(root: Path, stamp: Path, want: str, what: str, build: Callable[[], None]) -> None:
    """`build` unless `stamp` already records `want`, under root's build lock and checked again once the lock
    is held (built meanwhile by whoever held it); the stamp is written after a build that returned, so a build
    that failed midway is redone next time."""
    if stamp_ok(stamp, want):
        return
    with build_lock(root, what):
        if stamp_ok(stamp, want):
            return
        build()
        write_stamp(stamp, want)
