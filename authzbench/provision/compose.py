"""`--provision compose`: a backend's services from compose/docker-compose.yaml.

Lifecycle goes through the Docker Compose CLI (`docker compose ... up -d --wait SERVICES`), so the
file means exactly what Compose makes of it: networks and service-name DNS, dependency conditions
(one-shot migrations must exit 0 first), healthchecks, limits, volumes. The docker SDK, which has no
compose support, does the rest: the engine check, finding the containers by their compose labels,
copying Elasticsearch's generated CA out, and the CPU/memory samples for the monitor.

Endpoints are derived from the same interpolated file (passwords, keys, flags) and the host ports the
engine reports it published (each checked to be on 127.0.0.1), so they cannot drift from what Compose
did. The engine and Compose v2 come from provision/engine.py; `--local-images` (AUTHZBENCH_LOCAL_IMAGES=1)
adds compose/local/local-images.yaml, whose images provision/images.py builds here. The project name is
AUTHZBENCH_COMPOSE_PROJECT (default authzbench), so tests never touch a user's project.

Which services are a backend's is its declaration's `services` (systems/<name>/system.py); the adapter's
endpoint_from_compose comes in as `read` (provisioning never imports an adapter; run/servers.py hands it
over).
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import subprocess
import tarfile
import threading
from collections import deque
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from authzbench.core.console import say
from authzbench.core.errors import BackendUnavailable, UserError
from authzbench.provision.base import Deployment, cache_dir
from authzbench.systems import load, system, systems

COMPOSE_DIR = Path(__file__).resolve().parents[2] / "compose"
COMPOSE_FILE = COMPOSE_DIR / "docker-compose.yaml"
VERSIONS_FILE = COMPOSE_DIR / "versions.env"
PROJECT = "authzbench"
UP_TIMEOUT_S = 600  # first `up` pulls several GB of images
LOCAL_IMAGES_VAR = "AUTHZBENCH_LOCAL_IMAGES"
_VAR = re.compile(r"\$\$|\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")



def services(name: str) -> tuple[str, ...]:
    """The services of compose/docker-compose.yaml to `up` for a backend (their dependencies are followed from
    the file): its declaration's; none for an in-process one. A unit test keeps every service used."""
    return system(name).services


# the file, read offline -------------------------------------------------------------------------

def versions() -> dict[str, str]:
    """compose/versions.env: NAME=VALUE lines, the one place server versions are pinned."""
    out = {}
    for line in VERSIONS_FILE.read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            k, _, v = line.partition("=")
            out[k.strip()] = v.strip()
    return out


def environment() -> dict[str, str]:
    """What Compose interpolates with: the shell's environment wins over --env-file (plus the local
    images' tags, which authzbench passes to Compose's environment). With --local-images, the versions
    are those of the local images (every official image they replace is swapped, so Compose never uses
    the pins)."""
    if local_images():
        from authzbench.provision.images import local_versions

        return {**versions(), **os.environ, **local_versions(), **_local_tags}
    return {**versions(), **os.environ, **_local_tags}


def interpolate(value: Any, env: dict[str, str]) -> Any:
    """Compose's ${VAR}, ${VAR:-default} and $$ interpolation, recursively (the subset the file uses)."""
    if isinstance(value, str):
        def sub(m: re.Match) -> str:
            if m.group(0) == "$$":
                return "$"
            name, default = m.group(1), m.group(2)
            if env.get(name):
                return env[name]
            if default is not None:
                return default
            raise UserError(f"compose: variable {name} is not set (compose/versions.env or the environment)")

        return _VAR.sub(sub, value)
    if isinstance(value, list):
        return [interpolate(v, env) for v in value]
    if isinstance(value, dict):
        return {k: interpolate(v, env) for k, v in value.items()}
    return value


def project() -> str:
    return os.environ.get("AUTHZBENCH_COMPOSE_PROJECT") or PROJECT


def local_images() -> bool:
    return os.environ.get(LOCAL_IMAGES_VAR) == "1"


