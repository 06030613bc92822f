"""The machine-speed index (authzbench/core/speed.py) drops when the machine is slowed by other CPU-bound
work."""

from __future__ import annotations

import os
import subprocess
import sys

from authzbench.core import speed
from authzbench.core.records import as_dict

BUSY = "while True: pass"


def test_the_index_drops_clearly_when_cpu_bound_processes_compete():
    quiet = speed.measure()
    hogs = [subprocess.Popen([sys.executable, "-c", BUSY]) for _ in range(2 * max(2, os.cpu_count() or 1))]
    try:
        loaded = speed.measure()
    finally:
        for p in hogs:
            p.kill()
            p.wait(timeout=10)
    # Two busy processes a core leave the workload about a third of a core: its CPU score drops by ~3x. (One a
    # core failed once beside another test run: the quiet score was itself slowed, 0.596 against 0.705.) A
    # generous margin, so co-tenants on a shared machine do not flip the verdict: 20% lower at least. The CPU
    # score is the part that sees CPU load: in a full unit run the quiet loopback once read 29 us against 13
    # us loaded (other tests' processes), which moved the combined index the other way.
    assert loaded.cpu_score < 0.8 * quiet.cpu_score, (quiet, loaded)
    assert loaded.cpu_s > quiet.cpu_s


def test_the_record_carries_its_parts_and_the_index_is_their_geometric_mean():
    s = speed.measure(repeats=3, samples=200)
    rec = as_dict(s.record(backend="postgres", visit=0))
    assert rec["type"] == "speed_index" and rec["backend"] == "postgres" and rec["visit"] == 0
    assert {"cpu_s", "rtt_p50_us", "cpu_score", "rtt_score", "index", "seconds"} <= rec.keys()
    assert abs(rec["index"] ** 2 - rec["cpu_score"] * rec["rtt_score"]) < 1e-9 * rec["index"] ** 2
