"""compose/docker-compose.yaml, validated offline (these machines have a Docker client but no engine and
no compose plugin).

Each structural check runs on two readings of the file: ours (PyYAML + the interpolation compose.py
uses for endpoints) and Compose's own: `docker compose config` where the plugin exists, otherwise
compose-go, the library that command is built on (schema validation, interpolation with the env
file, merge keys, reference checks), compiled once from the Go module proxy into the cache.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from authzbench.core.errors import BackendUnavailable
from authzbench.provision import compose
from authzbench.provision.base import cache_dir, go_env
from authzbench.run import servers
from authzbench.systems import systems

# The reference report's server versions: a fact about that report, so written down here. A backend
# added since pins its own version in versions.env; every pin there must be used by a service's image.
REFERENCE_REPORT = {
    "SPICEDB_VERSION": "v1.46.2", "COCKROACH_VERSION": "v25.3.2", "POSTGRES_VERSION": "17.2",
    "CLICKHOUSE_VERSION": "25.10", "SCYLLA_VERSION": "2025.3", "ELASTICSEARCH_VERSION": "9.2.1",
    "MONGO_VERSION": "8.2.1"}
PINNED = compose.versions()
RAW_IMAGE = re.compile(r"[\w./-]+:\$\{([A-Z][A-Z0-9_]*_VERSION)\}")  # repo:${NAME_VERSION}


def pinned_images() -> dict[str, str]:
    """service -> its image as the raw file names it (repo:${X_VERSION}) with versions.env's value."""
    raw = yaml.safe_load(compose.COMPOSE_FILE.read_text())["services"]
    out = {}
    for name, svc in raw.items():
        m = RAW_IMAGE.fullmatch(svc["image"])
        assert m, f"{name}: image {svc['image']!r} is not repo:${{X_VERSION}} pinned in versions.env"
        out[name] = svc["image"].replace("${" + m.group(1) + "}", PINNED[m.group(1)])
    return out

CHECKER = Path(__file__).parent / "composecheck"  # main.go + go.mod + go.sum (compose-go, pinned)
# The variables a user may set; cleared so the machine's environment cannot change what is tested.
USER_VARS = [v for v in os.environ if v.startswith("AUTHZBENCH_") and v not in ("AUTHZBENCH_CACHE",)]


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch):
    for v in USER_VARS + list(PINNED):
        monkeypatch.delenv(v, raising=False)


def _compose_plugin() -> bool:
    try:
        return (
            subprocess.run(["docker", "compose", "version"], capture_output=True, timeout=30).returncode == 0)
    except (OSError, subprocess.TimeoutExpired):
        return False


def _checker() -> Path | None:
    """The compose-go loader, built once per source version into the cache (about 25 s cold)."""
    go = shutil.which("go")
    if go is None:
        return None
    digest = hashlib.sha256(b"".join((CHECKER / f).read_bytes() for f in ("main.go", "go.mod", "go.sum")))
    exe = cache_dir() / "tools" / f"composecheck-{digest.hexdigest()[:16]}"
    if not exe.is_file():
        exe.parent.mkdir(parents=True, exist_ok=True)
        tmp = exe.with_suffix(".tmp")
        out = subprocess.run([go, "build", "-o", str(tmp), "."], cwd=CHECKER, capture_output=True, text=True,
                             env={**os.environ, **go_env()}, timeout=900)
        assert out.returncode == 0, f"building the compose-go checker failed: {out.stderr[-2000:]}"
        tmp.replace(exe)
    return exe


def compose_config(env: dict[str, str] | None = None) -> tuple[int, str, str]:
    """(returncode, stdout JSON, stderr) of Compose's own reading of the file."""
    full = {**{k: v for k, v in os.environ.items() if k not in USER_VARS and k not in PINNED}, **(env or {})}
    if _compose_plugin():
        cmd = compose.compose_cmd("config", "--format", "json")
    else:
        exe = _checker()
        if exe is None:
            pytest.skip("neither `docker compose` nor Go is installed: Compose's own loader is unavailable")
        cmd = [str(exe), str(compose.COMPOSE_FILE), str(compose.VERSIONS_FILE)]
    out = subprocess.run(cmd, capture_output=True, text=True, env=full, timeout=120)
    return out.returncode, out.stdout, out.stderr


