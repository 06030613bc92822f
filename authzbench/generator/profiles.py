"""Dataset profiles: named parameter sets, overridable one key at a time (`--set key=value`)."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields, replace

from authzbench.core.errors import UserError


@dataclass(frozen=True)
class RebacParams:
    orgs: int = 16
    users_per_org: int = 200  # mean org memberships per org
    orgs_per_user: float = 2.0  # mean; each user belongs to 1..max_orgs_per_user orgs
    max_orgs_per_user: int = 8
    groups_per_org: int = 20
    groups_per_user: float = 3.0  # mean groups a user joins in each of their orgs
    group_manager_share: float = 0.12  # share of groups that have direct managers (1-3)
    child_group_share: float = 0.07  # share of groups nested under another group of the same org
    # > 0: instead of child_group_share's random nesting, each org's first groups form one chain this many
    # levels deep (group 1 in group 0, 2 in 1, ...): the shape sweep's nesting depth, set exactly.
    group_depth: int = 0
    resources_per_org: int = 2000
    admins_per_org: int = 10
    manager_users_per_res: int = 2
    manager_groups_per_res: int = 1
    viewer_users_per_res: int = 10
    viewer_groups_per_res: int = 3
    # 80/20 activity: Pareto shape log(5)/log(4) ~ 1.16 gives 20% of users 80% of the picks.
    pareto_alpha: float = 1.16
    # Activity weights are capped at this multiple of the least active user's for ACL and group
    # manager picks (a truncated Pareto). Uncapped, baseline's top user held 14,000 direct ACL
    # entries (76x the mean; the reference's heaviest holds 875, 5.6x); capped at 8: 3,552 (15x the
    # mean), the top 20% of users still holding 62% of the entries. The rest of the gap is users in
    # several small orgs, which the reference's table also has.
    acl_weight_cap: float = 8.0
    # Group popularity weights capped at this multiple of the least popular group's (0: uncapped). With
    # few groups per org, an uncapped Pareto top group takes in nearly all of its org's members.
    group_weight_cap: float = 0.0
    org_weight_cap: float = 0.0  # the same for organizations' popularity (org sizes)
    seed: int = 42
    chunk_orgs: int = 64  # orgs generated per chunk: bounds memory for large/xl

    def validate(self) -> None:
        for f in fields(self):
            v = getattr(self, f.name)
            if f.name in ("group_manager_share", "child_group_share"):
                if not 0 <= v <= 1:
                    raise UserError(f"{f.name} must be between 0 and 1, got {v}")
            elif f.name == "seed":
                if v < 0:
                    raise UserError(f"seed must be >= 0, got {v}")
            elif f.name in ("orgs", "users_per_org", "groups_per_org", "resources_per_org", "chunk_orgs",
                            "max_orgs_per_user", "orgs_per_user", "groups_per_user", "pareto_alpha",
                            "acl_weight_cap"):
                if v <= 0:
                    raise UserError(f"{f.name} must be > 0, got {v}")
            elif v < 0:
                raise UserError(f"{f.name} must be >= 0, got {v}")
        if self.orgs_per_user < 1:
            raise UserError(f"orgs_per_user must be >= 1, got {self.orgs_per_user}")
        if self.group_depth >= self.groups_per_org:
            raise UserError(
                f"group_depth must be below groups_per_org ({self.groups_per_org}), got {self.group_depth}")

    def as_dict(self) -> dict:
        return asdict(self)


REFERENCE = RebacParams(users_per_org=257, orgs_per_user=2.11, groups_per_org=11, groups_per_user=4.1,
                        child_group_share=0.075, resources_per_org=1380, viewer_users_per_res=11,
                        acl_weight_cap=1.5, group_weight_cap=2.0)

PROFILES: dict[str, RebacParams] = {
    # A few thousand relationships, with a 3-deep hierarchy and managers: for tests.
    "tiny": RebacParams(orgs=3, users_per_org=30, groups_per_org=6, groups_per_user=2.0,
                        group_manager_share=0.5, child_group_share=0.5, resources_per_org=80,
                        admins_per_org=2, viewer_users_per_res=4, viewer_groups_per_res=2, chunk_orgs=2),
    # The reference report's dataset: every total within 4% of what it generated and measured (16 orgs,
    # 1,950 users, 4,117 org memberships, 170 groups, 13,441 group memberships, 14 hierarchy edges,
    # 22,084 resources, 364,983 ACL entries), with its skew: heaviest user 865 direct ACL entries
    # (reference 875), largest group 315 direct members (reference 306). large and xl are 10x and 100x.
    "baseline": REFERENCE,
    "large": replace(REFERENCE, orgs=160),
    "xl": replace(REFERENCE, orgs=1600),
    # The shape used before the calibration (1,600 users, 320 groups, 32,000 resources, 481,005 ACL
    # entries; 524,637 relationships at baseline, 5.2M at large, 51.1M at xl): earlier reports used it.
    "baseline-v1": RebacParams(),
    "large-v1": RebacParams(orgs=160),
    "xl-v1": RebacParams(orgs=1600),
}


@dataclass(frozen=True)
class SocialParams:
    """The social graph of the Zanzibar-scale test, sized by its total relationship count."""

    relationships: int = 1_000_000
    # Shares per relationship, from the reference's table (1M column).
    users_per_rel: float = 0.005209  # user#self: one per user
    follows_per_rel: float = 0.052083
    content_per_rel: float = 0.364583
    interactions_per_rel: float = 0.104167
    public_user_share: float = 0.5  # user#visibility@user:* vs @user#follower (2,604 vs 2,604)
    public_content_share: float = 0.4964  # content#visibility@user:* vs @user#follower (180,989 vs 183,594)
    # The reference table has no `blocked` rows; without some, exclusion would never be exercised.
    blocked_per_follow: float = 0.02
    pareto_alpha: float = 1.16
    seed: int = 42
    chunk_rows: int = 4_000_000

    def validate(self) -> None:
        for f in fields(self):
            v = getattr(self, f.name)
            if f.name.endswith("share") and not 0 <= v <= 1:
                raise UserError(f"{f.name} must be between 0 and 1, got {v}")
            if f.name in ("relationships", "chunk_rows", "pareto_alpha") and v <= 0:
                raise UserError(f"{f.name} must be > 0, got {v}")
            if v < 0:
                raise UserError(f"{f.name} must be >= 0, got {v}")

    def as_dict(self) -> dict:
        return asdict(self)


SOCIAL_PROFILES: dict[str, SocialParams] = {
    "tiny": SocialParams(relationships=5_000),
    "baseline": SocialParams(relationships=1_000_000),
    "large": SocialParams(relationships=10_000_000),
    "xl": SocialParams(relationships=100_000_000),
}


def _scaled_int(raw: str) -> int:
    """Accepts 10M / 1.5k / 2G as well as plain integers."""
    mult = {"k": 1_000, "m": 1_000_000, "g": 1_000_000_000}.get(raw[-1:].lower(), 1)
    return int(float(raw[:-1] if mult > 1 else raw) * mult)


def resolve(profile: str, overrides: dict[str, str] | None = None, model: str = "rebac"):
    table = SOCIAL_PROFILES if model == "social" else PROFILES
    if profile not in table:
        raise UserError(f"unknown profile {profile!r}; valid: {', '.join(table)}")
    params = table[profile]
    kinds = {f.name: f.type for f in fields(params)}
    changes: dict[str, int | float] = {}
    for key, raw in (overrides or {}).items():
        if key not in kinds:
            raise UserError(f"unknown --set key {key!r}; valid: {', '.join(kinds)}")
        try:
            changes[key] = _scaled_int(raw) if kinds[key] == "int" else float(raw)
        except (ValueError, OverflowError):
            raise UserError(f"--set {key}={raw}: expected a {kinds[key]}") from None
        if not math.isfinite(changes[key]):
            raise UserError(f"--set {key}={raw}: expected a finite number")
    params = replace(params, **changes)
    try:
        params.validate()
    except UserError as e:
        raise UserError(f"--set {e}" if changes else str(e)) from None
    return params


def parse_sets(items: list[str] | None) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise UserError(f"--set expects key=value, got {item!r}")
        out[key.strip()] = value.strip()
    return out
