"""`--provision compose`: a backend's services from compose/docker-compose.yaml.

Lifecycle goes through the Docker Compose CLI (`docker compose ... up -d --wait SERVICES`), so the
file means exactly what Compose makes of it: networks and service-name DNS, dependency conditions
(one-shot migrations must exit 0 first), healthchecks, limits, volumes. The docker SDK, which has no
compose support, does the rest: the engine check, finding the containers by their compose labels,
copying Elasticsearch's generated CA out, and the CPU/memory samples for the monitor.

Endpoints are derived from the same interpolated file (ports, passwords, keys), so they cannot
drift from what Compose publishes. Not exercised on the project's machines (no Docker engine).
"""

from __future__ import annotations

import io
import os
import re
import subprocess
import tarfile
import threading
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import yaml

from authzbench.backends.registry import BACKENDS, entry
from authzbench.errors import BackendUnavailable, UserError
from authzbench.provision.base import Deployment, cache_dir, say

COMPOSE_DIR = Path(__file__).resolve().parents[2] / "compose"
COMPOSE_FILE = COMPOSE_DIR / "docker-compose.yaml"
VERSIONS_FILE = COMPOSE_DIR / "versions.env"
PROJECT = "authzbench"
UP_TIMEOUT_S = 600  # first `up` pulls several GB of images
_VAR = re.compile(r"\$\$|\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


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
    """What Compose interpolates with: the shell's environment wins over --env-file."""
    return {**versions(), **os.environ}


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


def load_compose(env: dict[str, str] | None = None) -> dict:
    """The compose file, merge keys resolved (PyYAML does `<<`) and variables interpolated."""
    return interpolate(yaml.safe_load(COMPOSE_FILE.read_text()), environment() if env is None else env)


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

    for svc in entry(name).compose_services:
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


def es_ca_path() -> Path:
    """Where compose_up copies the CA that the elasticsearch-setup service generated."""
    return cache_dir() / "compose" / "elasticsearch-ca.crt"


def endpoint(name: str, spec: dict | None = None) -> dict[str, Any]:
    """What each backend adapter expects, read from the interpolated file (no engine needed)."""
    spec = spec or load_compose()
    svcs = spec["services"]
    env = environment()
    if name == "postgres":
        pw = svcs["postgres"]["environment"]["POSTGRES_PASSWORD"]
        return {"dsn": f"postgresql://postgres@127.0.0.1:{published_port(spec, 'postgres', 5432)}/postgres",
                "password": pw, "server_settings": _pg_settings(svcs["postgres"]["command"])}
    if name == "cockroach":
        return {"dsn": f"postgresql://root@127.0.0.1:{published_port(spec, 'cockroach', 26257)}/defaultdb"
                       "?sslmode=disable"}
    if name in ("spicedb-pg", "spicedb-crdb"):
        cmd = svcs[name]["command"]
        ep: dict[str, Any] = {"addr": f"127.0.0.1:{published_port(spec, name, 50051)}",
                              "preshared_key": _flag(cmd, "--grpc-preshared-key"),
                              "datastore": _flag(cmd, "--datastore-engine"),
                              "spicedb_version": env["SPICEDB_VERSION"]}
        if name == "spicedb-pg":
            db = svcs["spicedb-pg-db"]["environment"]
            ep["datastore_version"] = env["POSTGRES_VERSION"]
            # footprint() sums pg_total_relation_size over this database.
            ep["datastore_dsn"] = (f"postgresql://postgres:{db['POSTGRES_PASSWORD']}@127.0.0.1:"
                                   f"{published_port(spec, 'spicedb-pg-db', 5432)}/{db['POSTGRES_DB']}")
        else:
            # No datastore_dsn: footprint()'s pg_total_relation_size query is PostgreSQL-only.
            ep["datastore_version"] = env["COCKROACH_VERSION"]
        return ep
    if name == "openfga":
        fga, db = svcs["openfga"]["environment"], svcs["openfga-db"]["environment"]
        return {"url": f"http://127.0.0.1:{published_port(spec, 'openfga', 8080)}",
                "preshared_key": fga["OPENFGA_AUTHN_PRESHARED_KEYS"],
                "max_results": int(fga["OPENFGA_LIST_OBJECTS_MAX_RESULTS"]),
                "deadline_s": 0 if fga["OPENFGA_LIST_OBJECTS_DEADLINE"] in ("0", "0s") else 3.0,
                "max_tuples_per_write": int(fga["OPENFGA_MAX_TUPLES_PER_WRITE"]),
                "openfga_version": env["OPENFGA_VERSION"], "datastore_version": env["POSTGRES_VERSION"],
                "datastore_dsn": f"postgresql://postgres:{db['POSTGRES_PASSWORD']}@127.0.0.1:"
                                 f"{published_port(spec, 'openfga-db', 5432)}/{db['POSTGRES_DB']}"}
    if name == "clickhouse":
        return {"dsn": f"http://default:@127.0.0.1:{published_port(spec, 'clickhouse', 8123)}"}
    if name == "scylla":
        return {"hosts": ["127.0.0.1"], "port": published_port(spec, "scylla", 9042), "keyspace": "authzbench"}
    if name == "elasticsearch":
        return {"url": f"https://127.0.0.1:{published_port(spec, 'elasticsearch', 9200)}",
                "username": "elastic", "password": svcs["elasticsearch"]["environment"]["ELASTIC_PASSWORD"],
                "ca_certs": str(es_ca_path())}
    if name == "mongo":
        return {"url": f"mongodb://127.0.0.1:{published_port(spec, 'mongo', 27017)}/", "engine": "mongodb"}
    raise UserError(f"compose: no endpoint for backend {name!r}")


# the engine -------------------------------------------------------------------------------------

_client_lock = threading.Lock()
_cached_client = None


def _client():
    """A docker SDK client that has answered a ping, or one line saying there is no engine."""
    global _cached_client
    with _client_lock:
        if _cached_client is not None:
            return _cached_client
        try:
            import docker

            client = docker.from_env(timeout=30)
            client.ping()
        except Exception as e:  # noqa: BLE001 - no socket, no permission, no daemon: all one line
            msg = " ".join(str(e).split())[:200] or type(e).__name__
            raise BackendUnavailable(f"no Docker engine reachable (docker.from_env failed: {msg}); "
                                     "use --provision native or external") from None
        _cached_client = client
        return client


def compose_cmd(*args: str) -> list[str]:
    return ["docker", "compose", "--ansi", "never", "-p", PROJECT, "-f", str(COMPOSE_FILE),
            "--env-file", str(VERSIONS_FILE), *args]


def _require_compose_cli() -> None:
    try:
        out = subprocess.run(["docker", "compose", "version", "--short"], capture_output=True, text=True,
                             timeout=30)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise BackendUnavailable(f"cannot run `docker compose` ({e}); install the Docker CLI with the "
                                 "compose plugin (v2.20+)") from None
    if out.returncode != 0:
        raise BackendUnavailable("the Docker Compose plugin is missing (`docker compose version` failed); "
                                 "install docker-compose-plugin v2.20+ or Docker Desktop")


def _compose(*args: str, what: str) -> None:
    """Run a compose command, its progress lines shown as they come; one line if it fails."""
    tail: deque[str] = deque(maxlen=15)
    proc = subprocess.Popen(compose_cmd(*args), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert proc.stdout is not None
    for line in proc.stdout:
        line = line.rstrip()
        if line:
            tail.append(line)
            say(f"compose: {line}")
    if proc.wait() != 0:
        last = next((t for t in reversed(tail) if "error" in t.lower()), tail[-1] if tail else "no output")
        raise BackendUnavailable(f"{what} failed: {' '.join(last.split())[:300]} (see `docker compose -p "
                                 f"{PROJECT} logs`)")


def _containers(client, services: list[str]) -> dict[str, Any]:
    """service -> container of this compose project, found by the labels Compose sets."""
    found = client.containers.list(all=True, filters={"label": f"com.docker.compose.project={PROJECT}"})
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


def compose_up(name: str, options: dict | None = None) -> Deployment:
    """Start (or reuse) a backend's services, wait until healthy, return how to reach them."""
    spec = load_compose()
    services = list(entry(name).compose_services)
    if not services:
        raise UserError(f"{name} has no compose services; use --provision native")
    client = _client()
    _require_compose_cli()
    say(f"compose: up {', '.join(services)} (a first run pulls the images; timeout {UP_TIMEOUT_S} s)")
    _compose("up", "-d", "--wait", "--wait-timeout", str(UP_TIMEOUT_S), *services,
             what=f"docker compose up {' '.join(services)}")
    long_running = [s for s in services_for(name, spec) if s not in one_shots(spec)]
    found = _containers(client, long_running)
    missing = [s for s in long_running if s not in found]
    if missing:
        raise BackendUnavailable(f"compose: no container for {', '.join(missing)} after `up`")
    if name == "elasticsearch":
        # The CA exists only inside the certs volume; the client needs it to verify the node.
        _copy_out(found["elasticsearch"], "/usr/share/elasticsearch/config/certs/ca/ca.crt", es_ca_path())
    v = environment()
    images = sorted({spec["services"][s]["image"] for s in long_running})
    notes = [f"docker compose services {', '.join(long_running)} ({', '.join(images)}); limits per container: "
             f"{v.get('AUTHZBENCH_CPUS') or 2} CPUs, {v.get('AUTHZBENCH_MEM') or '4g'} memory"]
    return Deployment(name, "compose", endpoint(name, spec), containers=[found[s].id for s in long_running],
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
    for other, e in BACKENDS.items():
        if other != name and e.compose_services and set(e.compose_services) & running:
            still_needed |= set(services_for(other, spec))
    targets = [s for s in reversed(mine) if s not in still_needed]
    if targets:
        _compose("rm", "--stop", "--force", *targets, what=f"docker compose rm {' '.join(targets)}")


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