@pytest.fixture(scope="module")
def official() -> dict:
    rc, out, err = compose_config()
    assert rc == 0, f"Compose rejects the file: {err}"
    return json.loads(out)


@pytest.fixture(scope="module")
def ours() -> dict:
    return compose.load_compose({**compose.versions()})


@pytest.fixture(params=["ours", "compose"])
def spec(request, ours) -> dict:
    return ours if request.param == "ours" else request.getfixturevalue("official")


def _ports(svc: dict) -> list[tuple[str, int, int]]:
    """(host ip, host port, container port) in either the short syntax or Compose's long form."""
    out = []
    for p in svc.get("ports") or []:
        if isinstance(p, dict):
            out.append((p.get("host_ip", ""), int(p["published"]), int(p["target"])))
        else:
            ip, host, target = str(p).split(":")
            out.append((ip, int(host), int(target)))
    return out


def _volume_sources(svc: dict) -> list[str]:
    return [v["source"] if isinstance(v, dict) else v.split(":")[0] for v in svc.get("volumes") or []]


def _long_running(spec: dict) -> dict[str, dict]:
    return {n: s for n, s in spec["services"].items() if n not in compose.one_shots(spec)}


# versions ---------------------------------------------------------------------------------------

def test_versions_are_the_reference_reports_pinned_in_one_place():
    assert {k: v for k, v in compose.versions().items() if k in REFERENCE_REPORT} == REFERENCE_REPORT
    raw = compose.COMPOSE_FILE.read_text()
    for name in PINNED:
        assert "${" + name + "}" in raw
    for value in PINNED.values():  # never repeated as a literal next to the variable
        assert f":{value}" not in raw, value


def test_every_image_is_the_pinned_one(spec):
    images = {n: s["image"] for n, s in spec["services"].items()}
    assert images == pinned_images()
    for image in images.values():
        tag = image.rpartition(":")[2]
        assert tag and tag != "latest" and "$" not in tag


# structure ---------------------------------------------------------------------------------------

def test_long_running_services_have_healthchecks_limits_and_loopback_ports(spec):
    for name, svc in _long_running(spec).items():
        hc = svc.get("healthcheck") or {}
        assert hc.get("test") and not hc.get("disable") and hc["test"][0] in ("CMD", "CMD-SHELL"), name
        assert float(svc["cpus"]) > 0 and svc["mem_limit"], f"{name} has no CPU/memory limits"
        assert _ports(svc), f"{name} publishes nothing"
        for ip, host, _ in _ports(svc):
            assert ip == "127.0.0.1" and host > 0, f"{name} publishes {host} beyond loopback"


def test_host_ports_are_distinct(spec):
    hosts = [h for svc in spec["services"].values() for _, h, _ in _ports(svc)]
    assert len(hosts) == len(set(hosts))


def test_one_shots_are_adopted_so_up_wait_returns(spec):
    """`docker compose up --wait` fails on an exited container unless a service of the same `up`
    waits for it with service_completed_successfully."""
    shots = compose.one_shots(spec)
    assert shots == {"spicedb-pg-migrate", "spicedb-crdb-migrate", "elasticsearch-setup", "openfga-migrate"}
    for name in shots:
        svc = spec["services"][name]
        assert svc.get("restart") == "no" and not svc.get("ports") and not svc.get("healthcheck"), name


def test_references_exist_and_volumes_are_named(spec):
    for name, svc in spec["services"].items():
        for dep in svc.get("depends_on") or {}:
            assert dep in spec["services"], f"{name} depends on unknown {dep}"
        for v in svc.get("volumes") or []:
            if isinstance(v, dict):
                assert v["type"] == "volume", f"{name}: {v} is not a named volume"
        for src in _volume_sources(svc):
            assert src in spec["volumes"], f"{name} uses undeclared volume {src}"
    # a Zanzibar engine (a system with tiers, or its adapter's on another datastore) keeps nothing: its
    # datastore's service holds its data
    engine_adapters = {s.adapter for s in systems().values() if s.tiers}
    engines = {svc for s in systems().values() if s.adapter in engine_adapters for svc in s.services}
    assert engines, "no system declares engine tiers"
    stateful = set(_long_running(spec)) - engines
    for name in stateful:
        assert _volume_sources(spec["services"][name]), f"{name} keeps its data in the container"


