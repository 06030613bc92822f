"""The rebac model's rules that a backend needs at write time, written once, as pure functions over ids.

A backend that precomputes permissions (Cassandra tables, document arrays, ClickHouse's perm table)
must, on every write, find the (resource, user) pairs the edge can change and recompute their state.
Both rules live here; backends keep only the storage code that answers the selectors below (which
query finds "the resources of org 3" is storage; that org_admin(3, u) reaches exactly those is the
model). `tests/unit/test_model_rules.py` proves them against the oracle, without servers.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Literal

from authzbench.schema.model import REBAC_RELATIONS

# Edges that change group membership (so a user's group closure).
GROUP_EDGES = frozenset({"group_member", "group_manager", "group_child"})
# Direct edges from a user to a group: the user is in membership(g) through either.
USER_GROUP_EDGES = ("group_member", "group_manager")
USER_ACL = frozenset({"resource_manager_user", "resource_viewer_user"})
GROUP_ACL = frozenset({"resource_manager_group", "resource_viewer_group"})

# A resource's ACL, by role: the sets its permissions are computed from. Document stores name their
# arrays after these roles (document_layout.ACL_FIELDS); other stores map their own names onto them.
ACL_ROLE = {"resource_org": "orgs", "resource_manager_user": "manager_users",
            "resource_manager_group": "manager_groups", "resource_viewer_user": "viewer_users",
            "resource_viewer_group": "viewer_groups"}
ACL_ROLES = tuple(ACL_ROLE.values())

ResourceSel = Literal["none", "resource", "org_resources", "granted_via_ancestors"]
UserSel = Literal["none", "user", "membership", "org_admins"]


@dataclass(frozen=True)
class Reach:
    """Which (resource, user) pairs an edge can change: resources x users, each named by a selector and
    its argument, for the backend to resolve in its storage:
    - resources: "resource" r; "org_resources" org; "granted_via_ancestors" g = resources granted (as
      manager or viewer group) to g or to any group above g; "none".
    - users: "user" u; "membership" g = every user in membership(g); "org_admins" org; "none".
    The same pairs before and after the change, except where `while_present` says the resource selector
    must be resolved while the edge exists (after an insert, before a delete): a group edge's ancestors
    include the parent only through the edge itself."""

    resources: ResourceSel
    resource_arg: int
    users: UserSel
    user_arg: int
    closure_changes: bool  # users' group closures change: recompute them before the pairs

    @property
    def empty(self) -> bool:
        return self.resources == "none" or self.users == "none"


def reach(relation: str, obj: int, sub: int) -> Reach:
    """The pairs edge relation(obj, sub) can change.
    - resource_*_user (r, u): (r, u); resource_*_group (r, g): r x membership(g);
    - resource_org (r, org): r x admins(org); org_admin (org, u): resources of org x {u};
    - group_member / group_manager (g, u): resources granted via g or its ancestors x {u};
    - group_child (parent, child): resources granted via parent or its ancestors x membership(child)
      (membership(child) itself does not depend on an edge into child, even on a cycle);
    - org_member, group_org: nothing (no permission reads them)."""
    if relation not in REBAC_RELATIONS:
        raise ValueError(f"unknown relation {relation!r}")
    if relation in USER_ACL:
        return Reach("resource", obj, "user", sub, False)
    if relation in GROUP_ACL:
        return Reach("resource", obj, "membership", sub, False)
    if relation == "resource_org":
        return Reach("resource", obj, "org_admins", sub, False)
    if relation == "org_admin":
        return Reach("org_resources", obj, "user", sub, False)
    if relation in USER_GROUP_EDGES:
        return Reach("granted_via_ancestors", obj, "user", sub, True)
    if relation == "group_child":
        return Reach("granted_via_ancestors", obj, "membership", sub, True)
    return Reach("none", obj, "none", sub, False)


PairState = Literal["manage", "view"] | None


def pair_state(user: int, groups: Iterable[int], admin_orgs: Iterable[int],
               acl: Mapping[str, Iterable[int]]) -> PairState:
    """The permission a user holds on one resource, from the user's group closure (every group the user
    is in, transitively), the orgs the user administers, and the resource's ACL by role (ACL_ROLES; a
    missing role is empty). manage = manager_users + manager_groups->membership + orgs->admin;
    view = manage + viewer_users + viewer_groups->membership."""
    g, a = set(groups), set(admin_orgs)

    def has(role: str, ids: set[int] | None = None) -> bool:
        members = acl.get(role, ())
        return user in members if ids is None else not ids.isdisjoint(members)

    if has("manager_users") or has("manager_groups", g) or has("orgs", a):
        return "manage"
    if has("viewer_users") or has("viewer_groups", g):
        return "view"
    return None


def holds(state: PairState, perm: str) -> bool:
    """Whether a pair in `state` holds `perm` (manage implies view)."""
    return state == "manage" or (perm == "view" and state == "view")


def walk(start: Iterable[int], neighbours: Callable[[list[int]], Iterable[int]]) -> set[int]:
    """Everything reachable from `start` (included), a frontier at a time: `neighbours(frontier)` returns
    the next ids (a backend's batched read of parents or children). A seen-set ends a cycle."""
    seen = set(start)
    frontier = sorted(seen)
    while frontier:
        frontier = sorted(set(neighbours(frontier)) - seen)
        seen.update(frontier)
    return seen


def group_closure(direct_groups: Iterable[int], ancestors: Callable[[int], set[int]]) -> list[int]:
    """A user's groups: the ancestors (self included) of every group the user is a direct member or
    manager of, sorted. `ancestors` is the backend's (memoized) walk up the hierarchy."""
    out: set[int] = set()
    for g in set(direct_groups):
        out |= ancestors(g)
    return sorted(out)
