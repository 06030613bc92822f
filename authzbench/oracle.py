"""The reference evaluator: ground truth for every answer a backend gives.

It holds, per permission, the sorted keys user * n_resources + resource of the full closure, so a
check is one binary search and a lookup is one slice.
"""

from __future__ import annotations

import numpy as np

from authzbench.closure import permission_keys
from authzbench.dataset import Dataset
from authzbench.model import PERMISSIONS


class Oracle:
    def __init__(self, ds: Dataset):
        self.n_resources = ds.entities["resource"]
        self.n_users = ds.entities["user"]
        self.keys: dict[str, np.ndarray] = permission_keys(ds)

    def check(self, user: int, perm: str, resource: int) -> bool:
        keys = self.keys[perm]
        k = user * self.n_resources + resource
        i = np.searchsorted(keys, k)
        return bool(i < len(keys) and keys[i] == k)

    def lookup_resources(self, user: int, perm: str) -> list[int]:
        keys = self.keys[perm]
        lo, hi = np.searchsorted(keys, [user * self.n_resources, (user + 1) * self.n_resources])
        return (keys[lo:hi] - user * self.n_resources).tolist()

    def count_by_user(self, perm: str) -> np.ndarray:
        """How many resources each user holds `perm` on (length n_users)."""
        return np.bincount(self.keys[perm] // self.n_resources, minlength=self.n_users)

    def total(self, perm: str) -> int:
        return len(self.keys[perm])

    @staticmethod
    def permissions() -> tuple[str, ...]:
        return PERMISSIONS
