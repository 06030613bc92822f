"""The document stores' resource documents, built chunk by chunk of resources (bounded memory at xl),
hold exactly the full closure's managers and viewers (no server: the documents they would send)."""

from __future__ import annotations

import json

import numpy as np

from authzbench.backends.expansion import Expansion, chunks_of
from authzbench.generator import generate
from authzbench.schema.closure import group_membership, permission_keys
from authzbench.systems.elasticsearch import load as elasticsearch_load
from authzbench.systems.mongo import load as mongo_load


def _expected(ds) -> tuple[dict[int, list[int]], dict[int, list[int]], dict[int, list[int]]]:
    """resource -> sorted users for manage and view, user -> sorted groups, from the full closure."""
    keys, n_res = permission_keys(ds), ds.entities["resource"]
    by_res = {p: {r: [] for r in range(n_res)} for p in ("manage", "view")}
    for perm, k in keys.items():
        for key in k.tolist():
            by_res[perm][key % n_res].append(key // n_res)
    m = group_membership(ds)
    groups: dict[int, list[int]] = {u: [] for u in range(ds.entities["user"])}
    for g, u in zip(m["group"].tolist(), m["user"].tolist(), strict=True):
        groups[u].append(g)
    return by_res["manage"], by_res["view"], {u: sorted(g) for u, g in groups.items()}


def _small_chunks(ds) -> Expansion:
    e = Expansion(ds, chunk_pairs=50)
    assert len(e.resource_chunks()) > 5
    return e


def test_elasticsearch_documents_from_small_chunks_hold_the_full_closure(tmp_path):
    ds = generate("tiny", tmp_path / "ds")
    manage, view, groups = _expected(ds)
    expanded = [0]
    docs = {c: {i: json.loads(t) for i, t in chunks_of(d)} for c, d in
            elasticsearch_load._all_docs(ds, _small_chunks(ds), expanded)}
    assert len(docs["resources"]) == ds.entities["resource"]
    for r, d in docs["resources"].items():
        assert d["managers"] == manage[r]
        assert d["viewers"] == sorted(set(view[r]) - set(manage[r]))  # view-only
    assert {u: d["groups"] for u, d in docs["users"].items()} == groups
    assert expanded[0] == sum(len(v) for v in permission_keys(ds).values())


def test_mongo_documents_from_small_chunks_hold_the_full_closure(tmp_path):
    ds = generate("tiny", tmp_path / "ds")
    manage, view, groups = _expected(ds)
    docs = {c: list(chunks_of(d)) for c, d in mongo_load._all_docs(ds, _small_chunks(ds), [0])}
    res = {d["_id"]: d for d in docs["resources"]}
    assert sorted(res) == list(range(ds.entities["resource"]))
    for r, d in res.items():
        assert (d["managers"], d["viewers"]) == (manage[r], view[r])
        assert isinstance(d["managers"], list) and all(isinstance(u, int) for u in d["viewers"])
    assert {d["_id"]: d["groups"] for d in docs["users"]} == groups
    assert len(docs["grants"]) == len({int(k) // ds.entities["resource"] * 2 + (p == "manage")
                                       for p, ks in permission_keys(ds).items() for k in ks})
    assert np.all(np.diff([d["_id"] for d in docs["resources"]]) == 1)
