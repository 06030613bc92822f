-- The rebac model in ClickHouse (backend `clickhouse`, authzbench/backends/clickhouse.py).
-- `-- section: NAME` blocks of statements; {db} is the database, {where} a predicate the adapter fills
-- in with integer lists only (never user text).
--
-- Model, as the reference did it: MergeTree tables for the relations, and streaming materialized
-- views (MVs) that expand every ACL insert into one expanded permission table perm(user, resource, perm).
--
-- * Ingest order. An MV fires on inserts into its source table only, with the inserted block as that
--   source; the other side of its JOIN is read whole at that moment. So the loader inserts org admins
--   and the group relations first, computes the group closure (group_reach, group_membership), and only
--   then inserts resource_org and the ACLs, which the MVs expand by joining the closure and org_admin.
-- * Closure. group_reach(ancestor, descendant) holds every path of length >= 1 of the hierarchy
--   (parent#member@child#membership). It is a fixpoint computed by the adapter (reach_init, then
--   reach_step until no new pair): unlike UNION ALL recursion or WITH RECURSIVE over paths, it
--   terminates on a cyclic hierarchy. group_membership(group, user) = direct members and managers of
--   the group and of every group it reaches.
-- * perm is ORDER BY (user, resource, perm): a check is a full-key point read and a lookup a key-prefix
--   range read, so one ordering serves both; the interface has no "who can see r" query, so no second
--   table ordered by resource is kept (it would double the write amplification). Rows are not
--   deduplicated: a user reaching a resource by several paths has several rows; checks stop at the
--   first, lookups use DISTINCT. perm is 'manage' or 'view'; manage implies view, so a view check
--   accepts either row.
-- * perm_source is the same expansion as a plain view over the source tables. It is what the MVs
--   compute incrementally; writes/deletes recompute a slice of perm from it, and tests compare the two.
--
-- Writes and deletes (they must leave perm equal to perm_source):
-- * Inserted ACL and resource_org rows flow through their MV; nothing else to do.
-- * Deletes are lightweight DELETEs (masked at once, visible to the next SELECT, merged away later).
--   A deleted grant may still be given by another path, so the affected (user, resource) pairs are
--   re-derived from perm_source (perm_missing, perm_stale): (u, r) for a user ACL, (members of g, r) for a
--   group ACL, (admins of o, r) for resource_org.
-- * org_admin, group_member and group_manager changes: the user's group_membership rows and all of
--   the user's perm rows are recomputed. group_child changes: group_reach is recomputed (a fixpoint over
--   the hierarchy only: small), then memberships and perm rows of every member of the child group, the
--   only users whose permissions an edge parent->child can change.
-- * ReplacingMergeTree/CollapsingMergeTree were not chosen: their answers are exact only after FINAL
--   or a merge (or a sum(sign) per key), which every check would pay for; lightweight DELETE makes the
--   rare delete pay instead. A recompute inserts the missing rows, then deletes the stale ones, so a
--   concurrent reader never sees a pair missing that is granted before and after.

-- section: tables
CREATE DATABASE IF NOT EXISTS {db};
CREATE TABLE IF NOT EXISTS {db}.meta (key String, value String) ENGINE = ReplacingMergeTree ORDER BY key;
CREATE TABLE IF NOT EXISTS {db}.org_admin (object Int32, subject Int32) ENGINE = MergeTree ORDER BY (object, subject);
CREATE TABLE IF NOT EXISTS {db}.org_member (object Int32, subject Int32) ENGINE = MergeTree ORDER BY (object, subject);
CREATE TABLE IF NOT EXISTS {db}.group_member (object Int32, subject Int32) ENGINE = MergeTree ORDER BY (object, subject);
CREATE TABLE IF NOT EXISTS {db}.group_manager (object Int32, subject Int32) ENGINE = MergeTree ORDER BY (object, subject);
CREATE TABLE IF NOT EXISTS {db}.group_child (object Int32, subject Int32) ENGINE = MergeTree ORDER BY (object, subject);
CREATE TABLE IF NOT EXISTS {db}.resource_org (object Int32, subject Int32) ENGINE = MergeTree ORDER BY (object, subject);
CREATE TABLE IF NOT EXISTS {db}.resource_manager_user (object Int32, subject Int32) ENGINE = MergeTree ORDER BY (object, subject);
CREATE TABLE IF NOT EXISTS {db}.resource_manager_group (object Int32, subject Int32) ENGINE = MergeTree ORDER BY (object, subject);
CREATE TABLE IF NOT EXISTS {db}.resource_viewer_user (object Int32, subject Int32) ENGINE = MergeTree ORDER BY (object, subject);
CREATE TABLE IF NOT EXISTS {db}.resource_viewer_group (object Int32, subject Int32) ENGINE = MergeTree ORDER BY (object, subject);
CREATE TABLE IF NOT EXISTS {db}.group_reach (ancestor Int32, descendant Int32) ENGINE = MergeTree ORDER BY (descendant, ancestor);
CREATE TABLE IF NOT EXISTS {db}.group_membership (group Int32, user Int32) ENGINE = MergeTree ORDER BY (group, user);
CREATE TABLE IF NOT EXISTS {db}.perm (user Int32, resource Int32, perm Enum8('view' = 1, 'manage' = 2))
    ENGINE = MergeTree ORDER BY (user, resource, perm);

