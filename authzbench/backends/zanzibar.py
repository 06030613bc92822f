"""What the Zanzibar engines' adapters (SpiceDB, OpenFGA, Permify) share, written once: the dataset's
relationships in write batches, and the object type and permission a check names."""

from __future__ import annotations

from collections.abc import Iterator

from authzbench.dataset import Dataset
from authzbench.errors import UserError
from authzbench.model import PERMISSION_TARGETS, RelationDef, relation_defs


def relationship_batches(ds: Dataset, n: int) -> Iterator[tuple[RelationDef, list[int], list[int]]]:
    """(relation, objects, subjects) in batches of at most n, relation by relation; metadata relations
    (group_org) are not relationships and are left out."""
    defs = relation_defs(ds.model)
    for name in ds.authz_relations():
        for df in ds.iter_batches(name, n):
            yield defs[name], df["object"].tolist(), df["subject"].tolist()


def permission_target(engine: str, model: str, perm: str) -> tuple[str, str]:
    """(object type, permission on it) a check of `perm` names: in the social model the permission names the
    object type (view_content -> content#view), in rebac it is the resource's."""
    try:
        return PERMISSION_TARGETS[model][perm]
    except KeyError:
        raise UserError(f"{engine}: unknown permission {perm!r} for the {model} model") from None
