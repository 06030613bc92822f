"""Deliberately wrong or slow backends, to prove the runner counts what goes wrong (mocks are fine here:
they test the harness, not a database)."""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass

from authzbench.systems.reference.adapter import ReferenceBackend, ReferenceOptions


@dataclass(frozen=True)
class SleepyOptions(ReferenceOptions):
    sleep_s: float = 0.3  # how long every 10th check sleeps


class FlippingBackend(ReferenceBackend):
    """Gives the wrong answer for every resource id divisible by 7."""

    name = "flipping"

    def check(self, user: int, perm: str, resource: int) -> bool:
        ans = super().check(user, perm, resource)
        return (not ans) if resource % 7 == 0 else ans

    def lookup_resources(self, user: int, perm: str):
        return [r for r in super().lookup_resources(user, perm) if r % 7 != 0]


class _Counting(ReferenceBackend):
    """Counts checks, so a fake can misbehave on every k-th one."""

    def connect(self) -> None:
        super().connect()
        self.n = 0

    def check(self, user: int, perm: str, resource: int) -> bool:
        self.n += 1
        return super().check(user, perm, resource)


class SleepyBackend(_Counting):
    """Sleeps past the timeout on every 10th check."""

    name = "sleepy"
    Options = SleepyOptions

    def check(self, user: int, perm: str, resource: int) -> bool:
        if (self.n + 1) % 10 == 0:
            time.sleep(self.options.sleep_s)
        return super().check(user, perm, resource)


@dataclass(frozen=True)
class StallingOptions(ReferenceOptions):
    stall_every: int = 500  # every this many-th check stalls
    stall_s: float = 0.05  # for this long: a GC pause or a compaction among ~0.1 ms checks


class StallingBackend(_Counting):
    """Stalls on every `stall_every`-th check, answering correctly: 1 op in 500 lies above the p99 and within
    the p99.9."""

    name = "stalling"
    Options = StallingOptions

    def check(self, user: int, perm: str, resource: int) -> bool:
        if (self.n + 1) % self.options.stall_every == 0:
            time.sleep(self.options.stall_s)
        return super().check(user, perm, resource)


class FailingBackend(_Counting):
    """Raises on every 5th check."""

    name = "failing"

    def check(self, user: int, perm: str, resource: int) -> bool:
        if (self.n + 1) % 5 == 0:
            self.n += 1
            raise ConnectionResetError("server went away")
        return super().check(user, perm, resource)


class DuplicatingBackend(ReferenceBackend):
    """Streams every lookup result twice, as SpiceDB may (once per path to a resource)."""

    name = "duplicating"

    def lookup_resources(self, user: int, perm: str):
        return [r for r in super().lookup_resources(user, perm) for _ in range(2)]


@dataclass(frozen=True)
class LaggyOptions(ReferenceOptions):
    lag_s: float = 0.05  # how long after it returned a write is applied


class LaggyBackend(ReferenceBackend):
    """Applies every write and delete `lag_s` after it returned, as an asynchronous engine would."""

    name = "laggy"
    Options = LaggyOptions

    def connect(self) -> None:
        super().connect()
        self.lag_s = self.options.lag_s
        self.queue: list[tuple[float, str, object]] = []

    def _due(self) -> None:
        now = time.perf_counter()
        while self.queue and self.queue[0][0] <= now:
            _, op, rel = self.queue.pop(0)
            (super().write if op == "write" else super().delete)(rel)

    def write(self, rel) -> None:
        self.queue.append((time.perf_counter() + self.lag_s, "write", rel))

    def delete(self, rel) -> None:
        self.queue.append((time.perf_counter() + self.lag_s, "delete", rel))

    def check(self, user: int, perm: str, resource: int) -> bool:
        self._due()
        return super().check(user, perm, resource)


class IgnoresRevocationBackend(ReferenceBackend):
    """Never applies a delete: a revoked user keeps access."""

    name = "ignores-revocation"

    def delete(self, rel) -> None:
        return None


