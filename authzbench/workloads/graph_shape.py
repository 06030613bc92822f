"""A rebac graph's shape, whoever made it: each relation's degree distribution (mean, min, percentiles, max),
the four parameters the shape sweep varies, the heaviest users and groups, and each parameter's ratio to
another dataset's (`baseline`'s, in `authzbench stats`)."""

from __future__ import annotations

from collections import defaultdict

import numpy as np

from authzbench.schema.dataset import Dataset
from authzbench.schema.model import ACL_RELATIONS, relation_defs

PERCENTILES = (50, 90, 99)


def degrees(counts: np.ndarray) -> dict:
    """mean/min/percentiles/max over the entities with at least one edge (as the reference's table counts).
    Percentiles by nearest rank: a degree is a whole number, so every figure is one some entity has."""
    c = counts[counts > 0]
    if len(c) == 0:
        return {"with": 0, "mean": float("nan"), "min": 0, **{f"p{q}": 0 for q in PERCENTILES}, "max": 0}
    pct = np.percentile(c, PERCENTILES, method="inverted_cdf")
    return {"with": int(len(c)), "mean": float(c.mean()), "min": int(c.min()),
            **{f"p{q}": int(v) for q, v in zip(PERCENTILES, pct, strict=True)}, "max": int(c.max())}


def relation_table(ds: Dataset) -> list[dict]:
    """Per relation and per side: 'group_member per group' is each group's direct members."""
    rows = []
    for rel, d in relation_defs(ds.model).items():
        if rel not in ds.counts:
            continue
        t = ds.table(rel)
        for side, kind in (("object", d.object_type), ("subject", d.subject_type)):
            if d.wildcard and side == "subject":
                continue
            per = np.bincount(t[side].to_numpy(), minlength=ds.entities[kind])
            name = f"{kind} ({side})" if d.object_type == d.subject_type else kind  # group_child's two ends
            rows.append({"relation": rel, "per": name, "rows": int(len(t)), **degrees(per)})
    return rows


def nesting_depth(ds: Dataset) -> int:
    """The most group_child edges on one parent -> child path (0: no nesting). The import refuses cycles;
    the generator makes none."""
    t = ds.table("group_child")
    children: dict[int, list[int]] = defaultdict(list)
    indeg: dict[int, int] = defaultdict(int)
    for p, c in zip(t["object"].tolist(), t["subject"].tolist(), strict=True):
        children[p].append(c)
        indeg[c] += 1
    depth = {g: 0 for g in children if indeg[g] == 0}
    frontier, best = list(depth), 0
    while frontier:  # Kahn's order: a group's depth is final once every parent is done
        g = frontier.pop()
        for c in children.get(g, []):
            depth[c] = max(depth.get(c, 0), depth[g] + 1)
            best = max(best, depth[c])
            indeg[c] -= 1
            if indeg[c] == 0:
                frontier.append(c)
    return best


def shape(ds: Dataset) -> dict[str, float]:
    """The shape sweep's parameters (generator/shape_params.py) as measured: nesting depth, mean direct groups
    of a user in any group, mean viewer users of a resource, and ACL entries per resource."""
    e = ds.entities
    gm = np.bincount(ds.table("group_member")["subject"].to_numpy(), minlength=e["user"])
    resources = max(e["resource"], 1)
    return {"nesting depth": float(nesting_depth(ds)),
            "groups per user": float(gm[gm > 0].mean()) if (gm > 0).any() else 0.0,
            "viewers per resource": ds.counts.get("resource_viewer_user", 0) / resources,
            "ACL density (entries per resource)": ds.acl_relationships / resources}


def shape_against(ds: Dataset, other: Dataset) -> list[dict]:
    a, b = shape(ds), shape(other)
    return [{"parameter": k, "this": a[k], "other": b[k], "ratio": a[k] / b[k] if b[k] else float("nan")}
            for k in a]


def heaviest(ds: Dataset, view_counts: np.ndarray | None = None, k: int = 5) -> dict[str, list[dict]]:
    """The k users with the most direct ACL entries (with their view closure when given) and the k groups
    with the most direct members (with the ACL entries that name them)."""
    e = ds.entities
    direct = sum(np.bincount(ds.table(r)["subject"].to_numpy(), minlength=e["user"])
                 for r in ACL_RELATIONS if r.endswith("_user"))
    grants = sum(np.bincount(ds.table(r)["subject"].to_numpy(), minlength=e["group"])
                 for r in ACL_RELATIONS if r.endswith("_group"))
    members = np.bincount(ds.table("group_member")["object"].to_numpy(), minlength=e["group"])
    users = [{"user": int(u), "direct ACL entries": int(direct[u]),
              **({"view (closure)": int(view_counts[u])} if view_counts is not None else {})}
             for u in np.argsort(-direct, kind="stable")[:k]]
    groups = [{"group": int(g), "direct members": int(members[g]), "ACL entries": int(grants[g])}
              for g in np.argsort(-members, kind="stable")[:k]]
    return {"users": users, "groups": groups}
