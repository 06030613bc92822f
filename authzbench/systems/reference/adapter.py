"""The oracle behind the Backend interface: an in-process backend that needs no server.

It proves the runner and the report end to end, and it is the yardstick for the harness itself.
Writes are kept in a per-process overlay: user ACL edges in a set (the mixed workload's scratch writes),
any other edge in the simple evaluator built on the first such write (the write scenarios).
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass

from authzbench.backends.base import (
    Backend,
    BackendOptions,
    Batch,
    Batches,
    Load,
    LoadStats,
    Progress,
    ServerInfo,
    no_progress,
)
from authzbench.core.errors import UserError
from authzbench.schema.dataset import Dataset
from authzbench.schema.model import REBAC_RELATIONS, Relationship
from authzbench.truth.evaluator import SimpleEvaluator
from authzbench.truth.social_oracle import oracle_for

PERM_OF = {"resource_viewer_user": "view", "resource_manager_user": "manage"}


@dataclass(frozen=True)
class ReferenceOptions(BackendOptions):
    delay_s: float = 0.0  # added to every op: a slow backend for the harness's own tests


class ReferenceBackend(Backend):
    name = "reference"
    Options = ReferenceOptions

    def connect(self) -> None:
        path = self.options.dataset_path or self.endpoint.get("dataset_path")
        if not path:
            raise UserError("the reference backend needs options['dataset_path']")
        self.oracle = oracle_for(Dataset.open(path))
        self.added: set[tuple[int, str, int]] = set()
        self.dataset_path = path
        self.ev: SimpleEvaluator | None = None  # built on the first structural write
        self.delay_s = self.options.delay_s

    def server_info(self) -> ServerInfo:
        return ServerInfo(
            "oracle", "in-process", "Reference oracle (in-process, numpy)", comparable=False,
            notes=["answers are the ground truth; latencies measure the harness, not a database"])

    def create_schema(self) -> None:
        return None

    def load(self, ds: Dataset, progress: Progress = no_progress) -> Load:
        """The oracle's indexes built in one batch of every relationship."""
        rows = yield Batches("reference: oracle", [Batch(ds.total_relationships, lambda: self._index(ds))])
        return LoadStats(rows=rows, batch_rows=ds.total_relationships)

    def _index(self, ds: Dataset) -> None:
        self.oracle = oracle_for(ds)

    def check(self, user: int, perm: str, resource: int) -> bool:
        if self.delay_s:
            time.sleep(self.delay_s)
        if (user, perm, resource) in self.added or (
            perm == "view" and (user, "manage", resource) in self.added):
            return True
        if self.ev is not None:
            return self.ev.check(user, perm, resource)
        return self.oracle.check(user, perm, resource)

    def lookup_resources(self, user: int, perm: str) -> Iterable[int]:
        if self.ev is not None:
            base = self.ev.lookup_resources(user, perm)
        else:
            base = self.oracle.lookup_resources(user, perm) if user < self.oracle.n_users else []
        extra = {r for (u, p, r) in self.added if u == user and (p == perm or perm == "view")}
        return sorted(set(base) | extra) if extra else base

    def write(self, rel: Relationship) -> None:
        if rel.relation in PERM_OF or rel.relation not in REBAC_RELATIONS:  # social: scratch followers
            self.added.add((rel.subject, PERM_OF.get(rel.relation, "view"), rel.object))
        else:
            self._evaluator().add(*rel)

    def delete(self, rel: Relationship) -> None:
        if rel.relation in PERM_OF or rel.relation not in REBAC_RELATIONS:
            self.added.discard((rel.subject, PERM_OF.get(rel.relation, "view"), rel.object))
        else:
            self._evaluator().remove(*rel)

    def _evaluator(self) -> SimpleEvaluator:
        if self.ev is None:
            self.ev = SimpleEvaluator.from_dataset(Dataset.open(self.dataset_path))
        return self.ev

    def footprint(self) -> int:
        return int(getattr(self.oracle, "nbytes", 0))  # the rebac oracle's indexes (no closure is held)

    def drop(self) -> None:
        self.added.clear()
        self.ev = None


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
