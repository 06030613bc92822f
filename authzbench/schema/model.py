"""The authorization models, as data shared by the generator, the oracle and every backend.

Every relation is stored as a two-column table (object, subject) of int32 ids. A relation's
meaning in Zanzibar terms is `object_type:object#relation@subject_type:subject[#subject_relation]`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple


@dataclass(frozen=True)
class RelationDef:
    name: str  # table name, also the Relationship.relation value
    object_type: str
    relation: str  # relation name in the Zanzibar schema
    subject_type: str
    subject_relation: str | None = None
    authz: bool = True  # False: metadata only (not a relationship in the schema)
    wildcard: bool = False  # subject is `subject_type:*` (the subject column is ignored)


class Relationship(NamedTuple):
    """One edge of the graph, as backends receive it for write/delete."""

    relation: str  # a RelationDef.name
    object: int
    subject: int


REBAC_RELATIONS: dict[str, RelationDef] = {
    r.name: r
    for r in [
        RelationDef("org_admin", "organization", "admin", "user"),
        RelationDef("org_member", "organization", "member", "user"),
        RelationDef("group_org", "group", "org", "organization", authz=False),
        RelationDef("group_member", "group", "member", "user"),
        RelationDef("group_manager", "group", "manager", "user"),
        # parent#member@child#membership: every member of the child group is a member of the parent.
        RelationDef("group_child", "group", "member", "group", "membership"),
        RelationDef("resource_org", "resource", "org", "organization"),
        RelationDef("resource_manager_user", "resource", "manager_user", "user"),
        RelationDef("resource_manager_group", "resource", "manager_group", "group"),
        RelationDef("resource_viewer_user", "resource", "viewer_user", "user"),
        RelationDef("resource_viewer_group", "resource", "viewer_group", "group"),
    ]
}

# The ACL relations: the ones that attach users or groups to resources ("ACL entries" in the reference).
ACL_RELATIONS = (
    "resource_manager_user", "resource_manager_group", "resource_viewer_user", "resource_viewer_group")

PERMISSIONS = ("manage", "view")

# The social model (schema/social.zed). "Visible to followers" is stored as a row (x, owner) meaning
# x#visibility@user:owner#follower; "public" as (x, 0) meaning x#visibility@user:*.
SOCIAL_RELATIONS: dict[str, RelationDef] = {
    r.name: r
    for r in [
        RelationDef("user_self", "user", "self", "user"),
        RelationDef("user_follower", "user", "follower", "user"),
        RelationDef("user_blocked", "user", "blocked", "user"),
        RelationDef("user_public", "user", "visibility", "user", wildcard=True),
        RelationDef("user_followers_visible", "user", "visibility", "user", "follower"),
        RelationDef("content_owner", "content", "owner", "user"),
        RelationDef("content_public", "content", "visibility", "user", wildcard=True),
        RelationDef("content_followers_visible", "content", "visibility", "user", "follower"),
        RelationDef("interaction_creator", "interaction", "creator", "user"),
        RelationDef("interaction_parent", "interaction", "parent", "content"),
    ]
}

# In the social model a check names the object type through the permission: check(user, "view_content", id).
SOCIAL_PERMISSIONS = ("view_user", "view_content", "view_interaction")

MODELS = ("rebac", "social")

# What a check of each model's permission names: (object type, permission on that type).
PERMISSION_TARGETS: dict[str, dict[str, tuple[str, str]]] = {
    "rebac": {"manage": ("resource", "manage"), "view": ("resource", "view")},
    "social": {"view_user": ("user", "view"), "view_content": ("content", "view"),
               "view_interaction": ("interaction", "view")},
}


def relation_defs(model: str) -> dict[str, RelationDef]:
    if model == "rebac":
        return REBAC_RELATIONS
    if model == "social":
        return SOCIAL_RELATIONS
    from authzbench.core.errors import UserError

    raise UserError(f"unknown model {model!r}; valid: {', '.join(MODELS)}")
