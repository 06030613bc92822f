"""Where a phase's workers run (the WorkerPool protocol): _LocalPool starts this host's forkserver processes
(or threads, for in-process engines) for one phase; KeptWorkers keeps processes across the phases of a
backend's visit, and _KeptPool runs one phase on them. The Dask pool of measure/distributed.py is the
many-host one. Every pool feeds the driver (measure/runner.py) the same messages."""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import pickle
import queue
import threading
import time
from collections.abc import Callable
from typing import Any, Protocol

from authzbench.core.stopping import STOP
from authzbench.measure.worker import PhaseEvents, kept_worker_main, worker_main
from authzbench.workloads.spec import PhaseSpec


class WorkerPool(Protocol):
    def start(self) -> dict[int, str]: ...  # spawn the workers; worker id -> host label ({} when local)
    def messages(self, timeout: float) -> list[tuple[str, int, Any]]: ...  # [] when none came in time
    def alive(self) -> bool: ...
    def go(self) -> None: ...  # connected: warm up
    def begin(self) -> float: ...  # start measuring at one instant; returns it on this host's perf_counter
    def window(self, observed_s: float) -> float: ...  # the measured window's length, best known
    def stop(self) -> None: ...
    def release(self) -> None: ...  # the measured window is closed: clean up and disconnect
    def abort(self) -> None: ...  # never measure: let every worker run to its end at once
    def join(self) -> None: ...


def preload_worker_modules(classes: list[type]) -> None:
    """Import the harness and the backends' drivers once, into the forkserver every worker forks from.

    Each worker otherwise imported them itself: 32 workers importing numpy and cassandra-driver at once
    were ready after 33 s (two cores, under load), and make bench spent 565 s of its 41 min starting
    32-worker phases; preloaded, 32 workers were up in 1.5 s. A no-op once
    the forkserver runs; a module that fails to import is skipped by the forkserver (ImportError)."""
    mods = ["authzbench.measure.worker"]  # what a worker runs (it imports spec.py and writes.py)
    for cls in classes:
        if cls.concurrency == "process":
            mods += [cls.__module__, *cls.worker_modules]
    mp.get_context("forkserver").set_forkserver_preload(list(dict.fromkeys(mods)))


class _LocalPool:
    """This host's workers: forkserver processes (no inherited driver threads), or threads for in-process
    engines."""

    def __init__(self, spec: PhaseSpec, factory: Callable, inputs: list, concurrency_model: str):
        if concurrency_model == "thread":
            self.out: Any = queue.Queue()
            self.ev = PhaseEvents.made_by(threading.Event)

            class _V:
                value = 0.0

            self.t0: Any = _V()
            make: Callable[..., Any] = lambda **kw: threading.Thread(daemon=True, **kw)  # noqa: E731
        else:
            ctx = mp.get_context("forkserver")
            self.out = ctx.Queue()
            self.ev = PhaseEvents.made_by(ctx.Event)
            self.t0 = ctx.Value("d", 0.0)
            make = lambda **kw: ctx.Process(daemon=True, **kw)  # noqa: E731
        self.workers = [make(target=worker_main, args=(w, spec, factory, inputs, self.out, self.ev, self.t0))
                        for w in range(spec.concurrency)]

    def start(self) -> dict[int, str]:
        for w in self.workers:
            w.start()
        return {}

    def messages(self, timeout: float) -> list[tuple[str, int, Any]]:
        try:
            return [self.out.get(timeout=timeout)]
        except queue.Empty:
            return []

    def alive(self) -> bool:
        return any(_alive(w) for w in self.workers)

    def go(self) -> None:
        self.ev.go.set()

    def begin(self) -> float:
        self.t0.value = time.perf_counter() + 0.05  # every worker shares one schedule origin
        self.ev.start.set()
        return self.t0.value

    def window(self, observed_s: float) -> float:
        return observed_s

    def stop(self) -> None:
        self.ev.stop.set()

    def release(self) -> None:
        self.ev.release.set()

    def abort(self) -> None:
        self.ev.abort()

    def join(self) -> None:
        for w in self.workers:
            if isinstance(w, threading.Thread):
                w.join(timeout=0.5)
            else:
                w.join(timeout=0.2 if STOP.is_set() else 2)
                if w.is_alive():
                    w.kill()
                    w.join(timeout=2)


