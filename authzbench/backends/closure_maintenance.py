"""Keeping a denormalized rebac model fresh after a structural write: the algorithm once, over the few
storage calls of `Store` (Elasticsearch and FerretDB documents, Cassandra tables).

Under the group lock (locks.serialized): find the resources the edge can change while the edge is present
(after an insert, before a delete: a group edge's ancestors include the parent only through the edge
itself), write the edge, find the users, recompute their group closures where the edge changes them, then
the permission state of every affected (resource, user) pair (model_rules.pair_state), writing only the
pairs whose state differs. Which pairs an edge reaches and what a pair's state is are model_rules'; which
query finds them, and how a state is stored, is the store's.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from authzbench.backends.locks import serialized
from authzbench.schema.model import Relationship
from authzbench.schema.model_rules import PairState, Reach, group_closure, pair_state, reach, walk


@dataclass
class UserState:
    """What a pair's state needs of a user: the group closure and the orgs the user administers."""

    groups: Iterable[int] = ()
    admin_orgs: Iterable[int] = field(default_factory=set)


# (direct groups of a user) -> the user's group closure, sorted; memoized for one write
Closure = Callable[[Iterable[int]], list[int]]


class Store(Protocol):
    """The storage calls the algorithm needs. A selection (of resources or users) is the store's own
    value (ids, or a query filter); a falsy one selects nothing."""

    keeps_closures: bool  # stores each user's group closure (documents), or computes it when needed

    def group_lock(self) -> contextlib.AbstractContextManager[Any]: ...

    def write_edge(self, rel: Relationship, *, insert: bool) -> None: ...

    def find_resources(self, rc: Reach) -> Any: ...

    def find_users(self, rc: Reach) -> Any: ...

    def parents(self, groups: list[int]) -> Iterable[int]: ...

    def user_states(self, users: Any, closure: Closure, *, refresh: bool) -> dict[int, UserState]:
        """Each selected user's state; refresh: the closure recomputed (closure(direct groups)) and stored
        where it differs. A store that keeps no closure always computes it."""
        ...

    def rewrite_pairs(self, resources: Any, users: dict[int, UserState]) -> None:
        """The selected resources' pairs with these users, written where their state changes (`changes`
        names them from a resource's ACL and the pairs' stored state)."""
        ...

    def finish(self) -> None: ...


def apply(store: Store, rel: Relationship, *, insert: bool) -> None:
    """Write or delete `rel` and everything derived from it, under the group lock."""
    with serialized(rel.relation, store.group_lock):
        _apply(store, rel, reach(rel.relation, int(rel.object), int(rel.subject)), insert=insert)


def _apply(store: Store, rel: Relationship, rc: Reach, *, insert: bool) -> None:
    if not insert:
        resources = store.find_resources(rc)  # with the edge still present
    store.write_edge(rel, insert=insert)
    if insert:
        resources = store.find_resources(rc)
    users = store.find_users(rc)
    # closures are kept exact even when no resource is granted through the group yet: a later
    # resource_*_group write finds the users it affects by their closure
    refresh = rc.closure_changes and store.keeps_closures
    if users and (resources or refresh):
        states = store.user_states(users, closure_of(store), refresh=rc.closure_changes)
        if resources and states:
            store.rewrite_pairs(resources, states)
    store.finish()


def closure_of(store: Store) -> Closure:
    """A user's group closure from the direct groups: the ancestors of each, walked up through
    store.parents, memoized for this write only (other processes write too)."""
    ancestors = functools.cache(lambda g: walk([g], lambda frontier: store.parents(frontier)))
    return lambda direct: group_closure(direct, ancestors)


# the stored state of a pair its arrays disagree on (a user among the managers but not the viewers where
# viewers hold every viewer): never equal to a computed state, so the pair is written again
MIXED = "mixed"


def stored_state(manage: bool, view: bool, mixed: bool = False) -> PairState | str:
    """A pair's stored state from what its rows or arrays say."""
    return MIXED if mixed and not (manage or view) else "manage" if manage else "view" if view else None


def changes(acl: Mapping[str, Iterable[int]], old: Callable[[int], PairState],
            users: Mapping[int, UserState]) -> list[tuple[int, PairState, PairState]]:
    """(user, old state, new state) of the resource's pairs with these users whose state changes."""
    out = []
    for u, st in users.items():
        new = pair_state(u, st.groups, st.admin_orgs, acl)
        was = old(u)
        if new != was:
            out.append((u, was, new))
    return out
