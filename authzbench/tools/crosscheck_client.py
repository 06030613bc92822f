"""The client's side of `authzbench crosscheck` (issue 56), beside tools/crosscheck.py:

- the CPU each side spent per measured op: our client (this process, the forkserver and its workers), the
  tool (pgbench or ghz, the processes this one waited for) and the server (a native deployment's processes,
  the backends they reaped included: PostgreSQL forks one per connection), so a throughput ratio comes with
  whose CPU it was;
- a backend's check over gRPC as a side of its own ("ours-grpc") where its adapter speaks HTTP but ghz gRPC:
  the runner's phase with the adapter's check sent over gRPC (its crosscheck's GRPC_BACKEND), so the
  transport's cost is a figure of the same kind as the others;
- the floor a Python client cannot pass: the bare driver call alone in a tight loop (its p50 and the client
  CPU per call), against the tool's p50.
"""

from __future__ import annotations

import contextlib
import importlib
import time
from collections.abc import Callable, Iterable, Iterator
from resource import RUSAGE_CHILDREN, getrusage
from typing import Any

import psutil

from authzbench.core.metrics import new_histogram, record_all
from authzbench.core.records import CrosscheckBreakdown
from authzbench.measure.timing import timed
from authzbench.systems import system
from authzbench.tools.runner_cost import runner_cost
from authzbench.workloads.spec import BackendFactory

# no-op ops of the runner's loop timed per scenario (x3, the least kept): ~0.3 s on a quiet core
RUNNER_OPS = 50_000
OURS_GRPC = "ours-grpc"  # the side: the runner's phase over a backend's own gRPC API (its GRPC_BACKEND)


def tree_cpu_s(roots: Iterable[int], without: Iterable[int] = ()) -> float:
    """User + system CPU seconds of processes and their live descendants, each with the children it waited
    for; the processes under `without` left out (a server this process started is its child, not its client).
    Every process's waited children count, not the roots' only: a descendant that reaps its own (PostgreSQL's
    postmaster its backends) would otherwise lose their time when they end, and the sum would fall (by 1.18 s
    in one CI run)."""
    skip = set(_tree(without))
    total = 0.0
    for p in _tree(roots):
        if p not in skip:
            with contextlib.suppress(psutil.Error):
                c = psutil.Process(p).cpu_times()
                total += c.user + c.system + c.children_user + c.children_system
    return total


def _tree(roots: Iterable[int]) -> list[int]:
    out = []
    for pid in roots:
        with contextlib.suppress(psutil.Error):
            root = psutil.Process(pid)
            out += [root.pid, *(p.pid for p in root.children(recursive=True))]
    return out