class KeptWorkers:
    """Worker processes kept for the phases of one backend's visit, so a phase does not start its own.

    Starting 32 forkserver workers took 1.3-2.7 s per 32-worker phase (the no-op backend: 1.6-1.9 s), and
    make bench ran 144 such phases: 398 s of its 893 s of phases went to starting and stopping workers.
    A phase uses the first N of them; a phase that ends with a worker stopped, hung or gone, or that did not
    complete, leaves them all to be replaced before the next one (a process stopped mid-op may hold the
    queue's lock; a connection that saw its server go is not trusted)."""

    def __init__(self) -> None:
        self.ctx = mp.get_context("forkserver")
        self.procs: list[Any] = []
        # inputs pickled once, by id (the list is kept, so its id is not reused while it is here)
        self._blobs: dict[int, tuple[list, bytes]] = {}
        self._fresh()

    def _fresh(self) -> None:
        self.out: Any = self.ctx.Queue()
        self.events = PhaseEvents.made_by(self.ctx.Event)
        self.t0: Any = self.ctx.Value("d", 0.0)
        self.commands: list[Any] = []
        self.held: list[set[int]] = []  # per worker: the keys of the inputs it already holds
        self.broken = False

    def payload(self, w: int, inputs: list) -> tuple[int, bytes | None]:
        """(key, pickled inputs, or None when worker w holds them). Sending a check phase's 8,000 inputs to
        each of 32 workers took 2.6 s of a 1.3 s phase on Cassandra; now they go to a worker once a visit."""
        key = id(inputs)
        if key not in self._blobs:
            self._blobs[key] = (inputs, pickle.dumps(inputs, protocol=pickle.HIGHEST_PROTOCOL))
        if key in self.held[w]:
            return key, None
        self.held[w].add(key)
        return key, self._blobs[key][1]

    def ensure(self, n: int) -> None:
        """At least n live workers, idle, their events cleared and their queue empty."""
        if self.broken or any(not p.is_alive() for p in self.procs):
            self.close()
            self._fresh()
        while len(self.procs) < n:
            cmd = self.ctx.SimpleQueue()
            p = self.ctx.Process(daemon=True, target=kept_worker_main,
                                 args=(len(self.procs), cmd, self.out, self.events, self.t0))
            p.start()
            self.procs.append(p)
            self.commands.append(cmd)
            self.held.append(set())
        for e in self.events:
            e.clear()
        with contextlib.suppress(queue.Empty):
            while True:
                self.out.get_nowait()

    def close(self) -> None:
        for cmd, p in zip(self.commands, self.procs, strict=True):
            if p.is_alive() and not self.broken:
                with contextlib.suppress(Exception):
                    cmd.put(None)
        for p in self.procs:
            p.join(timeout=0.2 if (STOP.is_set() or self.broken) else 2)
            if p.is_alive():
                p.kill()
                p.join(timeout=2)
        self.procs = []

    def __enter__(self) -> KeptWorkers:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class _KeptPool(_LocalPool):
    """One phase on KeptWorkers: the first `concurrency` of them, told what to run instead of started."""

    def __init__(self, kept: KeptWorkers, spec: PhaseSpec, factory: Callable, inputs: list):
        self.kept, self.n, self.cmd = kept, spec.concurrency, (spec, factory, inputs)
        self.out, self.ev, self.t0 = kept.out, kept.events, kept.t0
        self.finished: set[int] = set()

    def start(self) -> dict[int, str]:
        self.kept.ensure(self.n)
        self.out, self.ev, self.t0 = self.kept.out, self.kept.events, self.kept.t0
        self.t0.value = 0.0
        spec, factory, inputs = self.cmd
        for w in range(self.n):
            self.kept.commands[w].put((spec, factory, *self.kept.payload(w, inputs)))
        return {}

    def messages(self, timeout: float) -> list[tuple[str, int, Any]]:
        msgs = super().messages(timeout)
        self.finished |= {wid for m, wid, _ in msgs if m == "done"}
        return msgs

    def alive(self) -> bool:
        return any(self.kept.procs[w].is_alive() for w in range(self.n) if w not in self.finished)

    def join(self) -> None:
        """Every worker back to idle ("done"), else the pool is replaced before the next phase."""
        deadline = time.perf_counter() + (0.2 if STOP.is_set() else 2)
        while len(self.finished) < self.n and time.perf_counter() < deadline and self.alive():
            self.messages(0.1)
        if len(self.finished) < self.n:
            self.kept.broken = True


def _alive(w: Any) -> bool:
    return w.is_alive()
