"""A second, deliberately simple evaluator of the rebac model: plain Python sets and a recursive walk
with a cycle guard, read straight from the definition in DESIGN.md.

It shares no code with the vectorized closure (`closure.py`) that the oracle and three backends' loads
use, nor with `model_rules`, which the backends' write paths use: the unit tests compare it with the
oracle on generated shapes, so a bug in the shared closure cannot hide behind the backends agreeing
with it. It is also mutable (`add`/`remove`), so the write scenarios can follow every write and check
reads against the state the backend should show.
"""

from __future__ import annotations

from collections import defaultdict

from authzbench.schema.dataset import Dataset

Edge = tuple[int, int]


class SimpleEvaluator:
    def __init__(self, relations: dict[str, set[Edge]]):
        self.rel: dict[str, set[Edge]] = defaultdict(set, {k: set(v) for k, v in relations.items()})
        # object -> subjects and subject -> objects, per relation: kept in step with `rel`
        self.fwd: dict[str, dict[int, set[int]]] = defaultdict(lambda: defaultdict(set))
        self.rev: dict[str, dict[int, set[int]]] = defaultdict(lambda: defaultdict(set))
        for name, edges in self.rel.items():
            for o, s in edges:
                self.fwd[name][o].add(s)
                self.rev[name][s].add(o)

    @classmethod
    def from_dataset(cls, ds: Dataset) -> SimpleEvaluator:
        rels = {}
        for name in ds.relations():
            t = ds.table(name)
            rels[name] = set(zip(t["object"].tolist(), t["subject"].tolist(), strict=True))
        return cls(rels)

    # edits --------------------------------------------------------------------------------------
    def add(self, relation: str, obj: int, sub: int) -> None:
        self.rel[relation].add((obj, sub))
        self.fwd[relation][obj].add(sub)
        self.rev[relation][sub].add(obj)

    def remove(self, relation: str, obj: int, sub: int) -> None:
        self.rel[relation].discard((obj, sub))
        self.fwd[relation][obj].discard(sub)
        self.rev[relation][sub].discard(obj)

    def has(self, relation: str, obj: int, sub: int) -> bool:
        return (obj, sub) in self.rel[relation]

    # the model ----------------------------------------------------------------------------------
    def is_member(self, user: int, group: int, _seen: frozenset[int] = frozenset()) -> bool:
        """membership(g) = direct members ∪ direct managers ∪ membership(child), for every child."""
        if group in _seen:
            return False  # a cycle adds nobody new
        if user in self.fwd["group_member"][group] or user in self.fwd["group_manager"][group]:
            return True
        seen = _seen | {group}
        return any(self.is_member(user, child, seen) for child in self.fwd["group_child"][group])

    def can_manage(self, user: int, resource: int) -> bool:
        if user in self.fwd["resource_manager_user"][resource]:
            return True
        if any(self.is_member(user, g) for g in self.fwd["resource_manager_group"][resource]):
            return True
        return any(user in self.fwd["org_admin"][org] for org in self.fwd["resource_org"][resource])

    def can_view(self, user: int, resource: int) -> bool:
        if self.can_manage(user, resource) or user in self.fwd["resource_viewer_user"][resource]:
            return True
        return any(self.is_member(user, g) for g in self.fwd["resource_viewer_group"][resource])

    def check(self, user: int, perm: str, resource: int) -> bool:
        if perm == "manage":
            return self.can_manage(user, resource)
        if perm == "view":
            return self.can_view(user, resource)
        raise ValueError(f"unknown permission {perm!r}")

    def lookup_resources(self, user: int, perm: str) -> list[int]:
        """Every resource with an ACL or an org, checked one by one (slow on purpose: nothing clever)."""
        candidates = set(self.fwd["resource_org"]) | {
            r
            for rel in ("resource_manager_user", "resource_manager_group", "resource_viewer_user",
                        "resource_viewer_group")
            for r in self.fwd[rel]}
        return sorted(r for r in candidates if self.check(user, perm, r))
