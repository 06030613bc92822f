"""A client-side deadline per op for drivers that have none (psycopg: statement_timeout is enforced by
the server, so a frozen or unreachable server would hold the worker forever).

One watchdog thread per connection sleeps until the armed op's deadline; if the op is still running
then, it shuts the connection's socket down, so the blocked call returns at once with an error, which
the op turns into a TimeoutError. Arming costs a lock per op (~2.5 µs here), not a thread: the thread is
woken only when it sleeps with no deadline, not while it sleeps until an earlier op's.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import socket
import threading
import time
from collections.abc import Callable


class Watchdog:
    def __init__(self, timeout_s: float, fileno: Callable[[], int]):
        self.timeout_s = timeout_s
        self._fileno = fileno
        self._cv = threading.Condition()
        self._armed: tuple[int, float] | None = None
        self._seq = 0
        self._fired = -1
        self._closed = False
        self._idle = False  # the thread waits with no deadline: only then does arm() need to wake it
        self.tripped = False  # the socket was shut down: the connection must be made again
        threading.Thread(target=self._run, name="op-deadline", daemon=True).start()

    def arm(self) -> int:
        with self._cv:
            self._seq += 1
            self._armed = (self._seq, time.monotonic() + self.timeout_s)
            # A thread already asleep until an earlier op's deadline wakes then, finds this later one and
            # sleeps on: waking it every op cost 10-15 µs of the op (a thread switch and the GIL).
            if self._idle:
                self._cv.notify()
            return self._seq

    def disarm(self) -> None:
        with self._cv:
            self._armed = None

    def fired(self, seq: int) -> bool:
        return self._fired == seq

    def close(self) -> None:
        with self._cv:
            self._closed = True
            self._cv.notify()

    def _run(self) -> None:
        with self._cv:
            while not self._closed:
                if self._armed is None:
                    self._idle = True
                    self._cv.wait()
                    self._idle = False
                    continue
                seq, deadline = self._armed
                left = deadline - time.monotonic()
                if left > 0:
                    self._cv.wait(left)
                    continue
                self._fired, self._armed, self.tripped = seq, None, True
                with contextlib.suppress(OSError):
                    # A socket object over the driver's fd, detached after (the fd stays the driver's);
                    # its blocked read then sees end-of-stream and raises.
                    s = socket.socket(fileno=self._fileno())
                    try:
                        s.shutdown(socket.SHUT_RDWR)
                    finally:
                        s.detach()


def within_deadline(fn):
    """Decorate a backend method (plain or generator) so it runs inside `self._op_deadline()` (a plain one
    through its steps: `self._op_begin()`, `self._op_error(seq, e)`, `self._op_end(seq)`)."""
    if inspect.isgeneratorfunction(fn):
        @functools.wraps(fn)
        def gen(self, *a, **k):
            with self._op_deadline():
                yield from fn(self, *a, **k)
        return gen

    @functools.wraps(fn)
    def call(self, *a, **k):
        # The context manager's steps in line: its generator cost ~2 µs of every check (issue 56).
        seq = self._op_begin()
        try:
            return fn(self, *a, **k)
        except Exception as e:
            if (err := self._op_error(seq, e)) is e:
                raise
            raise err from None
        finally:
            self._op_end(seq)
    return call
