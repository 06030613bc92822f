"""The reference suite's CSV layout (ifundeasy/test-rlp, cmd/csv/generate.go) as the model's edges.

Every column maps onto a relation of the rebac model, or is named in MAPPING as read but not kept; a value the
model has no relation for (a hierarchy row of relation manager_group: "the child's managers manage the
parent", which the model cannot say) is yielded under its own name, so the writer refuses or drops it.
"""

from __future__ import annotations

import csv
from collections.abc import Callable, Iterator
from pathlib import Path

from authzbench.core.errors import UserError
from authzbench.imports.edges import Edge
from authzbench.imports.graph import declare, malformed

# file -> its header, as the reference's generator writes it
HEADERS: dict[str, tuple[str, ...]] = {
    "organizations.csv": ("org_id",),
    "users.csv": ("user_id", "primary_org_id"),
    "org_memberships.csv": ("org_id", "user_id", "role"),
    "groups.csv": ("group_id", "org_id"),
    "group_memberships.csv": ("group_id", "user_id", "role"),
    "group_hierarchy.csv": ("parent_group_id", "child_group_id", "relation"),
    "resources.csv": ("resource_id", "org_id"),
    "resource_acl.csv": ("resource_id", "subject_type", "subject_id", "relation"),
}

# How each column becomes the model's (recorded in the manifest's origin).
MAPPING: dict[str, str] = {
    "organizations.csv": "org_id declares an organization",
    "users.csv": "user_id declares a user; primary_org_id is read, not kept (the model has no such relation)",
    "org_memberships.csv": "role=member: org_member(org, user); role=admin: org_admin and org_member (the "
                           "reference's member permission includes admin)",
    "groups.csv": "group_org(group, org)",
    "group_memberships.csv": "role=direct_member: group_member(group, user); role=direct_manager: "
                             "group_manager(group, user)",
    "group_hierarchy.csv": "relation=member_group: group_child(parent, child); relation=manager_group has no "
                           "relation in the model",
    "resources.csv": "resource_org(resource, org)",
    "resource_acl.csv": "user/manager_user, group/manager_group, user/viewer_user, group/viewer_group: "
                        "resource_manager_user, resource_manager_group, resource_viewer_user, "
                        "resource_viewer_group (resource, subject)",
    "semantics": "the rebac model's, not the reference's schema: a manager_group grants manage to the "
                 "group's whole membership (the reference's: to its managers only), and organization "
                 "membership alone grants no view (the reference's view includes org->member)",
}

_ORG_ROLES = {"member": ("org_member",), "admin": ("org_admin", "org_member")}
_GROUP_ROLES = {"direct_member": "group_member", "direct_manager": "group_manager"}
_ACL = {("user", "manager_user"): "resource_manager_user",
        ("group", "manager_group"): "resource_manager_group",
        ("user", "viewer_user"): "resource_viewer_user", ("group", "viewer_group"): "resource_viewer_group"}


def _organizations(r: list[str], where: str) -> Iterator[Edge]:
    yield declare("organization", r[0], where)


def _users(r: list[str], where: str) -> Iterator[Edge]:
    yield declare("user", r[0], where)


def _org_memberships(r: list[str], where: str) -> Iterator[Edge]:
    for rel in _ORG_ROLES.get(r[2], (f"org_memberships.role={r[2]}",)):
        yield Edge(rel, r[0], r[1], where)


def _groups(r: list[str], where: str) -> Iterator[Edge]:
    yield Edge("group_org", r[0], r[1], where)


def _group_memberships(r: list[str], where: str) -> Iterator[Edge]:
    yield Edge(_GROUP_ROLES.get(r[2], f"group_memberships.role={r[2]}"), r[0], r[1], where)


def _group_hierarchy(r: list[str], where: str) -> Iterator[Edge]:
    rel = "group_child" if r[2] == "member_group" else f"group_hierarchy.relation={r[2]}"
    yield Edge(rel, r[0], r[1], where)


def _resources(r: list[str], where: str) -> Iterator[Edge]:
    yield Edge("resource_org", r[0], r[1], where)


def _resource_acl(r: list[str], where: str) -> Iterator[Edge]:
    rel = _ACL.get((r[1], r[3]), f"resource_acl.subject_type={r[1]},relation={r[3]}")
    yield Edge(rel, r[0], r[2], where)


_ROWS: dict[str, Callable[[list[str], str], Iterator[Edge]]] = {
    "organizations.csv": _organizations, "users.csv": _users, "org_memberships.csv": _org_memberships,
    "groups.csv": _groups, "group_memberships.csv": _group_memberships,
    "group_hierarchy.csv": _group_hierarchy, "resources.csv": _resources, "resource_acl.csv": _resource_acl}


def files(path: Path) -> list[Path]:
    """The eight files under `path`, refused together before any is read when one is missing."""
    if not path.is_dir():
        raise UserError(f"--path {path}: not a directory (the reference suite's data/ dir of CSV files)")
    missing = [name for name in HEADERS if not (path / name).is_file()]
    if missing:
        raise UserError(
            f"--path {path}: no {', '.join(missing)} (the reference layout has {', '.join(HEADERS)})")
    return [path / name for name in HEADERS]


def edges(path: Path) -> Iterator[Edge]:
    """Every row of every file as the model's edges (declarations first: organizations, users)."""
    for f in files(path):
        yield from _file_edges(f)


def _file_edges(f: Path) -> Iterator[Edge]:
    header, rows = HEADERS[f.name], _ROWS[f.name]
    with open(f, newline="", encoding="utf-8") as fh:
        reader = csv.reader(fh)
        try:
            first = next(reader, None)
            if first is None or tuple(c.strip() for c in first) != header:
                yield malformed(f"{f.name}:1", f"header is {first!r}, expected {','.join(header)}")
                return
            for row in reader:
                where = f"{f.name}:{reader.line_num}"
                if len(row) != len(header):
                    yield malformed(where, f"{len(row)} columns, expected {len(header)} ({','.join(header)})")
                elif not all(c.strip() for c in row):
                    yield malformed(where, f"an empty value in {row!r}")
                else:
                    yield from rows([c.strip() for c in row], where)
        except (csv.Error, UnicodeDecodeError) as e:
            yield malformed(f"{f.name}:{reader.line_num}", f"not CSV: {e}")
