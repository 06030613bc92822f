"""A dataset written back out in the reference suite's CSV layout (ids + 1, as its generator numbers them):
what the round-trip tests import again."""

from __future__ import annotations

import csv
from pathlib import Path

from authzbench.imports.reference_csv import HEADERS
from authzbench.schema.dataset import Dataset

_ACL = {"resource_manager_user": ("user", "manager_user"),
        "resource_manager_group": ("group", "manager_group"),
        "resource_viewer_user": ("user", "viewer_user"), "resource_viewer_group": ("group", "viewer_group")}


def _pairs(ds: Dataset, rel: str) -> list[tuple[int, int]]:
    t = ds.table(rel)
    return [(o + 1, s + 1) for o, s in zip(t["object"].tolist(), t["subject"].tolist(), strict=True)]


def write_reference_csv(ds: Dataset, out: Path) -> Path:
    """Every relation of a rebac dataset as the eight CSV files; org_member rows of org admins say `admin`."""
    out.mkdir(parents=True, exist_ok=True)
    admins = set(_pairs(ds, "org_admin"))
    members = set(_pairs(ds, "org_member"))
    if not admins <= members:
        raise ValueError("an org admin who is not a member cannot be written (role admin means both)")
    rows: dict[str, list[tuple]] = {
        "organizations.csv": [(o,) for o in range(1, ds.entities["organization"] + 1)],
        "users.csv": [(u, 1) for u in range(1, ds.entities["user"] + 1)],
        "org_memberships.csv": [(o, u, "admin" if (o, u) in admins else "member")
                                for o, u in sorted(members)],
        "groups.csv": _pairs(ds, "group_org"),
        "group_memberships.csv": [(g, u, "direct_member") for g, u in _pairs(ds, "group_member")]
        + [(g, u, "direct_manager") for g, u in _pairs(ds, "group_manager")],
        "group_hierarchy.csv": [(p, c, "member_group") for p, c in _pairs(ds, "group_child")],
        "resources.csv": _pairs(ds, "resource_org"),
        "resource_acl.csv": [(r, _ACL[rel][0], s, _ACL[rel][1])
                             for rel in _ACL for r, s in _pairs(ds, rel)],
    }
    for name, header in HEADERS.items():
        with open(out / name, "w", newline="") as fh:
            w = csv.writer(fh)
            w.writerow(header)
            w.writerows(rows[name])
    return out


def write_csvs(out: Path, **files: list[str]) -> Path:
    """A small reference-layout dir: each keyword (file stem) is its rows as "a,b,c" lines after the header;
    files not given are written with their header only."""
    out.mkdir(parents=True, exist_ok=True)
    for name, header in HEADERS.items():
        lines = [",".join(header), *files.get(name.removesuffix(".csv"), [])]
        (out / name).write_text("\n".join(lines) + "\n")
    return out
