-- The ReBAC model in PostgreSQL (backend `postgres`, authzbench/backends/postgres.py).
--
-- Sections are separated by `-- section: NAME` lines; the backend runs `tables` in create_schema(),
-- `indexes` and `build_membership` in build(), and `refresh_membership` after every write or delete
-- of a group relation. Everything lives in its own schema `authzbench`, so an external database
-- can be shared and drop() is one DROP SCHEMA.
--
-- Model
-- * One narrow table per relation (object, subject) - not one generic tuple table with a relation
--   column. The dataset is already one file per relation, so each file COPYs straight into its table,
--   rows stay 2 x int4 (no relation key repeated in every row and every index), and each table gets
--   exactly the two indexes its check and lookup paths need. (The generic tuple-table design is what
--   SpiceDB on Postgres measures; this backend is the hand-written alternative.)
-- * group_membership(group_id, user_id) is the materialized closure of membership(g): direct members
--   and managers of g and of every group below g. It is a table, not a MATERIALIZED VIEW, because a
--   materialized view can only be refreshed whole (~all groups) while a write touches one group and
--   its ancestors: build() fills it from group_membership_def, and a group write recomputes just the
--   affected groups (see refresh_membership). Deletes are why we recompute rather than add/remove
--   rows: a user may still be a member through another path.
-- * resource_grant is the permission model as one UNION ALL view: every way a user reaches a
--   resource, tagged 'manage' (implies view) or 'view'. check and lookup query it with constant perm
--   filters, which the planner uses to prune arms, and with resource/user predicates pushed into each
--   arm, so a check is a handful of index probes and EXISTS stops at the first hit.
-- * Indexes are created after the bulk COPY (PostgreSQL's own advice for bulk loads: one sorted
--   index build instead of 400k random inserts).

-- section: tables
CREATE SCHEMA IF NOT EXISTS authzbench;

CREATE TABLE IF NOT EXISTS authzbench.authz_meta (key text PRIMARY KEY, value text NOT NULL);

CREATE TABLE IF NOT EXISTS authzbench.org_admin (org_id int4 NOT NULL, user_id int4 NOT NULL);
CREATE TABLE IF NOT EXISTS authzbench.org_member (org_id int4 NOT NULL, user_id int4 NOT NULL);
CREATE TABLE IF NOT EXISTS authzbench.group_org (group_id int4 NOT NULL, org_id int4 NOT NULL);
CREATE TABLE IF NOT EXISTS authzbench.group_member (group_id int4 NOT NULL, user_id int4 NOT NULL);
CREATE TABLE IF NOT EXISTS authzbench.group_manager (group_id int4 NOT NULL, user_id int4 NOT NULL);
-- parent#member@child#membership: every member of the child group is a member of the parent.
CREATE TABLE IF NOT EXISTS authzbench.group_child (parent_id int4 NOT NULL, child_id int4 NOT NULL);
CREATE TABLE IF NOT EXISTS authzbench.resource_org (resource_id int4 NOT NULL, org_id int4 NOT NULL);
CREATE TABLE IF NOT EXISTS authzbench.resource_manager_user (resource_id int4 NOT NULL, user_id int4 NOT NULL);
CREATE TABLE IF NOT EXISTS authzbench.resource_manager_group (resource_id int4 NOT NULL, group_id int4 NOT NULL);
CREATE TABLE IF NOT EXISTS authzbench.resource_viewer_user (resource_id int4 NOT NULL, user_id int4 NOT NULL);
CREATE TABLE IF NOT EXISTS authzbench.resource_viewer_group (resource_id int4 NOT NULL, group_id int4 NOT NULL);

CREATE TABLE IF NOT EXISTS authzbench.group_membership (group_id int4 NOT NULL, user_id int4 NOT NULL);

-- Direct membership: members and managers alike are in membership(g).
CREATE OR REPLACE VIEW authzbench.group_direct AS
    SELECT group_id, user_id FROM authzbench.group_member
    UNION ALL
    SELECT group_id, user_id FROM authzbench.group_manager;

-- The closure's definition. `descendant` walks group_child downwards; UNION (not UNION ALL) drops
-- pairs already found, so on a cycle the recursion runs out of new rows and stops (the hierarchy is
-- generated acyclic, but nothing in the schema forbids a cycle). It walks groups only - hundreds of
-- edges even at xl - and joins users once at the end.
CREATE OR REPLACE VIEW authzbench.group_membership_def AS
    WITH RECURSIVE descendant(ancestor_id, group_id) AS (
        SELECT parent_id, child_id FROM authzbench.group_child
        UNION
        SELECT d.ancestor_id, c.child_id
        FROM descendant d JOIN authzbench.group_child c ON c.parent_id = d.group_id
    )
    SELECT group_id, user_id FROM authzbench.group_direct
    UNION
    SELECT d.ancestor_id, m.user_id FROM descendant d JOIN authzbench.group_direct m ON m.group_id = d.group_id;

