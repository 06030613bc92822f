"""The oracle built from compact indexes answers exactly as the full closure does, on every pair."""

from __future__ import annotations

import numpy as np
import pytest

from authzbench.generator import generate, write_tables
from authzbench.schema.closure import permission_keys
from authzbench.schema.model import PERMISSIONS
from authzbench.truth.oracle import Oracle
from tests.unit.test_oracle import ENTITIES, HAND


def _assert_equals_full_closure(o: Oracle, full: dict[str, np.ndarray]) -> None:
    n_res = o.n_resources
    for i, perm in enumerate(PERMISSIONS):
        keys = full[perm]
        truth = np.zeros(o.n_users * n_res, dtype=bool)
        truth[keys] = True
        got = np.array([o.check(u, perm, r) for u in range(o.n_users) for r in range(n_res)])
        assert np.array_equal(got, truth), f"check differs on {int((got != truth).sum())} {perm} pairs"
        for u in range(o.n_users):
            assert o.lookup_resources(u, perm) == np.flatnonzero(truth[u * n_res:(u + 1) * n_res]).tolist()
        assert np.array_equal(o.count_by_user(perm), np.bincount(keys // n_res, minlength=o.n_users))
        assert o.total(perm) == len(keys)
        assert np.array_equal(np.concatenate([k[i] for k in o.iter_keys()]), keys)


@pytest.mark.parametrize("sets", [{}, {"child_group_share": "0.9", "orgs": "4"}])
def test_every_pair_of_a_generated_profile_matches_the_full_closure(tmp_path, sets):
    ds = generate("tiny", tmp_path / "ds", overrides=sets)
    _assert_equals_full_closure(Oracle(ds), permission_keys(ds))


def test_tiny_chunks_and_split_bitmaps_give_the_same_answers(tmp_path):
    """Chunks of a few pairs and bitmaps of one org's width force every user range to be split."""
    ds = generate("tiny", tmp_path / "ds")
    o = Oracle(ds, chunk_pairs=50, bitmap_cells=1)
    assert len(list(o.chunks())) > 5
    _assert_equals_full_closure(o, permission_keys(ds))


def test_cyclic_hierarchy_and_resources_without_org_match_the_full_closure(tmp_path):
    graph = dict(HAND, group_child=([0, 1, 2], [1, 2, 0]), resource_org=([0, 1], [0, 1]))
    ds = write_tables(tmp_path, graph, ENTITIES)
    _assert_equals_full_closure(Oracle(ds), permission_keys(ds))


def test_the_oracle_holds_indexes_not_the_closure(tmp_path):
    """Its memory is O(relationships): at baseline the view closure alone is 4.4M keys (35 MB)."""
    ds = generate("baseline", tmp_path / "ds")
    o = Oracle(ds)
    closure_bytes = 8 * o.total("view")
    assert o.nbytes < closure_bytes / 4
    assert "keys" not in o.__dict__  # the full closure was never materialized
