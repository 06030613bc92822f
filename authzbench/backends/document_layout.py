"""Where each rebac relationship lives in the document stores (mongo, elasticsearch): both keep the same
documents per resource, user, group and organization, so both read and maintain the same arrays."""

from __future__ import annotations

# relation -> [(collection or index, id side, array field, other side)]: "object"/"subject" name which end
# of the edge is the document id and which the array element. Some edges are kept at both ends, so that
# writes can walk the hierarchy up (parents) and find a user's groups without a scan.
SOURCE: dict[str, list[tuple[str, str, str, str]]] = {
    "org_admin": [("orgs", "object", "admins", "subject"), ("users", "subject", "admin_orgs", "object")],
    "org_member": [("orgs", "object", "members", "subject"), ("users", "subject", "member_orgs", "object")],
    "group_org": [("groups", "object", "org", "subject")],
    "group_member": [("groups", "object", "members", "subject"), ("users", "subject", "member_of", "object")],
    "group_manager": [("groups", "object", "managers", "subject"), ("users", "subject", "manager_of", "object")],
    "group_child": [("groups", "object", "children", "subject"), ("groups", "subject", "parents", "object")],
    "resource_org": [("resources", "object", "orgs", "subject")],
    "resource_manager_user": [("resources", "object", "manager_users", "subject")],
    "resource_manager_group": [("resources", "object", "manager_groups", "subject")],
    "resource_viewer_user": [("resources", "object", "viewer_users", "subject")],
    "resource_viewer_group": [("resources", "object", "viewer_groups", "subject")],
}
# A resource document's ACL arrays: the relationships its permissions are computed from.
ACL_FIELDS = ("orgs", "manager_users", "manager_groups", "viewer_users", "viewer_groups")
