"""Reference evaluator of the social model (schema/social.zed), operator by operator:

    user view        = self + (visibility - blocked)                  union, exclusion, wildcard
    content view     = owner->self + (visibility - owner->blocked)    arrow, exclusion, wildcard
    interaction view = creator->self + (creator->view & parent->view)  intersection

visibility is `user:*` (anyone, the wildcard) or `user:X#follower` (X's followers).
Checks are point queries, so sorted neighbour arrays with binary search are enough.
"""

from __future__ import annotations

import numpy as np

from authzbench.schema.closure import csr
from authzbench.schema.dataset import Dataset


class _Adjacency:
    """object -> sorted subjects, with O(log n) membership."""

    def __init__(self, ds: Dataset, rel: str, n_objects: int):
        t = ds.table(rel)
        obj, sub = t["object"].to_numpy(np.int64), t["subject"].to_numpy(np.int64)
        order = np.lexsort((sub, obj))
        self.indptr, self.values = csr(obj[order], sub[order], n_objects)

    def of(self, x: int) -> np.ndarray:
        return self.values[self.indptr[x]:self.indptr[x + 1]]

    def has(self, x: int, y: int) -> bool:
        row = self.of(x)
        i = np.searchsorted(row, y)
        return bool(i < len(row) and row[i] == y)

    def count(self, x: int) -> int:
        return int(self.indptr[x + 1] - self.indptr[x])


def _flags(ds: Dataset, rel: str, n: int) -> np.ndarray:
    f = np.zeros(n, dtype=bool)
    f[ds.table(rel)["object"].to_numpy()] = True
    return f


def _single(ds: Dataset, rel: str, n: int) -> np.ndarray:
    a = np.full(n, -1, dtype=np.int64)
    t = ds.table(rel)
    a[t["object"].to_numpy()] = t["subject"].to_numpy()
    return a


class SocialOracle:
    def __init__(self, ds: Dataset):
        e = ds.entities
        self.n_users, self.n_content, self.n_interactions = e["user"], e["content"], e["interaction"]
        U, C = self.n_users, self.n_content
        self.self_ = _Adjacency(ds, "user_self", U)
        self.follower = _Adjacency(ds, "user_follower", U)
        self.blocked = _Adjacency(ds, "user_blocked", U)
        self.user_public = _flags(ds, "user_public", U)
        self.user_vis_followers = _Adjacency(ds, "user_followers_visible", U)
        self.owner = _single(ds, "content_owner", C)
        self.content_public = _flags(ds, "content_public", C)
        self.content_vis_followers = _Adjacency(ds, "content_followers_visible", C)
        self.creator = _single(ds, "interaction_creator", self.n_interactions)
        self.parent = _single(ds, "interaction_parent", self.n_interactions)

    def _visible(self, v: int, public: bool, followers_of: np.ndarray) -> bool:
        # visibility: user:* (wildcard: every user) | user:X#follower
        return public or any(self.follower.has(int(x), v) for x in followers_of)

    def view_user(self, v: int, x: int) -> bool:
        return self.self_.has(x, v) or (
            self._visible(v, bool(self.user_public[x]), self.user_vis_followers.of(x))
            and not self.blocked.has(x, v))

    def view_content(self, v: int, c: int) -> bool:
        owner = int(self.owner[c])
        owner_self = owner >= 0 and self.self_.has(owner, v)
        blocked = owner >= 0 and self.blocked.has(owner, v)
        return owner_self or (self._visible(v, bool(self.content_public[c]), self.content_vis_followers.of(c))
                              and not blocked)

    def view_interaction(self, v: int, i: int) -> bool:
        creator, parent = int(self.creator[i]), int(self.parent[i])
        if creator >= 0 and self.self_.has(creator, v):
            return True
        return creator >= 0 and parent >= 0 and self.view_user(v, creator) and self.view_content(v, parent)

    def check(self, user: int, perm: str, obj: int) -> bool:
        """An object past the dataset does not exist: no one may see it, as every engine answers (the load
        test's published ids run to 100,000; the in-process reference answered them with an IndexError)."""
        if perm == "view_user":
            return 0 <= obj < self.n_users and self.view_user(user, obj)
        if perm == "view_content":
            return 0 <= obj < self.n_content and self.view_content(user, obj)
        if perm == "view_interaction":
            return 0 <= obj < self.n_interactions and self.view_interaction(user, obj)
        raise ValueError(f"unknown social permission {perm!r}")

    def lookup_resources(self, user: int, perm: str) -> list[int]:
        n = {"view_user": self.n_users, "view_content": self.n_content,
             "view_interaction": self.n_interactions}[perm]
        return [o for o in range(n) if self.check(user, perm, o)]

    def follower_count(self) -> np.ndarray:
        return np.diff(self.follower.indptr)


def oracle_for(ds: Dataset):
    """The reference evaluator of the dataset's model."""
    if ds.model == "social":
        return SocialOracle(ds)
    from authzbench.truth.oracle import shared

    return shared(ds)
