"""A private PostgreSQL cluster from Debian's packages, shared by the recipes: a backend's own server or the
datastore under a Go engine or a wire-protocol stand-in (they call `start_cluster(ctx, name=...,
settings=...)`).

Each cluster is its own initdb'd data dir under the run dir, listening on 127.0.0.1 at a private port
with a private unix-socket dir, run as the `postgres` system user (initdb and postgres refuse root).
Host connections use a generated scram password, so wrong credentials are really refused.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import secrets
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from authzbench.core.console import say
from authzbench.core.errors import BackendUnavailable
from authzbench.provision.base import (
    StartContext,
    apt_install,
    check_user_exists,
    free_port,
    pid_alive,
    run_group,
    stop_pid,
    wait_until,
)

PG_USER = "postgres"

# Tuned for benchmarking, durability kept: fsync and full_page_writes stay on; only
# synchronous_commit=off (a crash may lose the last few hundred ms of commits, never corrupts).
# track_commit_timestamp is required by SpiceDB's Watch API; jit off because JIT compilation
# adds tens of ms to the first run of large lookups and nothing to short indexed checks.
BENCH_SETTINGS: dict[str, str] = {
    "shared_buffers": "1GB",
    "effective_cache_size": "4GB",
    "work_mem": "32MB",
    "maintenance_work_mem": "512MB",
    "max_connections": "200",
    "synchronous_commit": "off",
    "fsync": "on",
    "full_page_writes": "on",
    "wal_compression": "on",
    "max_wal_size": "4GB",  # no forced checkpoints in the middle of a bulk load
    "checkpoint_timeout": "15min",
    "random_page_cost": "1.1",  # SSD / page cache: index scans are cheap
    "jit": "off",
    "track_commit_timestamp": "on",
    "log_min_messages": "warning",
    "log_checkpoints": "off",
}


@dataclass
class PgCluster:
    dsn: str  # postgresql://postgres:PASSWORD@127.0.0.1:PORT/postgres, ready for any libpq/pgx client
    port: int
    pid: int  # the postmaster
    version: str  # SHOW server_version, e.g. "15.14 (Debian 15.14-0+deb12u1)"
    data_dir: Path
    log: Path
    password: str = ""
    settings: dict[str, str] = field(default_factory=dict)  # what we set on top of the defaults
    socket_dir: Path | None = None
    _proc: subprocess.Popen | None = field(default=None, repr=False)
    _scratch: list[Path] = field(default_factory=list, repr=False)  # dirs outside the run dir we made

    @property
    def public_dsn(self) -> str:
        """The DSN without the password (for manifests, reports and logs)."""
        return f"postgresql://{PG_USER}@127.0.0.1:{self.port}/postgres"

    def settings_line(self) -> str:
        """For the report: 'tuned for benchmarking: shared_buffers=1GB, ...'."""
        return "tuned for benchmarking: " + ", ".join(f"{k}={v}" for k, v in self.settings.items()
                                                      if not k.startswith("log_"))

    def stop(self) -> None:
        """Fast shutdown (SIGINT: abort sessions, checkpoint, exit); SIGTERM's 'smart' mode would wait
        for every client to disconnect."""
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, signal.SIGINT)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and pid_alive(self.pid):
            time.sleep(0.05)
        stop_pid(self.pid, timeout=10)
        if self._proc is not None:
            with contextlib.suppress(Exception):
                self._proc.wait(timeout=5)
        for d in self._scratch:
            shutil.rmtree(d, ignore_errors=True)


def installed() -> bool:
    """Debian's PostgreSQL server is installed (bin_dir would return at once)."""
    return any(Path("/usr/lib/postgresql").glob("*/bin/postgres"))


def bin_dir() -> Path:
    """The newest Debian PostgreSQL installed (/usr/lib/postgresql/<major>/bin)."""
    root = Path("/usr/lib/postgresql")
    if not root.is_dir() or not any(root.glob("*/bin/postgres")):
        apt_install(["postgresql", "postgresql-contrib"])
    found = sorted((p.parent for p in root.glob("*/bin/postgres")),
                   key=lambda b: int(b.parent.name) if b.parent.name.isdigit() else 0)
    if not found:
        raise BackendUnavailable("PostgreSQL server binaries not found under /usr/lib/postgresql: "
                                 "apt-get install postgresql postgresql-contrib")
    return found[-1]


def _as_pg() -> dict:
    """Popen kwargs to run as the postgres user when we are root (then the postmaster is our direct
    child, so its PID is the one we monitor and stop)."""
    if os.geteuid() != 0:
        return {}
    return {"user": PG_USER, "group": PG_USER, "extra_groups": []}


def _pg_can_reach(path: Path) -> bool:
    if os.geteuid() != 0:
        return True
    return subprocess.run(["test", "-w", str(path)], **_as_pg()).returncode == 0


def _own(path: Path) -> None:
    path.mkdir(parents=True, exist_ok=True)
    if os.geteuid() == 0:
        shutil.chown(path, user=PG_USER, group=PG_USER)


SCRATCH_ROOT = Path("/var/tmp/authzbench-pg")


