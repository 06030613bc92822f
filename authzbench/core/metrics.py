"""Latency histograms (every op, microseconds, HdrHistogram) and the CPU/RSS monitor."""

from __future__ import annotations

import contextlib
import functools
import os
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import numpy as np
import psutil
from hdrh.histogram import HdrHistogram

# 1 µs .. 1 h at 3 significant digits: 0.1% resolution anywhere in the range.
LOWEST_US, HIGHEST_US, DIGITS = 1, 3_600_000_000, 3


def new_histogram() -> HdrHistogram:
    return HdrHistogram(LOWEST_US, HIGHEST_US, DIGITS)


def record_all(h: HdrHistogram, values_us: list[int]) -> None:
    """Record every value into `h`, each distinct value once with its count: the same histogram as a
    record_value per value, at a fraction of hdrh's pure-Python cost when values repeat (latencies in µs
    do)."""
    vals, counts = np.unique(np.asarray(values_us, dtype=np.int64), return_counts=True)
    for v, c in zip(vals.tolist(), counts.tolist(), strict=True):
        h.record_value(v, c)


def encode(h: HdrHistogram) -> str:
    return h.encode().decode("ascii")


def decode(s: str) -> HdrHistogram:
    return HdrHistogram.decode(s.encode("ascii"))


def merge(encoded: Iterable[str]) -> HdrHistogram:
    """The sum of encoded histograms; read-only (shared between callers asking for the same list)."""
    return _merge(tuple(encoded))


# Rendering make bench's report (20261127-154106) merged 3,158 lists of which 886 distinct, one section
# after another: 29 s of its 107 s. A merged histogram is ~22 KB, so 2,048 of them stay under ~45 MB.
@functools.lru_cache(maxsize=2048)
def _merge(encoded: tuple[str, ...]) -> HdrHistogram:
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
    p999_ms: float = float("nan")  # p99.9: the Zanzibar paper's fourth percentile (issue 70)


def summarize(h: HdrHistogram) -> LatencySummary:
    n = h.get_total_count()
    if n == 0:
        nan = float("nan")
        return LatencySummary(0, nan, nan, nan, nan, nan, nan, nan)

    def ms(v: float) -> float:
        return v / 1000.0

    counts = np.ctypeslib.as_array(h.counts)[:h.counts_len].astype(np.float64)
    _, median, _ = _index_values(h.counts_len)
    mean = float(counts @ median) / n  # hdrh's get_mean_value, without its Python loop over every value
    p50, p95, p99, p999 = (percentile(h, q, counts) for q in (50, 95, 99, 99.9))
    return LatencySummary(
        n, ms(mean), ms(p50), ms(p95), ms(p99), ms(h.get_max_value()), ms(h.get_min_value()), ms(p999))


def percentile(h: HdrHistogram, q: float, counts: np.ndarray | None = None) -> int:
    """hdrh's get_value_at_percentile by a cumulative sum: its loop over the ~2,700 counts took ~2 s a report
    section on a loaded machine (a summary asks three percentiles and the mean of every phase)."""
    counts = np.ctypeslib.as_array(h.counts)[:h.counts_len] if counts is None else counts
    target = max(int(q * h.get_total_count() / 100 + 0.5), 1)
    i = int(np.searchsorted(np.cumsum(counts), target))
    lowest, _, highest = _index_values(h.counts_len)
    return int(highest[i] if q else lowest[i])


