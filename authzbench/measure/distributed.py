"""Load from many hosts: a phase's workers spread over Dask distributed workers, one per load host.

Optional extra `authzbench[distributed]`, imported only when used. The measuring loop never runs in a
Dask worker's event loop (a GIL-heavy task there stalls it and its profiler): one small agent per load
host, an actor pinned to that host's Dask worker, starts that host's share of the ordinary
`worker_main` processes (forkserver, exactly as locally) and relays their messages when polled.
Global worker ids go round-robin over the hosts with n = the total, so the open-loop slices and the
closed-loop striding of `worker_main` are unchanged, and the coordinator feeds the same PhaseState as
the local runner. Each host's wall clock is probed before the start; every host starts at one wall
instant converted to its own monotonic clock, and latency stays measured on each host's own clock from
its own intended times.

The scheduler runs pickled code from whoever reaches it: keep it on a private network or use Dask's TLS.
"""

from __future__ import annotations

import ipaddress
import multiprocessing as mp
import os
import queue
import re
import socket
import threading
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

from authzbench.core.errors import UserError
from authzbench.core.records import Clock, HostLost, Record
from authzbench.measure.runner import PhaseResult, PhaseSpec, drive_phase
from authzbench.measure.worker import PhaseEvents, worker_main

EXTRA = "pip install 'authzbench[distributed]'"
PROBES = 5  # clock probes per host; the lowest round trip wins (its midpoint error is at most rtt/2)
START_LEAD_S = 0.5  # the start instant is this far ahead: every host must hear of it before it passes
OFFSET_WARN_MS = 5.0  # offset uncertainty (rtt/2) above this is flagged: 0.5% of a 1 s interval
CALL_TIMEOUT_S = 10.0  # an agent that does not answer a short call in this time is a lost host
POLL_S = 0.1  # how often the agents' buffered messages are fetched, at most
MAX_BATCH = 20_000  # messages per drain call, to keep each reply small


def require() -> Any:
    """The distributed module, or one line naming the extra."""
    try:
        import distributed
    except ImportError:
        raise UserError(f"--workers-on needs the optional extra: {EXTRA}") from None
    return distributed


# load host ---------------------------------------------------------------------------------------

def _watch_agent(pid: int) -> None:
    while True:
        time.sleep(0.5)
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            # The agent's process died: nobody reads our queue any more, and a full pipe would keep us
            # (and the load on the server) alive forever.
            os._exit(70)
        except PermissionError:
            continue


def hosted_worker(agent_pid: int, *args: Any) -> None:
    """`worker_main` on a load host, ending itself when its agent's process dies."""
    threading.Thread(target=_watch_agent, args=(agent_pid,), daemon=True).start()
    worker_main(*args)


class Agent:
    """One per load host, an actor pinned to its Dask worker: starts, relays and stops its workers.

    `clock_skew_s` fakes a host whose wall clock is off by that much (tests of the offset correction)."""

    def __init__(self, clock_skew_s: float = 0.0):
        self.skew = clock_skew_s
        self.procs: list[Any] = []

    def _wall(self) -> float:
        return time.time() + self.skew

    def prepare(self, spec: PhaseSpec, factory: Callable, inputs: list, wids: list[int]) -> dict:
        ctx = mp.get_context("forkserver")
        self.out = ctx.Queue()
        self.ev = PhaseEvents.made_by(ctx.Event)
        self.t0 = ctx.Value("d", 0.0)
        self.procs = [ctx.Process(target=hosted_worker, daemon=True,
                                  args=(os.getpid(), w, spec, factory, inputs, self.out, self.ev, self.t0))
                      for w in wids]
        self.buf: list = []
        self.lock = threading.Lock()
        self.n_measured, self.measured_at = 0, 0.0
        for p in self.procs:
            p.start()
        self.relay = threading.Thread(target=self._relay, daemon=True)
        self.relay.start()
        return {"hostname": socket.gethostname(), "pid": os.getpid(), "pids": [p.pid for p in self.procs]}

    def _relay(self) -> None:
        """Buffer the workers' messages as they come, noting when the last one finished measuring (on this
        host's clock: the coordinator only hears of it at its next poll)."""
        done = 0
        while done < len(self.procs):
            try:
                msg = self.out.get(timeout=0.5)
            except queue.Empty:
                if not any(p.is_alive() for p in self.procs):
                    return
                continue
            with self.lock:
                self.buf.append(msg)
                if msg[0] == "measured":
                    self.n_measured += 1
                    self.measured_at = time.perf_counter()
            done += msg[0] == "done"

    def drain(self) -> tuple[list, int, float | None]:
        """Messages buffered since the last call, how many workers still run, and the measured window (s,
        from the start instant to the last worker's end) once every worker here finished measuring."""
        with self.lock:
            msgs, self.buf = self.buf[:MAX_BATCH], self.buf[MAX_BATCH:]
            window = self.measured_at - self.t0.value if self.n_measured == len(self.procs) else None
        return msgs, sum(p.is_alive() for p in self.procs), window

    def clock(self) -> float:
        return self._wall()

    def start_at(self, t0_wall: float) -> float:
        """Start measuring at t0_wall (this host's wall clock), as a perf_counter instant; returns the margin
        (s) left when the order arrived (negative: it came late, the first ops start late)."""
        margin = t0_wall - self._wall()
        self.t0.value = time.perf_counter() + margin
        self.ev.start.set()
        return margin

    def set_go(self) -> None:
        self.ev.go.set()

    def set_stop(self) -> None:
        self.ev.stop.set()

    def set_release(self) -> None:
        self.ev.release.set()

    def abort(self) -> None:
        self.ev.abort()

    def join(self) -> None:
        deadline = time.monotonic() + 5  # released workers exit at once; one still here after 5 s is hung
        for p in self.procs:
            p.join(timeout=max(0.0, deadline - time.monotonic()))
        for p in self.procs:
            if p.is_alive():
                p.kill()
                p.join(timeout=2)

    def versions(self) -> dict:
        from authzbench.results.store import environment

        env = environment()
        return {k: env[k] for k in ("hostname", "cpu_model", "cpu_logical", "python", "drivers")}


