-- The social model (schema/social.zed) in PostgreSQL, for backend `postgres` with --model social.
--
-- Same layout as postgres.sql: `-- section: NAME` blocks; `tables` in create_schema(), `indexes` in
-- build(). One narrow (object_id, subject_id) table per relation, in schema `authzbench`.
--
-- No closure is materialized: every social permission is a fixed-depth expression (no recursion),
-- so each check is a handful of primary-key probes. The operators of the schema map one to one:
--   union         OR
--   exclusion     AND NOT EXISTS (... blocked ...)
--   wildcard      EXISTS in *_public (visibility@user:*)
--   user#follower a join of *_followers_visible with user_follower
--   intersection  AND of two permission functions (interaction view)
-- The three permissions are SQL functions so check() is one round trip per call.

-- section: tables
CREATE SCHEMA IF NOT EXISTS authzbench;
CREATE TABLE IF NOT EXISTS authzbench.authz_meta (key text PRIMARY KEY, value text NOT NULL);
CREATE TABLE IF NOT EXISTS authzbench.user_self (object_id int4 NOT NULL, subject_id int4 NOT NULL);
CREATE TABLE IF NOT EXISTS authzbench.user_follower (object_id int4 NOT NULL, subject_id int4 NOT NULL);
CREATE TABLE IF NOT EXISTS authzbench.user_blocked (object_id int4 NOT NULL, subject_id int4 NOT NULL);
CREATE TABLE IF NOT EXISTS authzbench.user_public (object_id int4 NOT NULL, subject_id int4 NOT NULL);
CREATE TABLE IF NOT EXISTS authzbench.user_followers_visible (object_id int4 NOT NULL, subject_id int4 NOT NULL);
CREATE TABLE IF NOT EXISTS authzbench.content_owner (object_id int4 NOT NULL, subject_id int4 NOT NULL);
CREATE TABLE IF NOT EXISTS authzbench.content_public (object_id int4 NOT NULL, subject_id int4 NOT NULL);
CREATE TABLE IF NOT EXISTS authzbench.content_followers_visible (object_id int4 NOT NULL, subject_id int4 NOT NULL);
CREATE TABLE IF NOT EXISTS authzbench.interaction_creator (object_id int4 NOT NULL, subject_id int4 NOT NULL);
CREATE TABLE IF NOT EXISTS authzbench.interaction_parent (object_id int4 NOT NULL, subject_id int4 NOT NULL);

-- user view = self + (visibility - blocked)
CREATE OR REPLACE FUNCTION authzbench.view_user(v int4, x int4) RETURNS boolean
LANGUAGE sql STABLE AS $$
    SELECT EXISTS (SELECT 1 FROM authzbench.user_self WHERE object_id = x AND subject_id = v)
        OR ((EXISTS (SELECT 1 FROM authzbench.user_public WHERE object_id = x)
             OR EXISTS (SELECT 1 FROM authzbench.user_followers_visible fv
                        JOIN authzbench.user_follower f ON f.object_id = fv.subject_id
                        WHERE fv.object_id = x AND f.subject_id = v))
            AND NOT EXISTS (SELECT 1 FROM authzbench.user_blocked WHERE object_id = x AND subject_id = v))
$$;

-- content view = owner->self + (visibility - owner->blocked)
CREATE OR REPLACE FUNCTION authzbench.view_content(v int4, c int4) RETURNS boolean
LANGUAGE sql STABLE AS $$
    SELECT EXISTS (SELECT 1 FROM authzbench.content_owner o
                   JOIN authzbench.user_self s ON s.object_id = o.subject_id
                   WHERE o.object_id = c AND s.subject_id = v)
        OR ((EXISTS (SELECT 1 FROM authzbench.content_public WHERE object_id = c)
             OR EXISTS (SELECT 1 FROM authzbench.content_followers_visible fv
                        JOIN authzbench.user_follower f ON f.object_id = fv.subject_id
                        WHERE fv.object_id = c AND f.subject_id = v))
            AND NOT EXISTS (SELECT 1 FROM authzbench.content_owner o
                            JOIN authzbench.user_blocked b ON b.object_id = o.subject_id
                            WHERE o.object_id = c AND b.subject_id = v))
$$;

-- interaction view = creator->self + (creator->view & parent->view)
CREATE OR REPLACE FUNCTION authzbench.view_interaction(v int4, i int4) RETURNS boolean
LANGUAGE sql STABLE AS $$
    SELECT EXISTS (SELECT 1 FROM authzbench.interaction_creator cr
                   JOIN authzbench.user_self s ON s.object_id = cr.subject_id
                   WHERE cr.object_id = i AND s.subject_id = v)
        OR (EXISTS (SELECT 1 FROM authzbench.interaction_creator cr
                    WHERE cr.object_id = i AND authzbench.view_user(v, cr.subject_id))
            AND EXISTS (SELECT 1 FROM authzbench.interaction_parent p
                        WHERE p.object_id = i AND authzbench.view_content(v, p.subject_id)))
$$;

-- section: indexes
-- (object_id, subject_id) answers every probe above; follower also by follower for fan-out queries.
ALTER TABLE authzbench.user_self ADD PRIMARY KEY (object_id, subject_id);
ALTER TABLE authzbench.user_follower ADD PRIMARY KEY (object_id, subject_id);
ALTER TABLE authzbench.user_blocked ADD PRIMARY KEY (object_id, subject_id);
ALTER TABLE authzbench.user_public ADD PRIMARY KEY (object_id, subject_id);
ALTER TABLE authzbench.user_followers_visible ADD PRIMARY KEY (object_id, subject_id);
ALTER TABLE authzbench.content_owner ADD PRIMARY KEY (object_id, subject_id);
ALTER TABLE authzbench.content_public ADD PRIMARY KEY (object_id, subject_id);
ALTER TABLE authzbench.content_followers_visible ADD PRIMARY KEY (object_id, subject_id);
ALTER TABLE authzbench.interaction_creator ADD PRIMARY KEY (object_id, subject_id);
ALTER TABLE authzbench.interaction_parent ADD PRIMARY KEY (object_id, subject_id);