def _waited_cpu_s() -> float:
    r = getrusage(RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


class CpuSpent:
    """The CPU seconds one run cost its client and the server (None: not measured), between window(True) and
    window(False): the runner's measured window for ours (its on_window), the tool's whole runs for theirs
    (the processes this one waited for: its warm-up run included)."""

    def __init__(self, side: str, server_pids: list[int]) -> None:
        me = psutil.Process().pid
        self._client = _waited_cpu_s if side == "theirs" else (lambda: tree_cpu_s([me], server_pids))
        self._server = (lambda: tree_cpu_s(server_pids)) if server_pids else None
        self.client_s: float | None = None
        self.server_s: float | None = None
        self._at: tuple[float, float | None] = (0.0, None)

    def window(self, opening: bool) -> None:
        now = (self._client(), self._server() if self._server else None)
        if opening:
            self._at = now
            return
        self.client_s = now[0] - self._at[0]
        self.server_s = now[1] - self._at[1] if now[1] is not None and self._at[1] is not None else None

    def per_op_ms(self, ops: int) -> dict[str, float | None]:
        def ms(s: float | None) -> float | None:
            return s / ops * 1000 if s is not None and ops else None

        return {"client_cpu_ms": ms(self.client_s), "server_cpu_ms": ms(self.server_s)}


@contextlib.contextmanager
def cpu_spent(side: str, server_pids: list[int]) -> Iterator[CpuSpent]:
    """A CpuSpent for one run of a side: the tool's run is bracketed here; ours is measured over the runner's
    window (pass its `window` as run_phase's on_window)."""
    spent = CpuSpent(side, server_pids)
    if side == "theirs":
        spent.window(True)
    yield spent
    if side == "theirs":
        spent.window(False)


def grpc_factory(factory: BackendFactory, backend: str) -> BackendFactory:
    """The runner's factory for a backend's own gRPC side (its crosscheck's GRPC_BACKEND)."""
    return BackendFactory(parts(backend).GRPC_BACKEND, factory.endpoint, factory.options)


def parts(name: str) -> Any:
    """`name`'s crosscheck module (its declaration's `crosscheck`): tool, client, requests, driver call."""
    return importlib.import_module(system(name).crosscheck)


# where our time goes at 1 worker ----------------------------------------------------------------------

def bare_driver_call(backend: Any, name: str, args: tuple) -> Callable[[], Any]:
    """The driver's own call for one check with everything the adapter builds made beforehand: the same
    query / request on the adapter's connection, the adapter's code out of the way (its crosscheck's)."""
    return parts(name).driver_call(backend, args)


def breakdown(backend: Any, name: str, inputs: list, n: int,
              grpc: Callable[[tuple], Callable[[], Any]] | None = None) -> dict[str, float]:
    """p50 (ms) of the adapter's check and of the bare driver call (and, given `grpc`, of the same request
    over gRPC: OpenFGA's), in this process, call by call alternately on the same n inputs (a slow moment of
    the machine lands on all), which goes first rotating too (a later one asks the server what it was just
    asked)."""
    times: dict[str, list[float]] = {"adapter": [], "driver": [], **({"grpc": []} if grpc else {})}
    for i, (_, args, _) in enumerate(inputs[:n]):
        calls = [
            ("adapter", lambda a=args: backend.check(*a)), ("driver", bare_driver_call(backend, name, args))]
        calls += [("grpc", grpc(args))] if grpc else []
        for into, call in calls[i % len(calls):] + calls[:i % len(calls)]:
            t = timed(call)  # the bench's one clock around an op (measure/timing.py)
            if t.error is not None:
                raise t.error
            times[into].append((t.end_ns - t.sent_ns) / 1000)
    return {**{f"{k}_p50_ms": _p50_ms(v) for k, v in times.items()},
            "calls": len(times["adapter"])}


def breakdown_of(
    b: Any, name: str, endpoint: dict[str, Any], inputs: list, n: int, store: Any, sname: str) -> None:
    """The 1-worker breakdown of one scenario, then the bare driver call's floor on the same inputs; for a
    backend with a gRPC side (its crosscheck's grpc_call) also our own gRPC call of the request ghz sends, so
    the transport is a figure of its own."""
    grpc, close = parts(name).grpc_call(b, endpoint) if hasattr(parts(name), "grpc_call") else (None, None)
    try:
        got = breakdown(b, name, inputs, n, grpc)
    finally:
        if close is not None:
            close()
    got |= floor([bare_driver_call(b, name, args) for _, args, _ in inputs[:n]])
    got["runner_us"] = runner_cost(RUNNER_OPS)["runner_us"]
    store.append(CrosscheckBreakdown(backend=name, scenario=sname, **got))


def floor(calls: list[Callable[[], Any]]) -> dict[str, float]:
    """The bare driver calls alone, one after another in a tight loop (prepared beforehand): p50 (ms) and
    client CPU (ms) per call, the least a Python client on this driver spends, to set against the tool's
    p50."""
    lat: list[float] = []
    c0 = time.process_time()
    for call in calls:
        t = timed(call)  # the bench's one clock around an op (measure/timing.py)
        if t.error is not None:
            raise t.error
        lat.append((t.end_ns - t.sent_ns) / 1000)
    cpu = (time.process_time() - c0) / len(calls) * 1000 if calls else float("nan")
    return {"floor_p50_ms": _p50_ms(lat), "floor_cpu_ms": cpu}


def _p50_ms(latencies_us: list[float]) -> float:
    h = new_histogram()
    record_all(h, [max(1, int(v)) for v in latencies_us])
    return h.get_value_at_percentile(50) / 1000
