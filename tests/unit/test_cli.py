"""Bad input: one line on stderr, exit code 2, no traceback, nothing half-written."""

from __future__ import annotations

import subprocess
import sys

import pytest


def authzbench(*args: str, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "authzbench.cli", *args], capture_output=True, text=True,
                          cwd=cwd, timeout=120)


@pytest.mark.parametrize("args,message", [
    (["generate", "--profile", "huge"], "unknown profile 'huge'"),
    (["generate", "--profile", "tiny", "--set", "orgs=0"], "orgs must be > 0"),
    (["generate", "--profile", "tiny", "--set", "colour=blue"], "unknown --set key 'colour'"),
    (["generate", "--profile", "tiny", "--set", "orgs"], "--set expects key=value"),
    (["bench", "--backend", "oracledb", "--profile", "tiny"], "unknown backend 'oracledb'"),
    (["bench", "--backend", "reference", "--profile", "tiny", "--write-share", "2"], "--write-share"),
    (["bench", "--backend", "reference", "--scenario", "nope"], "unknown scenario 'nope'"),
    (["prepare", "--backend", "cockroach", "--provision", "native", "--profile", "tiny"],
     "cannot run natively"),
    (["report", "--results-dir", "/nonexistent-dir"], "no runs under"),
])
def test_bad_input_is_one_line_and_exit_code_2(tmp_path, args, message):
    r = authzbench(*args, cwd=tmp_path)
    assert r.returncode == 2, r.stderr
    lines = [line for line in r.stderr.splitlines() if line.strip() and "authzbench" in line and "error" in line]
    assert lines and message in lines[-1]
    assert "Traceback" not in r.stderr


def test_unwritable_data_dir_is_exit_code_2(tmp_path):
    (tmp_path / "f").write_text("x")
    r = authzbench("generate", "--profile", "tiny", "--out", str(tmp_path / "f" / "ds"))
    assert r.returncode == 2 and "cannot write" in r.stderr and "Traceback" not in r.stderr


def test_unknown_provision_mode_is_an_argparse_error(tmp_path):
    r = authzbench("bench", "--provision", "kubernetes", cwd=tmp_path)
    assert r.returncode == 2 and "invalid choice" in r.stderr


def test_generate_and_stats_print_the_distribution_and_anchors(tmp_path):
    r = authzbench("generate", "--profile", "tiny", "--out", str(tmp_path / "ds"))
    assert r.returncode == 0, r.stderr
    s = authzbench("stats", "--path", str(tmp_path / "ds"))
    assert s.returncode == 0, s.stderr
    for needle in ("group→direct_members", "user→orgs", "LOOKUPRES_MANAGE_USER", "check_negative"):
        assert needle in s.stdout


def test_pytest_rejects_an_unknown_backend_with_the_valid_list(tmp_path):
    r = subprocess.run([sys.executable, "-m", "pytest", "--backend", "oracledb", "-q", "--co"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 4 and "valid: reference, postgres" in r.stderr
