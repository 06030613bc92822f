"""Scenarios as data: what to call, on which inputs, with which expected answers and defaults.

A scenario's inputs are sampled deterministically from the dataset (seeded by the scenario name),
and each input carries the oracle's answer, so workers compare every response without the oracle.
Adding a scenario is a few lines: a sampler and a Scenario entry.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from authzbench.core.errors import UserError
from authzbench.schema.dataset import Dataset
from authzbench.truth.oracle import Oracle

# An input is (op, args, expected): op in {"check", "lookup", "roundtrip"}; expected is a bool for
# checks, a sorted tuple of resource ids for lookups, None for round trips.
Input = tuple[str, tuple, object]
Sampler = Callable[[Dataset, Oracle, int], list[Input]]


# Read and mixed phases stop at their op count or a 4 s budget, whichever comes first. In make bench
# at baseline (seven backends, 168 phases) the phases took 2,180 s of the run's 41 min: 2,000 FerretDB
# checks take 48 s at one worker, lookups ran to a 20 s budget. Replayed on that run's records, a 4 s
# budget that waits for the 20 ops a p95 needs (a 540 ms lookup waits ~11 s) makes them ~480 s, 5 s
# ~560 s. The report marks a percentile whose phase had fewer ops than it needs (p99: 100).
READ_BUDGET_S, MIN_OPS = 4.0, 20
# The budget, not the op count, ends a check phase: in make bench (20261125-065954) 271 of 485 closed
# phases ran out of their 2,000 ops (667 a round) before a round's 1.33 s budget, in windows down to 0.3 s
# (Cassandra and Elasticsearch at 8 workers), and such throughput figures moved 1.5x between runs while
# staying within one run's rounds. At 8,000 postgres at 8 workers (10,668 checks/s in 20261129-044051) still
# ended its 4,000-op rounds in 0.37 s, with one or two of the monitor's 0.5 s samples, so its client-bound
# flag came and went between runs. 64,000 (32,000 a round) leaves a 2 s round to the budget up to 16,000/s.
CHECK_OPS = 64_000
# Inputs sampled per scenario (with the oracle's answers); a phase with more ops cycles through them, and each
# round starts at its own share (phase_plan), so a round of under 4,000 ops meets only inputs of its own.
SAMPLED_INPUTS = 8_000


@dataclass(frozen=True)
class Scenario:
    name: str
    op: str  # check | lookup | roundtrip | mixed | ingest
    description: str
    sampler: Sampler | None
    iterations: int = CHECK_OPS  # measured ops per concurrency level (a cap: the budget ends the phase)
    warmup: int = 100  # ops run first and excluded from the figures (counted in the report)
    timeout_s: float = 2.0
    max_seconds: float = 60.0  # a phase stops here even if iterations are not done (reported)
    budget_s: float | None = READ_BUDGET_S  # intended stop: whichever comes first, this or `iterations`
    min_ops: int = MIN_OPS  # the budget waits for this many ops (spec.BUDGET_STRETCH bounds the wait)
    reference: bool = False  # one of the reference report's five read scenarios
    model: str = "rebac"
    # closed-loop worker counts above this are not run (see HEAVY_LOOKUP_WORKERS)
    max_workers: int | None = None
    latency_only: bool = False  # runs at the fewest workers only (see LATENCY_ONLY)


def input_count(sc: Scenario, iterations_scale: float) -> int:
    """How many inputs a run samples for a scenario (orchestrate and crosscheck sample the same): a read's ops
    (scaled), at most SAMPLED_INPUTS; a lookup's one input, its anchor user; every op of a write or churn
    phase, so no write repeats."""
    if sc.op == "lookup":
        return 1
    n = max(sc.iterations, round(sc.iterations * iterations_scale))
    return min(n, SAMPLED_INPUTS) if sc.op in ("check", "mixed", "roundtrip") else n


def _rng(name: str) -> np.random.Generator:
    return np.random.default_rng(zlib.crc32(name.encode()))


def _rows(ds: Dataset, rel: str) -> tuple[np.ndarray, np.ndarray]:
    t = ds.table(rel)
    return t["object"].to_numpy(), t["subject"].to_numpy()


def _checks(o: Oracle, perm: str, users: np.ndarray, resources: np.ndarray) -> list[Input]:
    return [("check", (int(u), perm, int(r)), o.check(int(u), perm, int(r))) for u, r in zip(users, resources,
                                                                                              strict=True)]


def sample_manage_direct(ds: Dataset, o: Oracle, n: int) -> list[Input]:
    """(user, resource) rows of manager_user: heavy users appear as often as they hold resources."""
    res, users = _rows(ds, "resource_manager_user")
    i = _rng("check_manage_direct_user").integers(0, len(res), n)
    return _checks(o, "manage", users[i], res[i])


def sample_org_admin(ds: Dataset, o: Oracle, n: int) -> list[Input]:
    orgs, admins = _rows(ds, "org_admin")
    rng = _rng("check_manage_org_admin")
    i = rng.integers(0, len(orgs), n)
    res_of_org, org_of_res = _rows(ds, "resource_org")
    by_org = np.argsort(org_of_res, kind="stable")
    starts = np.searchsorted(org_of_res[by_org], orgs[i], side="left")
    ends = np.searchsorted(org_of_res[by_org], orgs[i], side="right")
    pick = starts + np.floor(rng.random(n) * (ends - starts)).astype(np.int64)
    return _checks(o, "manage", admins[i], res_of_org[by_org[pick]])


def sample_view_group_member(ds: Dataset, o: Oracle, n: int) -> list[Input]:
    """A viewer group of the resource and one of that group's direct members or managers."""
    res, groups = _rows(ds, "resource_viewer_group")
    gm = np.concatenate([_rows(ds, "group_member")[0], _rows(ds, "group_manager")[0]])
    gu = np.concatenate([_rows(ds, "group_member")[1], _rows(ds, "group_manager")[1]])
    order = np.argsort(gm, kind="stable")
    gm, gu = gm[order], gu[order]
    rng = _rng("check_view_via_group_member")
    has_members = np.isin(groups, gm)
    idx = np.flatnonzero(has_members)
    i = idx[rng.integers(0, len(idx), n)]
    starts, ends = np.searchsorted(gm, groups[i], "left"), np.searchsorted(gm, groups[i], "right")
    pick = starts + np.floor(rng.random(n) * (ends - starts)).astype(np.int64)
    return _checks(o, "view", gu[pick], res[i])


