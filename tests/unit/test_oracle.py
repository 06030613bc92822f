"""The oracle on small graphs whose answers are worked out by hand."""

from __future__ import annotations

import pytest

from authzbench.generator import write_tables
from authzbench.truth.oracle import Oracle

# users: 0 alice (org admin), 1 bob (deep member), 2 carol (manager of child group), 3 dave (no access),
#        4 erin (direct viewer), 5 frank (direct manager)
# groups: 0 top, 1 mid (child of top), 2 leaf (child of mid): nested 3 deep
# resources: 0 in org 0 managed by group top; 1 in org 1 viewed by group top; 2 in org 1 plain
HAND = {
    "org_admin": ([0], [0]),
    "org_member": ([0, 0, 0, 1, 1, 1], [0, 1, 2, 3, 4, 5]),
    "group_org": ([0, 1, 2], [0, 0, 0]),
    "group_member": ([2], [1]),
    "group_manager": ([1], [2]),
    "group_child": ([0, 1], [1, 2]),
    "resource_org": ([0, 1, 2], [0, 1, 1]),
    "resource_manager_user": ([2], [5]),
    "resource_manager_group": ([0], [0]),
    "resource_viewer_user": ([2], [4]),
    "resource_viewer_group": ([1], [0]),
}
ENTITIES = {"organization": 2, "user": 6, "group": 3, "resource": 3}


@pytest.fixture(scope="module")
def oracle(tmp_path_factory) -> Oracle:
    return Oracle(write_tables(tmp_path_factory.mktemp("hand"), HAND, ENTITIES))


def test_member_of_a_group_nested_three_deep_inherits_manage(oracle):
    assert oracle.check(1, "manage", 0)  # bob: leaf -> mid -> top, top manages resource 0


def test_manager_of_a_child_group_is_a_member_of_its_parent(oracle):
    assert oracle.check(2, "manage", 0)  # carol manages mid, mid is a child of top
    assert oracle.check(2, "view", 1)  # top views resource 1


def test_org_admin_manages_every_resource_of_the_org_only(oracle):
    assert oracle.check(0, "manage", 0)
    assert not oracle.check(0, "manage", 1)  # resource 1 is in org 1


def test_manage_implies_view(oracle):
    assert oracle.lookup_resources(1, "view") == [0, 1]
    assert oracle.lookup_resources(5, "view") == [2]


def test_direct_viewer_cannot_manage(oracle):
    assert oracle.check(4, "view", 2)
    assert not oracle.check(4, "manage", 2)


def test_user_without_access_sees_nothing(oracle):
    assert oracle.lookup_resources(3, "view") == []
    assert not any(oracle.check(3, p, r) for p in ("manage", "view") for r in range(3))


def test_lookup_lists_exactly_the_manageable_resources(oracle):
    assert oracle.lookup_resources(0, "manage") == [0]
    assert oracle.lookup_resources(2, "manage") == [0]
    assert oracle.count_by_user("view").tolist() == [1, 2, 2, 0, 1, 1]


def test_cyclic_hierarchy_terminates_and_shares_members(tmp_path):
    cyclic = dict(HAND, group_child=([0, 1, 2], [1, 2, 0]))  # top -> mid -> leaf -> top
    o = Oracle(write_tables(tmp_path, cyclic, ENTITIES))
    # In a cycle every group's membership is the union of all three.
    assert o.check(1, "manage", 0) and o.check(2, "manage", 0)
    assert o.lookup_resources(1, "view") == [0, 1]
