"""One writer at a time for the edges whose maintenance reads many rows and rewrites many (group edges on
the backends that keep closures and permission pairs), on stores without an advisory lock.

Two such writes at once can each rewrite a state missing the other's edge: two workers attaching groups
that share members lost an update on FerretDB (1 of 24 ops never visible). PostgreSQL serializes them with
pg_advisory_xact_lock; the others take a lock row/document through `spin_lock` with their own primitive.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator

from authzbench.core.errors import BackendUnavailable
from authzbench.schema.model_rules import reach

# Give up waiting after 1,800 s: at baseline 8 workers queue behind one lock, each of their ops takes it for a
# grant and a revocation, and one FerretDB hierarchy change holds it for 46-85 s; the lock is not fair, so a
# waiter can lose it to the others several times and honestly wait many minutes (at 120 s, 2 of 26
# Elasticsearch ops and most of FerretDB's gave up; the runner tells such a wait from a hang by the holder's
# progress). A holder that died is taken over (or its row expires) after EXPIRE_S.
WAIT_S, EXPIRE_S = 1800.0, 180.0
# Waiters poll from every 2 ms backing off to every 100 ms: 7 waiters polling every 2 ms sent ~3,500 lock
# attempts a second (a Paxos round each on Cassandra, an insert + a find on FerretDB) to the server the
# holder was writing to.
POLL_S, POLL_MAX_S = 0.002, 0.1


class LockBusy(BackendUnavailable):
    """The group write lock stayed taken for WAIT_S (a live writer's long write, or a dead one's lock that
    has not expired yet)."""


def serialized(
    relation: str, lock: Callable[[], contextlib.AbstractContextManager]
) -> contextlib.AbstractContextManager:
    """`lock()` for an edge whose write changes users' group closures (model_rules.reach), else nothing."""
    return lock() if reach(relation, 0, 0).closure_changes else contextlib.nullcontext()


@contextlib.contextmanager
def spin_lock(take: Callable[[], bool], release: Callable[[], None], what: str) -> Iterator[None]:
    """Hold a lock while the body runs: `take()` returns True once this writer holds it (it may take over a
    dead holder's), polled every POLL_S backing off to POLL_MAX_S, up to WAIT_S; `release()` always runs
    after."""
    deadline, poll = time.monotonic() + WAIT_S, POLL_S
    while not take():
        if time.monotonic() > deadline:
            raise LockBusy(f"{what}: group write lock busy for {WAIT_S:.0f} s")
        time.sleep(poll)
        poll = min(POLL_MAX_S, poll * 2)
    try:
        yield
    finally:
        release()