def _cluster_dir(ctx: StartContext, name: str) -> tuple[Path, list[str]]:
    """Data lives under the run dir unless the postgres user cannot traverse to it (e.g. a run dir
    under /root or pytest's 0700 /tmp/pytest-of-root): then under /var/tmp, with a symlink from the
    run dir, named after the run dir so a restart replaces the old copy instead of leaking one."""
    home = ctx.dir(name)
    _own(home)
    if _pg_can_reach(home):
        return home, []
    _sweep_orphans()
    key = hashlib.sha1(str(home.resolve()).encode()).hexdigest()[:12]
    alt = SCRATCH_ROOT / f"{name}-{key}"
    shutil.rmtree(alt, ignore_errors=True)
    alt.parent.mkdir(parents=True, exist_ok=True)
    os.chmod(alt.parent, 0o755)
    _own(alt)
    (alt / "origin").write_text(str(home.resolve()))
    link = home / "cluster"
    with contextlib.suppress(FileNotFoundError):
        link.unlink()
    link.symlink_to(alt)
    return alt, [f"{name}: data in {alt} (the postgres user cannot traverse {home})"]


def _sweep_orphans() -> None:
    """Remove our /var/tmp copies whose run dir is gone (a server stopped by PID only, or killed):
    only dirs carrying our `origin` marker, and never one whose postmaster still runs."""
    for d in SCRATCH_ROOT.glob("*/origin"):
        with contextlib.suppress(OSError, ValueError):
            if Path(d.read_text().strip()).exists():
                continue
            pidfile = d.parent / "data" / "postmaster.pid"
            if pidfile.exists() and pid_alive(int(pidfile.read_text().split()[0])):
                continue
            shutil.rmtree(d.parent, ignore_errors=True)


def _socket_dir(base: Path) -> Path:
    # A unix socket path must fit in 107 bytes; fall back to a short private dir in /tmp.
    sock = base / "sock"
    if len(str(sock)) > 80:
        sock = Path(tempfile.mkdtemp(prefix="authzbench-pgsock-"))
    _own(sock)
    return sock


def start_cluster(ctx: StartContext, *, name: str, settings: dict[str, str] | None = None) -> PgCluster:
    """initdb + start a private cluster; returns once it accepts connections. `settings` override
    BENCH_SETTINGS (e.g. FerretDB or SpiceDB needs)."""
    check_user_exists(PG_USER)
    bins = bin_dir()
    base, notes = _cluster_dir(ctx, name)
    data, log = base / "data", ctx.dir(name) / "postgres.log"  # the log stays in the run dir, always
    shutil.rmtree(data, ignore_errors=True)  # a start is always a fresh cluster
    _own(data)
    sock = _socket_dir(base)
    password = secrets.token_urlsafe(18)
    pwfile = base / "pwfile"
    pwfile.write_text(password + "\n")
    if os.geteuid() == 0:
        shutil.chown(pwfile, user=PG_USER, group=PG_USER)
    os.chmod(pwfile, 0o600)

    t0 = time.perf_counter()
    say(f"{name}: initdb ({bins.parent.name}) in {data}")
    with open(log, "ab") as fh:
        rc = run_group([str(bins / "initdb"), "-D", str(data), "-U", PG_USER, "--pwfile", str(pwfile),
                        "--auth-host=scram-sha-256", "--auth-local=trust", "-E", "UTF8",
                        "--locale=C", "--no-instructions"],
                       stdout=fh, stderr=subprocess.STDOUT, **_as_pg())
    pwfile.unlink()
    if rc != 0:
        raise BackendUnavailable(f"{name}: initdb failed with exit code {rc} (see {log})")

    port = free_port()
    applied = {**BENCH_SETTINGS, **(settings or {})}
    # Written into postgresql.conf (not only -c flags) so a manual `pg_ctl start` of the same
    # data dir, e.g. while debugging, runs with the same settings.
    with open(data / "postgresql.conf", "a") as conf:
        conf.write("\n# authzbench\n")
        conf.write(f"listen_addresses = '127.0.0.1'\nport = {port}\nunix_socket_directories = '{sock}'\n")
        for k, v in applied.items():
            conf.write(f"{k} = '{v}'\n")

    fh = open(log, "ab")  # noqa: SIM115 - owned by the child
    proc = subprocess.Popen([str(bins / "postgres"), "-D", str(data)], stdout=fh, stderr=subprocess.STDOUT,
                            start_new_session=True, **_as_pg())
    fh.close()
    pg_isready = bins / "pg_isready"

    def ready() -> bool:
        return (
            subprocess.run([str(pg_isready), "-q", "-h", "127.0.0.1", "-p", str(port), "-t", "1"]).returncode
            == 0)

    wait_until(ready, timeout=60, what=f"{name} (PostgreSQL)", proc=proc, log=log, interval=0.05)
    dsn = f"postgresql://{PG_USER}:{password}@127.0.0.1:{port}/postgres"
    scratch = [p for p in (base, sock) if not p.is_relative_to(ctx.run_dir)]
    cluster = PgCluster(
        dsn=dsn, port=port, pid=proc.pid, version=_server_version(dsn), data_dir=data, log=log,
        password=password, settings=applied, socket_dir=sock, _proc=proc, _scratch=scratch)
    for n in notes:
        say(n)
    say(f"{name}: PostgreSQL {cluster.version.split()[0]} ready on 127.0.0.1:{port} "
        f"(pid {proc.pid}, {time.perf_counter() - t0:.1f} s)")
    return cluster


def _server_version(dsn: str) -> str:
    import psycopg

    with psycopg.connect(dsn, connect_timeout=10) as conn:
        row = conn.execute("SHOW server_version").fetchone()
        return str(row[0]) if row else "unknown"
