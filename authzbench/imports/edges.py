"""The one shape every importer produces: an edge of the model, named by strings, with where it came from."""

from __future__ import annotations

from collections.abc import Iterator
from typing import NamedTuple

from authzbench.schema.dataset import Dataset
from authzbench.schema.model import relation_defs


class Edge(NamedTuple):
    relation: str  # a RelationDef.name of the model, e.g. "group_member"
    obj: str  # the object's id as the source spells it
    subj: str  # the subject's id as the source spells it
    where: str  # "users.csv:17", "spicedb:ReadRelationships#412": named in every refusal


def edges_of(ds: Dataset) -> Iterator[Edge]:
    """A dataset's edges with its integer ids as strings: what a round trip compares against."""
    for rel in relation_defs(ds.model):
        t = ds.table(rel)
        for i, (o, s) in enumerate(zip(t["object"].tolist(), t["subject"].tolist(), strict=True)):
            yield Edge(rel, str(o), str(s), f"{rel}.parquet:{i + 1}")
