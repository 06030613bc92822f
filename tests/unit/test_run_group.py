"""A provisioning step cut short (a signal, its timeout) takes its grandchildren with it: initdb's
`postgres --single` once outlived a SIGINT that killed initdb alone."""

from __future__ import annotations

import subprocess
import sys
import time

import psutil
import pytest

from authzbench.provision.base import run_group

# a parent that starts a child in its own process group, prints the child's PID, then waits for it
SPAWNER = ("import subprocess, sys, time; c = subprocess.Popen([sys.executable, '-c', 'import time; "
           "time.sleep(60)']);"
           " print(c.pid, flush=True); time.sleep(60)")


def _grandchild(path) -> int:
    t0 = time.monotonic()
    while not path.read_text().strip():
        assert time.monotonic() - t0 < 20, "the spawner never started its child"
        time.sleep(0.05)
    return int(path.read_text().split()[0])


def _gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def test_a_timed_out_step_leaves_no_grandchild_running(tmp_path):
    out = tmp_path / "out"
    with open(out, "w") as fh, pytest.raises(subprocess.TimeoutExpired):
        run_group([sys.executable, "-c", SPAWNER], stdout=fh, timeout=3)
    assert _gone(_grandchild(out))


def test_a_step_that_ends_returns_its_exit_code():
    assert run_group([sys.executable, "-c", "raise SystemExit(3)"]) == 3


def test_plain_subprocess_run_would_leave_the_grandchild(tmp_path):
    # the control: what run_group fixes is real
    out = tmp_path / "out"
    with open(out, "w") as fh, pytest.raises(subprocess.TimeoutExpired):
        subprocess.run([sys.executable, "-c", SPAWNER], stdout=fh, timeout=3)
    pid = _grandchild(out)
    try:
        assert not _gone(pid)
    finally:
        psutil.Process(pid).kill()


def test_build_once_builds_until_a_build_returns_then_never_again_for_the_same_stamp(tmp_path):
    from authzbench.provision.base import build_once

    builds: list[str] = []

    def failing() -> None:
        builds.append("failed")
        raise RuntimeError("midway")

    stamp = tmp_path / "build.stamp"
    with pytest.raises(RuntimeError):
        build_once(tmp_path, stamp, "v1", "thing", failing)
    build_once(tmp_path, stamp, "v1", "thing", lambda: builds.append("built"))
    build_once(tmp_path, stamp, "v1", "thing", lambda: builds.append("again"))
    build_once(tmp_path, stamp, "v2", "thing", lambda: builds.append("v2"))  # a new version builds anew
    assert builds == ["failed", "built", "v2"]
