"""The rebac graph generator: Pareto-skewed, deterministic, vectorized, chunked by organization.

Shape: users join 1..8 orgs (popular orgs get more), join Pareto-weighted groups of their orgs, and
are picked for resource ACLs with Pareto weights, so a few users hold hundreds of resources and a
few groups hold hundreds of members, as in the reference's distribution table.
Every random stream is seeded by (seed, stream, chunk): output does not depend on timing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np

from authzbench.generator.profiles import RebacParams
from authzbench.schema.closure import sorted_unique

Emit = Callable[[str, np.ndarray, np.ndarray], None]  # relation, object ids, subject ids

# Stream ids for np.random.default_rng([seed, stream, chunk]).
_USERS, _ORG_MEMBERS, _ADMINS, _GROUPS, _GROUP_MEMBERS, _GROUP_MANAGERS, _HIERARCHY, _RESOURCES = range(8)


def _rng(p: RebacParams, stream: int, chunk: int = 0) -> np.random.Generator:
    return np.random.default_rng([p.seed, stream, chunk])


def _pareto(rng: np.random.Generator, alpha: float, n: int) -> np.ndarray:
    return rng.pareto(alpha, n) + 1.0  # classic Pareto with x_m = 1


def sample_in_slices(
    rng: np.random.Generator, cum: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """One weighted draw (with replacement) per request i from items [start[i], end[i]).

    `cum` is the prefix sum of the flattened weights with a leading 0, so every draw is a single
    searchsorted: the whole sample is vectorized, whatever the number of slices.
    """
    lo, hi = cum[start], cum[end]
    u = lo + rng.random(len(start)) * (hi - lo)
    idx = np.searchsorted(cum, u, side="right") - 1
    return np.clip(idx, start, end - 1)


def _unique_pairs(obj: np.ndarray, sub: np.ndarray, n_sub: int) -> tuple[np.ndarray, np.ndarray]:
    """Deduplicate and sort (object, subject) pairs."""
    key = sorted_unique(obj.astype(np.int64) * n_sub + sub.astype(np.int64))
    return (key // n_sub).astype(np.int32), (key % n_sub).astype(np.int32)


def _top_k_per_row(
    rng: np.random.Generator, log_w: np.ndarray, k: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Weighted sampling without replacement (Gumbel top-k) of k[i] columns in each row i."""
    keys = log_w + rng.gumbel(size=log_w.shape)
    order = np.argsort(-keys, axis=1)
    rank_ok = np.arange(log_w.shape[1])[None, :] < k[:, None]
    rows = np.broadcast_to(np.arange(log_w.shape[0])[:, None], order.shape)
    return rows[rank_ok], order[rank_ok]


def n_users(p: RebacParams) -> int:
    return max(1, round(p.orgs * p.users_per_org / p.orgs_per_user))


def entities(p: RebacParams) -> dict[str, int]:
    return {"organization": p.orgs, "user": n_users(p), "group": p.orgs * p.groups_per_org,
            "resource": p.orgs * p.resources_per_org}


def approx_relationships(p: RebacParams) -> float:
    """About how many relationships `generate` emits, before generating (for a sweep's time estimate): org
    memberships, group memberships and each resource's grants."""
    # baseline: 396,491 against the 401,577 generated (the hierarchy and the pools' rounding are left out)
    members = p.orgs * p.users_per_org
    grants = (
        p.manager_users_per_res + p.manager_groups_per_res + p.viewer_users_per_res + p.viewer_groups_per_res)
    return members * (1 + p.groups_per_user) + p.orgs * (p.admins_per_org + p.resources_per_org * grants)