def compose_files() -> list[Path]:
    from authzbench.provision.images import OVERRIDE_FILE

    return [COMPOSE_FILE, *([OVERRIDE_FILE] if local_images() else [])]


def merge_override(spec: dict, override: dict) -> dict:
    """Compose's merge of a second -f file, for the keys an override here sets: a mapping (environment,
    healthcheck) is merged key by key, anything else (image, command) replaced."""
    for svc, body in (override.get("services") or {}).items():
        target = spec["services"][svc]
        for key, value in (body or {}).items():
            target[key] = {**(target.get(key) or {}), **value} if isinstance(value, dict) else value
    return spec


def load_compose(env: dict[str, str] | None = None) -> dict:
    """The compose file(s), merge keys resolved (PyYAML does `<<`) and variables interpolated."""
    env = environment() if env is None else env
    spec = interpolate(yaml.safe_load(COMPOSE_FILE.read_text()), env)
    for extra in compose_files()[1:]:
        spec = merge_override(spec, interpolate(yaml.safe_load(extra.read_text()), env))
    return spec


def one_shots(spec: dict) -> set[str]:
    """Services others wait on to *complete* (migrations, cert generation): not long-running."""
    return {dep for svc in spec["services"].values()
            for dep, cond in (svc.get("depends_on") or {}).items()
            if (cond or {}).get("condition") == "service_completed_successfully"}


def services_for(name: str, spec: dict) -> list[str]:
    """The backend's services plus everything they depend on, dependencies first."""
    order: list[str] = []

    def visit(svc: str) -> None:
        if svc in order:
            return
        for dep in spec["services"][svc].get("depends_on") or {}:
            visit(dep)
        order.append(svc)

    for svc in services(name):
        visit(svc)
    return order


def published_port(spec: dict, service: str, target: int) -> int:
    """Host port of `service`'s container port `target` (short syntax 127.0.0.1:HOST:TARGET)."""
    for p in spec["services"][service].get("ports", []):
        host_ip, host_port, container_port = str(p).split(":")
        if int(container_port.split("/")[0]) == target:
            return int(host_port)
    raise UserError(f"compose: service {service} publishes no port for {target}")


def _flag(cmd: list[str], flag: str) -> str:
    return cmd[cmd.index(flag) + 1]


def _pg_settings(cmd: list[str]) -> dict[str, str]:
    return dict(cmd[i + 1].split("=", 1) for i, a in enumerate(cmd) if a == "-c")


@dataclass(frozen=True)
class ComposeFile:
    """The interpolated compose file as one backend reads its endpoint from it (its
    `endpoint_from_compose`): published ports, services' environment and command flags, pinned versions."""

    name: str  # the backend
    spec: dict
    env: dict[str, str]
    copies: list[tuple[str, str, Path]] = field(default_factory=list)  # (service, path inside, local copy)
    published: dict[tuple[str, int], int] = field(default_factory=dict)  # what the engine reports, once up

    def port(self, service: str, target: int) -> int:
        return self.published.get((service, target)) or published_port(self.spec, service, target)

    def environment(self, service: str) -> dict[str, str]:
        return self.spec["services"][service].get("environment") or {}

    def command(self, service: str) -> list[str]:
        return self.spec["services"][service].get("command") or []

    def flag(self, service: str, flag: str) -> str:
        return _flag(self.command(service), flag)

    def pg_settings(self, service: str) -> dict[str, str]:
        return _pg_settings(self.command(service))

    def cli(self) -> list[str]:
        """The compose command line of this project (`docker compose -p ... -f ...`), for an adapter that
        must reach into its container (Scylla's SSTable upload)."""
        return compose_cmd()

    def copy_from(self, service: str, path: str) -> str:
        """A file that exists only inside `service`'s container (a generated CA): compose_up copies it
        out once the service is up; returns where the copy will be."""
        dest = cache_dir() / "compose" / f"{service}-{Path(path).name}"
        self.copies.append((service, path, dest))
        return str(dest)


# How a backend reads its endpoint from the file: its adapter's endpoint_from_compose.
Reader = Callable[[ComposeFile], dict[str, Any]]