# coordinator -------------------------------------------------------------------------------------

class DaskPool:
    """The phase's workers on the load hosts, behind the same pool interface as the local runner's."""

    def __init__(
        self, client: Any, spec: PhaseSpec, factory: Callable, inputs: list, sink: Callable[[Record], None],
        clock_skews: dict[int, float] | None = None):
        self.client, self.spec, self.factory, self.inputs, self.sink = client, spec, factory, inputs, sink
        addrs = sorted(client.scheduler_info()["workers"])
        if not addrs:
            raise UserError(
                "no load host has joined the scheduler: run `authzbench load-host ADDRESS` on each")
        self.addrs = addrs[:spec.concurrency]  # more hosts than workers: the extra hosts stay idle
        h = len(self.addrs)
        self.wids = [list(range(i, spec.concurrency, h)) for i in range(h)]  # round-robin global ids
        self.skews = clock_skews or {}
        self.agents: list[Any] = []
        self.futures: list[Any] = []
        self.labels = [a for a in self.addrs]
        self.lost: dict[int, str] = {}
        self.alive_n = [len(w) for w in self.wids]
        self.finished: set[int] = set()
        self.pending: list[tuple[str, int, Any]] = []
        self.next_poll = 0.0
        self.windows: list[float | None] = [None] * len(self.addrs)
        self.infos: list[dict | None] = [None] * len(self.addrs)

    def _call(self, i: int, method: str, *args: Any, timeout: float = CALL_TIMEOUT_S) -> Any:
        try:
            return getattr(self.agents[i], method)(*args).result(timeout=timeout)
        except Exception as e:  # noqa: BLE001 - the host or its agent is gone; the phase says so
            self._lose(i, e)
            return None

    def _each(self, method: str, *args: Any, per: dict[int, tuple] | None = None,
              timeout: float = CALL_TIMEOUT_S) -> list[Any]:
        """Call every live agent at once (with `args`, or per[i] for agent i), then collect; None where
        lost."""
        futs = {}
        for i, ag in enumerate(self.agents):
            if i not in self.lost:
                try:
                    futs[i] = getattr(ag, method)(*(per[i] if per else args))
                except Exception as e:  # noqa: BLE001
                    self._lose(i, e)
        out: list[Any] = [None] * len(self.agents)
        for i, f in futs.items():
            try:
                out[i] = f.result(timeout=timeout)
            except Exception as e:  # noqa: BLE001
                self._lose(i, e)
        return out

    def _lose(self, i: int, e: BaseException) -> None:
        if i in self.lost:
            return
        why = f"load host {self.labels[i]} lost ({type(e).__name__}: {str(e)[:160] or 'no answer'})"
        self.lost[i] = why
        self.sink(HostLost(phase=self.spec.phase_id, host=self.labels[i], reason=why))
        for wid in self.wids[i]:  # its workers will never report: they count as failed, as a dead worker does
            if wid not in self.finished:
                self.pending += [("fatal", wid, why), ("done", wid, None)]
                self.finished.add(wid)

    def start(self) -> dict[int, str]:
        try:
            self.futures = [
                self.client.submit(
                    Agent, self.skews.get(i, 0.0), workers=[a], allow_other_workers=False, actor=True,
                    pure=False)
                for i, a in enumerate(self.addrs)]
            self.agents = [f.result(timeout=60) for f in self.futures]
        except Exception as e:  # noqa: BLE001 - no agent: every worker fails, the phase says why
            self.agents = [None] * len(self.addrs)
            for i in range(len(self.addrs)):
                self._lose(i, e)
            return {}
        per = {i: (self.spec, self.factory, self.inputs, w) for i, w in enumerate(self.wids)}
        self.infos = self._each("prepare", per=per, timeout=60)
        names = [info["hostname"] if info else a for info, a in zip(self.infos, self.addrs, strict=True)]
        twins = {n for n in names if names.count(n) > 1}  # several Dask workers on one host (tests, loopback)
        self.labels = [f"{n}#{i + 1}" if n in twins else n for i, n in enumerate(names)]
        return {wid: self.labels[i] for i, ws in enumerate(self.wids) for wid in ws}

    def messages(self, timeout: float) -> list[tuple[str, int, Any]]:
        """What the hosts buffered, fetched at most every POLL_S (workers report once a second; polling
        faster only spends the CPU the load processes share)."""
        end = time.perf_counter() + timeout
        while True:
            wait = min(self.next_poll, end) - time.perf_counter()
            if wait > 0:
                time.sleep(wait)
            out, self.pending = self.pending, []
            if time.perf_counter() >= self.next_poll:
                self.next_poll = time.perf_counter() + POLL_S
                for i, got in enumerate(self._each("drain")):
                    if got is None:
                        continue
                    msgs, self.alive_n[i], self.windows[i] = got
                    self.finished.update(m[1] for m in msgs if m[0] == "done")
                    out += msgs
                out, self.pending = out + self.pending, []
            if out or time.perf_counter() >= end:
                return out

    def alive(self) -> bool:
        return bool(self.pending) or any(
            self.alive_n[i] > 0 for i in range(len(self.agents)) if i not in self.lost)

    def _probe(self, i: int) -> tuple[float, float] | None:
        """(round trip, offset) of agent i's wall clock vs ours, from the probe with the lowest round trip."""
        best = None
        for _ in range(PROBES):
            a = time.time()
            remote = self._call(i, "clock")
            b = time.time()
            if remote is None:
                return None
            if best is None or b - a < best[0]:
                best = (b - a, remote - (a + b) / 2)
        return best

    def begin(self) -> float:
        probes = {i: self._probe(i) for i in range(len(self.agents)) if i not in self.lost}
        t0_wall = time.time() + START_LEAD_S
        live = {i: p for i, p in probes.items() if p is not None and i not in self.lost}
        margins = self._each("start_at", per={i: (t0_wall + p[1],) for i, p in live.items()})
        origin = time.perf_counter() + (t0_wall - time.time())
        hosts = []
        for i, (rtt, off) in live.items():
            hosts.append(
                {"host": self.labels[i], "address": self.addrs[i], "workers": self.wids[i],
                 "pids": (self.infos[i] or {}).get("pids"), "offset_ms": off * 1e3, "rtt_ms": rtt * 1e3,
                 "uncertainty_ms": rtt * 1e3 / 2, "warn": rtt * 1e3 / 2 > OFFSET_WARN_MS,
                 "start_margin_ms": margins[i] * 1e3 if margins[i] is not None else None})
        self.sink(Clock(phase=self.spec.phase_id, t0_wall=t0_wall, warn_ms=OFFSET_WARN_MS, hosts=hosts))
        return origin

    def window(self, observed_s: float) -> float:
        """The longest host's window on its own clock, when every live host measured to the end: the
        coordinator observes the end only at its next poll (up to POLL_S later, 1% of a 10 s phase)."""
        known = [w for w in self.windows if w is not None]
        return max(known) if not self.lost and known and len(known) == len(self.windows) else observed_s

    def go(self) -> None:
        self._each("set_go")

    def stop(self) -> None:
        self._each("set_stop")

    def release(self) -> None:
        self._each("set_release")

    def abort(self) -> None:
        self._each("abort")

    def join(self) -> None:
        self._each("join", timeout=30)
        self.agents, self.futures = [], []  # drop the actors: their workers forget them


