"""Where each rebac relationship lives in the document stores (mongo, elasticsearch): both keep the same
documents per resource, user, group and organization, so both read and maintain the same arrays."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from authzbench.backends.base import Step
from authzbench.backends.expansion import Expansion, stepped
from authzbench.schema.dataset import Dataset
from authzbench.schema.model_rules import ACL_ROLES

# relation -> [(collection or index, id side, array field, other side)]: "object"/"subject" name which end
# of the edge is the document id and which the array element. Some edges are kept at both ends, so that
# writes can walk the hierarchy up (parents) and find a user's groups without a scan.
SOURCE: dict[str, list[tuple[str, str, str, str]]] = {
    "org_admin": [("orgs", "object", "admins", "subject"), ("users", "subject", "admin_orgs", "object")],
    "org_member": [("orgs", "object", "members", "subject"), ("users", "subject", "member_orgs", "object")],
    "group_org": [("groups", "object", "org", "subject")],
    "group_member": [("groups", "object", "members", "subject"), ("users", "subject", "member_of", "object")],
    "group_manager": [
        ("groups", "object", "managers", "subject"), ("users", "subject", "manager_of", "object")],
    "group_child": [("groups", "object", "children", "subject"), ("groups", "subject", "parents", "object")],
    "resource_org": [("resources", "object", "orgs", "subject")],
    "resource_manager_user": [("resources", "object", "manager_users", "subject")],
    "resource_manager_group": [("resources", "object", "manager_groups", "subject")],
    "resource_viewer_user": [("resources", "object", "viewer_users", "subject")],
    "resource_viewer_group": [("resources", "object", "viewer_groups", "subject")],
}
# A resource document's ACL arrays: the relationships its permissions are computed from, named by role.
ACL_FIELDS = ACL_ROLES
# collection -> the entity its documents are (one document per id, 0..n-1)
ENTITY = {"orgs": "organization", "groups": "group", "users": "user", "resources": "resource"}

# (keys, values, n_keys) -> a function id -> that id's values in the store's format (a list, JSON text...)
Grouper = Callable[[np.ndarray, np.ndarray, int], Callable[[int], Any]]


def field_getters(ds: Dataset, collection: str, grouper: Grouper) -> dict[str, Callable[[int], Any]]:
    """Every relationship array of `collection`'s documents, from SOURCE: field -> (id -> values)."""
    n = ds.entities[ENTITY[collection]]
    out: dict[str, Callable[[int], Any]] = {}
    for relation, places in SOURCE.items():
        for coll, id_side, field, val_side in places:
            if coll == collection:
                df = ds.table(relation)
                out[field] = grouper(df[id_side].to_numpy(np.int64), df[val_side].to_numpy(np.int64), n)
    return out


def sorted_csr(keys: np.ndarray, values: np.ndarray, n_keys: int) -> tuple[list[int], np.ndarray]:
    """Values grouped by key, ascending within each key: (bounds, values) with key k's values at
    values[bounds[k]:bounds[k+1]]."""
    order = np.lexsort((values, keys))
    bounds = np.searchsorted(keys[order], np.arange(n_keys + 1), side="left")
    return bounds.tolist(), values[order]


def resource_closure(expansion: Expansion) -> Iterator[Step | tuple[int, int, dict[str, np.ndarray]]]:
    """The expanded permissions chunk by chunk of resources (bounded memory: at xl the whole closure is
    ~600M keys), each computed in a Step before it (expansion.stepped): (lo, hi, keys) with keys "manage" and
    "view" as (resource - lo) * n_users + user, sorted unique."""
    for chunk in stepped(expansion.iter_resource_keys()):
        if isinstance(chunk, Step):
            yield chunk
            continue
        lo, hi, manage, view = chunk
        yield lo, hi, {"manage": manage, "view": view}


def expanded_users(ds: Dataset) -> Expansion:
    """The dataset's expansion with the users' closures computed (the first Step of a document store's load:
    expansion time, not insert time); the resources' closures follow chunk by chunk as documents go out."""
    expansion = Expansion(ds)
    expansion.user_groups()
    return expansion


def user_groups(expansion: Expansion) -> tuple[np.ndarray, np.ndarray]:
    """(user, group) for every group whose membership holds the user: a user document's closure."""
    return expansion.user_groups()


# (id, field -> (id -> values)) -> the store's document of that id (a dict, or (id, JSON text))
Render = Callable[[int, dict[str, Callable[[int], Any]]], Any]


def documents(ds: Dataset, expansion: Expansion, grouper: Grouper, render: Render, expanded: list[int], *,
              view_only: bool) -> list[tuple[str, Iterator[Any]]]:
    """Every document of orgs, groups, users (with the user's closure, `groups`) and resources (with the
    expanded `managers` and `viewers`, chunk by chunk of resources, each chunk's Step before its documents;
    viewers view-only where the store's view query also matches `managers`), in the store's format:
    (collection, documents)."""
    u, g = user_groups(expansion)
    users = {"groups": grouper(u, g, ds.entities["user"])}

    def plain(collection: str, extra: dict[str, Callable[[int], Any]] | None = None) -> Iterator[Any]:
        fields = {**field_getters(ds, collection, grouper), **(extra or {})}
        return (render(i, fields) for i in range(ds.entities[ENTITY[collection]]))

    return [("orgs", plain("orgs")), ("groups", plain("groups")), ("users", plain("users", users)),
            ("resources", _resource_documents(ds, expansion, grouper, render, expanded, view_only))]


def _resource_documents(
    ds: Dataset, expansion: Expansion, grouper: Grouper, render: Render, expanded: list[int], view_only: bool
) -> Iterator[Any]:
    source = field_getters(ds, "resources", grouper)
    U = expansion.n_users
    for chunk in resource_closure(expansion):
        if isinstance(chunk, Step):
            yield chunk
            continue
        lo, hi, keys = chunk
        expanded[0] += len(keys["view"]) + len(keys["manage"])
        viewers = keys["view"]
        if view_only:  # a manager already matches the view query through `managers`
            viewers = viewers[~np.isin(viewers, keys["manage"], assume_unique=True)]
        local = {"managers": grouper(keys["manage"] // U, keys["manage"] % U, hi - lo),
                 "viewers": grouper(viewers // U, viewers % U, hi - lo)}
        extra = {f: (lambda i, get=get, lo=lo: get(i - lo)) for f, get in local.items()}
        yield from (render(i, {**source, **extra}) for i in range(lo, hi))