def test_registry_services_exist_with_an_endpoint_on_their_published_port(official):
    for name in systems():
        services = compose.services(name)
        for svc in services:
            assert svc in official["services"], f"{name}: service {svc} missing from the compose file"
        if not services:
            continue
        ep = servers.compose_endpoint(name)
        svc = official["services"][services[0]]
        published = {h for _, h, _ in _ports(svc)}
        assert _endpoint_ports(ep) & published, (name, ep)


def _endpoint_ports(ep: dict) -> set[int]:
    """Every port an endpoint points at, whatever its keys: a `port`, or HOST:PORT inside any string value (an
    address, a DSN, a URL), so a backend with its own endpoint shape needs no line here."""
    ports = {int(ep["port"])} if "port" in ep else set()
    ports |= {int(m) for v in ep.values() if isinstance(v, str) for m in re.findall(r"127\.0\.0\.1:(\d+)", v)}
    return ports


def test_endpoints_have_the_shape_each_backend_expects():
    assert servers.compose_endpoint("postgres")["dsn"] == "postgresql://postgres@127.0.0.1:5432/postgres"
    assert servers.compose_endpoint("cockroach") == {"dsn": "postgresql://root@127.0.0.1:26257/defaultdb?sslmode=disable"}
    assert servers.compose_endpoint("scylla") == {
        "hosts": ["127.0.0.1"], "port": 9042, "keyspace": "authzbench", "compose_cmd": compose.compose_cmd(),
        "compose_service": "scylla"}
    assert servers.compose_endpoint("clickhouse") == {"dsn": "http://default:@127.0.0.1:8123"}
    assert servers.compose_endpoint("mongo") == {"url": "mongodb://127.0.0.1:27017/", "engine": "mongodb"}
    permify = servers.compose_endpoint("permify")
    assert (permify["url"], permify["grpc_addr"]) == ("http://127.0.0.1:3476", "127.0.0.1:3478")
    es = servers.compose_endpoint("elasticsearch")
    assert es["url"] == "https://127.0.0.1:9200" and es["username"] == "elastic" and es["password"]
    assert es["ca_certs"].endswith("elasticsearch-ca.crt")
    pg = servers.compose_endpoint("spicedb-pg")
    assert pg["addr"] == "127.0.0.1:50051" and pg["datastore"] == "postgres" and pg["preshared_key"]
    assert pg["datastore_dsn"] == "postgresql://postgres:spicedb@127.0.0.1:5433/spicedb"
    assert pg["spicedb_version"] == "v1.46.2" and pg["datastore_version"] == "17.2"
    crdb = servers.compose_endpoint("spicedb-crdb")
    assert crdb["addr"] == "127.0.0.1:50052" and crdb["datastore"] == "cockroachdb"
    assert crdb["datastore_version"] == "v25.3.2" and "datastore_dsn" not in crdb


def test_dependency_order(ours):
    assert compose.services_for("spicedb-pg", ours) == ["spicedb-pg-db", "spicedb-pg-migrate", "spicedb-pg"]
    assert compose.services_for("spicedb-crdb", ours) == ["cockroach", "spicedb-crdb-migrate", "spicedb-crdb"]
    assert compose.services_for("elasticsearch", ours) == ["elasticsearch-setup", "elasticsearch"]
    assert compose.services_for("scylla", ours) == ["scylla"]


# what the environment controls --------------------------------------------------------------------

ENV = {"AUTHZBENCH_CPUS": "1.5", "AUTHZBENCH_MEM": "3g", "AUTHZBENCH_SPICEDB_KEY": "k-from-env",
       "AUTHZBENCH_ES_PASSWORD": "pw-from-env", "AUTHZBENCH_SCYLLA_PORT": "19042"}


