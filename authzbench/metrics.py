"""Latency histograms (every op, microseconds, HdrHistogram) and the CPU/RSS monitor."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import psutil
from hdrh.histogram import HdrHistogram

# 1 µs .. 1 h at 3 significant digits: 0.1% resolution anywhere in the range.
LOWEST_US, HIGHEST_US, DIGITS = 1, 3_600_000_000, 3


def new_histogram() -> HdrHistogram:
    return HdrHistogram(LOWEST_US, HIGHEST_US, DIGITS)


def encode(h: HdrHistogram) -> str:
    return h.encode().decode("ascii")


def decode(s: str) -> HdrHistogram:
    return HdrHistogram.decode(s.encode("ascii"))


def merge(encoded: Iterable[str]) -> HdrHistogram:
    total = new_histogram()
    for s in encoded:
        total.add(decode(s))
    return total


@dataclass
class LatencySummary:
    count: int
    mean_ms: float
    p50_ms: float
    p95_ms: float
    p99_ms: float
    max_ms: float
    min_ms: float


def summarize(h: HdrHistogram) -> LatencySummary:
    n = h.get_total_count()
    if n == 0:
        nan = float("nan")
        return LatencySummary(0, nan, nan, nan, nan, nan, nan)

    def ms(v: float) -> float:
        return v / 1000.0

    return LatencySummary(n, ms(h.get_mean_value()), ms(h.get_value_at_percentile(50)),
                          ms(h.get_value_at_percentile(95)), ms(h.get_value_at_percentile(99)),
                          ms(h.get_max_value()), ms(h.get_min_value()))


class Monitor:
    """Samples CPU % and RSS of the server processes (and their children) while a phase runs.

    Native servers are sampled with psutil; compose containers through a stats callback
    (docker SDK). Samples are handed to `sink` as they are taken, so a crash keeps them.
    """

    def __init__(self, pids: list[int], sink: Callable[[dict], None], interval_s: float = 0.5,
                 container_stats: Callable[[], list[tuple[float, int]]] | None = None):
        self.pids = pids
        self.sink = sink
        self.interval_s = interval_s
        self.container_stats = container_stats
        self._stop = threading.Event()
        self._active = threading.Event()  # set: inside the measured window (samples are kept)
        self._active.set()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._procs: dict[int, psutil.Process] = {}
        self._client: dict[int, psutil.Process] = {}
        self.samples = 0

    def _processes(self) -> list[psutil.Process]:
        procs = []
        for pid in self.pids:
            try:
                root = self._procs.get(pid) or psutil.Process(pid)
                self._procs[pid] = root
                procs.append(root)
                for child in root.children(recursive=True):
                    procs.append(self._procs.setdefault(child.pid, child))
            except psutil.Error:
                continue
        return procs

    def sample(self) -> dict | None:
        if self.container_stats is not None:
            stats = self.container_stats()
            return {"cpu_percent": sum(c for c, _ in stats), "rss_bytes": sum(r for _, r in stats),
                    "processes": len(stats), **self._client_cpu(set())}
        cpu, rss, n = 0.0, 0, 0
        procs = self._processes()
        for p in procs:
            try:
                cpu += p.cpu_percent(None)  # since this Process object's previous call
                rss += p.memory_info().rss
                n += 1
            except psutil.Error:
                continue
        return {"cpu_percent": cpu, "rss_bytes": rss, "processes": n,
                **self._client_cpu({p.pid for p in procs})} if n else None

    def _client_cpu(self, server_pids: set[int]) -> dict:
        """CPU of this benchmark process and its workers (server processes it started excluded): how much of
        the shared cores the client took. Nothing when the server runs inside this process (chdb)."""
        me = os.getpid()
        if me in server_pids:
            return {}
        cpu = 0.0
        try:
            tree = [psutil.Process(me), *psutil.Process(me).children(recursive=True)]
        except psutil.Error:
            return {}
        for p in tree:
            if p.pid in server_pids:
                continue
            try:
                cpu += self._client.setdefault(p.pid, p).cpu_percent(None)
            except psutil.Error:
                continue
        return {"client_cpu_percent": cpu}

    def _emit(self) -> None:
        with self._lock:
            s = self.sample()
        if s is not None:
            s["t"] = time.time()
            self.samples += 1
            self.sink(s)

    def _loop(self) -> None:
        with self._lock:
            self.sample()  # primes cpu_percent's baseline
        while not self._stop.wait(self.interval_s):
            if self._active.is_set():
                self._emit()

    def window(self, measuring: bool) -> None:
        """Keep only samples of the measured window: on open, restart the CPU baseline; on close, take
        a last sample, so even a phase shorter than the interval gets its average CPU."""
        if measuring:
            with self._lock:
                self.sample()
            self._active.set()
        else:
            self._active.clear()
            self._emit()

    def gated(self) -> Monitor:
        """Start outside the window: nothing is kept until window(True)."""
        self._active.clear()
        return self

    def __enter__(self) -> Monitor:
        self._thread = threading.Thread(target=self._loop, name="monitor", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread:
            self._thread.join(timeout=5)
