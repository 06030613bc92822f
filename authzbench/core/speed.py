"""The machine-speed index: a short fixed reference workload, identical on every machine, measured at the
start of every backend visit, so a reader can tell a slower machine (or a busier period of this one) from a
slower backend, and `report --compare` can normalize two runs' figures by it.

The index is a SPEED (higher = faster machine), 1.0 = the base machine below (not the
reference report's laptop):

    cpu_score = REF_CPU_S / cpu_s        (cpu_s: median seconds of one CPU unit, pure Python + numpy)
    rtt_score = REF_RTT_US / rtt_p50_us  (a 64-byte echo over a loopback TCP connection to another process)
    index     = sqrt(cpu_score * rtt_score)  (geometric mean: a run's figures are CPU plus round trips)

An index of 0.8 means the machine did the reference work at 80% of the base machine's speed: a latency
measured there is expected 1 / 0.8 = 1.25x longer for the machine alone.
"""

from __future__ import annotations

import math
import socket
import statistics
import subprocess
import sys
import time
from dataclasses import asdict, dataclass

import numpy as np

from authzbench.core.records import SpeedIndex

# The base machine (index 1.0): the 2-core machine kind of this project's runs (Intel Xeon @ 2.50GHz,
# 2 vCPUs), the quickest of five measurements on 2026-11-27 with other work on it (cpu 74.9-109.1 ms a unit,
# round trip 12.9-13.2 µs). They define the unit, they are not results: changing them rescales every later
# index, and old and new runs would stop comparing.
REF_CPU_S = 0.075
REF_RTT_US = 13.0
REF_MACHINE = "a 2-vCPU Intel Xeon @ 2.50GHz"  # named in reports, so a reader knows what 1.0 was

CPU_REPEATS = 21  # 75-110 ms a unit: 21 of them 1.6-2.3 s, the median over the short bursts of others
RTT_WARMUP, RTT_SAMPLES = 500, 20_000  # ~13 µs each: ~0.3 s, plus ~60 ms to start the echo process
_ECHO = ("import socket,sys\n"
         "s=socket.socket();s.bind(('127.0.0.1',0));s.listen(1)\n"
         "print(s.getsockname()[1],flush=True)\n"
         "c,_=s.accept();c.setsockopt(socket.IPPROTO_TCP,socket.TCP_NODELAY,1)\n"
         "while (d:=c.recv(64)):c.sendall(d)\n")


@dataclass(frozen=True)
class SpeedSample:
    cpu_s: float  # median seconds of one CPU unit
    rtt_p50_us: float  # median loopback round trip
    cpu_score: float
    rtt_score: float
    index: float  # sqrt(cpu_score * rtt_score); higher = faster machine
    seconds: float  # wall time of the whole measurement

    def record(self, backend: str, visit: int) -> SpeedIndex:
        """The results record (records.py kind `speed_index`)."""
        return SpeedIndex(backend=backend, visit=visit, **asdict(self))


def cpu_unit(arr: np.ndarray) -> float:
    """One fixed unit of CPU work: a pure-Python loop over ints and a dict (the interpreter, like the
    harness and the drivers) and a single-threaded numpy sort (memory and vector work). Returns seconds."""
    t0 = time.perf_counter()
    acc, seen = 0, {}
    for i in range(120_000):
        acc = (acc * 31 + i) % 1_000_003
        seen[acc & 1023] = i
    np.sort(arr, kind="stable")
    return time.perf_counter() - t0


def cpu_seconds(repeats: int = CPU_REPEATS) -> float:
    arr = np.random.default_rng(45).random(400_000)  # the same numbers on every machine
    return statistics.median(cpu_unit(arr) for _ in range(repeats))


def loopback_rtt_us(samples: int = RTT_SAMPLES) -> float:
    """Median round trip of a 64-byte message to an echo server in another process over 127.0.0.1 TCP."""
    proc = subprocess.Popen([sys.executable, "-c", _ECHO], stdout=subprocess.PIPE, text=True)
    try:
        port = int(proc.stdout.readline())  # type: ignore[union-attr]
        with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            msg, times = b"x" * 64, []
            for i in range(RTT_WARMUP + samples):
                t0 = time.perf_counter_ns()
                s.sendall(msg)
                got = 0
                while got < len(msg):
                    got += len(s.recv(64))
                if i >= RTT_WARMUP:
                    times.append(time.perf_counter_ns() - t0)
        return statistics.median(times) / 1000
    finally:
        proc.kill()
        proc.wait(timeout=10)


def measure(repeats: int = CPU_REPEATS, samples: int = RTT_SAMPLES) -> SpeedSample:
    """The reference workload once (2.2-2.9 s on the base machine)."""
    t0 = time.perf_counter()
    cpu_s = cpu_seconds(repeats)
    rtt = loopback_rtt_us(samples)
    cpu_score, rtt_score = REF_CPU_S / cpu_s, REF_RTT_US / rtt
    return SpeedSample(cpu_s, rtt, cpu_score, rtt_score, math.sqrt(cpu_score * rtt_score),
                       time.perf_counter() - t0)
