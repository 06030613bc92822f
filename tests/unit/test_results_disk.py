"""The results directory stops taking writes mid-run (here: a 16 KiB file size limit, as a full disk would):
one clear error, exit code 2, no traceback, nothing left running, and every line recorded before is kept."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LIMIT = 16 * 1024  # records.jsonl outgrows this in the first phases (25 KiB for the whole run); the tiny
# dataset's files (<= 4 KiB each) do not


def _limit_file_size() -> None:
    resource.setrlimit(resource.RLIMIT_FSIZE, (LIMIT, LIMIT))  # Python ignores SIGXFSZ: writes fail EFBIG


def test_a_results_dir_that_stops_taking_writes_is_one_error_and_keeps_what_was_recorded(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT), "AUTHZBENCH_STATE": str(tmp_path / "state")}
    gen = subprocess.run(
        [sys.executable, "-m", "authzbench.cli", "generate", "--profile", "tiny", "--data-dir",
         str(tmp_path / "data")],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert gen.returncode == 0, gen.stderr
    r = subprocess.run(
        [sys.executable, "-m", "authzbench.cli", "bench", "--backend", "reference", "--profile", "tiny",
         "--data-dir", str(tmp_path / "data"), "--results-dir", str(tmp_path / "results"), "--report-dir",
         str(tmp_path / "reports"), "--concurrency", "1,2", "--iterations-scale", "0.2"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600, preexec_fn=_limit_file_size)
    errors = [ln for ln in r.stderr.splitlines() if "error" in ln]
    assert r.returncode == 2, r.stderr[-3000:]
    assert "Traceback" not in r.stderr
    assert len(errors) == 1 and "cannot write" in errors[0] and "File too large" in errors[0], errors
    (run,) = (tmp_path / "results").iterdir()
    lines = (run / "records.jsonl").read_text().splitlines()
    kept = [json.loads(ln) for ln in lines[:-1]]  # the last line may be cut where the limit fell
    assert kept and any(rec["type"] == "interval" for rec in kept)
    assert (run / "manifest.json").is_file()
