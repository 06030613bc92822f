"""The compose path against a real Docker engine (`pytest --backend X --provision compose [--local-images]`):
`up --wait` hands over only healthy containers, every port is published on 127.0.0.1 and is the one the
endpoint uses, a SIGTERM in the middle of a `bench` removes the run's containers, and `down -v` leaves no
container, network or volume of the project behind. The scenario suite (test_scenarios.py) checks the
answers against the oracle through the same deployments."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def _compose_only(request):
    if (request.config.getoption("provision") or "native") != "compose":
        pytest.skip("a compose-path test: run with --provision compose")


def _client():
    import docker

    return docker.from_env(timeout=30)


def test_up_hands_over_healthy_containers_published_on_loopback_only(backend_name, live):
    client = _client()
    assert live.dep.containers, f"{backend_name}: no container recorded for the monitor"
    for cid in live.dep.containers:
        c = client.containers.get(cid)
        assert c.status == "running", f"{c.name} is {c.status}"
        health = (c.attrs["State"].get("Health") or {}).get("Status")
        assert health in (None, "healthy"), f"{c.name} handed over while {health}"
        for port, binds in (c.attrs["NetworkSettings"]["Ports"] or {}).items():
            for b in binds or []:
                assert b["HostIp"] == "127.0.0.1", (
                    f"{c.name} publishes {port} on {b['HostIp'] or 'every address'}")


def test_the_endpoint_uses_the_port_the_engine_published(backend_name, live):
    published = {int(b["HostPort"]) for cid in live.dep.containers
                 for binds in (_client().containers.get(cid).attrs["NetworkSettings"]["Ports"] or {}).values()
                 for b in binds or []}
    text = json.dumps(live.dep.endpoint)
    assert any(f":{p}" in text or f'"port": {p}' in text for p in published), (
        published, live.dep.public_endpoint())


def _records(results: Path) -> list[dict]:
    out = []
    for f in results.glob("*/records.jsonl"):
        for line in f.read_text().splitlines():
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError:
                continue
    return out


@pytest.mark.backend("postgres")
@pytest.mark.slow
def test_sigterm_mid_bench_removes_its_containers_and_down_v_leaves_nothing(request, tmp_path, monkeypatch):
    from authzbench.provision import compose

    monkeypatch.setenv("AUTHZBENCH_COMPOSE_PROJECT", "authzbench-pytest-sigterm")  # beside the session's own
    env = {**os.environ, "PYTHONPATH": str(ROOT), "AUTHZBENCH_STATE": str(tmp_path / "state"),
           "AUTHZBENCH_DATA": str(tmp_path / "data"), "AUTHZBENCH_RESULTS": str(tmp_path / "results")}
    cmd = [sys.executable, "-m", "authzbench.cli", "bench", "--backend", "postgres", "--provision", "compose",
           *(["--local-images"] if request.config.getoption("local_images") else []),
           "--profile", "tiny", "--scenario", "check_manage_direct_user", "--concurrency", "2",
           "--iterations-scale", "500"]  # still measuring when the signal comes (see test_stopping.BENCH)
    log = tmp_path / "run.log"
    with open(log, "w") as fh:
        proc = subprocess.Popen(cmd, cwd=tmp_path, env=env, stdout=fh, stderr=subprocess.STDOUT,
                                start_new_session=True)
    try:
        t0 = time.monotonic()
        while not any(r["type"] == "interval" for r in _records(tmp_path / "results")):
            assert proc.poll() is None, (
                f"bench ended ({proc.returncode}) before measuring: {log.read_text()[-2000:]}")
            assert time.monotonic() - t0 < 600, "no measured interval after 600 s"
            time.sleep(0.5)
        assert [s for s in compose.leftovers() if s.startswith("container")], "no container while measuring"
        os.kill(proc.pid, signal.SIGTERM)
        code = proc.wait(timeout=90)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert code == 143, log.read_text()[-2000:]
    running = [s for s in compose.leftovers() if s.startswith("container")]
    assert not running, f"containers of the interrupted run still there: {running}"
    ends = [r for r in _records(tmp_path / "results") if r["type"] == "phase_end"]
    assert ends and ends[0]["status"] == "interrupted"
    compose.compose_project_down()
    assert compose.leftovers() == []


@pytest.mark.backend("postgres")
def test_an_up_that_fails_says_why_in_one_line_and_leaves_no_container(monkeypatch):
    import socket

    from authzbench.core.errors import BackendUnavailable
    from authzbench.provision import compose

    monkeypatch.setenv("AUTHZBENCH_COMPOSE_PROJECT", "authzbench-pytest-failed-up")
    with socket.socket() as taken:  # the host port the file asks for is held by someone else
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        monkeypatch.setenv("AUTHZBENCH_POSTGRES_PORT", str(taken.getsockname()[1]))
        with pytest.raises(BackendUnavailable) as e:
            compose.compose_up("postgres")
    assert "\n" not in str(e.value) and "docker compose up postgres failed" in str(e.value)
    assert not [s for s in compose.leftovers() if s.startswith("container")]
    compose.compose_project_down()
    assert compose.leftovers() == []


def test_the_report_names_the_compose_image_not_a_native_server(backend_name, live):
    if backend_name != "postgres":
        pytest.skip("postgres is the backend whose label was guessed from its version string")
    with live.backend() as b:
        label = b.server_info().label
    assert "(compose, " in label and "native" not in label, label
