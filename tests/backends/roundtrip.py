"""What the export round trips of issue 69 share: a dataset loaded into a server through the suite's own
adapter, read back through the server's API by an importer, must be the same graph, relationship for
relationship (a multiset: a duplicate or a lost copy is a difference), and give the same oracle answers."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from pathlib import Path

from authzbench.generator import write_tables
from authzbench.imports.edges import Edge, edges_of
from authzbench.schema.dataset import Dataset
from authzbench.schema.model import relation_defs
from authzbench.truth.oracle import Oracle


def loaded_edges(ds: Dataset) -> Counter[tuple[str, str, str]]:
    """The dataset's relationships as a server holds them: metadata relations (group_org) are not loaded."""
    defs = relation_defs(ds.model)
    return Counter((e.relation, e.obj, e.subj) for e in edges_of(ds) if defs[e.relation].authz)


def as_counter(edges: Iterable[Edge]) -> Counter[tuple[str, str, str]]:
    return Counter((e.relation, e.obj, e.subj) for e in edges)


def differences(got: Counter, want: Counter) -> str:
    extra, lost = got - want, want - got
    return (f"{sum(extra.values())} extra (e.g. {list(extra)[:3]}), "
            f"{sum(lost.values())} lost (e.g. {list(lost)[:3]})")


def dataset_of(edges: Counter[tuple[str, str, str]], like: Dataset, out: Path) -> Dataset:
    """The read-back graph as a dataset of the same entities (ids are the dataset's decimal ids)."""
    tables: dict[str, tuple[list[int], list[int]]] = {}
    for (rel, o, s), n in sorted(edges.items()):
        objs, subs = tables.setdefault(rel, ([], []))
        objs.extend([int(o)] * n)
        subs.extend([int(s)] * n)
    return write_tables(out, tables, like.entities, like.model)


def answers_differ(a: Dataset, b: Dataset) -> list[tuple[int, str]]:
    """(user, permission) pairs whose lookups (every resource the user reaches) the two oracles disagree
    on."""
    oa, ob = Oracle(a), Oracle(b)
    return [(u, p) for u in range(a.entities["user"]) for p in ("manage", "view")
            if oa.lookup_resources(u, p) != ob.lookup_resources(u, p)]
