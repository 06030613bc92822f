"""The monitor samples CPU and RSS of server processes and their children."""

from __future__ import annotations

import subprocess
import sys
import time

from authzbench.core.metrics import Monitor


def test_monitor_sees_a_busy_child_of_the_server_process():
    # A "server" whose child burns CPU, as postgres backends are children of the postmaster.
    code = "import subprocess,sys; subprocess.run([sys.executable,'-c','while True: pass'])"
    server = subprocess.Popen([sys.executable, "-c", code])
    samples: list[dict] = []
    try:
        time.sleep(0.3)
        with Monitor([server.pid], samples.append, interval_s=0.2):
            time.sleep(1.5)
    finally:
        for child in __import__("psutil").Process(server.pid).children(recursive=True):
            child.kill()
        server.kill()
    assert len(samples) >= 4
    assert max(s["cpu_percent"] for s in samples) > 50  # one busy core
    assert all(s["rss_bytes"] > 1_000_000 and s["processes"] == 2 for s in samples)


def test_monitor_of_dead_processes_records_nothing_and_does_not_crash():
    samples: list[dict] = []
    with Monitor([2**22 + 12345], samples.append, interval_s=0.05):
        time.sleep(0.3)
    assert samples == []


def test_monitor_records_the_client_processes_cpu_apart_from_the_servers():
    server = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    # a busy worker process of the client (a child of this process, as load workers are); a busy loop in
    # this thread would hold the GIL and starve the monitor's own sampling thread on a loaded machine
    worker = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    samples: list[dict] = []
    try:
        time.sleep(0.2)
        with Monitor([server.pid], samples.append, interval_s=0.2):
            time.sleep(1.5)
    finally:
        server.kill()
        worker.kill()
    assert len(samples) >= 4
    # > 20, not ~100: the machine is shared
    assert max(s["client_cpu_percent"] for s in samples) > 20
    assert max(s["cpu_percent"] for s in samples) < 10


def test_an_in_process_engine_has_no_separate_client_share():
    import os

    samples: list[dict] = []
    with Monitor([os.getpid()], samples.append, interval_s=0.1):
        # Until a few samples came, not a fixed 0.4 s: late in a full run the first (priming) sample of this
        # process, its PSS and every process's CPU, outlasted 0.4 s and the test got none.
        deadline = time.monotonic() + 20
        while len(samples) < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
    assert len(samples) >= 3 and all("client_cpu_percent" not in s for s in samples), samples


def test_server_memory_counts_a_page_shared_by_its_processes_once():
    # A "server" and its forked child both map one 64 MiB shared region, as PostgreSQL's backends map its
    # shared buffers: their RSS summed counts the region twice, their PSS once.
    code = (
        "import mmap,os,sys,time; m=mmap.mmap(-1, 64<<20); m.write(b'x'*(64<<20)); pid=os.fork(); "
        "m.seek(0); m.read(64<<20); time.sleep(0.5 if pid else 0); print('ready', flush=True) if pid else "
        "None; time.sleep(30)")
    server = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert server.stdout.readline().strip() == "ready"
        s = Monitor([server.pid], lambda _: None).sample()
    finally:
        for child in __import__("psutil").Process(server.pid).children(recursive=True):
            child.kill()
        server.kill()
    mib = 2**20
    assert s["processes"] == 2 and s["rss_bytes"] >= 128 * mib
    assert 64 * mib <= s["pss_bytes"] <= s["rss_bytes"] - 48 * mib
