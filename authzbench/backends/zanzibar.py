"""What the Zanzibar engines' adapters (SpiceDB, OpenFGA, Permify) share, written once: the dataset's
relationships in write batches (the object type and permission a check names: common.permission_target)."""

from __future__ import annotations

from collections.abc import Iterator

from authzbench.schema.dataset import Dataset
from authzbench.schema.model import RelationDef, relation_defs


def relationship_batches(ds: Dataset, n: int) -> Iterator[tuple[RelationDef, list[int], list[int]]]:
    """(relation, objects, subjects) in batches of at most n, relation by relation; metadata relations
    (group_org) are not relationships and are left out."""
    defs = relation_defs(ds.model)
    for name in ds.authz_relations():
        for df in ds.iter_batches(name, n):
            yield defs[name], df["object"].tolist(), df["subject"].tolist()
