"""A Docker engine and Compose v2 for `--provision compose`, found or (as root) installed and started.

Order: the engine the user already runs (DOCKER_HOST, or /var/run/docker.sock answering) is used as is
and never stopped; else one authzbench already started (its private socket answers); else, as root,
Debian's `docker.io` is installed if missing and a dockerd is started on a private socket and data
root, so it cannot be mistaken for the user's engine (`default_mode()` keeps choosing native). Only the
process that started a dockerd stops it, by the PID it recorded. Compose v2: the `docker compose` plugin
if it is v2.20+ (`up --wait`), else the standalone binary built once from the Go module proxy (Debian
packages only Compose 1.29). Every step says in one line what it did.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from authzbench.core.console import say
from authzbench.core.errors import BackendUnavailable
from authzbench.provision.base import apt_install, cache_dir, stop_pid

USER_SOCKET = Path("/var/run/docker.sock")
# The engine authzbench starts: its own socket, exec root and data root (kept between runs: the image cache).
OWN_DIR = Path("/run/authzbench-docker")
OWN_SOCKET = OWN_DIR / "docker.sock"
OWN_PIDFILE = OWN_DIR / "dockerd.pid"
OWN_DATA = Path("/var/lib/authzbench-docker")
ENGINE_START_S = 60  # measured ~3 s here; containerd's first start on a cold disk takes longer
COMPOSE_MODULE = "github.com/docker/compose/v2"
COMPOSE_VERSION = "v2.40.3"
COMPOSE_MIN = (2, 20)  # `up --wait` and `--wait-timeout`


@dataclass
class Engine:
    host: str  # the DOCKER_HOST value
    compose: list[str]  # argv prefix of Compose v2
    started_pid: int | None = None  # the dockerd this process started, else None
    notes: list[str] = field(default_factory=list)

    def stop(self) -> None:
        """Stop the dockerd this process started (by PID), nothing else."""
        if self.started_pid:
            stop_pid(self.started_pid, timeout=30)
            say(f"docker engine: stopped the dockerd authzbench started (pid {self.started_pid})")
            self.started_pid = None


def answers(sock: Path) -> bool:
    """The engine behind a unix socket answers /_ping (a socket file can outlive its engine)."""
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(2)
            s.connect(str(sock))
            s.sendall(b"GET /_ping HTTP/1.0\r\n\r\n")
            return b" 200 " in s.recv(64)
    except OSError:
        return False


def _running_engine() -> tuple[str, str] | None:
    """(DOCKER_HOST, what it is) of an engine that answers, the user's first."""
    if os.environ.get("DOCKER_HOST"):  # the user's choice: used or refused, never replaced by another
        host = os.environ["DOCKER_HOST"]
        if host.startswith("unix://") and not answers(Path(host.removeprefix("unix://"))):
            raise BackendUnavailable(
                f"DOCKER_HOST={host} does not answer; start that engine or unset DOCKER_HOST")
        return host, "the engine named by DOCKER_HOST"
    if answers(USER_SOCKET):
        return f"unix://{USER_SOCKET}", f"the running engine at {USER_SOCKET}"
    if answers(OWN_SOCKET):
        return f"unix://{OWN_SOCKET}", f"the engine authzbench started at {OWN_SOCKET}"
    return None


def _start_dockerd() -> int:
    """Start a dockerd on authzbench's own socket and data root; its PID."""
    if os.geteuid() != 0:
        raise BackendUnavailable("no Docker engine answers and starting one needs root: start Docker, or use "
                                 "--provision native")
    if not shutil.which("dockerd"):
        apt_install(["docker.io"])
    OWN_DIR.mkdir(parents=True, exist_ok=True)
    OWN_DATA.mkdir(parents=True, exist_ok=True)
    log = cache_dir() / "logs" / "dockerd.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    # No default bridge (compose makes its own networks); published ports stay as the compose file says.
    cmd = ["dockerd", "--host", f"unix://{OWN_SOCKET}", "--data-root", str(OWN_DATA),
           "--exec-root", str(OWN_DIR / "exec"), "--pidfile", str(OWN_PIDFILE), "--bridge", "none"]
    with open(log, "ab") as fh:
        proc = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True)
    deadline = time.monotonic() + ENGINE_START_S
    while not answers(OWN_SOCKET):
        if proc.poll() is not None or time.monotonic() > deadline:
            if proc.poll() is None:
                stop_pid(proc.pid, timeout=10)
            tail = (log.read_text(errors="replace").strip().splitlines() or ["no output"])[-1]
            raise BackendUnavailable(
                f"dockerd did not start within {ENGINE_START_S} s: {tail[:200]} (log {log})")
        time.sleep(0.2)
    return proc.pid


def _version(argv: list[str]) -> tuple[int, ...] | None:
    try:
        out = subprocess.run([*argv, "version", "--short"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    m = re.search(r"(\d+)\.(\d+)", out.stdout)
    return tuple(int(x) for x in m.groups()) if out.returncode == 0 and m else None


def compose_cli(build: bool = True) -> list[str]:
    """Compose v2's argv prefix: the installed plugin if new enough, else our build of the standalone
    binary."""
    if (v := _version(["docker", "compose"])) and v >= COMPOSE_MIN:
        return ["docker", "compose"]
    exe = cache_dir() / "docker-compose" / f"docker-compose-{COMPOSE_VERSION}"
    if not exe.is_file() and not build:
        raise BackendUnavailable("Docker Compose v2.20+ is missing (Debian packages only 1.29, without `up "
                                 "--wait`): install docker-compose-plugin, or run `nox -s engine`")
    if not exe.is_file():
        from authzbench.provision.gobuild import with_linked_version

        # go install refuses the module (its go.mod has exclude directives): the module-copy build of gobuild.
        exe = with_linked_version("docker-compose", COMPOSE_MODULE, COMPOSE_VERSION, "./cmd",
                                  f"{COMPOSE_MODULE}/internal.Version", expect="~8 min").binary()
    return [str(exe)]


def ensure_engine(start: bool = True) -> Engine:
    """An engine that answers and Compose v2, DOCKER_HOST set for this process and its children."""
    found = _running_engine()
    pid = None
    if found:
        host, what = found
        note = f"docker engine: using {what}"
    elif not start:
        raise BackendUnavailable(
            "no Docker engine answers (DOCKER_HOST, /var/run/docker.sock); start one, or run `nox -s engine`")
    else:
        pid = _start_dockerd()
        host = f"unix://{OWN_SOCKET}"
        note = f"docker engine: started dockerd (pid {pid}, socket {OWN_SOCKET}, data {OWN_DATA})"
    os.environ["DOCKER_HOST"] = host
    try:
        compose = compose_cli(build=start)
    except BackendUnavailable:
        if pid:
            stop_pid(pid, timeout=30)
        raise
    say(f"{note}; compose: {' '.join(compose)}")
    return Engine(host, compose, pid, [note])


def stop_own() -> str:
    """`authzbench engine down`: stop the dockerd authzbench started (the PID its pidfile names, checked to
    be a dockerd on authzbench's socket), never another engine. One line saying what happened."""
    try:
        pid = int(OWN_PIDFILE.read_text().strip())
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except (OSError, ValueError):
        return "docker engine: authzbench started none; nothing stopped"
    if (not cmdline
        or Path(cmdline[0].decode()).name != "dockerd"
        or f"unix://{OWN_SOCKET}".encode() not in cmdline):
        return f"docker engine: pid {pid} is not the dockerd authzbench started; nothing stopped"
    stop_pid(pid, timeout=30)
    return f"docker engine: stopped the dockerd authzbench started (pid {pid})"