class GenerousBackend(ReferenceBackend):
    """After any write, a scratch user (id past the dataset's) can view every resource: a wrong answer
    under every state, not a stale one."""

    name = "generous"

    def check(self, user: int, perm: str, resource: int) -> bool:
        if perm == "view" and user >= self.oracle.n_users and (self.added or self.ev is not None):
            return True
        return super().check(user, perm, resource)


@dataclass(frozen=True)
class SlowWriteOptions(ReferenceOptions):
    write_s: float = 1.0  # how long every write takes
    progresses: bool = True  # rows written along the way (an honest long write) or none (a hung one)


class SlowWriteBackend(ReferenceBackend):
    """Every write takes `write_s`, writing a row every 10 ms if it `progresses`, else nothing."""

    name = "slow-write"
    Options = SlowWriteOptions
    counts_rows = True

    def _spend(self) -> None:
        end = time.perf_counter() + self.options.write_s
        while time.perf_counter() < end:
            time.sleep(0.01)
            self.rows_touched += int(self.options.progresses)

    def write(self, rel) -> None:
        self._spend()
        super().write(rel)


class LockedSlowWriteBackend(SlowWriteBackend):
    """SlowWriteBackend whose writes take one lock (threads: the workers of a thread-model phase), as the
    group write lock serializes structural writes: a worker queued behind it shows no progress of its own."""

    name = "locked-slow-write"
    lock = threading.Lock()

    def write(self, rel) -> None:
        with self.lock:
            super().write(rel)

    def delete(self, rel) -> None:
        with self.lock:
            self._spend()
            super().delete(rel)


@dataclass(frozen=True)
class ConnectLogOptions(ReferenceOptions):
    log_path: str = ""  # every connect appends this process's pid here


class ConnectLogBackend(ReferenceBackend):
    """The reference, logging each connect's process id: shows which worker processes a phase ran in."""

    name = "connect-log"
    Options = ConnectLogOptions

    def connect(self) -> None:
        super().connect()
        with open(self.options.log_path, "a") as f:
            f.write(f"{os.getpid()}\n")


class DyingBackend(ReferenceBackend):
    """Its worker process exits at the first check, as a driver crash or the OOM killer would end it."""

    name = "dying"

    def check(self, user: int, perm: str, resource: int) -> bool:
        os._exit(3)


@dataclass(frozen=True)
class GoneOptions(ReferenceOptions):
    answers: int = 300  # checks answered at once before the server is gone
    fail_after_s: float = 0.05  # how long each later check waits before it fails


class GoneBackend(_Counting):
    """Answers its first checks at once, then every check fails after a wait: a server killed mid-phase, seen
    by a driver whose calls time out (the fast part's many answers outnumber the slow part's failures)."""

    name = "gone"
    Options = GoneOptions

    def check(self, user: int, perm: str, resource: int) -> bool:
        if self.n >= self.options.answers:
            time.sleep(self.options.fail_after_s)
            raise ConnectionError("server gone")
        return super().check(user, perm, resource)


@dataclass(frozen=True)
class ChurnSlowOptions(ReferenceOptions):
    ms_per_write_per_s: float = 5.0  # a real user's check costs this much per write of the last second


class ChurnSlowBackend(ReferenceBackend):
    """Its checks of real users slow with the write rate of the last second, over every worker of the process
    (threads), as a closure store's reads slow while its rows are rewritten. The scratch users' probes do not,
    so a step fails on its reads."""

    name = "churn-slow"
    Options = ChurnSlowOptions
    writes: list[float] = []  # noqa: RUF012 - shared on purpose: the write rate is the whole process's
    lock = threading.Lock()

    def _wrote(self) -> None:
        with self.lock:
            self.writes.append(time.perf_counter())

    def write(self, rel) -> None:
        self._wrote()
        super().write(rel)

    def delete(self, rel) -> None:
        self._wrote()
        super().delete(rel)

    def check(self, user: int, perm: str, resource: int) -> bool:
        if user < self.oracle.n_users:
            since = time.perf_counter() - 1.0
            with self.lock:
                self.writes[:] = [t for t in self.writes if t >= since]
                rate = len(self.writes)
            time.sleep(rate * self.options.ms_per_write_per_s / 1000)
        return super().check(user, perm, resource)
