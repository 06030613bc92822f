"""Bad input: one line on stderr, exit code 2, no traceback, nothing half-written."""

from __future__ import annotations

import subprocess
import sys

import pytest


def authzbench(*args: str, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "authzbench.cli", *args], capture_output=True, text=True,
                          cwd=cwd, timeout=120)


@pytest.mark.parametrize(
    "args,message",
    [(["generate", "--profile", "huge"], "unknown profile 'huge'"),
     (["generate", "--profile", "tiny", "--set", "orgs=0"], "orgs must be > 0"),
     (["generate", "--profile", "tiny", "--set", "colour=blue"], "unknown --set key 'colour'"),
     (["generate", "--profile", "tiny", "--set", "orgs"], "--set expects key=value"),
     (["bench", "--backend", "oracledb", "--profile", "tiny"], "unknown backend 'oracledb'"),
     (["bench", "--backend", "reference", "--profile", "tiny", "--write-share", "2"], "--write-share"),
     (["bench", "--backend", "reference", "--scenario", "nope"], "unknown scenario 'nope'"),
     (["bench", "--backend", "reference", "--scenario", "roundtrip,nope"], "unknown scenario 'nope'"),
     (["prepare", "--backend", "spicedb-crdb", "--provision", "native", "--profile", "tiny"],
      "cannot run natively"),
     (["report", "--results-dir", "/nonexistent-dir"], "no runs under"),
     (["prepare", "--backend", "cockroach", "--provision", "external", "--profile", "tiny"],
      "no adapter yet"),
     (["bench", "--backend", "reference", "--profile", "tiny", "--option", "bulk_doc=5"],
      "unknown backend option bulk_doc"),
     (["prepare", "--backend", "reference", "--profile", "tiny", "--option", "delay_s=slow"],
      "option delay_s='slow': expected float"),
     (["prepare", "--backend", "reference", "--profile", "tiny", "--option", "delay_s"],
      "expected KEY=VALUE"),
     (["bench", "--backend", "reference", "--profile", "tiny", "--churn-rates", "10,1"],
      "--churn-rates must ascend"),
     (["bench", "--backend", "reference", "--profile", "tiny", "--churn-rates", "1,1"],
      "--churn-rates: 1"),
     (["bench", "--backend", "reference", "--profile", "tiny", "--churn-writers", "0"], "--churn-writers"),
     (["bench", "--backend", "reference", "--profile", "tiny", "--churn-step", "-1"], "--churn-step")])
def test_bad_input_is_one_line_and_exit_code_2(tmp_path, args, message):
    r = authzbench(*args, cwd=tmp_path)
    assert r.returncode == 2, r.stderr
    lines = [
        line for line in r.stderr.splitlines() if line.strip() and "authzbench" in line and "error" in line]
    assert lines and message in lines[-1]
    assert "Traceback" not in r.stderr


def test_scenarios_are_repeatable_and_comma_separated_like_backends():
    from authzbench.cli import build_parser
    from authzbench.commands import _config

    args = build_parser().parse_args(
        ["bench", "--backend", "reference", "--scenario", "write_acl,write_hierarchy", "--scenario",
         "roundtrip"])
    assert _config(args).schedule.scenarios == ["write_acl", "write_hierarchy", "roundtrip"]


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


def test_pytest_interface_skips_backend_tests_without_the_flag_and_reports_p95_with_it(tmp_path):
    """`pytest` alone skips the real-backend suite naming the flag; `pytest --backend reference
    --benchmark-json` runs it, with the suite's p95/p99 in pytest-benchmark's JSON, and `--report`
    renders the markdown report of that pytest run."""
    import json
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    target = str(root / "tests" / "backends" / "test_scenarios.py")
    r = subprocess.run([sys.executable, "-m", "pytest", target, "-q", "-rs", "-p", "no:cacheprovider",
                        "--rootdir", str(root), "-k", "check_manage_direct_user"],
                       capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert r.returncode == 0 and "run with --backend NAME" in r.stdout, r.stdout[-2000:]
    out = tmp_path / "bench.json"
    r = subprocess.run([sys.executable, "-m", "pytest", target, "-q", "-p", "no:cacheprovider", "--rootdir",
                        str(root), "--backend", "reference", "--rounds", "20", "--report",
                        "--benchmark-json", str(out), "-k", "check_manage_direct_user or round_trip"],
                       capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    benches = json.loads(out.read_text())["benchmarks"]
    assert benches and all(b["extra_info"]["p95_ms"] >= b["extra_info"]["p50_ms"] > 0 for b in benches)
    reports = [p for p in (tmp_path / "reports").glob("pytest-*.md") if not p.stem.endswith("-appendix")]
    assert len(reports) == 1 and "check_manage_direct_user" in reports[0].read_text()


def test_workers_on_without_the_distributed_extra_is_one_line_naming_it(tmp_path):
    code = (
        "import sys; sys.modules['distributed'] = None; from authzbench.cli import main; "
        "sys.exit(main(['bench', '--backend', 'postgres', '--provision', 'external', '--profile', 'tiny', "
        "'--workers-on', 'tcp://127.0.0.1:8786']))")
    r = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "authzbench[distributed]" in r.stderr.strip().splitlines()[-1]