-- section: views
CREATE MATERIALIZED VIEW IF NOT EXISTS {db}.mv_manager_user TO {db}.perm AS
    SELECT subject AS user, object AS resource, 'manage' AS perm FROM {db}.resource_manager_user;
CREATE MATERIALIZED VIEW IF NOT EXISTS {db}.mv_viewer_user TO {db}.perm AS
    SELECT subject AS user, object AS resource, 'view' AS perm FROM {db}.resource_viewer_user;
CREATE MATERIALIZED VIEW IF NOT EXISTS {db}.mv_manager_group TO {db}.perm AS
    SELECT m.user AS user, r.object AS resource, 'manage' AS perm
    FROM {db}.resource_manager_group AS r INNER JOIN {db}.group_membership AS m ON m.group = r.subject;
CREATE MATERIALIZED VIEW IF NOT EXISTS {db}.mv_viewer_group TO {db}.perm AS
    SELECT m.user AS user, r.object AS resource, 'view' AS perm
    FROM {db}.resource_viewer_group AS r INNER JOIN {db}.group_membership AS m ON m.group = r.subject;
CREATE MATERIALIZED VIEW IF NOT EXISTS {db}.mv_org_admin TO {db}.perm AS
    SELECT a.subject AS user, r.object AS resource, 'manage' AS perm
    FROM {db}.resource_org AS r INNER JOIN {db}.org_admin AS a ON a.object = r.subject;
-- group_membership's derivation: direct members and managers of a group and of every group it reaches.
CREATE VIEW IF NOT EXISTS {db}.membership_source AS
    WITH direct AS (SELECT object AS group, subject AS user FROM {db}.group_member
                    UNION ALL SELECT object, subject FROM {db}.group_manager)
    SELECT DISTINCT group, user FROM (
        SELECT group, user FROM direct
        UNION ALL SELECT r.ancestor, d.user FROM {db}.group_reach AS r INNER JOIN direct AS d ON d.group = r.descendant);
-- The MVs' SELECTs over the whole source tables; a WHERE on user/resource is pushed into every branch.
CREATE VIEW IF NOT EXISTS {db}.perm_source AS
    SELECT subject AS user, object AS resource, 'manage' AS perm FROM {db}.resource_manager_user
    UNION ALL SELECT subject, object, 'view' FROM {db}.resource_viewer_user
    UNION ALL SELECT m.user, r.object, 'manage'
        FROM {db}.resource_manager_group AS r INNER JOIN {db}.group_membership AS m ON m.group = r.subject
    UNION ALL SELECT m.user, r.object, 'view'
        FROM {db}.resource_viewer_group AS r INNER JOIN {db}.group_membership AS m ON m.group = r.subject
    UNION ALL SELECT a.subject, r.object, 'manage'
        FROM {db}.resource_org AS r INNER JOIN {db}.org_admin AS a ON a.object = r.subject;

-- section: reach_init
INSERT INTO {db}.group_reach SELECT DISTINCT object, subject FROM {db}.group_child;

-- section: reach_step
INSERT INTO {db}.group_reach
    SELECT DISTINCT r.ancestor, c.subject FROM {db}.group_reach AS r
    INNER JOIN {db}.group_child AS c ON c.object = r.descendant
    WHERE (r.ancestor, c.subject) NOT IN (SELECT ancestor, descendant FROM {db}.group_reach);

-- section: membership
-- Every user's membership, at load; the view is its one definition.
INSERT INTO {db}.group_membership SELECT group, user FROM {db}.membership_source;

-- Re-deriving a slice ({where}): the adapter inserts the `*_missing` rows first, then deletes the rows the
-- `*_stale` condition selects, if any: a row granted before and after is never absent (deleting the slice,
-- then inserting it again, let 23 of 108 concurrent checks of a kept pair see a deny). A lightweight
-- DELETE costs a mutation even when it matches nothing, so the adapter looks before it deletes.

-- section: membership_missing
-- {where} restricts the users (column `user`).
SELECT group, user FROM {db}.membership_source WHERE {where}
    AND (group, user) NOT IN (SELECT group, user FROM {db}.group_membership WHERE {where});

-- section: membership_stale
{where} AND (group, user) NOT IN (SELECT group, user FROM {db}.membership_source WHERE {where});

-- section: perm_missing
-- {where} restricts user and resource.
SELECT DISTINCT user, resource, CAST(perm AS Enum8('view' = 1, 'manage' = 2)) FROM {db}.perm_source
    WHERE {where} AND (user, resource, toString(perm)) NOT IN
    (SELECT user, resource, toString(perm) FROM {db}.perm WHERE {where});

-- section: perm_stale
{where} AND (user, resource, toString(perm)) NOT IN
    (SELECT user, resource, toString(perm) FROM {db}.perm_source WHERE {where});