def test_limits_credentials_and_ports_come_from_the_environment(monkeypatch):
    for k, v in ENV.items():
        monkeypatch.setenv(k, v)
    spec = compose.load_compose()
    for name, svc in _long_running(spec).items():
        assert (svc["cpus"], svc["mem_limit"]) == ("1.5", "3g"), name
    assert servers.compose_endpoint("spicedb-pg", spec)["preshared_key"] == "k-from-env"
    assert servers.compose_endpoint("spicedb-crdb", spec)["preshared_key"] == "k-from-env"
    assert servers.compose_endpoint("elasticsearch", spec)["password"] == "pw-from-env"
    assert servers.compose_endpoint("scylla", spec)["port"] == 19042


def test_compose_reads_the_environment_the_same_way():
    rc, out, err = compose_config(ENV)
    assert rc == 0, err
    spec = json.loads(out)
    for name, svc in _long_running(spec).items():
        assert float(svc["cpus"]) == 1.5 and int(svc["mem_limit"]) == 3 * 2**30, name
    assert "k-from-env" in spec["services"]["spicedb-pg"]["command"]
    assert spec["services"]["elasticsearch"]["environment"]["ELASTIC_PASSWORD"] == "pw-from-env"
    assert _ports(spec["services"]["scylla"]) == [("127.0.0.1", 19042, 9042)]


def test_compose_rejects_a_broken_file(tmp_path, monkeypatch):
    """The loader used above does catch mistakes (so the passing runs above mean something)."""
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        compose.COMPOSE_FILE.read_text().replace(
            "spicedb-pg-db: {condition: service_healthy}", "spicedb-pg-dbx: {condition: service_healthy}", 1))
    monkeypatch.setattr(compose, "COMPOSE_FILE", bad)
    rc, _, err = compose_config()
    assert rc != 0 and "spicedb-pg-dbx" in err


# servers' own settings ---------------------------------------------------------------------------

def test_spicedb_phones_nowhere_and_needs_its_key(ours):
    for name in ("spicedb-pg", "spicedb-crdb"):
        cmd = ours["services"][name]["command"]
        assert "--telemetry-endpoint=" in cmd and "--skip-release-check" in cmd
        assert "--grpc-preshared-key" in cmd
    assert "--disable-version-check" in ours["services"]["scylla"]["command"]


def test_postgres_is_tuned_like_the_native_one(ours):
    from authzbench.provision.pgcluster import BENCH_SETTINGS

    assert servers.compose_endpoint("postgres", ours)["server_settings"] == BENCH_SETTINGS
    assert "track_commit_timestamp=on" in ours["services"]["spicedb-pg-db"]["command"]


def test_openfgas_datastore_is_the_shared_postgres_plus_frequent_autovacuum(ours):
    """Spelled out (YAML cannot extend an anchored list), so checked against the anchor."""
    cmd, shared = ours["services"]["openfga-db"]["command"], ours["services"]["postgres"]["command"]
    assert cmd == [*shared, "-c", "autovacuum_naptime=5s"]


def test_scylla_fits_its_container(ours):
    cmd = ours["services"]["scylla"]["command"]
    smp, memory = int(compose._flag(cmd, "--smp")), compose._flag(cmd, "--memory")
    assert smp <= float(ours["services"]["scylla"]["cpus"])
    assert int(memory.rstrip("G")) < int(ours["services"]["scylla"]["mem_limit"].rstrip("g"))
    assert compose._flag(cmd, "--broadcast-rpc-address") == "127.0.0.1"


