"""Structural writes: what keeping permissions fresh costs, and how stale answers get.

A write op grants (or, for revoke_then_check, revokes) access through one kind of edge, then checks
until a probe reflects it (visibility lag), then undoes it the same way (a revocation: a probe still
allowed after it returned is a stale allow). Every op writes only scratch entities (users and groups
with ids past the dataset's), each op its own, and ops are sampled so that none changes another's
answers (checked at sampling): concurrent workers never touch each other's probes and every read of the
phase stays checkable; the expected answers of each op are worked out by the simple evaluator
(`evaluator.py`) following the op's writes, not by the code being measured.

This module samples the ops (and a mixed phase's writes); measure/visibility.py runs them.

A hierarchy op attaches a scratch group that has a real group below it (set up untimed), so the
timed edge carries that real group's members: its cost is a real hierarchy change's.
"""

from __future__ import annotations

import functools
import zlib
from dataclasses import dataclass

import numpy as np

from authzbench.schema.dataset import Dataset
from authzbench.schema.model import Relationship
from authzbench.truth.evaluator import SimpleEvaluator

KINDS = ("membership", "hierarchy", "org_admin", "acl", "revoke")
SCRATCH_BASE = 1_000_000  # scratch ids start at n + this: far from the mixed workloads' n + worker id
WARMUP_OFFSET = 500_000  # warm-up ops' scratch ids start this far past the measured ops' (never shared)
POLL_S = 0.001  # visibility is polled every 1 ms
VISIBILITY_BOUND_S = 10.0  # never visible within this = an error of its own


@dataclass(frozen=True)
class WriteOp:
    kind: str  # one of KINDS
    setup: tuple[Relationship, ...]  # written untimed before the op (and removed after it)
    change: Relationship  # the timed edge
    revoke_first: bool  # revoke_then_check: the change is deleted (its grant is part of the setup)
    probe: tuple[int, str, int]  # a check the change flips: False -> True on grant
    control: tuple[int, str, int]  # a check whose answer is worked out for both states
    control_applied: bool = False  # the control's answer once the change is applied
    control_base: bool = False  # ... and with the setup only


# sampling ------------------------------------------------------------------------------------------

def _reach(ev: SimpleEvaluator, n_res: int) -> dict[int, list[int]]:
    """group -> resources granted to it or to any group above it (manager or viewer)."""
    direct: dict[int, set[int]] = {}
    for rel in ("resource_manager_group", "resource_viewer_group"):
        for r, g in ev.rel[rel]:
            direct.setdefault(g, set()).add(r)
    out: dict[int, list[int]] = {}
    for g in {g for _, g in ev.rel["group_member"] | ev.rel["group_manager"]} | set(direct):
        res = sorted(set().union(*(direct.get(x, set()) for x in _ancestors(ev, g))))
        if res:
            out[g] = res
    return out


def _hot_first(weights: dict[int, int], rng: np.random.Generator, n: int) -> list[int]:
    """The heaviest ids first (the hotspots are always measured), then draws weighted by size."""
    ids = sorted(weights, key=lambda k: -weights[k])
    w = np.array([weights[i] for i in ids], dtype=float)
    drawn = rng.choice(len(ids), size=max(0, n - 3), p=w / w.sum()) if ids else []
    return [*ids[:3], *(ids[i] for i in drawn)][:n]


def _evaluator(ds: Dataset) -> SimpleEvaluator:
    """The dataset's evaluator, built once for all of a run's samplers: each write scenario's sampler (its ops
    and its warm-up ops) and the churn step's built one apiece, 10 builds of ~1.5 s on baseline (more on a
    loaded machine: 15 s). Every use leaves it as it found it (the ops' edges are scratch, never the
    dataset's)."""
    return _evaluator_of(str(ds.path), ds.hash)


@functools.lru_cache(maxsize=1)
def _evaluator_of(path: str, digest: str) -> SimpleEvaluator:
    return SimpleEvaluator.from_dataset(Dataset.open(path))


