"""The reference evaluator: ground truth for every answer a backend gives.

It keeps compact indexes of the graph, memory O(relationships): each ACL relation by resource and
by subject (user or group), resources by organization, org admins, and each user's group closure
(via the hierarchy). A check reads a handful of short slices; a lookup expands one user's paths.
Per-user counts (the distribution table, the scenario anchors) stream through users in chunks of
bounded size, so nothing ever holds the full closure: at `xl` the view closure is ~10x `large`'s 46M
pairs, which as int64 keys plus sort buffers is what no longer fitted in memory.

The loaders that precompute permissions (Cassandra tables, Elasticsearch and FerretDB documents) do
not take their rows from here: backends/expansion.py expands them apart, so a defect in either shows as a
difference (tests/unit/test_expansion.py) instead of being loaded into the backends and agreeing with the
truth that produced it. `iter_keys` streams the closure in user order for `authzbench perf` and the tests;
the full closure (`closure.permission_keys`) stays: `keys` exposes it for small datasets and for the tests
that prove both agree on every pair.
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import cached_property
from pathlib import Path

import numpy as np

from authzbench.schema.closure import expand, group_reach, permission_keys, sorted_unique
from authzbench.schema.dataset import Dataset
from authzbench.schema.model import PERMISSIONS, REBAC_RELATIONS

# Pairs expanded per chunk of users before dedup: 8M int64 keys = 64 MB, a few copies while sorting.
CHUNK_PAIRS = 8_000_000
# Cells of one chunk's (user, org, rank) bitmap; a chunk needing more is split in two.
BITMAP_CELLS = 32_000_000


def _unique(a: np.ndarray, kind: str | None = None) -> np.ndarray:
    s = np.sort(a, kind=kind)
    return s[np.concatenate(([True], s[1:] != s[:-1]))] if len(s) else s


def _stable_order(keys: np.ndarray, n_keys: int) -> np.ndarray:
    """argsort(keys, kind="stable") as an LSD radix sort of two 16-bit digits: numpy radix-sorts
    16-bit keys in linear time, and two passes took half the CPU of the 64-bit stable argsort (32M keys)."""
    if n_keys > 2**32:
        return np.argsort(keys, kind="stable")
    order = np.argsort((keys & 0xFFFF).astype(np.uint16), kind="stable")
    if n_keys <= 2**16:
        return order
    return order[np.argsort((keys[order] >> 16).astype(np.uint16), kind="stable")]


def _local_keys(
    manage: list[tuple[np.ndarray, np.ndarray]], viewer: list[tuple[np.ndarray, np.ndarray]] | None, lo: int,
    hi: int, width: int) -> tuple[np.ndarray, np.ndarray]:
    """(major, minor) path pairs of majors lo..hi-1 as sorted unique keys (major - lo) * width + minor:
    (manage, view), view = manage plus the `viewer` paths (None: manage only). uint32 when they fit:
    sorting 4-byte keys took half the time of 8-byte ones here."""
    dtype = np.uint32 if (hi - lo) * width <= 2**32 else np.int64

    def keys(parts: list[tuple[np.ndarray, np.ndarray]]) -> np.ndarray:
        return _unique(np.concatenate([((a - lo) * width + b).astype(dtype, copy=False) for a, b in parts]))

    m = keys(manage)
    if viewer is None:
        return m, m
    # Two sorted runs: the stable sort (timsort) merges them in linear time.
    return m, _unique(np.concatenate([m, keys(viewer)]), kind="stable")


def _ranges(estimate: np.ndarray, max_pairs: int, max_width: int) -> Iterator[tuple[int, int]]:
    """Consecutive ranges of ids whose summed estimate stays under max_pairs (a heavier single id is its
    own range), at most max_width ids each."""
    cum, n, lo = np.cumsum(estimate), len(estimate), 0
    while lo < n:
        base = cum[lo - 1] if lo else 0
        hi = min(int(np.searchsorted(cum, base + max_pairs, side="right")), lo + max_width, n)
        hi = max(hi, lo + 1)
        yield lo, hi
        lo = hi


class _Index:
    """Values of key k are values[indptr[k]:indptr[k + 1]], sorted (int32)."""

    __slots__ = ("indptr", "values")

    def __init__(self, keys: np.ndarray, values: np.ndarray, n_keys: int):
        keys = keys.astype(np.int64, copy=False)
        if len(keys) and np.all(keys[1:] >= keys[:-1]):  # tables come sorted by object: no argsort
            self.indptr = np.zeros(n_keys + 1, dtype=np.int64)
            np.cumsum(np.bincount(keys, minlength=n_keys), out=self.indptr[1:])
            v = values
        else:
            order = _stable_order(keys, n_keys)
            self.indptr = np.zeros(n_keys + 1, dtype=np.int64)
            np.cumsum(np.bincount(keys, minlength=n_keys), out=self.indptr[1:])
            v = values[order]
        self.values = v.astype(np.int32, copy=False)

    def of(self, k: int) -> np.ndarray:
        return self.values[self.indptr[k]:self.indptr[k + 1]]

    def degree(self) -> np.ndarray:
        return np.diff(self.indptr)

    def span(self, lo: int, hi: int) -> tuple[np.ndarray, np.ndarray]:
        """(key, value) of keys lo..hi-1, in key order: a contiguous slice, no copy of the index."""
        a, b = self.indptr[lo], self.indptr[hi]
        keys = np.repeat(np.arange(lo, hi, dtype=np.int64), np.diff(self.indptr[lo:hi + 1]))
        return keys, self.values[a:b].astype(np.int64)

    def join(self, left: np.ndarray, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Every (left[i], v) for v in the values of keys[i]."""
        return expand(left, keys, self.indptr, self.values)

    @property
    def nbytes(self) -> int:
        return self.indptr.nbytes + self.values.nbytes


