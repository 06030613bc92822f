"""closure_maintenance, the write algorithm of the precomputing backends, over an in-memory store (no
server): after every insert and delete of every relation kind, on random graphs with deep hierarchies and
cycles, the stored pair states and closures equal the simple evaluator's on every pair. A store that keeps
closures (the document stores) and one that computes them when needed (Cassandra) both."""

from __future__ import annotations

import contextlib

import pytest

from authzbench.backends import closure_maintenance as maintenance
from authzbench.schema.model import Relationship
from authzbench.schema.model_rules import ACL_ROLE, Reach, walk
from authzbench.truth.evaluator import SimpleEvaluator
from tests.unit.test_model_rules import ENT, SHAPES, _edits, random_graph


class MemoryStore:
    """The storage calls over dicts: the edges (a SimpleEvaluator's), each user's stored closure, each
    pair's stored state. Records the calls, so a test sees the algorithm skip what it need not do."""

    def __init__(self, ev: SimpleEvaluator, keeps_closures: bool):
        self.ev, self.keeps_closures = ev, keeps_closures
        self.closures = {u: self._true_closure(u) for u in range(ENT["user"])}
        self.pairs = {(u, r): _truth(ev, u, r) for u in range(ENT["user"]) for r in range(ENT["resource"])}
        self.calls: list[str] = []

    def _true_closure(self, u: int) -> set[int]:
        return {g for g in range(ENT["group"]) if self.ev.is_member(u, g)}

    def group_lock(self) -> contextlib.AbstractContextManager:
        self.calls.append("lock")
        return contextlib.nullcontext()

    def write_edge(self, rel: Relationship, *, insert: bool) -> None:
        (self.ev.add if insert else self.ev.remove)(rel.relation, rel.object, rel.subject)

    def find_resources(self, rc: Reach) -> set[int]:
        fwd = self.ev.fwd
        if rc.resources == "resource":
            return {rc.resource_arg}
        if rc.resources == "org_resources":
            return {r for r in range(ENT["resource"]) if rc.resource_arg in fwd["resource_org"][r]}
        if rc.resources == "granted_via_ancestors":
            anc = walk([rc.resource_arg], self.parents)
            return {r for r in range(ENT["resource"])
                    if anc & (fwd["resource_manager_group"][r] | fwd["resource_viewer_group"][r])}
        return set()

    def find_users(self, rc: Reach) -> set[int]:
        if rc.users == "user":
            return {rc.user_arg}
        if rc.users == "membership":  # the stored closures, as the document stores search them
            held = self.closures if self.keeps_closures else {u: self._true_closure(u) for u in self.closures}
            return {u for u, gs in held.items() if rc.user_arg in gs}
        if rc.users == "org_admins":
            return set(self.ev.fwd["org_admin"][rc.user_arg])
        return set()

    def parents(self, groups: list[int]) -> list[int]:
        return [p for g in groups for p in self.ev.rev["group_child"][g]]

    def user_states(self, users: set[int], closure: maintenance.Closure, *, refresh: bool
                    ) -> dict[int, maintenance.UserState]:
        self.calls.append("users")
        out = {}
        for u in users:
            if refresh or not self.keeps_closures:
                groups = set(closure(self.ev.rev["group_member"][u] | self.ev.rev["group_manager"][u]))
                if self.keeps_closures:
                    self.closures[u] = groups
            else:
                groups = self.closures.get(u, set())
            out[u] = maintenance.UserState(groups, set(self.ev.rev["org_admin"][u]))
        return out

    def rewrite_pairs(self, resources: set[int], users: dict[int, maintenance.UserState]) -> None:
        self.calls.append("pairs")
        for r in resources:
            acl = {role: self.ev.fwd[rel][r] for rel, role in ACL_ROLE.items()}
            for u, old, new in maintenance.changes(acl, lambda u, r=r: self.pairs.get((u, r)), users):
                assert old == self.pairs.get((u, r)) != new
                self.pairs[(u, r)] = new

    def finish(self) -> None:
        self.calls.append("finish")


def _truth(ev: SimpleEvaluator, u: int, r: int) -> str | None:
    return "manage" if ev.check(u, "manage", r) else "view" if ev.check(u, "view", r) else None


def _assert_fresh(store: MemoryStore, what: str) -> None:
    wrong = [p for p, st in store.pairs.items() if st != _truth(store.ev, *p)]
    assert wrong == [], f"{what}: {len(wrong)} stale pairs, e.g. {wrong[:3]}"
    if store.keeps_closures:
        assert all(store.closures[u] == store._true_closure(u) for u in store.closures), what


@pytest.mark.parametrize("keeps_closures", [True, False])
@pytest.mark.parametrize(("seed", "shape"), SHAPES)
def test_every_edit_leaves_every_pair_and_closure_equal_to_the_evaluator(seed, shape, keeps_closures):
    tables = random_graph(seed, shape)
    ev = SimpleEvaluator({rel: set(zip(o, s, strict=True)) for rel, (o, s) in tables.items()})
    store = MemoryStore(ev, keeps_closures)
    edits = _edits(tables)
    for rel, o, s, insert in [*edits, *((r, o, s, not i) for r, o, s, i in reversed(edits))]:
        maintenance.apply(store, Relationship(rel, o, s), insert=insert)
        _assert_fresh(store, f"{'insert' if insert else 'delete'} {rel}({o},{s})")


def test_only_group_edges_take_the_lock_and_an_edge_no_permission_reads_stops_at_the_edge():
    ev = SimpleEvaluator({"group_member": {(0, 1)}, "resource_viewer_group": {(5, 0)}})
    store = MemoryStore(ev, keeps_closures=True)
    maintenance.apply(store, Relationship("group_manager", 0, 2), insert=True)
    assert store.calls == ["lock", "users", "pairs", "finish"] and store.pairs[(2, 5)] == "view"
    store.calls.clear()
    maintenance.apply(store, Relationship("org_member", 0, 3), insert=True)
    assert store.calls == ["finish"]


def test_a_group_edge_with_no_resource_still_refreshes_stored_closures_only():
    ev = SimpleEvaluator({"group_member": {(1, 4)}})
    kept, computed = MemoryStore(ev, keeps_closures=True), MemoryStore(SimpleEvaluator(dict(ev.rel)), False)
    for store in (kept, computed):
        maintenance.apply(store, Relationship("group_child", 0, 1), insert=True)
    assert kept.closures[4] == {0, 1} and "users" in kept.calls and "pairs" not in kept.calls
    assert "users" not in computed.calls  # nothing stored, nothing to recompute
