"""The permission rows the precomputing loaders write (Cassandra's permission tables, the Elasticsearch and
FerretDB resource, user and grant documents), expanded from the dataset's relationships on the backends'
side.

Written apart from the oracle on purpose: had the loaders taken their rows from the oracle, a defect in that
expansion would be loaded into three backends and then agree with the oracle that produced it, the one class
of error the answers' comparison cannot catch. This module imports nothing of the oracle's
(authzbench.truth.oracle, authzbench.schema.closure) and works differently: the group closure walks each user
up the hierarchy (the oracle joins a group-reach table), the joins are binary searches over pair tables sorted
once (the oracle's are CSR indexes), and the dedup is a hash (pandas.unique) then a sort.
tests/unit/test_expansion.py holds the two equal on every pair; tests/unit/test_imports.py keeps them apart.

Memory stays bounded: the closure is streamed in chunks of users or of resources whose estimated paths stay
under `chunk_pairs` (at xl the whole view closure is ~600M keys); what is held is O(relationships).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from functools import cached_property
from typing import TypeVar

import numpy as np
import pandas as pd

from authzbench.backends.base import Step
from authzbench.schema.dataset import Dataset
from authzbench.schema.model import REBAC_RELATIONS

T = TypeVar("T")
# Paths expanded per chunk before dedup: 8M int64 keys = 64 MB, a few copies while deduplicating.
CHUNK_PAIRS = 8_000_000


def stepped(items: Iterable[T], name: str = "closure_seconds") -> Iterator[Step | T]:
    """`items`, each computed in a Step named `name` yielded just before it: the run layer runs and times the
    Step (a loader streaming the closure chunk by chunk reports the expansion apart from its writes), so a
    consumer passes every Step on, untouched, and uses the items between them."""
    it, box = iter(items), []
    while True:
        yield Step(name, lambda: box.append(next(it, _END)))
        item = box.pop()
        if item is _END:
            return
        yield item


def chunks_of(items: Iterable[Step | T]) -> Iterator[T]:
    """The items of a `stepped` stream with each Step run in place, untimed: for callers outside a load
    (tests, tools)."""
    for item in items:
        if isinstance(item, Step):
            item.run()
        else:
            yield item


_END = object()


def id_space(ds: Dataset) -> dict[str, int]:
    """Ids per entity type: the manifest's counts, raised to cover every id a relationship names (an edited
    copy of a dataset, the write tests', may name a user or group past the generated ones)."""
    out = dict(ds.entities)
    for name, d in REBAC_RELATIONS.items():
        if name not in ds.counts:
            continue
        t = ds.table(name)
        if len(t) == 0:
            continue
        for typ, col in ((d.object_type, "object"), (d.subject_type, "subject")):
            if typ in out:
                out[typ] = max(out[typ], int(t[col].max()) + 1)
    return out


def _distinct_sorted(keys: np.ndarray) -> np.ndarray:
    """Distinct int64 keys in ascending order: a hash pass first (pandas.unique), then a sort of what is
    left."""
    if len(keys) == 0:
        return keys.astype(np.int64)
    return np.sort(pd.unique(keys.astype(np.int64, copy=False)))