def _seen_entities(ds: Dataset) -> dict[str, int]:
    """The dataset's entity counts, widened to every id its relations use: an edited copy (the write tests')
    may name a user or group past the generated ones."""
    out = dict(ds.entities)
    for name, d in REBAC_RELATIONS.items():
        t = ds.table(name)
        for typ, col in ((d.object_type, "object"), (d.subject_type, "subject")):
            if len(t) and typ in out:
                out[typ] = max(out[typ], int(t[col].max()) + 1)
    return out


class Oracle:
    def __init__(self, ds: Dataset, chunk_pairs: int = CHUNK_PAIRS, bitmap_cells: int = BITMAP_CELLS):
        self.ds = ds
        self.chunk_pairs, self.bitmap_cells = chunk_pairs, bitmap_cells
        e = _seen_entities(ds)
        self.n_resources, self.n_users = e["resource"], e["user"]
        self.n_groups, self.n_orgs = e["group"], e["organization"]
        R, U, G, n_orgs = self.n_resources, self.n_users, self.n_groups, self.n_orgs

        def rel(name: str) -> tuple[np.ndarray, np.ndarray]:
            t = ds.table(name)
            return t["object"].to_numpy(np.int64), t["subject"].to_numpy(np.int64)

        # resource -> subjects (checks) and subject -> resources (lookups, counts), per ACL relation.
        self.by_res: dict[str, _Index] = {}
        self.by_sub: dict[str, _Index] = {}
        for name, n_sub in (("resource_manager_user", U), ("resource_viewer_user", U),
                            ("resource_manager_group", G), ("resource_viewer_group", G)):
            r, s = rel(name)
            self.by_res[name] = _Index(r, s, R)
            self.by_sub[name] = _Index(s, r, n_sub)
        r, o = rel("resource_org")
        self.res_org = np.full(R, -1, dtype=np.int32)
        self.res_org[r] = o
        self.org_res = _Index(o, r, n_orgs)
        # a resource in several orgs (the schema allows it; the write scenarios and edits make it) is
        # managed by every one's admins: checks read all of them (res_org keeps one, for counting buckets)
        self.res_orgs = _Index(r, o, R)
        self._buckets()
        o, a = rel("org_admin")
        self.admin_keys = sorted_unique(o * U + a)
        self.admin_orgs = _Index(a, o, U)
        self.user_groups = _Index(*self._user_group_closure(ds), U)

    def _buckets(self) -> None:
        """A perfect hash of resources: (bucket, rank) with bucket = the resource's org (n_orgs when it has
        none) and rank its position in that org. Counting then marks (user, org) slots of one org's
        width instead of sorting keys (the sort was 90% of the counting time)."""
        bucket = np.where(self.res_org < 0, self.n_orgs, self.res_org).astype(np.int64)
        order = np.argsort(bucket, kind="stable")
        sizes = np.bincount(bucket, minlength=self.n_orgs + 1)
        starts = np.concatenate(([0], np.cumsum(sizes)[:-1]))
        self.res_bucket = bucket.astype(np.int32)
        self.res_rank = np.empty(self.n_resources, dtype=np.int32)
        self.res_rank[order] = np.arange(self.n_resources) - starts[bucket[order]]
        self.bucket_width = max(1, int(sizes.max()))

    def _user_group_closure(self, ds: Dataset) -> tuple[np.ndarray, np.ndarray]:
        """(user, group) for every group whose membership holds the user: direct member or manager of
        the group or of any descendant. Size: direct memberships x ancestors (a shallow hierarchy)."""
        G = self.n_groups
        pairs = [ds.table(n) for n in ("group_member", "group_manager")]
        g = np.concatenate([p["object"].to_numpy(np.int64) for p in pairs])
        u = np.concatenate([p["subject"].to_numpy(np.int64) for p in pairs])
        gc = ds.table("group_child")
        anc, desc = group_reach(gc["object"].to_numpy(np.int64), gc["subject"].to_numpy(np.int64), G)
        ancestors = _Index(desc, anc, G)
        user, group = ancestors.join(u, g)
        key = sorted_unique(user * G + group)
        return key // G, key % G

    # single answers ------------------------------------------------------------------------------

    def check(self, user: int, perm: str, resource: int) -> bool:
        if not (0 <= user < self.n_users and 0 <= resource < self.n_resources):
            # an id the dataset does not have (a scratch user): no relationship grants it anything
            return False
        if self._direct(user, resource, "manager") or self._admin(user, resource):
            return True
        return perm == "view" and self._direct(user, resource, "viewer")

    def _direct(self, user: int, resource: int, role: str) -> bool:
        users = self.by_res[f"resource_{role}_user"].of(resource)
        i = np.searchsorted(users, user)
        if i < len(users) and users[i] == user:
            return True
        groups = self.by_res[f"resource_{role}_group"].of(resource)
        if len(groups) == 0:
            return False
        mine = self.user_groups.of(user)
        j = np.searchsorted(mine, groups)
        return bool(np.any(mine[np.minimum(j, len(mine) - 1)] == groups)) if len(mine) else False

    def _admin(self, user: int, resource: int) -> bool:
        for org in self.res_orgs.of(resource).tolist():
            k = org * self.n_users + user
            i = np.searchsorted(self.admin_keys, k)
            if i < len(self.admin_keys) and self.admin_keys[i] == k:
                return True
        return False

    def lookup_resources(self, user: int, perm: str) -> list[int]:
        if not 0 <= user < self.n_users:
            return []
        return self._chunk_keys(user, user + 1, perm == "view")[perm == "view"].tolist()

    # every user, streamed --------------------------------------------------------------------------

    def _paths(self, lo: int, hi: int, role: str) -> list[tuple[np.ndarray, np.ndarray]]:
        """(user, resource) pairs of users lo..hi-1 through one role's direct users and groups."""
        u, r = self.by_sub[f"resource_{role}_user"].span(lo, hi)
        gu, g = self.user_groups.span(lo, hi)
        return [(u, r), self.by_sub[f"resource_{role}_group"].join(gu, g)]

    def _chunk_keys(self, lo: int, hi: int, with_view: bool = True) -> tuple[np.ndarray, np.ndarray]:
        """Sorted unique local keys (user - lo) * n_resources + resource of users lo..hi-1: (manage, view)."""
        au, ao = self.admin_orgs.span(lo, hi)
        manage = [*self._paths(lo, hi, "manager"), self.org_res.join(au, ao)]
        return _local_keys(manage, self._paths(lo, hi, "viewer") if with_view else None, lo, hi,
                           self.n_resources)

    def _estimate(self) -> np.ndarray:
        """An upper bound of each user's (manage + view) path count, to size the chunks."""
        gu, g = self.user_groups.span(0, self.n_users)
        per_group = (
            self.by_sub["resource_manager_group"].degree() + self.by_sub["resource_viewer_group"].degree())
        au, ao = self.admin_orgs.span(0, self.n_users)
        est = (self.by_sub["resource_manager_user"].degree() + self.by_sub["resource_viewer_user"].degree()
               + np.bincount(gu, weights=per_group[g], minlength=self.n_users).astype(np.int64)
               + np.bincount(au, weights=self.org_res.degree()[ao], minlength=self.n_users).astype(np.int64))
        return 2 * est  # manage keys are concatenated again into view's dedup

    def chunks(self, max_pairs: int | None = None) -> Iterator[tuple[int, int]]:
        """User ranges whose expanded paths stay under max_pairs (a heavier single user is its own chunk)."""
        return _ranges(self._estimate(), max_pairs or self.chunk_pairs, max(1, 2**32 // self.n_resources))

    def iter_keys(self, max_pairs: int | None = None) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """The closure chunk by chunk in user order: concatenated, each equals permission_keys()."""
        for lo, hi in self.chunks(max_pairs):
            m, v = self._chunk_keys(lo, hi)
            yield m.astype(np.int64) + lo * self.n_resources, v.astype(np.int64) + lo * self.n_resources

    @cached_property
    def _counts(self) -> dict[str, np.ndarray]:
        out = {p: np.zeros(self.n_users, dtype=np.int64) for p in PERMISSIONS}
        for lo, hi in self.chunks():
            self._count_chunk(lo, hi, out)
        return out

    def _count_chunk(self, lo: int, hi: int, out: dict[str, np.ndarray]) -> None:
        """Distinct resources per user of lo..hi-1 by marking (user, org, rank) in a dense bitmap."""
        au, ao = self.admin_orgs.span(lo, hi)
        manage = [*self._paths(lo, hi, "manager"), self.org_res.join(au, ao)]
        viewer = self._paths(lo, hi, "viewer")
        nb = self.n_orgs + 1
        used = np.zeros((hi - lo) * nb, dtype=bool)
        slot_keys = {id(p): (p[0] - lo) * nb + self.res_bucket[p[1]] for p in (*manage, *viewer)}
        for k in slot_keys.values():
            used[k] = True
        slots = np.flatnonzero(used)
        if len(slots) * self.bucket_width > self.bitmap_cells and hi - lo > 1:
            mid = (lo + hi) // 2
            self._count_chunk(lo, mid, out)
            self._count_chunk(mid, hi, out)
            return
        slot_of = np.cumsum(used, dtype=np.int64) - 1
        W = self.bucket_width
        marks = {}
        for perm, parts in (("manage", manage), ("view", manage + viewer)):
            m = np.zeros(len(slots) * W, dtype=bool)
            for p in parts:
                m[slot_of[slot_keys[id(p)]] * W + self.res_rank[p[1]]] = True
            marks[perm] = np.count_nonzero(m.reshape(len(slots), W), axis=1)
        for perm, per_slot in marks.items():
            out[perm][lo:hi] = np.bincount(slots // nb, weights=per_slot, minlength=hi - lo).astype(np.int64)

    def count_by_user(self, perm: str) -> np.ndarray:
        """How many resources each user holds `perm` on (length n_users)."""
        return self._counts[perm]

    def total(self, perm: str) -> int:
        return int(self._counts[perm].sum())

    @cached_property
    def keys(self) -> dict[str, np.ndarray]:
        """The full closure as sorted keys (memory O(closure): for small datasets and tests)."""
        return permission_keys(self.ds)

    @property
    def nbytes(self) -> int:
        idx = [*self.by_res.values(), *self.by_sub.values(), self.org_res, self.res_orgs, self.admin_orgs,
               self.user_groups]
        return sum(i.nbytes for i in idx) + self.res_org.nbytes + self.admin_keys.nbytes

    @staticmethod
    def permissions() -> tuple[str, ...]:
        return PERMISSIONS


_SHARED: dict[tuple[str, str], Oracle] = {}


def shared(ds: Dataset) -> Oracle:
    """The process's one Oracle of a dataset: the run checks answers with it, the samplers and counts read
    it, where each built its own (at xl a second copy took the suite past 4 GB of RSS).
    Keyed by path and hash (an edited copy is another dataset); it keeps only the latest dataset's."""
    key = (str(Path(ds.path).resolve()), ds.hash)
    if key not in _SHARED:
        _SHARED.clear()
        _SHARED[key] = Oracle(ds)
    return _SHARED[key]
