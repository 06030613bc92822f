"""Shared by the backends whose writes maintain a precomputed closure (scylla, clickhouse, mongo,
elasticsearch): a script of writes and deletes covering every relation kind, replayed against a
backend and, edge by edge, against the oracle recomputed from scratch on the edited relations."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pandas as pd

from authzbench.backends.base import Backend
from authzbench.schema.dataset import Dataset
from authzbench.schema.model import PERMISSIONS, Relationship
from authzbench.truth.oracle import Oracle

State = dict[str, set[tuple[int, int]]]


def mutated(ds: Dataset, tables: dict[str, pd.DataFrame]) -> Dataset:
    """`ds` with its relations replaced by `tables` (in memory)."""
    out = Dataset(ds.path, ds.manifest)
    out.__dict__["_tables"] = tables
    return out


def lookup_state(b: Backend, ds: Dataset, users: list[int] | None = None, workers: int = 8) -> State:
    """{perm: {(user, resource)}} from the backend's lookups, for `users` (default: every user and 4 never
    seen), several at once: an engine's lookup waits on its datastore."""
    users = list(range(ds.entities["user"] + 4)) if users is None else users
    keys = [(u, perm) for perm in ("manage", "view") for u in users]
    with ThreadPoolExecutor(workers) as pool:
        found = list(pool.map(lambda k: b.lookup_resources(*k), keys))
    state: State = {"manage": set(), "view": set()}
    for (u, perm), resources in zip(keys, found, strict=True):
        state[perm].update((u, r) for r in resources)
    return state