def generate(p: RebacParams, emit: Emit) -> None:
    """Generate every relation, calling emit(relation, objects, subjects) chunk by chunk.

    Each relation's chunks arrive in increasing object order, each sorted by (object, subject). The steps
    run in this order and each reads the arrays of the ones before it (memberships, weights, group ids);
    every step draws from its own random stream (seed, stream, chunk).
    """
    U, G, n_orgs = n_users(p), p.orgs * p.groups_per_org, p.orgs
    user_w = _pareto(_rng(p, _USERS), p.pareto_alpha, U)
    org_w = _pareto(_rng(p, _USERS, 1), p.pareto_alpha, n_orgs)
    if p.org_weight_cap > 0:
        org_w = np.minimum(org_w, p.org_weight_cap)

    # Org memberships: each user joins k orgs (geometric, mean orgs_per_user), popular orgs favoured.
    org_of, user_of = _org_memberships(p, U, n_orgs, org_w)
    emit("org_member", org_of, user_of)
    org_of, user_of, mem_start, mem_end = _every_org_has_a_member(org_of, user_of, user_w, n_orgs)
    mem_cum = np.concatenate([[0.0], np.cumsum(np.minimum(user_w, p.acl_weight_cap)[user_of])])
    emit("org_admin", *_org_admins(p, org_of, user_of, mem_start, U))

    # Groups: contiguous ids per org; group g belongs to org g // groups_per_org.
    group_org = np.repeat(np.arange(n_orgs, dtype=np.int32), p.groups_per_org)
    emit("group_org", np.arange(G, dtype=np.int32), group_org)
    group_w = _pareto(_rng(p, _GROUPS), p.pareto_alpha, G)
    if p.group_weight_cap > 0:
        group_w = np.minimum(group_w, p.group_weight_cap)
    group_cum = np.concatenate([[0.0], np.cumsum(group_w)])
    emit("group_member", *_group_members(p, org_of, user_of, user_w, group_w, U))
    emit("group_manager", *_group_managers(p, group_org, user_of, (mem_cum, mem_start, mem_end), U, G))
    emit("group_child", *_hierarchy(p, group_org, G))

    # Resources, chunked by org so that xl runs in bounded memory.
    for lo, hi in _chunks(n_orgs, p.chunk_orgs):
        _resources(p, lo, hi, emit, _Pools(user_of, mem_cum, mem_start, mem_end, group_cum, U, G))