def sample_write_ops(ds: Dataset, kind: str, n: int, offset: int = 0) -> list[WriteOp]:
    """n write ops of `kind`, with scratch ids unique per op (from `offset` on); expectations from the simple
    evaluator."""
    if kind not in KINDS:
        raise ValueError(f"unknown write kind {kind!r}")
    rng = np.random.default_rng(zlib.crc32(f"write_{kind}".encode()))
    ev = _evaluator(ds)
    n_users, n_groups, n_res = ds.entities["user"], ds.entities["group"], ds.entities["resource"]
    reach = _reach(ev, n_res)
    members = {g: len(ev.fwd["group_member"][g]) + len(ev.fwd["group_manager"][g]) for g in range(n_groups)}
    org_res = _org_resources(ev)
    # targets: the hotspots first (most resources reached, most members), then draws weighted by size
    by_reach = _hot_first({g: len(r) for g, r in reach.items()}, rng, n)
    by_members = _hot_first({g: members[g] for g in reach}, rng, n)
    orgs = _hot_first({o: len(r) for o, r in org_res.items()}, rng, n)
    if kind == "hierarchy":
        parents, big = _hierarchy_targets(ev, reach, members, rng, n)
    ops = []
    for k in range(n):
        u, s = n_users + SCRATCH_BASE + offset + k, n_groups + SCRATCH_BASE + offset + k
        setup: tuple[Relationship, ...] = ()
        perm = "view"
        if kind == "membership" or (kind == "revoke" and k % 2 == 0):
            g = by_reach[k] if k % 2 == 0 else by_members[k]
            change, r = Relationship("group_member", g, u), int(rng.choice(reach[g]))
        elif kind in ("acl", "revoke"):
            r = int(rng.integers(n_res))
            change = Relationship("resource_viewer_user", r, u)
        elif kind == "org_admin":
            perm, org = "manage", orgs[k]
            change, r = Relationship("org_admin", org, u), int(rng.choice(sorted(org_res[org])))
        else:  # hierarchy: a scratch group holding u and a big real group, attached under a parent
            parent, below = parents[k], big[k % len(big)]
            setup = (Relationship("group_member", s, u), Relationship("group_child", s, below))
            change, r = Relationship("group_child", parent, s), int(rng.choice(reach[parent]))
        if kind == "revoke":
            setup = (change,)
        rc = int(rng.integers(n_res))
        ops.append(WriteOp(kind, setup, change, kind == "revoke", (u, perm, r), (u, "view", rc if rc != r else
                                                                                 (r + 1) % n_res)))
    return _independent([_verified(op, ev) for op in ops], ev)


# Scratch-id offsets of a churn step's kinds (sample_churn_ops): each kind is sampled on its own, so their ids
# are kept apart, below WARMUP_OFFSET.
CHURN_OFFSETS = {"membership": 0, "revoke": 100_000, "hierarchy": 200_000}


def sample_churn_ops(ds: Dataset, mix: tuple[tuple[str, float], ...], n: int) -> list[WriteOp]:
    """About n ops drawn by `mix` (kind, share), in a seeded order, those that would change another's answers
    left out (keep_independent): kinds are sampled apart, so a hierarchy op's big group may be a membership
    op's group."""
    kinds, shares = zip(*mix, strict=True)
    counts = {k: max(1, round(n * w / sum(shares))) for k, w in mix}
    pools = {k: sample_write_ops(ds, k, counts[k], offset=CHURN_OFFSETS[k]) for k in kinds}
    kept = set(map(id, keep_independent([op for k in kinds for op in pools[k]], _evaluator(ds))))
    rng = np.random.default_rng(zlib.crc32(b"churn"))
    order = [k for k in kinds for _ in range(counts[k])]
    rng.shuffle(order)
    nxt = dict.fromkeys(kinds, 0)
    ops = []
    for k in order:
        op, nxt[k] = pools[k][nxt[k]], nxt[k] + 1
        if id(op) in kept:
            ops.append(op)
    return ops


def keep_independent(ops: list[WriteOp], ev: SimpleEvaluator) -> list[WriteOp]:
    """The ops that answer as alone while every op is applied. The model only grants, so an op's answers with
    a subset of the others applied lie between alone and all: leaving some out keeps the rest independent."""
    extra = {rel for op in ops for rel in (*op.setup, op.change) if not ev.has(*rel)}
    for rel in extra:
        ev.add(*rel)
    try:
        out = []
        for op in ops:
            with_change = (ev.check(*op.probe), ev.check(*op.control))
            ev.remove(*op.change)
            without = (ev.check(*op.probe), ev.check(*op.control))
            ev.add(*op.change)
            present, absent = ((op.control_base, op.control_applied) if op.revoke_first
                               else (op.control_applied, op.control_base))
            if with_change == (True, present) and without == (False, absent):
                out.append(op)
    finally:
        for rel in extra:
            ev.remove(*rel)
    return out