def test_elasticsearch_has_security_with_tls_and_basic_auth(ours):
    env = ours["services"]["elasticsearch"]["environment"]
    assert env["xpack.security.enabled"] == "true" and env["xpack.security.http.ssl.enabled"] == "true"
    assert env["ELASTIC_PASSWORD"] == "authzbench"  # the local-only default
    setup = ours["services"]["elasticsearch-setup"]["command"][-1]
    # certutil --pem writes NAME/NAME.crt and NAME/NAME.key per instance, and ca/ca.crt
    instance = re.search(r"- name: ([\w.-]+)", setup).group(1)
    assert env["xpack.security.http.ssl.key"] == f"certs/{instance}/{instance}.key"
    assert env["xpack.security.http.ssl.certificate"] == f"certs/{instance}/{instance}.crt"
    assert f"config/{env['xpack.security.http.ssl.certificate_authorities']}" in setup
    assert "ip: [127.0.0.1]" in setup  # clients connect to https://127.0.0.1
    assert "https://localhost:9200" in " ".join(ours["services"]["elasticsearch"]["healthcheck"]["test"])


# no engine ---------------------------------------------------------------------------------------

def test_interpolation_handles_defaults_and_escapes():
    assert compose.interpolate("${X:-2}", {}) == "2"
    assert compose.interpolate("${X:-2}", {"X": ""}) == "2"
    assert compose.interpolate("${X}", {"X": "v"}) == "v"
    assert compose.interpolate("$${X}", {}) == "${X}"


def test_without_a_docker_engine_compose_up_is_one_clear_line(monkeypatch):
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
    monkeypatch.setattr(compose, "_cached_client", None)
    for call in (lambda: compose.compose_up("postgres"), lambda: compose.compose_down("postgres"),
                 lambda: compose.container_stats(["x"])):
        with pytest.raises(BackendUnavailable) as e:
            call()
        msg = str(e.value)
        assert msg.startswith("no Docker engine reachable (docker.from_env failed: ") and "\n" not in msg
        assert msg.endswith("; use --provision native or external")


def test_provision_compose_goes_through_compose_up(monkeypatch, tmp_path):
    from authzbench.run.servers import provision

    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
    monkeypatch.setattr(compose, "_cached_client", None)
    with pytest.raises(BackendUnavailable, match="no Docker engine reachable"):
        provision("scylla", "compose", tmp_path)


# monitor arithmetic -------------------------------------------------------------------------------

def _stats(usage: int, system: int, pre_usage: int = 0, pre_system: int = 0, cpus: int = 4,
           mem: int = 0, cache_key: str = "inactive_file", cache: int = 0) -> dict:
    return {
        "cpu_stats": {"cpu_usage": {"total_usage": usage}, "system_cpu_usage": system, "online_cpus": cpus},
        "precpu_stats": {"cpu_usage": {"total_usage": pre_usage}, "system_cpu_usage": pre_system},
        "memory_stats": {"usage": mem, "stats": {cache_key: cache}}}


def test_cpu_percent_is_the_docker_cli_formula():
    # 0.5 s of container CPU while the host's 4 CPUs ran 4 s (1 s wall): half a core = 50 %
    s = _stats(usage=1_500_000_000, system=14_000_000_000, pre_usage=1_000_000_000, pre_system=10_000_000_000)
    assert compose.cpu_percent(s) == pytest.approx(50.0)
    assert compose.cpu_percent(s, prev=(500_000_000, 10_000_000_000)) == pytest.approx(100.0)
    assert compose.cpu_percent(_stats(usage=5, system=9)) == 0.0  # one-shot sample: no baseline yet


def test_memory_excludes_page_cache_on_cgroup_v1_and_v2():
    assert compose.memory_bytes(_stats(0, 0, mem=1000, cache=300)) == 700
    assert compose.memory_bytes(_stats(0, 0, mem=1000, cache_key="total_inactive_file", cache=100)) == 900
    assert compose.memory_bytes(_stats(0, 0, mem=1000)) == 1000


# --local-images: the override file, read offline ---------------------------------------------------

from authzbench.provision import engine, images  # noqa: E402 - grouped with the tests that use them

# noxfile.COMPOSE_BACKENDS
LOCAL_BACKENDS = ("postgres", "spicedb-pg", "openfga", "permify", "scylla", "elasticsearch")


def test_the_override_swaps_services_of_the_compose_file_only():
    base = yaml.safe_load(compose.COMPOSE_FILE.read_text())["services"]
    assert set(images.override_images()) <= set(base)


