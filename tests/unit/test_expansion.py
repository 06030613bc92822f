"""The backends' permission-row expansion (backends/expansion.py, what the precomputing loaders write) and
the oracle are two implementations of the model that share no code: they must give the same pairs, the same
group closure and the same totals on every dataset, the generated ones and random small graphs (cycles in
the hierarchy, resources without an org, ids past the manifest's counts included)."""

from __future__ import annotations

import numpy as np
import pytest

from authzbench.backends.base import Step
from authzbench.backends.expansion import Expansion, chunks_of, stepped
from authzbench.generator import generate, write_tables
from authzbench.schema.model import PERMISSIONS
from authzbench.truth.oracle import Oracle
from tests.unit.test_model_rules import ENT, SHAPES, random_graph
from tests.unit.test_oracle import ENTITIES, HAND


def _user_order(e: Expansion) -> dict[str, np.ndarray]:
    parts = list(e.iter_user_keys())
    return {p: np.concatenate([k[i] for k in parts]) for i, p in enumerate(PERMISSIONS)}


def _resource_order(e: Expansion) -> dict[str, np.ndarray]:
    """iter_resource_keys' chunks re-keyed user * n_resources + resource, in resource order."""
    parts = list(e.iter_resource_keys())
    return {p: np.concatenate([(k[i] % e.n_users) * e.n_resources + lo + k[i] // e.n_users
                               for lo, _hi, *k in parts]) for i, p in enumerate(PERMISSIONS)}


def assert_expansion_equals_oracle(ds, chunk_pairs: int | None = None) -> Expansion:
    o, e = Oracle(ds), Expansion(ds, chunk_pairs)
    assert (e.n_users, e.n_resources, e.n_groups, e.n_orgs) == (
        o.n_users, o.n_resources, o.n_groups, o.n_orgs)
    users, res = _user_order(e), _resource_order(e)
    for i, perm in enumerate(PERMISSIONS):
        truth = np.concatenate([k[i] for k in o.iter_keys()])
        assert np.array_equal(users[perm], truth), perm  # sorted, distinct, the same pairs
        assert np.array_equal(np.sort(res[perm]), truth), perm
        assert len(np.unique(res[perm])) == len(res[perm])  # no pair written twice
        assert e.total(perm) == o.total(perm)
        got = np.bincount(users[perm] // e.n_resources, minlength=e.n_users)
        assert np.array_equal(got, o.count_by_user(perm))
        for u in range(min(e.n_users, 40)):
            mine = users[perm][users[perm] // e.n_resources == u] % e.n_resources
            assert mine.tolist() == o.lookup_resources(u, perm)
    u, g = e.user_groups()
    ou, og = o.user_groups.span(0, o.n_users)
    assert np.array_equal(u, ou) and np.array_equal(g, og)
    assert e.membership_pairs == len(og)
    for lo, hi, manage, view in e.iter_resource_keys():  # every key names a resource of its chunk
        assert np.all(np.diff(view) > 0) and np.all(np.diff(manage) > 0)
        assert (not len(view)) or view[-1] < (hi - lo) * e.n_users
    return e


@pytest.mark.parametrize("sets", [{}, {"child_group_share": "0.9", "orgs": "4"}])
def test_the_expansion_equals_the_oracle_on_the_tiny_profile(tmp_path, sets):
    ds = generate("tiny", tmp_path / "ds", overrides=sets)
    assert assert_expansion_equals_oracle(ds).total("view") > 1000


def test_small_chunks_split_users_and_resources_and_change_nothing(tmp_path):
    ds = generate("tiny", tmp_path / "ds")
    e = assert_expansion_equals_oracle(ds, chunk_pairs=50)
    assert len(e.user_chunks()) > 5 and len(e.resource_chunks()) > 5
    for chunks in (e.user_chunks(), e.resource_chunks()):  # consecutive, whole ids, covering every id
        assert chunks[0][0] == 0 and all(a[1] == b[0] for a, b in zip(chunks, chunks[1:], strict=False))
    assert e.user_chunks()[-1][1] == e.n_users and e.resource_chunks()[-1][1] == e.n_resources


@pytest.mark.parametrize(("seed", "shape"), [*SHAPES, (3, "cycles"), (4, "deep"), (5, "managers")])
def test_the_expansion_equals_the_oracle_on_random_small_graphs(tmp_path, seed, shape):
    ds = write_tables(tmp_path / "ds", random_graph(seed, shape), ENT)
    assert_expansion_equals_oracle(ds)
    assert_expansion_equals_oracle(ds, chunk_pairs=3)


def test_a_cycle_resources_without_org_and_ids_past_the_manifest(tmp_path):
    graph = dict(HAND, group_child=([0, 1, 2], [1, 2, 0]), resource_org=([0, 1], [0, 1]),
                 group_member=([2, 3], [1, 7]), resource_viewer_user=([2, 4], [4, 8]))
    e = assert_expansion_equals_oracle(write_tables(tmp_path, graph, ENTITIES))
    assert (e.n_users, e.n_groups, e.n_resources) == (9, 4, 5)


def test_an_empty_dataset_expands_to_nothing(tmp_path):
    e = Expansion(write_tables(tmp_path, {}, ENTITIES))
    assert e.total("view") == 0 and len(e.user_groups()[0]) == 0
    assert all(len(m) == len(v) == 0 for m, v in e.iter_user_keys())


def test_stepped_computes_each_item_in_the_step_before_it():
    produced: list[int] = []
    out = stepped(produced.append(i) or i for i in range(3))
    first = next(out)
    assert isinstance(first, Step) and first.name == "closure_seconds" and produced == []
    first.run()
    assert produced == [0] and next(out) == 0
    assert list(chunks_of(out)) == [1, 2]
