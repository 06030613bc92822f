"""The reference's distribution table and the scenario anchors, computed from a dataset."""

from __future__ import annotations

import numpy as np
import pandas as pd

from authzbench.schema.dataset import Dataset
from authzbench.truth.oracle import Oracle
from authzbench.workloads.catalog import SCENARIOS, heavy_manage_user, regular_view_user
from authzbench.workloads.graph_shape import PERCENTILES, degrees


def _row(name: str, counts: np.ndarray, notes: str) -> dict:
    """The reference table's row (mean, min, max over the entities with at least one) and percentiles."""
    d = degrees(counts)
    return {"relationship": name, **{k: d[k] for k in ("mean", "min", "max", *PCT)}, "notes": notes}


PCT = tuple(f"p{q}" for q in PERCENTILES)


def _per(df: pd.DataFrame, col: str, n: int) -> np.ndarray:
    return np.bincount(df[col].to_numpy(), minlength=n)


# What the reference report generated and measured (its configuration line says otherwise; these are
# the totals of its tables): `baseline` is calibrated to them.
REFERENCE_TOTALS = {
    "organizations": 16, "users": 1950, "org memberships": 4117, "groups": 170, "group memberships": 13441,
    "hierarchy edges": 14, "resources": 22084, "ACL entries": 364983}


def totals(ds: Dataset) -> dict[str, int]:
    """The reference's headline totals, counted in the dataset (rebac)."""
    e, c = ds.entities, ds.counts
    return {"organizations": e["organization"], "users": e["user"], "org memberships": c["org_member"],
            "groups": e["group"], "group memberships": c["group_member"], "hierarchy edges": c["group_child"],
            "resources": e["resource"], "ACL entries": ds.acl_relationships}


def totals_table(ds: Dataset):
    """A rich table of the totals beside the reference's, with the difference in %."""
    from rich.table import Table

    t = Table(title=f"Totals — {ds.profile} vs the reference report's dataset")
    for c in ("", "this dataset", "reference", "difference"):
        t.add_column(c, justify="left" if not c else "right")
    for k, v in totals(ds).items():
        ref = REFERENCE_TOTALS[k]
        t.add_row(k, f"{v:,}", f"{ref:,}", f"{(v - ref) / ref:+.1%}")
    return t


def social_distribution(ds: Dataset) -> list[dict]:
    e = ds.entities
    f, co = ds.table("user_follower"), ds.table("content_owner")
    ip = ds.table("interaction_parent")
    return [
        _row("user→followers", _per(f, "object", e["user"]), "Pareto: a few users have most followers"),
        _row("user→following", _per(f, "subject", e["user"]), "follows per user"),
        _row("user→content (owner)", _per(co, "subject", e["user"]), "a few users own most content"),
        _row("content→interactions", _per(ip, "subject", e["content"]), "popular content draws comments"),
        _row("user→blocked", _per(ds.table("user_blocked"), "object", e["user"]), "exclusion paths"),
        {"relationship": "public users / content", "mean": float("nan"),
         "min": len(ds.table("user_public")), "max": len(ds.table("content_public")),
         "notes": "wildcard visibility rows (min column: users, max column: content)"},
    ]


def distribution(ds: Dataset, oracle: Oracle | None = None) -> list[dict]:
    if ds.model == "social":
        return social_distribution(ds)
    e = ds.entities
    om, gm, gmg, gc = (ds.table(r) for r in ("org_member", "group_member", "group_manager", "group_child"))
    direct = pd.concat([ds.table("resource_manager_user"), ds.table("resource_viewer_user")])
    rows = [
        _row("org→users", _per(om, "object", e["organization"]), "members per organization"),
        _row("user→orgs", _per(om, "subject", e["user"]), "organizations per user (1-8)"),
        _row("group→direct_members", _per(gm, "object", e["group"]), "fan-out hotspots at the top"),
        _row("group→direct_managers", _per(gmg, "object", e["group"]),
             f"{int((_per(gmg, 'object', e['group']) > 0).sum())} groups have managers"),
        _row("user→groups", _per(gm, "subject", e["user"]), "direct memberships per user"),
        _row("parent_group→child_groups", _per(gc, "object", e["group"]),
             f"{int((_per(gc, 'object', e['group']) > 0).sum())} parents; shallow hierarchy"),
        _row("user→resources (direct ACL)", _per(direct, "subject", e["user"]),
             f"{int((_per(direct, 'subject', e['user']) > 0).sum()):,} users with ≥1 direct entry"),
        _row("resource→users (direct ACL)", _per(direct, "object", e["resource"]), "manager + viewer users"),
    ]
    if oracle is not None:
        rows += [
            _row("user→manage (closure)", oracle.count_by_user("manage"),
                 "what lookup_resources(manage) returns"),
            _row("user→view (closure)", oracle.count_by_user("view"), "what lookup_resources(view) returns")]
    return rows


def anchors(oracle: Oracle) -> dict[str, int]:
    heavy, regular = heavy_manage_user(oracle), regular_view_user(oracle)
    return {
        "LOOKUPRES_MANAGE_USER": heavy, "manage resources of it": int(oracle.count_by_user("manage")[heavy]),
        "LOOKUPRES_VIEW_USER": regular, "view resources of it": int(oracle.count_by_user("view")[regular])}


def sampled_inputs(ds: Dataset, oracle: Oracle, n: int = 5) -> dict[str, list]:
    """The first n inputs of each check scenario, as the runner will issue them."""
    return {name: [(args, exp) for _, args, exp in sc.sampler(ds, oracle, n)]
            for name, sc in SCENARIOS.items() if sc.op == "check" and sc.model == ds.model}