def test_every_service_of_a_local_image_backend_is_swapped(ours):
    swapped = images.override_images()
    for name in LOCAL_BACKENDS:
        missing = set(compose.services_for(name, ours)) - set(swapped)
        assert not missing, f"{name}: services still on official images: {missing}"


def test_each_local_image_has_a_dockerfile_and_a_system_that_declares_it():
    for image in set(images.override_images().values()):
        assert (images.LOCAL_DIR / image / "Dockerfile").is_file(), image
        assert any(s.image == image for s in systems().values()), image


def test_images_are_swapped_only_when_asked(monkeypatch):
    plain = compose.load_compose()
    monkeypatch.setenv(compose.LOCAL_IMAGES_VAR, "1")
    local = compose.load_compose()
    assert plain["services"]["postgres"]["image"] == f"postgres:{PINNED['POSTGRES_VERSION']}"
    assert local["services"]["postgres"]["image"] == "authzbench-local/postgres:unbuilt"
    for svc in ("postgres", "openfga"):  # nothing but the image changes
        assert {k: v for k, v in local["services"][svc].items() if k != "image"} == \
               {k: v for k, v in plain["services"][svc].items() if k != "image"}
    scylla = local["services"]["scylla"]
    assert scylla["command"] == ["cassandra"] and scylla["ports"] == plain["services"]["scylla"]["ports"]
    assert scylla["healthcheck"]["test"][0] == "CMD" and scylla["healthcheck"]["interval"] == "2s"


def test_our_merge_of_the_override_is_compose_s(monkeypatch):
    try:
        cli = engine.compose_cli(build=False)
    except BackendUnavailable:
        pytest.skip("no Compose v2 here (`nox -s engine` builds it)")
    monkeypatch.setenv(compose.LOCAL_IMAGES_VAR, "1")
    out = subprocess.run([*cli, "-p", "x", *(a for f in compose.compose_files() for a in ("-f", str(f))),
                          "--env-file", str(compose.VERSIONS_FILE), "config", "--format", "json"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    theirs, mine = json.loads(out.stdout)["services"], compose.load_compose()["services"]
    for svc in images.override_images():
        assert theirs[svc]["image"] == mine[svc]["image"]
        assert (theirs[svc].get("command") or []) == (mine[svc].get("command") or []), svc
        assert theirs[svc].get("environment", {}) == {
            k: str(v) for k, v in mine[svc].get("environment", {}).items()}
        assert (theirs[svc].get("healthcheck") or {}).get("test") == (mine[svc].get("healthcheck") or {}).get(
            "test")


def test_local_images_without_provision_compose_is_refused_in_one_line(capsys):
    from authzbench import cli

    assert cli.main(["bench", "--backend", "postgres", "--local-images", "--profile", "tiny"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["authzbench: error: --local-images needs --provision compose (it swaps the compose file's "
                   "images)"]


def test_provision_compose_without_an_engine_is_refused_in_one_line_before_the_dataset(capsys, monkeypatch,
                                                                                       tmp_path):
    from authzbench import cli

    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
    monkeypatch.setattr(compose, "_cached_client", None)
    monkeypatch.setattr(compose, "_engine_cache", [])
    monkeypatch.chdir(tmp_path)
    argv = ["bench", "--backend", "postgres,elasticsearch", "--provision", "compose", "--profile", "tiny",
            "--results-dir", str(tmp_path / "results"), "--report-dir", str(tmp_path / "reports")]
    assert cli.main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert (len(err) == 1
            and err[0].startswith("authzbench: error: --provision compose: ")
            and "engine up" in err[0])
    assert not any(tmp_path.iterdir())  # no dataset, no results, no report


def test_the_apt_mirror_is_the_one_apt_uses(tmp_path, monkeypatch):
    if not any(Path(p).exists() for p in ("/etc/apt/sources.list", "/etc/apt/sources.list.d")):
        pytest.skip("not a Debian machine")
    assert images.apt_mirror().startswith(("http://", "https://"))