def oracle_pairs(ds: Dataset) -> State:
    """{perm: {(user, resource)}} as the oracle computes it."""
    o, n = Oracle(ds), ds.entities["resource"]
    return {perm: {(int(k // n), int(k % n)) for k in o.keys[perm]} for perm in PERMISSIONS}


def edit_steps(ds: Dataset) -> list[tuple[str, Relationship, bool]]:
    """(op, relationship, compare the whole state after it): deletes of existing edges and inserts of new
    ones for every relation kind; a member joining a group that grants nothing yet, then a grant to that
    group (the member's closure must have changed already); a user id never seen before; and a group
    hierarchy cycle (closure recomputation must terminate on it) that is then removed again."""
    t = {rel: ds.table(rel) for rel in ds.relations()}
    first = {rel: (int(df["object"].iloc[0]), int(df["subject"].iloc[0])) for rel, df in t.items() if len(df)}
    n_users, n_groups = ds.entities["user"], ds.entities["group"]
    parent, child = first["group_child"]
    # a root group with no resource granted through it (its grants deleted first, not compared one by one)
    grants = pd.concat([t["resource_viewer_group"].assign(rel="resource_viewer_group"),
                        t["resource_manager_group"].assign(rel="resource_manager_group")])
    roots = sorted(set(range(n_groups)) - set(t["group_child"]["subject"]) - {parent, child})
    lone = min(roots, key=lambda g: int((grants["subject"] == g).sum()))
    ungrant = [("delete", Relationship(r.rel, int(r.object), int(r.subject)), False)
               for r in grants[grants["subject"] == lone].itertuples()]
    steps = [("delete", Relationship(rel, *first[rel])) for rel in (
        "resource_viewer_user", "resource_manager_user", "resource_viewer_group", "resource_manager_group",
        "org_admin", "group_member", "group_manager", "group_child", "resource_org")]
    steps += [
        ("write", Relationship("resource_viewer_user", 1, n_users - 1)),
        ("write", Relationship("resource_manager_user", 2, n_users - 2)),
        ("write", Relationship("resource_viewer_group", 3, n_groups - 1)),
        ("write", Relationship("resource_manager_group", 4, n_groups - 2)),
        ("write", Relationship("org_admin", 0, n_users - 3)),
        ("write", Relationship("group_member", n_groups - 1, n_users - 4)),
        ("write", Relationship("group_manager", n_groups - 2, n_users - 5)),
        ("write", Relationship("group_child", n_groups - 1, n_groups - 2)),
        ("write", Relationship("resource_org", 5, 1)),
        ("write", Relationship("org_member", 0, n_users - 6)),
        ("write", Relationship("resource_viewer_user", 7, n_users + 3)),  # a user id never seen (no document)
        ("write", Relationship("resource_manager_user", 7, n_users + 3)),  # now manage, not only view
        ("delete", Relationship("resource_manager_user", 7, n_users + 3)),  # back to view only
        ("write", Relationship("group_member", lone, n_users - 8)),
        ("write", Relationship("resource_viewer_group", 9, lone)),
        ("write", Relationship("group_child", parent, child)),  # re-inserted, then a cycle on top
        ("write", Relationship("group_child", child, parent)),
        ("write", Relationship("group_member", child, n_users - 7)),
        ("delete", Relationship("group_child", child, parent)),
        ("delete", Relationship("group_member", child, n_users - 7)),
        ("delete", Relationship("resource_viewer_user", 7, n_users + 3)),
    ]
    lone_at = next(i for i, (_, r) in enumerate(steps) if r.relation == "group_member" and r.object == lone)
    return [*((op, r, True) for op, r in steps[:lone_at]), *ungrant,
            *((op, r, True) for op, r in steps[lone_at:])]


def cycle_steps(ds: Dataset) -> list[tuple[str, Relationship]]:
    """The steps of edit_steps that close a group cycle and open it again (child#member@parent)."""
    parent, child = (int(x) for x in ds.table("group_child").iloc[0][["object", "subject"]])
    return [(op, Relationship("group_child", child, parent)) for op in ("write", "delete")]


def closes_cycle(edges: pd.DataFrame, parent: int, child: int) -> bool:
    """Whether the hierarchy edge parent -> child closes a cycle: child already reaches parent (object is
    the parent, subject the child, as in group_child)."""
    below: dict[int, list[int]] = {}
    for p, c in zip(edges["object"].tolist(), edges["subject"].tolist(), strict=True):
        below.setdefault(int(p), []).append(int(c))
    seen, todo = set(), [child]
    while todo:
        g = todo.pop()
        if g == parent:
            return True
        if g not in seen:
            seen.add(g)
            todo += below.get(g, [])
    return False


def _only(pairs: State, users: list[int]) -> State:
    keep = set(users)
    return {k: {(u, r) for u, r in v if u in keep} for k, v in pairs.items()}


def replay_edits(
    b: Backend, ds: Dataset, state: Callable[[Backend], State], expected: Callable[[Dataset], State],
    cycles: bool = True, users_state: Callable[[Backend, list[int]], State] | None = None,
    full_every: int = 6) -> Dataset:
    """Apply edit_steps to `b` and to a copy of the relations; after each compared step, `state(b)` must
    equal `expected(edited dataset)` key by key. Then `b`'s checks and lookups must equal the oracle's for
    the users the script touched. Returns the edited dataset.

    cycles=False (an engine that does not guard cycles, tested on one apart): every hierarchy write that
    would close a cycle in the edited relations is left out, with the later delete of that edge. Not only
    cycle_steps: on `tiny` the script's new edge group_child(n-1, n-2) closes one too (group n-2 is
    already an ancestor of n-1).

    users_state (an engine whose whole state is a lookup per user, slow: Permify's took 574 s of CI): after
    a compared step, the users whose expected answers changed are read through it; the whole state after
    every `full_every`-th compared step and the last one, so a stray change to another user is still found."""
    tables = {rel: ds.table(rel).copy() for rel in ds.relations()}
    skipped: set[tuple[int, int]] = set()
    # the expected answers before the step: only the user-by-user reads need them
    script, compared, before = edit_steps(ds), 0, expected(ds) if users_state else {}
    for step, (op, rel, compare) in enumerate(script):
        if not cycles and rel.relation == "group_child":
            edge = (rel.object, rel.subject)
            if op == "write" and closes_cycle(tables["group_child"], *edge):
                skipped.add(edge)
                continue
            if op == "delete" and edge in skipped:
                skipped.discard(edge)
                continue
        df = tables[rel.relation]
        hit = (df["object"] == rel.object) & (df["subject"] == rel.subject)
        if op == "write":
            b.write(rel)
            if not hit.any():
                tables[rel.relation] = pd.concat(
                    [df, pd.DataFrame({"object": [rel.object], "subject": [rel.subject]}, dtype=np.int32)],
                    ignore_index=True)
        else:
            b.delete(rel)
            tables[rel.relation] = df[~hit].reset_index(drop=True)
        if not compare:
            continue
        compared += 1
        want = full = expected(mutated(ds, tables))
        if users_state is None or compared % full_every == 0 or step == len(script) - 1:
            got = state(b)
        else:
            changed = sorted({u for k in full for u, _ in full[k] ^ before.get(k, set())})
            got, want = users_state(b, changed), _only(full, changed)
        before = full
        for k in want:
            assert got[k] == want[k], (f"after {op} {rel}: {k} missing {sorted(want[k] - got[k])[:5]}, "
                                       f"extra {sorted(got[k] - want[k])[:5]}")
    final = mutated(ds, tables)
    o = Oracle(final)
    for u in [*range(ds.entities["user"] - 8, ds.entities["user"]), ds.entities["user"] + 3]:
        for perm in PERMISSIONS:
            assert sorted(b.lookup_resources(u, perm)) == o.lookup_resources(u, perm), (u, perm)
            assert all(b.check(u, perm, r) == o.check(u, perm, r) for r in range(0, 12)), (u, perm)
    return final


def assert_checks_equal_oracle(
    b: Backend, ds: Dataset, oracle, users_step: int, resources_step: int = 1) -> None:
    """Every `users_step`-th user against every `resources_step`-th resource, both permissions; the sample
    must hold positives and negatives, or it would prove nothing."""
    bad, positives, total = [], 0, 0
    for u in range(0, ds.entities["user"], max(1, users_step)):
        for r in range(0, ds.entities["resource"], resources_step):
            for perm in PERMISSIONS:
                want = oracle.check(u, perm, r)
                positives += want
                total += 1
                if b.check(u, perm, r) != want:
                    bad.append((u, perm, r, want))
    assert 0 < positives < total and not bad, f"{len(bad)} checks differ: {bad[:5]}"


def assert_every_lookup_equals_oracle(b: Backend, ds: Dataset, oracle) -> None:
    bad = [(u, perm) for u in range(ds.entities["user"]) for perm in PERMISSIONS
           if sorted(b.lookup_resources(u, perm)) != oracle.lookup_resources(u, perm)]
    assert not bad, f"{len(bad)} lookups differ: {bad[:5]}"


def big_org(tmp_path) -> tuple[Dataset, int, list[int], list[int]]:
    """One org of 10,500 resources (past the 10,000 many engines cap a result at): the dataset, one of its
    admins, and the oracle's view and manage lookups of that admin (all 10,500 each)."""
    from authzbench.generator import generate

    ds = generate("tiny", tmp_path / "big", overrides={"orgs": "1", "resources_per_org": "10500",
                                                        "users_per_org": "12", "admins_per_org": "2"})
    o = Oracle(ds)
    admin = int(ds.table("org_admin")["subject"].iloc[0])
    view = o.lookup_resources(admin, "view")
    assert len(view) == 10500
    return ds, admin, view, o.lookup_resources(admin, "manage")