-- manage(r) = manager_user + manager_group->membership + org->admin
-- view(r)   = manage(r) + viewer_user + viewer_group->membership
CREATE OR REPLACE VIEW authzbench.resource_grant AS
    SELECT resource_id, user_id, 'manage'::text AS perm FROM authzbench.resource_manager_user
    UNION ALL
    SELECT g.resource_id, m.user_id, 'manage'::text
    FROM authzbench.resource_manager_group g JOIN authzbench.group_membership m ON m.group_id = g.group_id
    UNION ALL
    SELECT o.resource_id, a.user_id, 'manage'::text
    FROM authzbench.resource_org o JOIN authzbench.org_admin a ON a.org_id = o.org_id
    UNION ALL
    SELECT resource_id, user_id, 'view'::text FROM authzbench.resource_viewer_user
    UNION ALL
    SELECT g.resource_id, m.user_id, 'view'::text
    FROM authzbench.resource_viewer_group g JOIN authzbench.group_membership m ON m.group_id = g.group_id;

-- section: indexes
-- (object, subject) unique: the check probe and ON CONFLICT for writes.
-- (subject, object): the lookup walk from a user (or group, or org) to resources; both columns in
-- the key so lookups are index-only scans.
CREATE UNIQUE INDEX IF NOT EXISTS org_admin_pk ON authzbench.org_admin (org_id, user_id);
CREATE INDEX IF NOT EXISTS org_admin_by_user ON authzbench.org_admin (user_id, org_id);
CREATE UNIQUE INDEX IF NOT EXISTS org_member_pk ON authzbench.org_member (org_id, user_id);
CREATE UNIQUE INDEX IF NOT EXISTS group_org_pk ON authzbench.group_org (group_id, org_id);
CREATE UNIQUE INDEX IF NOT EXISTS group_member_pk ON authzbench.group_member (group_id, user_id);
CREATE UNIQUE INDEX IF NOT EXISTS group_manager_pk ON authzbench.group_manager (group_id, user_id);
CREATE UNIQUE INDEX IF NOT EXISTS group_child_pk ON authzbench.group_child (parent_id, child_id);
CREATE INDEX IF NOT EXISTS group_child_by_child ON authzbench.group_child (child_id, parent_id);
CREATE UNIQUE INDEX IF NOT EXISTS resource_org_pk ON authzbench.resource_org (resource_id, org_id);
CREATE INDEX IF NOT EXISTS resource_org_by_org ON authzbench.resource_org (org_id, resource_id);
CREATE UNIQUE INDEX IF NOT EXISTS resource_manager_user_pk ON authzbench.resource_manager_user (resource_id, user_id);
CREATE INDEX IF NOT EXISTS resource_manager_user_by_user ON authzbench.resource_manager_user (user_id, resource_id);
CREATE UNIQUE INDEX IF NOT EXISTS resource_manager_group_pk ON authzbench.resource_manager_group (resource_id, group_id);
CREATE INDEX IF NOT EXISTS resource_manager_group_by_group ON authzbench.resource_manager_group (group_id, resource_id);
CREATE UNIQUE INDEX IF NOT EXISTS resource_viewer_user_pk ON authzbench.resource_viewer_user (resource_id, user_id);
CREATE INDEX IF NOT EXISTS resource_viewer_user_by_user ON authzbench.resource_viewer_user (user_id, resource_id);
CREATE UNIQUE INDEX IF NOT EXISTS resource_viewer_group_pk ON authzbench.resource_viewer_group (resource_id, group_id);
CREATE INDEX IF NOT EXISTS resource_viewer_group_by_group ON authzbench.resource_viewer_group (group_id, resource_id);
CREATE UNIQUE INDEX IF NOT EXISTS group_membership_pk ON authzbench.group_membership (group_id, user_id);
CREATE INDEX IF NOT EXISTS group_membership_by_user ON authzbench.group_membership (user_id, group_id);

-- section: build_membership
TRUNCATE authzbench.group_membership;
INSERT INTO authzbench.group_membership (group_id, user_id)
    SELECT group_id, user_id FROM authzbench.group_membership_def;

-- section: affected_groups
-- The groups whose membership depends on %(groups)s: those groups and all their ancestors (UNION
-- again stops on cycles).
WITH RECURSIVE ancestor(group_id) AS (
    SELECT unnest(%(groups)s::int4[])
    UNION
    SELECT c.parent_id FROM ancestor a JOIN authzbench.group_child c ON c.child_id = a.group_id
)
SELECT group_id FROM ancestor;

-- section: refresh_membership
-- Recompute membership of the affected groups only (the group_membership_def filter is pushed below
-- its UNION, so only their direct members are joined).
DELETE FROM authzbench.group_membership WHERE group_id = ANY(%(groups)s::int4[]);
INSERT INTO authzbench.group_membership (group_id, user_id)
    SELECT group_id, user_id FROM authzbench.group_membership_def WHERE group_id = ANY(%(groups)s::int4[]);