def _every_org_has_a_member(org_of: np.ndarray, user_of: np.ndarray, user_w: np.ndarray,
                            n_orgs: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(org_of, user_of, first, end) of each org's memberships. An org without members cannot hold groups or
    ACLs: it gets the heaviest user (not emitted as org_member: only groups and ACLs draw from it)."""
    mem_start = np.searchsorted(org_of, np.arange(n_orgs), side="left")
    mem_end = np.searchsorted(org_of, np.arange(n_orgs), side="right")
    if np.any(mem_end == mem_start):
        empty = np.flatnonzero(mem_end == mem_start)
        org_of = np.concatenate([org_of, empty.astype(np.int32)])
        user_of = np.concatenate([user_of, np.full(len(empty), int(np.argmax(user_w)), np.int32)])
        order = np.lexsort((user_of, org_of))
        org_of, user_of = org_of[order], user_of[order]
        mem_start = np.searchsorted(org_of, np.arange(n_orgs), side="left")
        mem_end = np.searchsorted(org_of, np.arange(n_orgs), side="right")
    return org_of, user_of, mem_start, mem_end


def _org_admins(p: RebacParams, org_of: np.ndarray, user_of: np.ndarray, mem_start: np.ndarray,
                U: int) -> tuple[np.ndarray, np.ndarray]:
    """Distinct members picked uniformly (by activity, the heaviest users would administer every org they are
    in and dwarf every other path to "manage")."""
    rng = _rng(p, _ADMINS)
    keys = rng.random(len(user_of))
    order = np.lexsort((-keys, org_of))
    rank = np.arange(len(order)) - mem_start[org_of[order]]
    pick = order[rank < p.admins_per_org]
    return _unique_pairs(org_of[pick], user_of[pick], U)


def _group_members(p: RebacParams, org_of: np.ndarray, user_of: np.ndarray, user_w: np.ndarray,
                   group_w: np.ndarray, U: int) -> tuple[np.ndarray, np.ndarray]:
    """Per org membership, 1 + Poisson(groups_per_user - 1) groups of that org, more for active users."""
    gpo = p.groups_per_org
    rng = _rng(p, _GROUP_MEMBERS)
    activity = user_w[user_of] / user_w.mean()
    k = np.minimum(1 + rng.poisson((p.groups_per_user - 1) * np.sqrt(activity)), gpo)
    rows, cols = _top_k_per_row(rng, np.log(group_w).reshape(p.orgs, gpo)[org_of], k)
    return _unique_pairs(org_of[rows] * gpo + cols, user_of[rows], U)


def _group_managers(
    p: RebacParams, group_org: np.ndarray, user_of: np.ndarray,
    members: tuple[np.ndarray, np.ndarray, np.ndarray], U: int, G: int) -> tuple[np.ndarray, np.ndarray]:
    """A share of groups get 1-3 managers from their org's members (members: mem_cum, mem_start, mem_end)."""
    mem_cum, mem_start, mem_end = members
    rng = _rng(p, _GROUP_MANAGERS)
    managed = np.flatnonzero(rng.random(G) < p.group_manager_share)
    n_mgr = rng.integers(1, 4, len(managed))
    g_rep = np.repeat(managed, n_mgr)
    o_rep = group_org[g_rep]
    idx = sample_in_slices(rng, mem_cum, mem_start[o_rep], mem_end[o_rep])
    return _unique_pairs(g_rep, user_of[idx], U)


def _hierarchy(p: RebacParams, group_org: np.ndarray, G: int) -> tuple[np.ndarray, np.ndarray]:
    """A share of groups become children of an earlier group of the same org -> acyclic; with group_depth,
    one chain of that depth per org instead."""
    gpo = p.groups_per_org
    rng = _rng(p, _HIERARCHY)
    local = np.tile(np.arange(gpo), p.orgs)
    if p.group_depth > 0:  # one chain per org: local group i in i - 1, for i = 1..depth
        child = np.flatnonzero((local > 0) & (local <= p.group_depth))
        return _unique_pairs(child - 1, child, G)
    is_child = (local > 0) & (rng.random(G) < p.child_group_share)
    child = np.flatnonzero(is_child)
    parent = group_org[child] * gpo + np.floor(rng.random(len(child)) * local[child]).astype(np.int64)
    return _unique_pairs(parent, child, G)


def _org_memberships(p: RebacParams, U: int, n_orgs: int, org_w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    max_k = min(p.max_orgs_per_user, n_orgs)
    orgs_out, users_out = [], []
    log_w = np.log(org_w)
    chunk_users = max(1, 4_000_000 // n_orgs)  # bound the (users x orgs) Gumbel matrix
    for c, lo in enumerate(range(0, U, chunk_users)):
        hi = min(U, lo + chunk_users)
        rng = _rng(p, _ORG_MEMBERS, c)
        k = np.clip(rng.geometric(1.0 / p.orgs_per_user, hi - lo), 1, max_k)
        rows, cols = _top_k_per_row(rng, np.broadcast_to(log_w, (hi - lo, n_orgs)), k)
        users_out.append(rows + lo)
        orgs_out.append(cols)
    org_of, user_of = np.concatenate(orgs_out), np.concatenate(users_out)
    key = sorted_unique(org_of.astype(np.int64) * U + user_of)
    return (key // U).astype(np.int32), (key % U).astype(np.int32)


def _chunks(n: int, size: int) -> Iterator[tuple[int, int]]:
    for lo in range(0, n, size):
        yield lo, min(n, lo + size)


@dataclass(frozen=True)
class _Pools:
    """What a chunk of resources draws its users and groups from, built once for every chunk: the users by
    org membership (user_of, weighted by mem_cum, org o's slice mem_start[o]:mem_end[o]), the groups by
    weight (group_cum), and the user and group counts."""

    user_of: np.ndarray
    mem_cum: np.ndarray
    mem_start: np.ndarray
    mem_end: np.ndarray
    group_cum: np.ndarray
    U: int
    G: int


def _resources(p: RebacParams, lo: int, hi: int, emit: Emit, pools: _Pools) -> None:
    rpo, gpo = p.resources_per_org, p.groups_per_org
    user_of, mem_cum, mem_start, mem_end = pools.user_of, pools.mem_cum, pools.mem_start, pools.mem_end
    group_cum, U, G = pools.group_cum, pools.U, pools.G
    rng = _rng(p, _RESOURCES, lo // p.chunk_orgs)
    res = np.arange(lo * rpo, hi * rpo, dtype=np.int64)
    org = (res // rpo).astype(np.int32)
    emit("resource_org", res.astype(np.int32), org)

    def users(n: int) -> tuple[np.ndarray, np.ndarray]:
        r = np.repeat(res, n)
        o = org[np.repeat(np.arange(len(res)), n)]
        return _unique_pairs(r, user_of[sample_in_slices(rng, mem_cum, mem_start[o], mem_end[o])], U)

    def groups(n: int) -> tuple[np.ndarray, np.ndarray]:
        r = np.repeat(res, n)
        o = org[np.repeat(np.arange(len(res)), n)].astype(np.int64)
        return _unique_pairs(r, sample_in_slices(rng, group_cum, o * gpo, (o + 1) * gpo), G)

    # Draws are with replacement then deduplicated: heavy users are picked twice for a resource
    # now and then, exactly the skew we want, at the cost of slightly fewer entries than nominal.
    emit("resource_manager_user", *users(p.manager_users_per_res))
    emit("resource_manager_group", *groups(p.manager_groups_per_res))
    emit("resource_viewer_user", *users(p.viewer_users_per_res))
    emit("resource_viewer_group", *groups(p.viewer_groups_per_res))
