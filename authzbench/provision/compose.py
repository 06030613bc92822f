"""`--provision compose`: the services of compose/docker-compose.yaml, driven through the docker SDK.

The SDK has no compose support, so this reads the compose file (interpolating compose/versions.env
and the environment), starts a backend's services in dependency order with their ports (127.0.0.1
only), limits, volumes and healthchecks, waits until they are healthy (one-shot migrations: exited
0), and hands back the endpoint the backend's adapter expects. Container stats feed the monitor.

Not exercised on the project's machines (no Docker engine there): see README.
"""

from __future__ import annotations

import io
import os
import re
import tarfile
import time
from pathlib import Path
from typing import Any

import yaml

from authzbench.backends.registry import entry
from authzbench.errors import BackendUnavailable, UserError
from authzbench.provision.base import Deployment, say

COMPOSE_DIR = Path(__file__).resolve().parents[2] / "compose"
COMPOSE_FILE = COMPOSE_DIR / "docker-compose.yaml"
VERSIONS_FILE = COMPOSE_DIR / "versions.env"
PROJECT = "authzbench"
_VAR = re.compile(r"\$\$|\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


def versions() -> dict[str, str]:
    out = {}
    for line in VERSIONS_FILE.read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            k, _, v = line.partition("=")
            out[k.strip()] = v.strip()
    return out


def interpolate(value: Any, env: dict[str, str]) -> Any:
    """Compose's ${VAR} / ${VAR:-default} / $$ interpolation, recursively."""
    if isinstance(value, str):
        def sub(m: re.Match) -> str:
            if m.group(0) == "$$":
                return "$"
            name, default = m.group(1), m.group(2)
            if name in env and env[name] != "":
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


def load_compose() -> dict:
    env = {**versions(), **os.environ}
    return interpolate(yaml.safe_load(COMPOSE_FILE.read_text()), env)


def services_for(name: str, spec: dict) -> list[str]:
    """The backend's services plus their dependencies, dependencies first."""
    order: list[str] = []

    def visit(svc: str) -> None:
        if svc in order:
            return
        for dep in (spec["services"][svc].get("depends_on") or {}):
            visit(dep)
        order.append(svc)

    for svc in entry(name).compose_services:
        visit(svc)
    return order


def _client():
    try:
        import docker

        client = docker.from_env()
        client.ping()
        return client
    except Exception as e:  # noqa: BLE001 - no engine, no socket, no permission: one line
        raise BackendUnavailable(f"no Docker engine reachable (docker.from_env failed: {str(e).splitlines()[0][:160]}); "
                                 "use --provision native or external") from None


def _run_args(name: str, svc: dict) -> dict[str, Any]:
    ports = {}
    for p in svc.get("ports", []):
        host_ip, host_port, container_port = p.split(":")
        ports[f"{container_port}/tcp"] = (host_ip, int(host_port))
    hc = svc.get("healthcheck")
    health = None
    if hc:
        health = {"test": hc["test"], "interval": int(float(str(hc.get("interval", "2s")).rstrip("s")) * 1e9),
                  "retries": int(hc.get("retries", 30))}
    volumes = {}
    for v in svc.get("volumes", []):
        vol, _, path = v.partition(":")
        volumes[f"{PROJECT}_{vol}"] = {"bind": path, "mode": "rw"}
    return {"image": svc["image"], "name": f"{PROJECT}-{name}", "command": svc.get("command"),
            "environment": svc.get("environment"), "ports": ports, "volumes": volumes, "healthcheck": health,
            "detach": True, "network": PROJECT, "hostname": name,
            "labels": {"com.docker.compose.project": PROJECT, "com.docker.compose.service": name},
            "nano_cpus": int(float(svc.get("cpus", 0)) * 1e9) or None, "mem_limit": svc.get("mem_limit")}


def compose_up(name: str, options: dict | None = None) -> Deployment:
    spec = load_compose()
    client = _client()
    import docker

    try:
        client.networks.get(PROJECT)
    except docker.errors.NotFound:
        client.networks.create(PROJECT)
    containers = []
    for svc_name in services_for(name, spec):
        svc = spec["services"][svc_name]
        try:
            c = client.containers.get(f"{PROJECT}-{svc_name}")
            if c.status != "running" and svc.get("restart") != "no":
                c.start()
        except docker.errors.NotFound:
            say(f"compose: starting {svc_name} ({svc['image']})")
            c = client.containers.run(**{k: v for k, v in _run_args(svc_name, svc).items() if v is not None})
        _wait(c, one_shot=svc.get("restart") == "no")
        if svc.get("restart") != "no":
            containers.append(c.id)
    dep = Deployment(name, "compose", endpoint(name, client), containers=containers,
                     notes=[f"docker compose service(s) {', '.join(entry(name).compose_services)}"])
    return dep


def _wait(container, one_shot: bool, timeout: float = 300) -> None:
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        container.reload()
        state = container.attrs["State"]
        if one_shot and state["Status"] == "exited":
            if state["ExitCode"] != 0:
                raise BackendUnavailable(f"compose: {container.name} exited with {state['ExitCode']}")
            return
        if not one_shot and state.get("Health", {}).get("Status") == "healthy":
            return
        time.sleep(1)
    raise BackendUnavailable(f"compose: {container.name} not healthy after {timeout:.0f} s")


def endpoint(name: str, client=None) -> dict[str, Any]:
    """What each adapter expects, matching the ports and credentials of the compose file."""
    key = os.environ.get("AUTHZBENCH_SPICEDB_KEY", "authzbench")
    v = versions()
    if name == "postgres":
        return {"dsn": "postgresql://postgres:authzbench@127.0.0.1:15432/postgres"}
    if name == "cockroach":
        return {"dsn": "postgresql://root@127.0.0.1:26257/defaultdb?sslmode=disable"}
    if name == "spicedb-pg":
        return {"addr": "127.0.0.1:50051", "preshared_key": key, "datastore": "postgres",
                "datastore_version": v["POSTGRES_VERSION"], "spicedb_version": v["SPICEDB_VERSION"],
                "datastore_dsn": "postgresql://postgres:spicedb@127.0.0.1:15433/spicedb"}
    if name == "spicedb-crdb":
        return {"addr": "127.0.0.1:50052", "preshared_key": key, "datastore": "cockroachdb",
                "datastore_version": v["COCKROACH_VERSION"], "spicedb_version": v["SPICEDB_VERSION"]}
    if name == "clickhouse":
        return {"dsn": "http://default:@127.0.0.1:18123"}
    if name == "scylla":
        return {"hosts": ["127.0.0.1"], "port": 19042, "keyspace": "authzbench"}
    if name == "elasticsearch":
        ca = None
        if client is not None:  # the node generated its own CA on first start: copy it out
            ca = _copy_out(client, f"{PROJECT}-elasticsearch", "/usr/share/elasticsearch/config/certs/http_ca.crt")
        return {"url": "https://127.0.0.1:19200", "username": "elastic",
                "password": os.environ.get("AUTHZBENCH_ES_PASSWORD", "authzbench"), "ca_certs": ca}
    if name == "mongo":
        return {"url": "mongodb://127.0.0.1:27017/", "engine": "mongodb"}
    raise UserError(f"compose: no endpoint for backend {name!r}")


def _copy_out(client, container: str, path: str) -> str:
    stream, _ = client.containers.get(container).get_archive(path)
    data = io.BytesIO(b"".join(stream))
    with tarfile.open(fileobj=data) as tar:
        member = tar.getmembers()[0]
        out = Path(".authzbench") / "compose" / member.name
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_bytes(tar.extractfile(member).read())
    return str(out.resolve())


def compose_down(name: str) -> None:
    spec = load_compose()
    client = _client()
    for svc_name in reversed(services_for(name, spec)):
        try:
            c = client.containers.get(f"{PROJECT}-{svc_name}")
            c.stop(timeout=30)
            c.remove()
        except Exception:  # noqa: BLE001 - already gone
            continue


def container_stats(ids: list[str]) -> list[tuple[float, int]]:
    """(CPU %, memory bytes) per container, computed the way `docker stats` does."""
    client = _client()
    out = []
    for cid in ids:
        s = client.containers.get(cid).stats(stream=False)
        cpu, pre = s["cpu_stats"], s["precpu_stats"]
        delta = cpu["cpu_usage"]["total_usage"] - pre.get("cpu_usage", {}).get("total_usage", 0)
        system = cpu.get("system_cpu_usage", 0) - pre.get("system_cpu_usage", 0)
        ncpu = cpu.get("online_cpus") or len(cpu["cpu_usage"].get("percpu_usage") or [1])
        pct = (delta / system) * ncpu * 100.0 if system > 0 else 0.0
        mem = s.get("memory_stats", {})
        out.append((pct, int(mem.get("usage", 0) - mem.get("stats", {}).get("inactive_file", 0))))
    return out
