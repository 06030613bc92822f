"""Ending a run on SIGINT, SIGTERM or SIGHUP.

The first signal asks the run to stop: inside a phase the runner polls `STOP` (workers stop, what they
measured is drained and recorded, the phase is marked interrupted); anywhere else `Interrupted` is raised
so the code unwinds through its `finally` blocks (servers the run started are stopped, the report is
rendered from what was recorded). A second signal ends the process at once: the servers this process
spawned and its worker processes are killed, then it exits. Exit code 128 + signal number (130 / 143 / 129).
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator

STOP = threading.Event()  # set by the first signal; the runner polls it between ops
SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
GRACE_S = 5.0  # after the first signal, the phase in flight gets this long to drain its workers

_state: dict = {"signum": None, "at": 0.0, "polled": 0, "reason": None}


class Interrupted(BaseException):
    """Raised by the first signal outside a phase. BaseException: `except Exception` must not swallow it."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum

    @property
    def exit_code(self) -> int:
        return 128 + self.signum


def signal_name() -> str:
    """What stopped the run: SIGTERM, ..., or the reason given to request_stop()."""
    if _state["signum"]:
        return signal.Signals(_state["signum"]).name
    return _state["reason"] or "a signal"


def clear_internal_stop() -> None:
    """A new run in the same process starts unstopped, unless a signal came (that one still counts)."""
    if not _state["signum"]:
        STOP.clear()
        _state.update(reason=None, error=None)


def request_stop(reason: str, error: BaseException | None = None) -> None:
    """Stop the run from inside (e.g. the results dir stopped taking writes): like a first signal, but
    check() then raises `error`."""
    if not STOP.is_set():
        _state.update(reason=reason, error=error, at=time.perf_counter())
        STOP.set()


def signum() -> int | None:
    return _state["signum"]


def grace_deadline() -> float:
    """perf_counter() by which the phase in flight must have ended (inf before any signal)."""
    return _state["at"] + GRACE_S if STOP.is_set() else float("inf")


def check() -> None:
    """Raise Interrupted if a signal came while it was only polled (e.g. between two phases)."""
    if STOP.is_set() and _state["signum"]:
        raise Interrupted(_state["signum"])
    if STOP.is_set() and _state.get("error") is not None:
        raise _state["error"]


@contextlib.contextmanager
def polled() -> Iterator[None]:
    """Inside: a first signal only sets STOP (the runner ends the phase itself, recording what it has)."""
    _state["polled"] += 1
    try:
        yield
    finally:
        _state["polled"] -= 1


def install(kill_now: Callable[[], None], say: Callable[[str], None]) -> Callable[[], None]:
    """Handle SIGINT/SIGTERM/SIGHUP in this (main) thread; returns a function restoring the old handlers."""
    STOP.clear()
    _state.update(signum=None, at=0.0, polled=0, reason=None, error=None)

    def handler(signum: int, frame) -> None:
        if STOP.is_set():  # the second signal: at once
            with contextlib.suppress(Exception):
                kill_now()
            os._exit(128 + signum)
        _state.update(signum=signum, at=time.perf_counter())
        STOP.set()
        say(f"{signal.Signals(signum).name}: stopping (workers, then the servers this run started); "
            f"send it again to end at once")
        if not _state["polled"]:
            raise Interrupted(signum)

    previous = {s: signal.signal(s, handler) for s in SIGNALS}

    def restore() -> None:
        for s, h in previous.items():
            signal.signal(s, h)

    return restore


def _our_servers() -> list:
    """Direct children of this process that lead their own session: the servers we spawned (provision
    starts each in its own session); multiprocessing's helpers and workers do not."""
    import psutil

    out = []
    for child in psutil.Process().children():
        with contextlib.suppress(psutil.Error, OSError):
            if os.getsid(child.pid) == child.pid:
                out.append(child)
    return out


def stop_children(timeout: float = 10.0) -> None:
    """Stop the servers this process spawned that are still running (a start cut short by the signal, whose
    Deployment never existed to stop them): SIGTERM to each one's tree, SIGKILL after `timeout`."""
    import psutil

    trees = []
    for server in _our_servers():
        with contextlib.suppress(psutil.Error):
            trees.append([server, *server.children(recursive=True)])
    for tree in trees:
        with contextlib.suppress(psutil.Error):
            tree[0].terminate()
    _, alive = psutil.wait_procs([p for t in trees for p in t], timeout=timeout)
    for p in alive:
        with contextlib.suppress(psutil.Error):
            p.kill()


def kill_children() -> None:
    """The second signal: SIGKILL every process below this one (workers, the servers it spawned)."""
    import psutil

    for p in psutil.Process().children(recursive=True):
        with contextlib.suppress(psutil.Error):
            p.kill()
