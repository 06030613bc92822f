"""provision/engine.py without an engine: which engine is chosen, and that only authzbench's own dockerd
is ever stopped. (Starting a real one is tests/backends/test_compose_lifecycle.py's, under --provision
compose.)"""

from __future__ import annotations

import socket
import subprocess
import sys
import threading

import pytest

from authzbench.core.errors import BackendUnavailable
from authzbench.provision import engine


@pytest.fixture
def own(tmp_path, monkeypatch):
    """authzbench's own socket and pidfile moved into tmp_path; no user engine."""
    monkeypatch.setattr(engine, "OWN_SOCKET", tmp_path / "docker.sock")
    monkeypatch.setattr(engine, "OWN_PIDFILE", tmp_path / "dockerd.pid")
    monkeypatch.setattr(engine, "USER_SOCKET", tmp_path / "user.sock")
    monkeypatch.delenv("DOCKER_HOST", raising=False)
    return tmp_path


def _fake_engine(path) -> socket.socket:
    """A unix socket answering /_ping with 200, as dockerd does."""
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(str(path))
    srv.listen()

    def serve():
        while True:
            try:
                conn, _ = srv.accept()
            except OSError:
                return
            with conn:
                conn.recv(256)
                conn.sendall(b"HTTP/1.0 200 OK\r\n\r\nOK")

    threading.Thread(target=serve, daemon=True).start()
    return srv


def test_a_dead_docker_host_is_refused_not_replaced_by_another_engine(own, monkeypatch):
    srv = _fake_engine(own / "docker.sock")  # authzbench's own engine answers...
    monkeypatch.setenv("DOCKER_HOST", f"unix://{own / 'gone.sock'}")  # ...but the user named another one
    try:
        with pytest.raises(BackendUnavailable, match=r"DOCKER_HOST=unix://.*gone.sock does not answer"):
            engine.ensure_engine(start=True)
    finally:
        srv.close()


def test_the_users_engine_comes_before_authzbench_s_own(own):
    user, mine = _fake_engine(own / "user.sock"), _fake_engine(own / "docker.sock")
    try:
        host, what = engine._running_engine()
    finally:
        user.close()
        mine.close()
    assert host == f"unix://{own / 'user.sock'}" and "running engine" in what


def test_without_an_engine_and_without_leave_to_start_one_it_says_how_in_one_line(own):
    with pytest.raises(BackendUnavailable) as e:
        engine.ensure_engine(start=False)
    assert "\n" not in str(e.value) and "nox -s engine" in str(e.value)


def test_engine_down_stops_nothing_that_is_not_authzbench_s_dockerd(own):
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        (own / "dockerd.pid").write_text(str(other.pid))
        assert "is not the dockerd authzbench started; nothing stopped" in engine.stop_own()
        assert other.poll() is None
    finally:
        other.kill()
        other.wait()
    (own / "dockerd.pid").unlink()
    assert engine.stop_own() == "docker engine: authzbench started none; nothing stopped"