def run_phase_distributed(spec: PhaseSpec, factory: Callable, inputs: list, sink: Callable[[Record], None],
                          client: Any, on_window: Callable[[bool], None] | None = None,
                          clock_skews: dict[int, float] | None = None) -> PhaseResult:
    """run_phase with the workers spread over the load hosts of `client`'s cluster; never raises on backend
    or host trouble (a lost host marks the phase incomplete)."""
    return drive_phase(spec, DaskPool(client, spec, factory, inputs, sink, clock_skews), sink, on_window)


def connect(address: str) -> Any:
    """A client of the scheduler at `address`, after checking the load hosts run the same packages."""
    distributed = require()
    if not re.match(r"^(tcp|tls)://[^/]+:\d+$", address):
        raise UserError(f"--workers-on expects tcp://HOST:PORT (or tls://), got {address!r}")
    try:
        # The default client of this process: an actor handle finds its client (and event loop) that way.
        client = distributed.Client(address, timeout=10)
    except (OSError, TimeoutError) as e:
        raise UserError(
            f"--workers-on {address}: cannot reach the Dask scheduler ({type(e).__name__}: {e})") from None
    try:
        client.get_versions(check=True)
    except ValueError as e:
        client.close()
        raise UserError(f"--workers-on {address}: package versions differ between hosts: "
                        f"{str(e).strip().splitlines()[0]}") from None
    if not client.scheduler_info()["workers"]:
        client.close()
        raise UserError(
            f"--workers-on {address}: no load host joined; run `authzbench load-host {address}` on each")
    return client