def endpoint(name: str, read: Reader | None, spec: dict | None = None) -> dict[str, Any]:
    """What the backend's adapter expects, read from the interpolated file (no engine needed)."""
    return _endpoint(ComposeFile(name, spec or load_compose(), environment()), read)


def _endpoint(view: ComposeFile, read: Reader | None) -> dict[str, Any]:
    """Each backend's adapter reads its own (`read`, its endpoint_from_compose); a system without an adapter
    declares its reader (`endpoint`)."""
    if not services(view.name):
        raise UserError(f"compose: no endpoint for backend {view.name!r} (it has no compose services)")
    declared = system(view.name).endpoint
    own = load(declared) if declared else read
    if own is None:
        raise UserError(f"compose: backend {view.name!r} has no adapter to read its endpoint")
    return own(view)


# the engine -------------------------------------------------------------------------------------

_client_lock = threading.RLock()  # engine() is called with it held
_cached_client = None
_engine_cache: list = []  # the Engine of this process, once found
_local_tags: dict[str, str] = {}  # AUTHZBENCH_LOCAL_<IMAGE> -> tag, for local-images.yaml


def engine():
    """The engine and Compose v2 this process uses (provision/engine.py); started only by `authzbench
    engine up` / `nox -s engine` / the pytest session, never implicitly by a run."""
    from authzbench.provision.engine import ensure_engine

    with _client_lock:
        if not _engine_cache:
            _engine_cache.append(ensure_engine(start=False))
        return _engine_cache[0]


def use_engine(e) -> None:
    """Adopt an engine found or started by the caller (the pytest session)."""
    with _client_lock:
        _engine_cache[:] = [e]


def _client():
    """A docker SDK client that has answered a ping, or one line saying there is no engine."""
    global _cached_client
    with _client_lock:
        if _cached_client is not None:
            return _cached_client
        try:
            import docker

            engine()  # sets DOCKER_HOST when the engine is authzbench's own
            client = docker.from_env(timeout=30)
            client.ping()
        except Exception as e:  # noqa: BLE001 - no socket, no permission, no daemon: all one line
            msg = " ".join(str(e).split())[:200] or type(e).__name__
            raise BackendUnavailable(f"no Docker engine reachable (docker.from_env failed: {msg}); "
                                     "use --provision native or external") from None
        _cached_client = client
        return client


def require_engine() -> None:
    """A Docker engine answers (its client pinged once and kept), or BackendUnavailable in one line."""
    _client()


def compose_cmd(*args: str) -> list[str]:
    prefix = _engine_cache[0].compose if _engine_cache else ["docker", "compose"]
    files = [a for f in compose_files() for a in ("-f", str(f))]
    return [*prefix, "--ansi", "never", "-p", project(), *files, "--env-file", str(VERSIONS_FILE), *args]


def _require_compose_cli() -> None:
    engine()  # raises one line when there is no engine or no Compose v2


def _compose(*args: str, what: str) -> None:
    """Run a compose command, its progress lines shown as they come; one line if it fails."""
    tail: deque[str] = deque(maxlen=15)
    proc = subprocess.Popen(compose_cmd(*args), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env={**os.environ, **_local_tags})
    assert proc.stdout is not None
    for line in proc.stdout:
        line = line.rstrip()
        if line:
            tail.append(line)
            say(f"compose: {line}")
    if proc.wait() != 0:
        last = next((t for t in reversed(tail) if "error" in t.lower()), tail[-1] if tail else "no output")
        raise BackendUnavailable(f"{what} failed: {' '.join(last.split())[:300]} (see `docker compose -p "
                                 f"{project()} logs`)")


def _containers(client, services: list[str]) -> dict[str, Any]:
    """service -> container of this compose project, found by the labels Compose sets."""
    found = client.containers.list(all=True, filters={"label": f"com.docker.compose.project={project()}"})
    by_service = {c.labels.get("com.docker.compose.service"): c for c in found}
    return {s: by_service[s] for s in services if s in by_service}