@functools.cache
def _index_values(counts_len: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per counts index: the lowest, median and highest value it stands for (the suite's one histogram
    layout, so computed once)."""
    h = new_histogram()
    assert h.counts_len == counts_len, "one histogram layout throughout the suite"
    v = [h.get_value_from_index(i) for i in range(counts_len)]
    return (np.array([h.get_lowest_equivalent_value(x) for x in v], dtype=np.float64),
            np.array([h._hdr_median_equiv_value(x) for x in v], dtype=np.float64),
            np.array([h.get_highest_equivalent_value(x) for x in v], dtype=np.float64))


# The shortest sample whose foreign CPU counts for a phase's peak: below it, 10 ms ticks over ~40 processes
# are noise of the order of the figure itself.
MIN_MAX_S = 0.2
# A server's memory is its processes' proportional set size (PSS: a shared page split between the processes
# mapping it), not their RSS summed: 36 PostgreSQL processes of one SpiceDB datastore summed to 4,907 MiB
# of RSS, each counting the shared buffers again, against 516 MiB of PSS. PSS reads /proc/PID/smaps_rollup,
# 1.5-3 ms of CPU a process here, so it is read every PSS_EVERY_S (~2% of a core for 36 processes) and each
# sample carries the latest reading; memory moves slowly next to the 0.5 s CPU samples.
PSS_EVERY_S = 4.0


@dataclass
class Disturbance:
    """What else ran on the machine during a measured window, in % of one core (200 = both of 2 cores)."""

    foreign_cpu: float  # mean CPU of processes that are neither this run's client nor the measured server
    foreign_cpu_max: float
    steal: float  # mean CPU stolen by the hypervisor
    samples: int

    def as_record(self) -> dict:
        return {"foreign_cpu": round(self.foreign_cpu, 1), "foreign_cpu_max": round(self.foreign_cpu_max, 1),
                "steal": round(self.steal, 1), "samples": self.samples}


class _MachineCpu:
    """Machine-wide busy and steal CPU between two calls, in % of one core (psutil.cpu_times deltas)."""

    def __init__(self) -> None:
        self.ncpu = psutil.cpu_count() or 1
        self.last = psutil.cpu_times()

    def delta(self) -> tuple[float, float, float]:
        """(busy, steal) in % of one core since the last call, and that interval's length in seconds."""
        now = psutil.cpu_times()
        d = {f: getattr(now, f) - getattr(self.last, f) for f in now._fields}
        self.last = now
        # guest time is already counted in user on Linux; idle and iowait are not busy
        total = sum(v for f, v in d.items() if f not in ("guest", "guest_nice"))
        if total <= 0:
            return 0.0, 0.0, 0.0
        idle = d.get("idle", 0.0) + d.get("iowait", 0.0)
        scale = 100 * self.ncpu / total
        steal = d.get("steal", 0.0)
        return (total - idle - steal) * scale, steal * scale, total / self.ncpu


class _TreeCpu:
    """CPU a changing set of processes used between two calls, in % of one core, counting the ones that
    started or exited meanwhile. Each process counts its own and its reaped children's time, so one that
    ended between two calls still counts (through its parent); its last reading is taken back, so only its
    time since then does. A process first seen now counts all its time when it was created since the last
    call, give or take `new_slack_s` (psutil's create_time rests on the boot time in whole seconds)."""

    def __init__(self, new_slack_s: float = 0.01) -> None:
        self.last: dict[int, float] | None = None  # None: not primed yet
        self.new_slack_s = new_slack_s
        self.t = time.monotonic()
        self.wall = time.time()

    def delta(self, procs: list[psutil.Process]) -> float:
        now: dict[int, float] = {}
        used = 0.0
        for p in procs:
            try:
                c = p.cpu_times()
                now[p.pid] = v = c.user + c.system + c.children_user + c.children_system
                if self.last is not None:
                    used += v - self.last[p.pid] if p.pid in self.last else v if self._new(p) else 0.0
            except psutil.Error:
                continue
        if self.last is not None:
            used -= sum(v for pid, v in self.last.items() if pid not in now)
        t = time.monotonic()
        dt, self.t, self.wall, self.last = t - self.t, t, time.time(), now
        return 100 * used / dt if dt > 0 else 0.0

    def _new(self, p: psutil.Process) -> bool:
        return p.create_time() >= self.wall - self.new_slack_s


def tree_pss(procs: Iterable[psutil.Process]) -> int:
    """Summed PSS of these processes (0 when any cannot be read: a partial sum would understate)."""
    total = 0
    for p in procs:
        try:
            total += p.memory_full_info().pss
        except psutil.NoSuchProcess:
            continue  # ended since it was listed: it holds no memory now
        except (psutil.Error, AttributeError):  # AttributeError: no pss field on this platform
            return 0
    return total


def outside(procs: list[psutil.Process], ours: set[int], others: set[int]) -> list[psutil.Process]:
    """The processes (listed with their ppid) neither in `ours` nor descended from one of ours: a worker the
    client started, or a backend a server forked, between the listing of their trees and this listing is
    still theirs, not someone else's (a Python worker's start is ~20-30 ms of CPU, 7-10% of a core in a 0.3 s
    sample). A descendant through `others` (another server of the run) stays foreign."""
    parent = {p.pid: p.info.get("ppid") for p in procs}

    def descends(pid: int | None) -> bool:
        seen: set[int] = set()
        while pid and pid not in seen and pid not in others:
            if pid in ours:
                return True
            seen.add(pid)
            pid = parent.get(pid)
        return False

    return [p for p in procs if p.pid not in ours and not descends(p.pid)]


class Monitor:
    """Samples CPU %, RSS and PSS of the server processes (and their children) while a phase runs, and what
    else used the machine meanwhile (foreign CPU, steal: see Disturbance).

    Native servers are sampled with psutil; compose containers through a stats callback
    (docker SDK). Samples are handed to `sink` as they are taken, so a crash keeps them.
    `others`: PIDs of servers this run started for other backends (idle meanwhile): their CPU is foreign,
    not the client's, although they are children of this process.
    """

    def __init__(self, pids: list[int], sink: Callable[[dict], None], interval_s: float = 0.5,
                 container_stats: Callable[[], list[tuple[float, int]]] | None = None,
                 others: list[int] | None = None):
        self.pids = pids
        self.others = set(others or [])
        self._machine = _MachineCpu()
        # (foreign unclipped, steal, seconds) per sample kept
        self._window: list[tuple[float, float, float]] = []
        self._last_foreign: tuple[float, float, float] | None = None
        self.sink = sink
        self.interval_s = interval_s
        self.container_stats = container_stats
        self._stop = threading.Event()
        self._active = threading.Event()  # set: inside the measured window (samples are kept)
        self._active.set()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._procs: dict[int, psutil.Process] = {}
        self._server_cpu, self._client_tree = _TreeCpu(), _TreeCpu()
        self._foreign_cpu = _TreeCpu(new_slack_s=1.0)
        self.samples = 0
        self._pss: tuple[float, int] | None = None  # (when, bytes) of the latest PSS reading

    def _processes(self, others: set[int] | None = None) -> list[psutil.Process]:
        procs, others = [], self._other_tree() if others is None else others
        for pid in self.pids:
            try:
                root = self._procs.get(pid) or psutil.Process(pid)
                self._procs[pid] = root
                procs.append(root)
                for child in root.children(recursive=True):
                    if child.pid not in others:  # an in-process engine's tree holds the other servers too
                        procs.append(self._procs.setdefault(child.pid, child))
            except psutil.Error:
                continue
        return procs

    def sample(self) -> dict | None:
        if self.container_stats is not None:
            stats = self.container_stats()
            out = {"cpu_percent": sum(c for c, _ in stats), "rss_bytes": sum(r for _, r in stats),
                   "processes": len(stats),
                   "client_cpu_percent": max(0.0, self._client_tree.delta(self._client_procs(set())))}
            return {**out, **self._foreign(out["cpu_percent"] + out.get("client_cpu_percent", 0.0))}
        rss, n = 0, 0
        others = self._other_tree()  # once a sample: each walk lists every process on the machine
        procs = self._processes(others)
        for p in procs:
            try:
                rss += p.memory_info().rss
                n += 1
            except psutil.Error:
                continue
        if not n:
            return None
        server = {p.pid for p in procs}
        client = self._client_procs(server, others)
        # a sample's share can dip below 0 when a process's end lands in its parent's times late: clipped for
        # the per-sample figure (the foreign CPU, averaged over a window, is kept signed)
        out = {"cpu_percent": max(0.0, self._server_cpu.delta(procs)), "rss_bytes": rss, "processes": n}
        if (pss := self._latest_pss(procs)) is not None:
            out["pss_bytes"] = pss
        if os.getpid() not in server:  # an in-process engine's CPU includes the client's
            out["client_cpu_percent"] = max(0.0, self._client_tree.delta(client))
        return {**out, **self._foreign_processes(server | {p.pid for p in client} | {os.getpid()}, others)}

    def _latest_pss(self, procs: list[psutil.Process]) -> int | None:
        """The server tree's PSS, read again when the last reading is PSS_EVERY_S old; None where the kernel
        does not give it (no smaps_rollup, or another user's processes)."""
        now = time.monotonic()
        if self._pss is None or now - self._pss[0] >= PSS_EVERY_S:
            self._pss = (now, tree_pss(procs))
        return self._pss[1] or None

    def _foreign(self, ours: float) -> dict:
        """Machine CPU not used by the measured containers or this run's client (compose: the containers'
        processes are not ours to walk), and the hypervisor's steal."""
        busy, steal, dt = self._machine.delta()
        self._last_foreign = (busy - ours, steal, dt)
        return {"foreign_cpu_percent": max(0.0, busy - ours), "steal_percent": steal}

    def _foreign_processes(self, ours: set[int], others: set[int]) -> dict:
        """CPU of every process that is neither the measured server nor this run's client (co-tenants, other
        servers of this run, daemons, kernel threads), and the hypervisor's steal. Summed over those
        processes, not taken as the machine's busy time less ours: a phase starts and ends 32 workers and
        PostgreSQL forks a backend per connection, and the time of processes that came and went between
        two samples read as 25-110% of a core used by someone else on a quiet machine."""
        foreign = self._foreign_cpu.delta(outside(list(psutil.process_iter(["ppid"])), ours, others))
        _, steal, dt = self._machine.delta()
        self._last_foreign = (foreign, steal, dt)
        return {"foreign_cpu_percent": max(0.0, foreign), "steal_percent": steal}

    def _client_procs(self, server_pids: set[int], others: set[int] | None = None) -> list[psutil.Process]:
        """This benchmark process and its workers, less the servers it started (the measured one and the
        others, idle meanwhile)."""
        me = os.getpid()
        try:
            tree = [psutil.Process(me), *psutil.Process(me).children(recursive=True)]
        except psutil.Error:
            return []
        skip = server_pids | (self._other_tree() if others is None else others)
        return [p for p in tree if p.pid not in skip]

    def _other_tree(self) -> set[int]:
        out = set()
        for pid in self.others:
            with contextlib.suppress(psutil.Error):
                out |= {pid, *(c.pid for c in psutil.Process(pid).children(recursive=True))}
        return out

    def _emit(self) -> None:
        with self._lock:
            s = self.sample()
        if s is not None:
            s["t"] = time.time()
            self.samples += 1
            if "foreign_cpu_percent" in s and self._last_foreign is not None:
                self._window.append(self._last_foreign)
            self.sink(s)

    def disturbance(self) -> Disturbance | None:
        """Foreign CPU and steal over the measured window, each sample weighted by its interval; None without
        samples. Per-process CPU comes in 10 ms ticks, so a sample of a few ms (the window's last one often
        lands just after a regular one) is mostly rounding: 38 processes rounded down at once read as 76% of
        a core "foreign" in a quiet run, and an unweighted mean of 1-2 samples re-ran every 32-worker phase.
        The signed values are averaged (clipping each at 0 would bias the mean upwards); the max is taken
        over samples of at least MIN_MAX_S."""
        w = [x for x in self._window if x[2] > 0]
        total = sum(dt for _, _, dt in w)
        if not w or total <= 0:
            return None
        mean = max(0.0, sum(f * dt for f, _, dt in w) / total)
        steal = sum(st * dt for _, st, dt in w) / total
        peak = max((f for f, _, dt in w if dt >= MIN_MAX_S), default=mean)
        return Disturbance(mean, max(0.0, peak), steal, len(w))

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