def host_versions(client: Any) -> dict:
    """Each load host's Python, CPU and driver versions, and the drivers whose versions differ from ours."""
    from authzbench.results.store import environment

    ours = environment()["drivers"]
    hosts = client.run(_versions)
    differ = sorted({f"{d} {v} on {a} (here {ours.get(d)})" for a, h in hosts.items()
                     for d, v in h["drivers"].items() if ours.get(d) != v})
    return {"hosts": hosts, "driver_mismatches": differ}


def _versions() -> dict:
    return Agent().versions()


def _is_local(host: str, local: set[str]) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback or host in local
    except ValueError:
        return host == "localhost" or host.endswith(".localhost") or host in local


def endpoint_hosts(url: str) -> list[str]:
    """The server host names in a URL / DSN (several for a multi-host URL or a `host=` DSN)."""
    parts = urlsplit(url)
    if parts.netloc:
        netloc = parts.netloc.rsplit("@", 1)[-1]
        return [re.sub(r":\d+$", "", h).strip("[]") for h in netloc.split(",") if h]
    return [h for m in re.findall(r"host=([^\s]+)", url) for h in m.split(",")]


def check_endpoint(client: Any, backend: str, url: str) -> None:
    """Refuse a loopback server address when a load host runs on another machine: it would load itself."""
    import psutil

    local = {a.address for addrs in psutil.net_if_addrs().values() for a in addrs}
    remote = [a for a in client.scheduler_info()["workers"]
              if not _is_local(urlsplit(a).hostname or "", local)]
    loop = [h for h in endpoint_hosts(url) if _is_local(h, {"127.0.0.1"}) or h.startswith("/")]
    if remote and loop:
        raise UserError(
            f"{backend}: the server address {loop[0]!r} is loopback (or a local socket) but load host "
            f"{remote[0]} is another machine; give the server's network address")


def load_host(address: str, host: str | None = None, name: str | None = None) -> int:
    """A Dask worker for the load processes of this host: one process, one thread, may start children
    (daemon off), profiler off, its HTTP server on 127.0.0.1. Listens on `host`, by default the address
    this machine reaches the scheduler from (127.0.0.1 for a loopback scheduler). Runs until Ctrl-C."""
    import asyncio

    import dask

    distributed = require()
    dask.config.set({"distributed.worker.daemon": False, "distributed.worker.profile.enabled": False})
    if not host:  # left empty, the worker would listen on every interface and only advertise this one
        from distributed.utils import get_ip

        host = get_ip(urlsplit(address).hostname or "127.0.0.1")

    async def serve() -> None:
        async with distributed.Worker(address, nthreads=1, host=host, name=name,
                                      dashboard_address="127.0.0.1:0") as w:
            print(f"load host {w.address} joined {address}; Ctrl-C to leave", flush=True)
            await w.finished()

    asyncio.run(serve())
    return 0
