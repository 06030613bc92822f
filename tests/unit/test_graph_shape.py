"""`authzbench stats`' shape figures on a graph small enough to count by hand: degrees with nearest-rank
percentiles, the shape sweep's four parameters, the heaviest users and groups, the ratio to another graph."""

from __future__ import annotations

import pytest

from authzbench.generator import write_tables
from authzbench.workloads.graph_shape import heaviest, nesting_depth, relation_table, shape, shape_against

ENTITIES = {"organization": 1, "user": 4, "group": 3, "resource": 2}
TABLES = {
    "org_member": ([0, 0, 0, 0], [0, 1, 2, 3]), "org_admin": ([0], [0]),
    "group_org": ([0, 1, 2], [0, 0, 0]),
    "group_member": ([0, 0, 0, 1, 2], [0, 1, 2, 1, 3]),  # per group 3, 1, 1; per user 1, 2, 1, 1
    "group_child": ([0, 1], [1, 2]),  # g0 > g1 > g2: two levels
    "resource_org": ([0, 1], [0, 0]),
    "resource_viewer_user": ([0, 0, 0, 1], [0, 1, 2, 0]),
    "resource_manager_user": ([1], [3]),
    "resource_viewer_group": ([0], [0]),
}


@pytest.fixture(scope="module")
def ds(tmp_path_factory):
    return write_tables(tmp_path_factory.mktemp("g") / "ds", TABLES, ENTITIES)


def test_each_relation_side_has_its_degree_distribution(ds):
    rows = {(r["relation"], r["per"]): r for r in relation_table(ds)}
    per_group = rows[("group_member", "group")]
    assert per_group == {"relation": "group_member", "per": "group", "rows": 5, "with": 3, "mean": 5 / 3,
                         "min": 1, "p50": 1, "p90": 3, "p99": 3, "max": 3}
    assert rows[("group_member", "user")]["mean"] == 1.25 and rows[("group_member", "user")]["max"] == 2
    assert rows[("resource_manager_group", "resource")]["with"] == 0, "an empty relation has a row of zeros"


def test_the_shape_parameters_are_counted_from_the_graph(ds):
    assert shape(ds) == {"nesting depth": 2.0, "groups per user": 1.25, "viewers per resource": 2.0,
                         "ACL density (entries per resource)": 3.0}


def test_a_graph_against_itself_has_every_ratio_one(ds):
    assert [r["ratio"] for r in shape_against(ds, ds)] == [1.0, 1.0, 1.0, 1.0]


def test_the_longest_path_counts_when_a_group_has_two_parents(tmp_path):
    # 0 > 1 > 2 > 3 and 0 > 3: depth 3, not 1
    t = write_tables(tmp_path / "d", {"group_child": ([0, 1, 2, 0], [1, 2, 3, 3])},
                     {"organization": 1, "user": 1, "group": 4, "resource": 0})
    assert nesting_depth(t) == 3


def test_the_heaviest_user_and_group_come_first(ds):
    h = heaviest(ds, k=2)
    assert h["users"][0] == {"user": 0, "direct ACL entries": 2}
    assert h["groups"][0] == {"group": 0, "direct members": 3, "ACL entries": 1}