def _hierarchy_targets(ev: SimpleEvaluator, reach: dict[int, list[int]], members: dict[int, int],
                       rng: np.random.Generator, n: int) -> tuple[list[int], list[int]]:
    """Parents (hot first) and the big real groups hung below the ops' scratch groups, chosen so that no
    parent has one of those groups among its ancestors. While op i's change is applied, everything under
    its group gains its parent's resources, so an op attached under that group at the same time would
    see them."""
    # The compose CI run caught such a pair (a control check of write_hierarchy on tiny allowed through
    # the other worker's op); excluding them costs baseline 8 of its 176 parents.
    anc = functools.cache(lambda g: frozenset(_ancestors(ev, g)))
    hot = sorted(reach, key=lambda g: -len(reach[g]))[:3]
    blocked = set().union(*(anc(p) for p in hot))
    big = [g for g in sorted(members, key=lambda g: -members[g]) if members[g] and g not in blocked][:8]
    hung = frozenset(big)
    free = {g: len(r) for g, r in reach.items() if not anc(g) & hung}
    return _hot_first(free, rng, n), big


def _independent(ops: list[WriteOp], ev: SimpleEvaluator) -> list[WriteOp]:
    """Concurrent workers run these ops in any overlap, so each op's answers must not depend on the others'
    states: every op must answer as alone while every other op's setup and change are applied
    (keep_independent's test, here a sampling error rather than a filter)."""
    kept = set(map(id, keep_independent(ops, ev)))
    for op in ops:
        if id(op) not in kept:
            raise AssertionError(
                f"{op.kind} op {op.change}: its answers change while the other ops are applied: "
                "concurrent ops would interfere")
    return ops


def _org_resources(ev: SimpleEvaluator) -> dict[int, set[int]]:
    out: dict[int, set[int]] = {}
    for r, org in ev.rel["resource_org"]:
        out.setdefault(org, set()).add(r)
    return out


def _ancestors(ev: SimpleEvaluator, g: int) -> set[int]:
    seen, stack = {g}, [g]
    while stack:
        for p in ev.rev["group_child"][stack.pop()] - seen:
            seen.add(p)
            stack.append(p)
    return seen


def _verified(op: WriteOp, ev: SimpleEvaluator) -> WriteOp:
    """Apply the op to the evaluator: the probe must flip as the op says; the control's answers with the
    setup only and with the change applied are recorded; then everything is undone."""
    for rel in op.setup:
        ev.add(*rel)
    apply, undo = (ev.remove, ev.add) if op.revoke_first else (ev.add, ev.remove)
    before, base = ev.check(*op.probe), ev.check(*op.control)
    apply(*op.change)
    after, applied = ev.check(*op.probe), ev.check(*op.control)
    undo(*op.change)
    for rel in reversed(op.setup):
        ev.remove(*rel)
    if before == after or after == op.revoke_first:
        raise AssertionError(
            f"{op.kind} op {op.change} does not flip its probe {op.probe}: {before} -> {after}")
    return WriteOp(op.kind, op.setup, op.change, op.revoke_first, op.probe, op.control, applied, base)


# mixed --write-kind ---------------------------------------------------------------------------------
# The edge a mixed workload's writes change. Subjects are scratch (a user past the dataset's, for
# hierarchy an empty scratch group), so no read of the phase changes answer and every one stays checked;
# the cost of a hierarchy change that carries real members is what `write_hierarchy` measures.
MIXED_KINDS = ("acl", "membership", "hierarchy", "org_admin", "realistic")
REALISTIC_MIX = (("acl", 0.70), ("membership", 0.25), ("hierarchy", 0.04), ("org_admin", 0.01))
MIXED_RELATION = {"membership": "group_member", "hierarchy": "group_child", "org_admin": "org_admin"}


def mixed_targets(ds: Dataset) -> dict[str, list[int]]:
    """Objects a mixed write may attach a scratch subject to: every group, parent group and org."""
    return {"membership": list(range(ds.entities["group"])), "hierarchy": list(range(ds.entities["group"])),
            "org_admin": list(range(ds.entities["organization"])),
            "scratch_group": [ds.entities["group"] + SCRATCH_BASE // 2]}


def mixed_write(spec, rng: np.random.Generator, scratch_user: int) -> Relationship:
    """One write of a mixed phase (spec: spec.PhaseSpec), for the worker's scratch user."""
    kind = spec.write_kind
    if kind == "realistic":
        kinds, weights = zip(*REALISTIC_MIX, strict=True)
        kind = kinds[int(rng.choice(len(kinds), p=np.array(weights) / sum(weights)))]
    if kind == "acl":
        return Relationship(spec.scratch_relation, int(rng.integers(0, spec.n_resources)), scratch_user)
    targets = spec.write_targets[kind]
    obj = int(targets[int(rng.integers(len(targets)))])
    if kind == "hierarchy":  # the worker's own scratch group
        return Relationship(
            "group_child", obj, spec.write_targets["scratch_group"][0] + scratch_user - spec.scratch_user)
    return Relationship(MIXED_RELATION[kind], obj, scratch_user)
