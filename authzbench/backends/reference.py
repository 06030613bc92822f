"""The oracle behind the Backend interface: an in-process backend that needs no server.

It proves the runner and the report end to end, and it is the yardstick for the harness itself.
Writes are kept in a per-process overlay (mixed workloads only write scratch users).
"""

from __future__ import annotations

import time
from collections.abc import Iterable

from authzbench.backends.base import Backend, LoadStats, Progress, ServerInfo, no_progress
from authzbench.dataset import Dataset
from authzbench.errors import UserError
from authzbench.model import Relationship
from authzbench.social_oracle import oracle_for

PERM_OF = {"resource_viewer_user": "view", "resource_manager_user": "manage"}


class ReferenceBackend(Backend):
    name = "reference"
    models = frozenset({"rebac", "social"})

    def connect(self) -> None:
        path = self.options.get("dataset_path") or self.endpoint.get("dataset_path")
        if not path:
            raise UserError("the reference backend needs options['dataset_path']")
        self.oracle = oracle_for(Dataset.open(path))
        self.added: set[tuple[int, str, int]] = set()
        self.delay_s = float(self.options.get("delay_s", 0.0))

    def server_info(self) -> ServerInfo:
        return ServerInfo("oracle", "in-process", "Reference oracle (in-process, numpy)", comparable=False,
                          notes=["answers are the ground truth; latencies measure the harness, not a database"])

    def create_schema(self) -> None:
        return None

    def load(self, ds: Dataset, progress: Progress = no_progress) -> LoadStats:
        t0 = time.perf_counter()
        self.oracle = oracle_for(ds)
        progress(ds.total_relationships)
        return LoadStats(rows=ds.total_relationships, batch_rows=ds.total_relationships,
                         batch_seconds=[time.perf_counter() - t0])

    def check(self, user: int, perm: str, resource: int) -> bool:
        if self.delay_s:
            time.sleep(self.delay_s)
        if (user, perm, resource) in self.added or (perm == "view" and (user, "manage", resource) in self.added):
            return True
        return self.oracle.check(user, perm, resource)

    def lookup_resources(self, user: int, perm: str) -> Iterable[int]:
        base = self.oracle.lookup_resources(user, perm) if user < self.oracle.n_users else []
        extra = {r for (u, p, r) in self.added if u == user and (p == perm or perm == "view")}
        return sorted(set(base) | extra) if extra else base

    def write(self, rel: Relationship) -> None:
        self.added.add((rel.subject, PERM_OF.get(rel.relation, "view"), rel.object))

    def delete(self, rel: Relationship) -> None:
        self.added.discard((rel.subject, PERM_OF.get(rel.relation, "view"), rel.object))

    def footprint(self) -> int:
        return int(getattr(self.oracle, "nbytes", 0))  # the rebac oracle's indexes (no closure is held)

    def drop(self) -> None:
        self.added.clear()


class NoopBackend(ReferenceBackend):
    """Answers instantly without looking anything up: measures the harness's own ceiling."""

    name = "noop"

    def connect(self) -> None:
        self.added = set()

    def check(self, user: int, perm: str, resource: int) -> bool:
        return True

    def lookup_resources(self, user: int, perm: str) -> Iterable[int]:
        return ()

    def footprint(self) -> int:
        return 0
