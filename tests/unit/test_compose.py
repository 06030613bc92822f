"""The compose file, validated offline (these machines have no Docker engine and no compose plugin)."""

from __future__ import annotations

import pytest
import yaml

from authzbench.backends.registry import BACKENDS
from authzbench.errors import BackendUnavailable
from authzbench.provision import compose

PINNED = {"SPICEDB_VERSION": "v1.46.2", "COCKROACH_VERSION": "v25.3.2", "POSTGRES_VERSION": "17.2",
          "CLICKHOUSE_VERSION": "25.10", "SCYLLA_VERSION": "2025.3", "ELASTICSEARCH_VERSION": "9.2.1",
          "MONGO_VERSION": "8.2.1"}


@pytest.fixture(scope="module")
def spec() -> dict:
    return compose.load_compose()


def test_versions_are_the_reference_reports_pinned_in_one_place():
    assert compose.versions() == PINNED
    raw = compose.COMPOSE_FILE.read_text()
    for name in PINNED:
        assert "${" + name + "}" in raw  # used through interpolation, never repeated


def test_every_image_is_pinned_to_an_exact_tag(spec):
    for name, svc in spec["services"].items():
        image, _, tag = svc["image"].rpartition(":")
        assert image and tag and tag != "latest" and "$" not in tag, name
        assert tag in PINNED.values(), f"{name}: {svc['image']} is not one of the pinned versions"


def test_long_running_services_have_healthchecks_limits_and_loopback_ports(spec):
    for name, svc in spec["services"].items():
        if svc.get("restart") == "no":  # one-shot migrations
            continue
        assert svc.get("healthcheck", {}).get("test"), f"{name} has no healthcheck"
        assert svc.get("cpus") and svc.get("mem_limit"), f"{name} has no CPU/memory limits"
        for p in svc.get("ports", []):
            assert p.startswith("127.0.0.1:"), f"{name} publishes {p} beyond loopback"


def test_dependencies_and_volumes_exist(spec):
    for name, svc in spec["services"].items():
        for dep in svc.get("depends_on") or {}:
            assert dep in spec["services"], f"{name} depends on unknown {dep}"
        for v in svc.get("volumes", []):
            assert v.split(":")[0] in spec["volumes"], f"{name} uses undeclared volume {v}"


def test_every_registry_backend_has_its_services_and_an_endpoint(spec):
    for name, e in BACKENDS.items():
        for svc in e.compose_services:
            assert svc in spec["services"], f"{name}: service {svc} missing from the compose file"
        if e.compose_services:
            assert compose.services_for(name, spec)[-1] in e.compose_services
            assert compose.endpoint(name)  # no engine needed


def test_spicedb_services_start_after_their_migration(spec):
    order = compose.services_for("spicedb-pg", spec)
    assert order == ["spicedb-pg-db", "spicedb-pg-migrate", "spicedb-pg"]
    assert compose.services_for("spicedb-crdb", spec) == ["cockroach", "spicedb-crdb-migrate", "spicedb-crdb"]


def test_interpolation_handles_defaults_and_escapes(monkeypatch):
    monkeypatch.delenv("AUTHZBENCH_CPUS", raising=False)
    assert compose.interpolate("${AUTHZBENCH_CPUS:-2}", {}) == "2"
    assert compose.interpolate("$${X}", {}) == "${X}"
    assert yaml.safe_load("a: 1")["a"] == 1


def test_without_a_docker_engine_compose_up_is_one_clear_line(monkeypatch):
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
    with pytest.raises(BackendUnavailable, match="no Docker engine reachable") as e:
        compose.compose_up("postgres", {})
    assert "\n" not in str(e.value)