def _copy_out(container, path: str, dest: Path) -> None:
    stream, _ = container.get_archive(path)
    with tarfile.open(fileobj=io.BytesIO(b"".join(stream))) as tar:
        member = tar.getmembers()[0]
        data = tar.extractfile(member)
        if data is None:
            raise BackendUnavailable(f"compose: {path} in {container.name} is not a file")
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_bytes(data.read())


def published_ports(found: dict[str, Any]) -> dict[tuple[str, int], int]:
    """(service, container port) -> host port, as the engine published them; anything bound beyond
    127.0.0.1 is refused (the file publishes on loopback only: another address means it was changed)."""
    out: dict[tuple[str, int], int] = {}
    for svc, c in found.items():
        c.reload()
        for port, binds in ((c.attrs.get("NetworkSettings") or {}).get("Ports") or {}).items():
            for b in binds or []:
                if b.get("HostIp") != "127.0.0.1":
                    where = b.get("HostIp") or "every address"
                    raise BackendUnavailable(
                        f"compose: {svc} publishes {port} on {where}:{b.get('HostPort')}, "
                        "not 127.0.0.1 only; refusing to use it")
                out[(svc, int(port.split("/")[0]))] = int(b["HostPort"])
    return out


def compose_up(name: str, read: Reader | None = None) -> Deployment:
    """Start (or reuse) a backend's services, wait until healthy, return how to reach them (`read` from
    the file, see _endpoint)."""
    spec = load_compose()
    wanted = list(services(name))
    if not wanted:
        raise UserError(f"{name} has no compose services; use --provision native")
    client = _client()
    _require_compose_cli()
    if local_images():
        from authzbench.provision import images

        _local_tags.update(images.ensure(services_for(name, spec)))
        spec = load_compose()  # now with the local images' tags
    say(f"compose: up {', '.join(wanted)} (a first run pulls the images; timeout {UP_TIMEOUT_S} s)")
    try:
        _compose("up", "-d", "--wait", "--wait-timeout", str(UP_TIMEOUT_S), *wanted,
                 what=f"docker compose up {' '.join(wanted)}")
    except BackendUnavailable:
        # A failed `up` (a host port taken, an unhealthy service) leaves created containers behind.
        with contextlib.suppress(BackendUnavailable):
            compose_down(name)
        raise
    long_running = [s for s in services_for(name, spec) if s not in one_shots(spec)]
    found = _containers(client, long_running)
    missing = [s for s in long_running if s not in found]
    if missing:
        raise BackendUnavailable(f"compose: no container for {', '.join(missing)} after `up`")
    view = ComposeFile(name, spec, environment(), published=published_ports(found))
    ep = _endpoint(view, read)
    for svc, path, dest in view.copies:  # files the endpoint needs from inside a container (a CA)
        _copy_out(found[svc], path, dest)
    v = environment()
    images = sorted({spec["services"][s]["image"] for s in long_running})
    notes = [
        f"docker compose services {', '.join(long_running)} ({', '.join(images)}); limits per container: "
        f"{v.get('AUTHZBENCH_CPUS') or 2} CPUs, {v.get('AUTHZBENCH_MEM') or '4g'} memory"]
    return Deployment(name, "compose", ep, containers=[found[s].id for s in long_running],
                      notes=notes)


def compose_down(name: str) -> None:
    """Stop and remove a backend's containers (named volumes, i.e. loaded data, are kept).

    A shared dependency (cockroach under both `cockroach` and `spicedb-crdb`) stays up while another
    backend that needs it still has its own services running."""
    spec = load_compose()
    client = _client()
    _require_compose_cli()
    mine = services_for(name, spec)
    running = {s for s, c in _containers(client, list(spec["services"])).items() if c.status == "running"}
    still_needed: set[str] = set()
    for other in systems():
        if other != name and set(services(other)) & running:
            still_needed |= set(services_for(other, spec))
    targets = [s for s in reversed(mine) if s not in still_needed]
    if targets:
        _compose("rm", "--stop", "--force", *targets, what=f"docker compose rm {' '.join(targets)}")


