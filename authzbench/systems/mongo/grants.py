"""The mongo adapter's `grants` collection (mongo.py): one document per (user, permission) holding every
resource id of that permission, so a lookup is one read by _id (mongo.json says why). Its ids, the
documents the load writes and the updates the write path applies, kept together so they agree."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

import numpy as np

from authzbench.backends.base import Step
from authzbench.backends.expansion import Expansion, stepped


def grant_id(user: int, perm: str) -> int:
    """_id of a user's grants document for one permission (an int: FerretDB pushes _id equality down)."""
    return user * 2 + (perm == "manage")


def grant_updates(
    changes: Iterable[tuple[int, str, int, bool]]) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """What the write path must apply to `grants` for changed (user, perm, resource, granted) pairs:
    exactly the pairs it adds to (granted=True) or removes from (False) `managers` / `viewers`.
    One update per (user, perm): $addToSet with $each (upsert: a user's first grant creates the
    document) or $pullAll. For `self._bulk(self.grants, grant_updates(...))` in rewrite_pairs."""
    adds: dict[int, list[int]] = {}
    rms: dict[int, list[int]] = {}
    for user, perm, resource, granted in changes:
        (adds if granted else rms).setdefault(grant_id(user, perm), []).append(resource)
    ops = [({"_id": g}, {"$addToSet": {"resources": {"$each": rs}}}) for g, rs in adds.items()]
    return ops + [({"_id": g}, {"$pullAll": {"resources": rs}}) for g, rs in rms.items()]


def _grant_docs(expansion: Expansion) -> Iterator[Step | dict[str, Any]]:
    """One document per (user, permission) holding it on anything: {_id: grant_id, resources: [...]}, from
    the closure chunk by chunk of users. The heaviest xl-v1 user has 16,000 (~180 KB of BSON), far under
    the 16 MB document limit. Each chunk's Step (expansion.stepped) comes before its documents."""
    R = expansion.n_resources
    for chunk in stepped(expansion.iter_user_keys()):
        if isinstance(chunk, Step):
            yield chunk
            continue
        for perm, k in zip(("manage", "view"), chunk, strict=True):
            if not len(k):
                continue  # a range of users without this permission anywhere
            users = k // R
            starts = np.flatnonzero(np.concatenate(([True], users[1:] != users[:-1]))).tolist()
            res = (k % R).tolist()
            for s, e in zip(starts, [*starts[1:], len(k)], strict=True):
                yield {"_id": grant_id(int(users[s]), perm), "resources": res[s:e]}