def sample_negative(ds: Dataset, o: Oracle, n: int) -> list[Input]:
    """Users checking resources they cannot see: a full traversal before answering "no"."""
    rng = _rng("check_negative")
    out: list[Input] = []
    n_users, n_res = ds.entities["user"], ds.entities["resource"]
    while len(out) < n:
        u, r = rng.integers(0, n_users, 4 * n), rng.integers(0, n_res, 4 * n)
        out += [x for x in _checks(o, "view", u, r) if x[2] is False][: n - len(out)]
    return out


def heavy_manage_user(o: Oracle) -> int:
    """The reference's BENCH_LOOKUPRES_MANAGE_USER: the user who can manage the most resources."""
    return int(np.argmax(o.count_by_user("manage")))


def regular_view_user(o: Oracle) -> int:
    """The reference's BENCH_LOOKUPRES_VIEW_USER: the median user by viewable resources."""
    counts = o.count_by_user("view")
    users = np.flatnonzero(counts > 0)
    order = users[np.argsort(counts[users], kind="stable")]
    return int(order[len(order) // 2])


def _lookup(o: Oracle, user: int, perm: str, n: int) -> list[Input]:
    return [("lookup", (user, perm), tuple(o.lookup_resources(user, perm)))] * n


def sample_lookup_manage_super(ds: Dataset, o: Oracle, n: int) -> list[Input]:
    return _lookup(o, heavy_manage_user(o), "manage", n)


def sample_lookup_view_regular(ds: Dataset, o: Oracle, n: int) -> list[Input]:
    return _lookup(o, regular_view_user(o), "view", n)


def sample_roundtrip(ds: Dataset, o: Oracle, n: int) -> list[Input]:
    return [("roundtrip", (), None)] * n


def sample_mixed_reads(ds: Dataset, o: Oracle, n: int) -> list[Input]:
    """The read side of `mixed`: the three positive check kinds and negatives, interleaved."""
    parts = [sample_manage_direct(ds, o, n // 4 + 1), sample_org_admin(ds, o, n // 4 + 1),
             sample_view_group_member(ds, o, n // 4 + 1), sample_negative(ds, o, n // 4 + 1)]
    return [x for quad in zip(*parts, strict=True) for x in quad][:n]


# social model ------------------------------------------------------------------------------------

SOCIAL_MIX = (("view_content", 0.6), ("view_user", 0.3), ("view_interaction", 0.1))  # the reference's mix
DEFAULT_DAU = 0.05


def dau_pool(n_users: int, factor: float) -> np.ndarray:
    """The reference's daily-active-user model: a uniform sample of users (ids 0, 1/f, 2/f, ...)
    issues every request. The factor drives cache-hit rates, so it is a parameter of the run."""
    step = max(1, round(1 / max(factor, 1e-9)))
    return np.arange(0, n_users, step)


def _social_inputs(ds: Dataset, o, n: int, mix, dau: float, name: str) -> list[Input]:
    rng = _rng(name)
    pool = dau_pool(ds.entities["user"], dau)
    # Popular users' content and profiles are requested more: weight objects by their owner's followers.
    followers = (
        np.bincount(ds.table("user_follower")["object"].to_numpy(), minlength=ds.entities["user"]) + 1.0)
    owner = ds.table("content_owner").sort_values("object")["subject"].to_numpy()
    parent = ds.table("interaction_parent").sort_values("object")["subject"].to_numpy()
    weights = {"view_user": followers, "view_content": followers[owner],
               "view_interaction": followers[owner][parent]}
    cums = {p: np.cumsum(w) for p, w in weights.items()}
    perms = [p for p, _ in mix]
    kinds = rng.choice(len(perms), size=n, p=np.array([w for _, w in mix]) / sum(w for _, w in mix))
    viewers = pool[rng.integers(0, len(pool), n)]
    out: list[Input] = []
    for k, v in zip(kinds, viewers, strict=True):
        perm = perms[k]
        cum = cums[perm]
        obj = min(int(np.searchsorted(cum, rng.random() * cum[-1], side="right")), len(cum) - 1)
        out.append(("check", (int(v), perm, obj), o.check(int(v), perm, obj)))
    return out


def _social_sampler(mix, name: str) -> Sampler:
    def sample(ds: Dataset, o, n: int, dau: float = DEFAULT_DAU) -> list[Input]:
        return _social_inputs(ds, o, n, mix, dau, name)

    return sample


def _write_sampler(kind: str) -> Sampler:
    """("structural", op, warm-up op): the warm-up op is an ACL grant and revocation on a scratch user of its
    own (WARMUP_OFFSET): it warms the connection, the write and check paths and the prepared statements in
    milliseconds everywhere, where a warm-up op of the scenario's own kind took minutes on the slow stores
    (4 FerretDB hierarchy ops of ~100 s each, serialized by the group lock, before a phase could start)."""
    def sample(ds: Dataset, o: Oracle, n: int) -> list[Input]:
        from authzbench.workloads.writes import WARMUP_OFFSET, sample_write_ops

        warm = sample_write_ops(ds, "acl", n, offset=WARMUP_OFFSET)
        return [("structural", op, w) for op, w in zip(sample_write_ops(ds, kind, n), warm, strict=True)]

    return sample


# Write scenarios: each op is a grant and its revocation (2 timed writes, each probed until visible), up to
# inflight.MAX_IN_FLIGHT ops in flight per worker, so a cache window no longer sets the op count (one op at a
# time got 1-4 ops a phase under a 5 s window, 20261128-083444). They run at 1 worker in the default run, in
# one round: 200 ops or a 3 s budget, whichever comes first. 200 ops are 400 timed writes (a p99 has 100) and
# bound the restore check's repair (2 fully consistent checks an op); the budget ends the phase for any writer
# slower than ~15 ms an op. 3 s, not 6: at baseline with 3 s budgets (20261129-103220) every writer under
# 100 ms an op still timed 64-400 writes a phase (SpiceDB 128/128/64 with its 5 s window, OpenFGA the same,
# Permify 204/196/130), while the write phases of make bench took 447 s of its 24.7 min at 6 s
# (20261129-071003). The budget bounds the phase, not an op: a slow store's phase is its first
# op or two (FerretDB's membership write took 10-23 s, its hierarchy write 33-47 s at baseline; Cassandra's
# hierarchy write 15 s), reported with its op count and marked as too few for a p95. One op may take long:
# attaching a 300-member group under a parent reaching thousands of resources took Cassandra over 40 s at
# baseline, so an op gets 120 s before it counts as hung. `--iterations-scale` scales ops and budget alike.
_WRITE = dict(iterations=200, warmup=2, timeout_s=120.0, max_seconds=180.0, budget_s=3.0, min_ops=0)


# The churn sweep's structural ops (workloads/churn.py CHURN_MIX), split over the writers: a writer reuses an
# op once it is done, and under a 5 s window 100 changes/s hold ~280 ops in flight a writer
# (inflight.CHURN_IN_FLIGHT).
CHURN_OPS = 800


def sample_churn(ds: Dataset, o: Oracle, n: int, mix=None) -> list[Input]:
    """A churn step's inputs: n via-group checks (the readers'), then the writers' structural ops as
    ("structural", op, None), drawn by `mix` ((kind, share) pairs; default CHURN_MIX). The checks are all
    positive and the ops only add scratch grants and remove their own, so every check keeps its answer under
    any churn."""
    from authzbench.workloads.churn import CHURN_MIX
    from authzbench.workloads.writes import sample_churn_ops

    ops = sample_churn_ops(ds, tuple(tuple(x) for x in mix) if mix else CHURN_MIX, CHURN_OPS)
    return [*sample_view_group_member(ds, o, n), *(("structural", op, None) for op in ops)]


# A churn step's op bound: its open loop measures a check from its intended start, so a 2 s timeout would turn
# a queue into errors; and a slow store's structural write (FerretDB's hierarchy change: 33-47 s) must be able
# to return for its step to be judged by its lateness.
CHURN_TIMEOUT_S = 60.0


# Lookup phases stop at an op count or the time budget, whichever comes first: a 10 ms lookup gets
# 400 ops in the 4 s budget (enough for a p99, which needs >= 100); 5,000 ops bound the fastest at
# eight or more workers. 50 fixed ops made p99 equal the maximum.
LOOKUP_OPS = 5000
# Lookups run at up to 8 workers: 32 of them on two cores measure the run queue. The heaviest user's (10,500
# resources at baseline) cost the most of make bench: Permify answered 0 of 32 within the 60 s timeout (176 s
# for the two phases of one visit), SpiceDB's took 9 s a round; a median user's took Permify 19 s a round at
# 32 (20261128-013743).
HEAVY_LOOKUP_WORKERS = 8
# The other check paths run at 1 worker only: the throughput curve (1, 8, 32 workers) is the via-group
# check's and the mixed phase's, which interleaves all four check kinds. At 8 and 32 workers these three were
# 144 of make bench's 517 phases (20261128-013743) and no need of the decision summary reads them.
LATENCY_ONLY = True
# Their budgets are shorter than a curve's (issue 53: the time for the churn sweep and the mode phases). In
# make bench (20261128-160246) at 2 s a round the fewest ops of a latency-only check were 56 a round
# (FerretDB's negative check), the next 128-231; 1 s a round keeps >= 20 a round everywhere (p95) and saves
# ~48 s. The round trip had >= 983 ops a round in 2 s: 0.5 s keeps ~245 (p99) and saves ~23 s.
LATENCY_ONLY_BUDGET_S, ROUNDTRIP_BUDGET_S = 2.0, 1.0

SCENARIOS: dict[str, Scenario] = {
    s.name: s
    for s in [
        Scenario("roundtrip", "roundtrip",
                 "A trivial request on the same connection (SELECT 1, ping): the "
                 "floor that check latency is compared with.", sample_roundtrip, budget_s=ROUNDTRIP_BUDGET_S),
        Scenario(
            "check_manage_direct_user", "check",
            "`manage` check where the user is a direct manager_user of the resource (shortest path).",
            sample_manage_direct, reference=True, latency_only=LATENCY_ONLY, budget_s=LATENCY_ONLY_BUDGET_S),
        Scenario("check_manage_org_admin", "check",
                 "`manage` check granted through the resource's organization admin.", sample_org_admin,
                 reference=True, latency_only=LATENCY_ONLY, budget_s=LATENCY_ONLY_BUDGET_S),
        Scenario("check_view_via_group_member", "check",
                 "`view` check where the user is a direct member or "
                 "manager of one of the resource's viewer groups.", sample_view_group_member, reference=True),
        Scenario(
            "check_negative", "check",
            "`view` check for a user with no access (the whole graph must be ruled out).", sample_negative,
            latency_only=LATENCY_ONLY, budget_s=LATENCY_ONLY_BUDGET_S),
        Scenario(
            "lookup_resources_manage_super", "lookup",
            "Every resource the heaviest `manage` user can manage, streamed.", sample_lookup_manage_super,
            iterations=LOOKUP_OPS, warmup=3, timeout_s=60.0, reference=True, max_workers=HEAVY_LOOKUP_WORKERS,
        ),
        Scenario(
            "lookup_resources_view_regular", "lookup", "Every resource a median user can view, streamed.",
            sample_lookup_view_regular, iterations=LOOKUP_OPS, warmup=3, timeout_s=60.0, reference=True,
            max_workers=HEAVY_LOOKUP_WORKERS),
        Scenario("mixed", "mixed",
                 "Checks with a share of relationship writes/deletes (default 1%), open or closed loop.",
                 sample_mixed_reads, warmup=100),
        Scenario("ingest", "ingest", "Bulk load of the dataset plus any closure / view build.", None),
        Scenario(
            "write_membership", "write",
            "Add a scratch user to a group, then remove them: the groups "
            "reaching the most resources and with the most members included.", _write_sampler("membership"),
            **_WRITE),
        Scenario("write_hierarchy", "write",
                 "Attach a group (a scratch group holding a big real group) under a "
                 "parent, then detach it; parents reaching the most resources included.",
                 _write_sampler("hierarchy"), **_WRITE),
        Scenario("write_org_admin", "write",
                 "Grant org admin, then revoke it (reaches every resource of the org).",
                 _write_sampler("org_admin"), **_WRITE),
        Scenario(
            "write_acl", "write",
            "Add a user to one resource's ACL, then remove them (the mixed workload's write, for contrast).",
            _write_sampler("acl"), **_WRITE),
        Scenario("revoke_then_check", "write",
                 "Revoke access a user had (through a membership, or a direct "
                 "ACL) and check as soon as the write returns: stale allows are counted.",
                 _write_sampler("revoke"), **_WRITE),
        Scenario(
            "churn", "churn",
            "Via-group checks at a fixed offered rate while membership, hierarchy and "
            "revocation changes arrive at increasing rates: one open-loop step per rate, the sweep stopping "
            "at the first step whose reads leave the SLO, whose writes fall behind or whose changes stay "
            "unseen.", sample_churn, iterations=1000, warmup=100, timeout_s=CHURN_TIMEOUT_S,
            max_seconds=120.0, budget_s=None, min_ops=0),
        Scenario(
            "social_roundtrip", "roundtrip", "A trivial request on the same connection.", sample_roundtrip,
            model="social"),
        Scenario("social_view_content", "check",
                 "Can the user see a piece of content (owner, public or follower, minus blocked).",
                 _social_sampler((("view_content", 1.0),), "svc"), model="social"),
        Scenario("social_view_user", "check", "Can the user see another user's profile.",
                 _social_sampler((("view_user", 1.0),), "svu"), model="social"),
        Scenario("social_view_interaction", "check",
                 "Can the user see an interaction (creator and parent content both visible: intersection).",
                 _social_sampler((("view_interaction", 1.0),), "svi"), model="social"),
        Scenario("social_mixed", "mixed",
                 "The reference's weighted mix: 60% content, 30% profile, 10% "
                 "interaction checks, issued by daily-active users, plus WriteRelationship (default 1%).",
                 _social_sampler(SOCIAL_MIX, "smix"), iterations=4000, model="social"),
    ]
}

READ_SCENARIOS = [n for n, s in SCENARIOS.items() if s.op in ("check", "lookup") and s.model == "rebac"]
# The write side a design review weighs against the reads: a group change, a hierarchy change, a revocation.
DEFAULT_WRITES = ["write_membership", "write_hierarchy", "revoke_then_check"]
DEFAULT_SCENARIOS = ["roundtrip", *READ_SCENARIOS, "mixed", *DEFAULT_WRITES, "churn"]
DEFAULT_SCENARIOS_BY_MODEL = {
    "rebac": DEFAULT_SCENARIOS,
    "social": ["social_roundtrip", "social_view_content", "social_view_user", "social_view_interaction",
               "social_mixed"],
}
# Writes of the mixed workloads touch only scratch subjects (ids past the dataset's users), so every
# read answer stays checkable against the oracle: (relation, object type whose ids are drawn).
SCRATCH_WRITES = {"rebac": ("resource_viewer_user", "resource"), "social": ("user_follower", "user")}


WRITE_SCENARIOS = [n for n, s in SCENARIOS.items() if s.op == "write"]


def scenario(name: str) -> Scenario:
    try:
        return SCENARIOS[name]
    except KeyError:
        raise UserError(f"unknown scenario {name!r}; valid: {', '.join(SCENARIOS)}") from None