def port_variables() -> list[str]:
    """The AUTHZBENCH_*_PORT variables the compose file publishes with; 0 = an ephemeral port, which
    compose_up reads back from the engine (how the tests avoid a port a user's server holds)."""
    return sorted(set(re.findall(r"\$\{(AUTHZBENCH_[A-Z0-9_]+_PORT)\b", COMPOSE_FILE.read_text())))


def compose_project_down() -> None:
    """`down -v` of the whole project: containers, its network and its named volumes (the loaded data)."""
    _client()
    _compose(
        "down", "-v", "--remove-orphans", "--timeout", "30", what=f"docker compose -p {project()} down -v")


def leftovers() -> list[str]:
    """Containers, networks and volumes the engine still holds for this project (`down -v` leaves none)."""
    client = _client()
    label = {"label": f"com.docker.compose.project={project()}"}
    return ([f"container {c.name}" for c in client.containers.list(all=True, filters=label)]
            + [f"network {n.name}" for n in client.networks.list(filters=label)]
            + [f"volume {v.name}" for v in client.volumes.list(filters=label)])


# monitor ----------------------------------------------------------------------------------------

_prev_cpu: dict[str, tuple[int, int]] = {}  # container id -> (container usage ns, system usage ns)


def cpu_percent(stats: dict, prev: tuple[int, int] | None = None) -> float:
    """CPU % the way the docker CLI computes it: container CPU time over host CPU time since the
    previous sample, times the number of online CPUs (so 2 busy cores = 200 %)."""
    cpu = stats.get("cpu_stats") or {}
    usage = (cpu.get("cpu_usage") or {}).get("total_usage", 0)
    system = cpu.get("system_cpu_usage", 0)
    if prev is None:
        pre = stats.get("precpu_stats") or {}
        prev = ((pre.get("cpu_usage") or {}).get("total_usage", 0), pre.get("system_cpu_usage", 0))
    d_cpu, d_sys = usage - prev[0], system - prev[1]
    ncpu = cpu.get("online_cpus") or len((cpu.get("cpu_usage") or {}).get("percpu_usage") or []) or 1
    return d_cpu / d_sys * ncpu * 100.0 if d_cpu > 0 and d_sys > 0 and prev[1] > 0 else 0.0


def memory_bytes(stats: dict) -> int:
    """Memory the way the docker CLI shows it: usage minus page cache (cgroup v2 inactive_file,
    cgroup v1 total_inactive_file)."""
    mem = stats.get("memory_stats") or {}
    usage = int(mem.get("usage", 0))
    st = mem.get("stats") or {}
    cache = st.get("inactive_file", st.get("total_inactive_file", 0))
    return usage - cache if 0 < cache < usage else usage


def container_stats(ids: list[str]) -> list[tuple[float, int]]:
    """(CPU %, memory bytes) per container, for the monitor. one_shot stats return at once (no
    1 s wait for a second sample), so CPU % is taken against this function's previous sample of the
    same container, like psutil's cpu_percent(None); the first call primes it (0 %)."""
    client = _client()

    def one(cid: str) -> tuple[float, int]:
        import docker

        try:
            c = client.containers.get(cid)
            try:
                s = c.stats(stream=False, one_shot=True)
            except docker.errors.InvalidVersion:  # engine API < 1.41: the daemon takes two samples itself
                s = c.stats(stream=False)
        except docker.errors.DockerException:  # a container that died mid-phase: idle, not a crash
            return 0.0, 0
        cpu = s.get("cpu_stats") or {}
        now = ((cpu.get("cpu_usage") or {}).get("total_usage", 0), cpu.get("system_cpu_usage", 0))
        prev = _prev_cpu.get(cid)
        _prev_cpu[cid] = now
        return (cpu_percent(s, prev) if prev else 0.0), memory_bytes(s)

    if len(ids) <= 1:
        return [one(c) for c in ids]
    with ThreadPoolExecutor(max_workers=min(8, len(ids))) as pool:
        return list(pool.map(one, ids))