class _Pairs:
    """(key, value) pairs sorted by key then value; the pairs of a key are found by binary search."""

    __slots__ = ("key", "value")

    def __init__(self, key: np.ndarray, value: np.ndarray):
        key, value = key.astype(np.int64, copy=False), value.astype(np.int64, copy=False)
        order = np.lexsort((value, key))
        self.key, self.value = key[order], value[order]

    def between(self, lo: int, hi: int) -> tuple[np.ndarray, np.ndarray]:
        """The pairs whose key is in lo..hi-1."""
        a, b = np.searchsorted(self.key, [lo, hi], side="left")
        return self.key[a:b], self.value[a:b]

    def follow(self, left: np.ndarray, via: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(left[i], v) for every pair (via[i], v): the join of (left, via) with these pairs on the key."""
        first = np.searchsorted(self.key, via, side="left")
        n = np.searchsorted(self.key, via, side="right") - first
        if n.sum() == 0:
            return np.empty(0, np.int64), np.empty(0, np.int64)
        # the position of each output row: its row's first match plus its rank within that row's matches
        row = np.repeat(np.arange(len(via)), n)
        rank = np.arange(len(row)) - np.repeat(np.cumsum(n) - n, n)
        return left[row], self.value[first[row] + rank]

    def per_key(self, n_keys: int, weight: np.ndarray | None = None) -> np.ndarray:
        """For each key 0..n_keys-1: its number of pairs, or the sum of weight[value] over them."""
        w = None if weight is None else weight[self.value].astype(np.float64)
        return np.bincount(self.key, weights=w, minlength=n_keys).astype(np.int64)


def _ranges(cost: np.ndarray, budget: int) -> Iterator[tuple[int, int]]:
    """Consecutive ids lo..hi-1 whose summed cost stays within budget; an id costing more is alone."""
    ends = np.cumsum(cost)
    lo, n = 0, len(cost)
    while lo < n:
        already = int(ends[lo - 1]) if lo else 0
        hi = max(lo + 1, int(np.searchsorted(ends, already + budget, side="right")))
        yield lo, min(hi, n)
        lo = hi


class Expansion:
    """The rebac permissions of a dataset, expanded for loading: manage(r) = manager_user ∪
    membership(manager_group) ∪ admin(org(r)); view(r) = manage(r) ∪ viewer_user ∪ membership(viewer_group);
    membership(g) = direct members ∪ managers ∪ membership of every child group, transitively."""

    def __init__(self, ds: Dataset, chunk_pairs: int | None = None):
        self.ds = ds
        self.chunk_pairs = chunk_pairs or CHUNK_PAIRS
        space = id_space(ds)
        self.n_users, self.n_resources = space["user"], space["resource"]
        self.n_groups, self.n_orgs = space["group"], space["organization"]

    def _edges(self, relation: str) -> tuple[np.ndarray, np.ndarray]:
        if relation not in self.ds.counts:
            return np.empty(0, np.int64), np.empty(0, np.int64)
        t = self.ds.table(relation)
        return t["object"].to_numpy(np.int64), t["subject"].to_numpy(np.int64)

    # the group closure -------------------------------------------------------------------------------

    @cached_property
    def _memberships(self) -> pd.DataFrame:
        """(user, group) for every group whose membership holds the user, sorted: each user's direct groups
        (member or manager), then their parents, their parents' parents... until a round adds no pair (so a
        cycle in the hierarchy ends too)."""
        direct = [pd.DataFrame({"user": s, "group": o}) for o, s in map(self._edges, ("group_member",
                                                                                      "group_manager"))]
        parent, child = self._edges("group_child")
        up = pd.DataFrame({"group": child, "parent": parent}).drop_duplicates()
        held = pd.concat(direct, ignore_index=True).drop_duplicates()
        frontier = held
        while len(frontier) and len(up):
            step = frontier.merge(up, on="group")[["user", "parent"]].rename(columns={"parent": "group"})
            step = step.drop_duplicates()
            known = step.merge(held, on=["user", "group"], how="left", indicator=True)
            frontier = step[(known["_merge"] == "left_only").to_numpy()]
            held = pd.concat([held, frontier], ignore_index=True)
        return held.sort_values(["user", "group"], kind="stable").reset_index(drop=True)

    def user_groups(self) -> tuple[np.ndarray, np.ndarray]:
        """(user, group) for every group whose membership holds the user, sorted by user then group."""
        m = self._memberships
        return m["user"].to_numpy(np.int64), m["group"].to_numpy(np.int64)

    @property
    def membership_pairs(self) -> int:
        return len(self._memberships)

    # pair tables, by user and by resource ----------------------------------------------------------

    @cached_property
    def _by_user(self) -> dict[str, _Pairs]:
        """user -> resource (direct grants), user -> group (closure), user -> org (admin), group -> resource
        per role and org -> resource: the joins that walk from a user to its resources."""
        u, g = self.user_groups()
        o, a = self._edges("org_admin")
        r, ro = self._edges("resource_org")
        out = {"groups": _Pairs(u, g), "admin_of": _Pairs(a, o), "org_resources": _Pairs(ro, r)}
        for role in ("manager", "viewer"):
            r, s = self._edges(f"resource_{role}_user")
            out[f"{role}_user"] = _Pairs(s, r)
            r, s = self._edges(f"resource_{role}_group")
            out[f"{role}_group"] = _Pairs(s, r)
        return out

    @cached_property
    def _by_resource(self) -> dict[str, _Pairs]:
        """resource -> user (direct), resource -> group per role, resource -> org, and group -> user
        (membership), org -> user (admins): the joins that walk from a resource to its users."""
        u, g = self.user_groups()
        o, a = self._edges("org_admin")
        r, ro = self._edges("resource_org")
        out = {"members": _Pairs(g, u), "admins": _Pairs(o, a), "orgs": _Pairs(r, ro)}
        for role in ("manager", "viewer"):
            out[f"{role}_user"] = _Pairs(*self._edges(f"resource_{role}_user"))
            out[f"{role}_group"] = _Pairs(*self._edges(f"resource_{role}_group"))
        return out

    # chunks ------------------------------------------------------------------------------------------

    def _user_paths(self, lo: int, hi: int) -> tuple[list[tuple[np.ndarray, np.ndarray]], ...]:
        """(user, resource) paths of users lo..hi-1: (manage paths, viewer-only paths)."""
        p = self._by_user
        gu, g = p["groups"].between(lo, hi)
        au, o = p["admin_of"].between(lo, hi)
        manage = [p["manager_user"].between(lo, hi), p["manager_group"].follow(gu, g),
                  p["org_resources"].follow(au, o)]
        viewer = [p["viewer_user"].between(lo, hi), p["viewer_group"].follow(gu, g)]
        return manage, viewer

    def _resource_paths(self, lo: int, hi: int) -> tuple[list[tuple[np.ndarray, np.ndarray]], ...]:
        """(resource, user) paths of resources lo..hi-1: (manage paths, viewer-only paths)."""
        p = self._by_resource
        ro, o = p["orgs"].between(lo, hi)
        paths = {}
        for role in ("manager", "viewer"):
            rg, g = p[f"{role}_group"].between(lo, hi)
            paths[role] = [p[f"{role}_user"].between(lo, hi), p["members"].follow(rg, g)]
        return [*paths["manager"], p["admins"].follow(ro, o)], paths["viewer"]

    @staticmethod
    def _keys(manage: list[tuple[np.ndarray, np.ndarray]], viewer: list[tuple[np.ndarray, np.ndarray]],
              base: int, width: int) -> tuple[np.ndarray, np.ndarray]:
        """Distinct sorted keys (major - base) * width + minor: (manage, view)."""
        def key(parts: list[tuple[np.ndarray, np.ndarray]]) -> np.ndarray:
            return np.concatenate([(a - base) * width + b for a, b in parts] or [np.empty(0, np.int64)])

        m = _distinct_sorted(key(manage))
        return m, _distinct_sorted(np.concatenate([m, key(viewer)]))

    def user_chunks(self) -> list[tuple[int, int]]:
        """User ranges whose paths stay under chunk_pairs (an upper bound: duplicates counted)."""
        p = self._by_user
        per_group = (p["manager_group"].per_key(self.n_groups) + p["viewer_group"].per_key(self.n_groups))
        per_org = p["org_resources"].per_key(self.n_orgs)
        cost = (p["manager_user"].per_key(self.n_users) + p["viewer_user"].per_key(self.n_users)
                + p["groups"].per_key(self.n_users, per_group) + p["admin_of"].per_key(self.n_users, per_org))
        return list(_ranges(2 * cost, self.chunk_pairs))

    def resource_chunks(self) -> list[tuple[int, int]]:
        """Resource ranges whose paths stay under chunk_pairs."""
        p = self._by_resource
        members, admins = p["members"].per_key(self.n_groups), p["admins"].per_key(self.n_orgs)
        cost = (p["manager_user"].per_key(self.n_resources) + p["viewer_user"].per_key(self.n_resources)
                + p["manager_group"].per_key(self.n_resources, members)
                + p["viewer_group"].per_key(self.n_resources, members)
                + p["orgs"].per_key(self.n_resources, admins))
        return list(_ranges(2 * cost, self.chunk_pairs))

    def iter_user_keys(self) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """The permissions chunk by chunk in user order: (manage, view) as sorted distinct int64 keys
        user * n_resources + resource; a user's keys are all in one chunk."""
        for lo, hi in self.user_chunks():
            yield self._keys(*self._user_paths(lo, hi), 0, self.n_resources)

    def iter_resource_keys(self) -> Iterator[tuple[int, int, np.ndarray, np.ndarray]]:
        """The permissions chunk by chunk in resource order: (lo, hi, manage, view), keys
        (resource - lo) * n_users + user, sorted distinct int64; a resource's keys are all in one chunk."""
        for lo, hi in self.resource_chunks():
            yield lo, hi, *self._keys(*self._resource_paths(lo, hi), lo, self.n_users)

    @cached_property
    def _totals(self) -> dict[str, int]:
        out = {"manage": 0, "view": 0}
        for manage, view in self.iter_user_keys():
            out["manage"] += len(manage)
            out["view"] += len(view)
        return out

    def total(self, perm: str) -> int:
        """How many (user, resource) pairs hold `perm` (one pass over the chunks, then kept)."""
        return self._totals[perm]
