"""The model's write-time rules (model_rules) and the simple evaluator, against the oracle, without servers.

Graphs are random but seeded, in shapes that stress the closure: a deep hierarchy (a chain), many
managers, and cycles injected into the hierarchy.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from authzbench.generator import write_tables
from authzbench.schema.model import PERMISSIONS, REBAC_RELATIONS
from authzbench.schema.model_rules import ACL_ROLE, GROUP_EDGES, holds, pair_state, reach, walk
from authzbench.truth.evaluator import SimpleEvaluator
from authzbench.truth.oracle import Oracle

ENT = {"organization": 3, "user": 14, "group": 9, "resource": 12}


def random_graph(seed: int, shape: str) -> dict[str, tuple[list[int], list[int]]]:
    rng = np.random.default_rng(seed)
    n = ENT

    def pick(rel_obj: str, rel_sub: str, k: int) -> set[tuple[int, int]]:
        return {(int(rng.integers(n[rel_obj])), int(rng.integers(n[rel_sub]))) for _ in range(k)}

    edges = {
        "org_admin": pick("organization", "user", 3), "org_member": pick("organization", "user", 8),
        "group_org": {(g, int(rng.integers(3))) for g in range(n["group"])},
        "group_member": pick("group", "user", 12),
        "group_manager": pick("group", "user", 14 if shape == "managers" else 3),
        "resource_org": {(r, int(rng.integers(3))) for r in range(n["resource"])},
        "resource_manager_user": pick("resource", "user", 5),
        "resource_manager_group": pick("resource", "group", 5),
        "resource_viewer_user": pick("resource", "user", 6),
        "resource_viewer_group": pick("resource", "group", 6),
    }
    if shape == "deep":
        hier = {(g, g + 1) for g in range(n["group"] - 1)}  # 0 -> 1 -> ... -> 8
    else:
        hier = {(a, b) for a, b in pick("group", "group", 6) if a < b}
    if shape == "cycles":
        hier |= {(6, 2), (8, 0), (3, 3)}  # back edges and a self-loop
    edges["group_child"] = hier
    return {rel: ([o for o, _ in sorted(e)], [s for _, s in sorted(e)]) for rel, e in edges.items()}


SHAPES = [(seed, shape) for shape in ("deep", "managers", "cycles", "plain") for seed in (1, 2)]


def _ds(tmp_path, tables):
    return write_tables(tmp_path / "ds", tables, ENT)


def _all_pairs():
    return itertools.product(range(ENT["user"]), range(ENT["resource"]))


@pytest.mark.parametrize(("seed", "shape"), SHAPES)
def test_simple_evaluator_equals_the_oracle_on_every_pair(tmp_path, seed, shape):
    ds = _ds(tmp_path, random_graph(seed, shape))
    o, ev = Oracle(ds), SimpleEvaluator.from_dataset(ds)
    for perm in PERMISSIONS:
        assert [ev.check(u, perm, r) for u, r in _all_pairs()] == [
            o.check(u, perm, r) for u, r in _all_pairs()]
        assert all(ev.lookup_resources(u, perm) == o.lookup_resources(u, perm) for u in range(ENT["user"]))
    assert sum(o.total(p) for p in PERMISSIONS) > 0  # the shapes grant something, or this proves nothing


def test_simple_evaluator_follows_adds_and_removes():
    ev = SimpleEvaluator({"group_member": {(0, 1)}, "resource_viewer_group": {(5, 0)}})
    assert ev.check(1, "view", 5) and not ev.check(1, "manage", 5)
    ev.add("group_child", 0, 2)
    ev.add("group_manager", 2, 7)
    assert ev.check(7, "view", 5)
    ev.remove("group_child", 0, 2)
    assert not ev.check(7, "view", 5)


class _Resolver:
    """Resolves Reach selectors on a SimpleEvaluator's edges: what a backend's storage code does."""

    def __init__(self, ev: SimpleEvaluator):
        self.ev = ev

    def ancestors(self, g: int) -> set[int]:
        return walk([g], lambda f: [p for x in f for p in self.ev.rev["group_child"][x]])

    def resources(self, sel: str, arg: int) -> set[int]:
        fwd = self.ev.fwd
        if sel == "resource":
            return {arg}
        if sel == "org_resources":
            return {r for r in range(ENT["resource"]) if arg in fwd["resource_org"][r]}
        if sel == "granted_via_ancestors":
            anc = self.ancestors(arg)
            return {r for r in range(ENT["resource"])
                    if anc & (fwd["resource_manager_group"][r] | fwd["resource_viewer_group"][r])}
        return set()

    def users(self, sel: str, arg: int) -> set[int]:
        if sel == "user":
            return {arg}
        if sel == "membership":
            return {u for u in range(ENT["user"]) if self.ev.is_member(u, arg)}
        if sel == "org_admins":
            return set(self.ev.fwd["org_admin"][arg])
        return set()


def _state(o: Oracle) -> dict[tuple[int, int], tuple[bool, bool]]:
    return {(u, r): (o.check(u, "manage", r), o.check(u, "view", r)) for u, r in _all_pairs()}


def _edits(tables) -> list[tuple[str, int, int, bool]]:
    """For every relation: delete its first edge, and insert an edge that is not there."""
    out = []
    for rel in REBAC_RELATIONS:
        objs, subs = tables[rel]
        if objs:
            out.append((rel, objs[0], subs[0], False))
        o_type, s_type = REBAC_RELATIONS[rel].object_type, REBAC_RELATIONS[rel].subject_type
        cand = next((o, s) for o in range(ENT[o_type]) for s in range(ENT[s_type])
                    if (o, s) not in set(zip(objs, subs, strict=True)))
        out.append((rel, *cand, True))
    return out


@pytest.mark.parametrize(("seed", "shape"), SHAPES)
def test_reach_covers_every_pair_an_edge_changes(tmp_path, seed, shape):
    tables = random_graph(seed, shape)
    before = _state(Oracle(_ds(tmp_path / "before", tables)))
    for i, (rel, o, s, insert) in enumerate(_edits(tables)):
        edited = {k: (list(v[0]), list(v[1])) for k, v in tables.items()}
        objs, subs = edited[rel]
        if insert:
            objs.append(o)
            subs.append(s)
        else:
            j = next(k for k in range(len(objs)) if (objs[k], subs[k]) == (o, s))
            del objs[j], subs[j]
        after = _state(Oracle(_ds(tmp_path / f"e{i}", edited)))
        changed = {p for p in before if before[p] != after[p]}
        # resolved while the edge is present: on the graph that has it
        present = SimpleEvaluator.from_dataset(_ds(tmp_path / f"p{i}", edited if insert else tables))
        res = _Resolver(present)
        rc = reach(rel, o, s)
        pairs = {(u, r)
                 for u in res.users(rc.users, rc.user_arg)
                 for r in res.resources(rc.resources, rc.resource_arg)}
        assert changed <= pairs, (
            f"{'insert' if insert else 'delete'} {rel}({o},{s}): {sorted(changed - pairs)[:5]}")
        assert rc.closure_changes == (rel in GROUP_EDGES)


@pytest.mark.parametrize(("seed", "shape"), SHAPES)
def test_pair_state_equals_the_oracle_given_closure_admin_orgs_and_acl(tmp_path, seed, shape):
    ds = _ds(tmp_path, random_graph(seed, shape))
    o, ev = Oracle(ds), SimpleEvaluator.from_dataset(ds)
    groups = {u: {g for g in range(ENT["group"]) if ev.is_member(u, g)} for u in range(ENT["user"])}
    admin = {u: set(ev.rev["org_admin"][u]) for u in range(ENT["user"])}
    for u, r in _all_pairs():
        acl = {role: ev.fwd[rel][r] for rel, role in ACL_ROLE.items()}
        state = pair_state(u, groups[u], admin[u], acl)
        for perm in PERMISSIONS:
            assert holds(state, perm) == o.check(u, perm, r), (u, perm, r, state)


def test_reach_of_unknown_relation_is_refused():
    with pytest.raises(ValueError, match="unknown relation"):
        reach("resource_owner", 1, 2)


def test_walk_terminates_on_a_cycle():
    parents = {1: [2], 2: [3], 3: [1]}
    assert walk([1], lambda f: [p for x in f for p in parents.get(x, [])]) == {1, 2, 3}
