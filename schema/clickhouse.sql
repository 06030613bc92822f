-- The rebac model in ClickHouse (backend `clickhouse`, authzbench/backends/clickhouse.py).
-- `-- section: NAME` blocks; {db} is the database name.
--
-- Model, as the reference did it: MergeTree tables for the relations, and streaming materialized
-- views that expand every ACL insert into one expanded permission table `perm(user, resource, perm)`.
-- * Group membership is closed first (group_reach, then group_membership), because an MV fires on
--   inserts into its source table only: the loader inserts org admins and group relations, builds the
--   closure, and only then inserts resources and ACLs, which the MVs expand by joining the closure.
-- * group_reach is computed by a fixpoint loop in the adapter (INSERT ... WHERE NOT IN until no new
--   pair): unlike UNION ALL recursion it terminates on a cyclic hierarchy.
-- * perm is ORDER BY (user, resource, perm): a check and a lookup are both a primary-key range read.
--   A user reaching a resource by several paths has several rows: checks stop at the first, lookups
--   use DISTINCT. `manage` implies view (perm IN ('manage', 'view')).
-- * Writes: a new ACL row flows through its MV. Deletes use lightweight DELETE (visible to the next
--   SELECT, merged away later) and re-expand the touched resource from the sources; a group or admin
--   change recomputes the closure and the whole expanded table (O(dataset): rare in authorization
--   workloads, and only the tests do it). ReplacingMergeTree/CollapsingMergeTree were not chosen:
--   their answers are only exact after FINAL or a merge, which would make every check pay for FINAL.

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
CREATE TABLE IF NOT EXISTS {db}.perm (user Int32, resource Int32, perm LowCardinality(String)) ENGINE = MergeTree ORDER BY (user, resource, perm);

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

-- section: reach_init
INSERT INTO {db}.group_reach SELECT DISTINCT g, g FROM (
    SELECT object AS g FROM {db}.group_member UNION ALL SELECT object FROM {db}.group_manager
    UNION ALL SELECT object FROM {db}.group_child UNION ALL SELECT subject FROM {db}.group_child);

-- section: reach_step
INSERT INTO {db}.group_reach
    SELECT DISTINCT r.ancestor, c.subject FROM {db}.group_reach AS r
    INNER JOIN {db}.group_child AS c ON c.object = r.descendant
    WHERE (r.ancestor, c.subject) NOT IN (SELECT ancestor, descendant FROM {db}.group_reach);

-- section: membership
INSERT INTO {db}.group_membership SELECT DISTINCT r.ancestor, d.user FROM {db}.group_reach AS r
    INNER JOIN (SELECT object AS group, subject AS user FROM {db}.group_member
                UNION ALL SELECT object, subject FROM {db}.group_manager) AS d ON d.group = r.descendant;

-- section: expand
-- The MVs' SELECTs, run directly (no MV fires on inserts into perm itself); {where} limits resources.
INSERT INTO {db}.perm SELECT subject, object, 'manage' FROM {db}.resource_manager_user WHERE {where_obj};
INSERT INTO {db}.perm SELECT subject, object, 'view' FROM {db}.resource_viewer_user WHERE {where_obj};
INSERT INTO {db}.perm SELECT m.user, r.object, 'manage' FROM {db}.resource_manager_group AS r
    INNER JOIN {db}.group_membership AS m ON m.group = r.subject WHERE {where_r};
INSERT INTO {db}.perm SELECT m.user, r.object, 'view' FROM {db}.resource_viewer_group AS r
    INNER JOIN {db}.group_membership AS m ON m.group = r.subject WHERE {where_r};
INSERT INTO {db}.perm SELECT a.subject, r.object, 'manage' FROM {db}.resource_org AS r
    INNER JOIN {db}.org_admin AS a ON a.object = r.subject WHERE {where_r};
