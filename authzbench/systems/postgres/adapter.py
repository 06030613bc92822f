"""PostgreSQL: normalized relation tables + a materialized group-membership closure (postgres.sql).

Ingest is binary COPY, built with numpy straight from the dataset's DataFrames (no per-row Python);
indexes and the closure are built afterwards in build(). A check is one prepared EXISTS query over
the resource_grant view; a lookup streams its rows in chunks instead of buffering the whole result.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import psycopg
from psycopg import pq, sql

from authzbench.backends.base import (
    Backend,
    Batch,
    Batches,
    Build,
    BuildStats,
    Load,
    LoadStats,
    Progress,
    ServerInfo,
    Step,
    no_progress,
)
from authzbench.backends.common import first_line, public_dsn
from authzbench.backends.deadline import Watchdog, within_deadline
from authzbench.backends.sqlfile import schema_sections
from authzbench.core.errors import BackendUnavailable, UserError
from authzbench.schema.dataset import Dataset
from authzbench.schema.model import (
    PERMISSIONS,
    REBAC_RELATIONS,
    SOCIAL_PERMISSIONS,
    SOCIAL_RELATIONS,
    Relationship,
)

SCHEMA_FILE = Path(__file__).resolve().parent / "postgres.sql"
SOCIAL_SCHEMA_FILE = SCHEMA_FILE.with_name("postgres_social.sql")
SCHEMA = "authzbench"

# Column names of each relation table, (object, subject), as in postgres.sql.
COLUMNS: dict[str, tuple[str, str]] = {
    "org_admin": ("org_id", "user_id"),
    "org_member": ("org_id", "user_id"),
    "group_org": ("group_id", "org_id"),
    "group_member": ("group_id", "user_id"),
    "group_manager": ("group_id", "user_id"),
    "group_child": ("parent_id", "child_id"),
    "resource_org": ("resource_id", "org_id"),
    "resource_manager_user": ("resource_id", "user_id"),
    "resource_manager_group": ("resource_id", "group_id"),
    "resource_viewer_user": ("resource_id", "user_id"),
    "resource_viewer_group": ("resource_id", "group_id"),
}
COLUMNS.update({r: ("object_id", "subject_id") for r in SOCIAL_RELATIONS})
# Writes to these change group_membership.
GROUP_RELATIONS = frozenset({"group_member", "group_manager", "group_child"})

# 'manage' grants imply view. The perm literals let the planner drop the arms a check cannot use.
PERM_FILTER = {"manage": "perm = 'manage'", "view": "perm IN ('manage', 'view')"}
CHECK_SQL = {p: f"SELECT EXISTS (SELECT 1 FROM authzbench.resource_grant "
                f"WHERE resource_id = %s AND user_id = %s AND {f})" for p, f in PERM_FILTER.items()}
LOOKUP_SQL = {p: f"SELECT DISTINCT resource_id FROM authzbench.resource_grant WHERE user_id = %s AND {f}"
              for p, f in PERM_FILTER.items()}
# social: check(user, "view_content", id) -> the permission function of postgres_social.sql.
CHECK_SQL.update({p: f"SELECT authzbench.{p}(%s, %s)" for p in SOCIAL_PERMISSIONS})


def check_statement(perm: str) -> tuple[str, tuple[str, str]]:
    """The query check() runs for `perm` and the names of its two parameters in order ("resource", "user"
    for rebac): what `authzbench crosscheck` hands to pgbench as a custom script."""
    if perm in SOCIAL_PERMISSIONS:
        return CHECK_SQL[perm], ("user", "resource")
    return CHECK_SQL[_perm(perm)], ("resource", "user")

def pq_placeholders(query: str) -> bytes:
    """A query's %s placeholders as libpq's own ($1, $2, ...), for a statement prepared on the connection."""
    parts = query.split("%s")
    return ("".join(f"{p}${i}" for i, p in enumerate(parts[:-1], 1)) + parts[-1]).encode()


# Binary COPY: 11-byte signature, flags, header-extension length; then per row a field count and
# (length, value) per field, all big-endian; a -1 field count ends the stream.
COPY_HEADER = b"PGCOPY\n\xff\r\n\x00" + np.array([0, 0], ">i4").tobytes()
COPY_TRAILER = np.array([-1], ">i2").tobytes()
COPY_ROW = np.dtype([("n", ">i2"), ("l1", ">i4"), ("v1", ">i4"), ("l2", ">i4"), ("v2", ">i4")])


def copy_block(obj: np.ndarray, sub: np.ndarray) -> bytes:
    """A complete binary COPY stream for (object, subject) int4 pairs, built without Python loops."""
    rows = np.empty(len(obj), COPY_ROW)
    rows["n"], rows["l1"], rows["l2"] = 2, 4, 4
    rows["v1"], rows["v2"] = obj, sub
    return COPY_HEADER + rows.tobytes() + COPY_TRAILER


class PostgresBackend(Backend):
    name: ClassVar[str] = "postgres"
    counts_rows = True
    batch_rows: ClassVar[int] = 65536  # rows per COPY statement (one timed batch)
    lookup_chunk: ClassVar[int] = 1024  # rows per streamed chunk of a lookup

    @classmethod
    def endpoint_from_url(cls, url: str) -> dict[str, Any]:
        return {"dsn": url}

    @classmethod
    def endpoint_from_compose(cls, c: Any) -> dict[str, Any]:
        return {"dsn": f"postgresql://postgres@127.0.0.1:{c.port('postgres', 5432)}/postgres",
                "password": c.environment("postgres")["POSTGRES_PASSWORD"],
                "server_settings": c.pg_settings("postgres"),
                "where": f"compose, {c.spec['services']['postgres']['image']}"}

    # lifecycle ---------------------------------------------------------------------------------
    def connect(self) -> None:
        self.model = self.options.get("model", "rebac")
        self.sql = schema_sections(SOCIAL_SCHEMA_FILE if self.model == "social" else SCHEMA_FILE)
        kwargs: dict[str, Any] = {"autocommit": True, "connect_timeout": 5}
        if self.endpoint.get("password"):
            kwargs["password"] = self.endpoint["password"]
        timeout_s = self.options.get("timeout_s")
        self._watchdog: Watchdog | None = None
        if timeout_s:
            # Server-side per-statement limit: a slow query is cancelled by the server, not abandoned.
            kwargs["options"] = f"-c statement_timeout={int(float(timeout_s) * 1000)}"
            # libpq's own client-side limit for (re)connecting; it counts whole seconds, at least 2.
            kwargs["connect_timeout"] = max(2, math.ceil(float(timeout_s)))
        dsn = self.endpoint.get("dsn") or self.endpoint.get("url")
        if not dsn:
            raise UserError(f"{self.name}: endpoint has no dsn")
        self._dsn, self._kwargs = dsn, kwargs
        try:
            self.conn = psycopg.connect(dsn, **kwargs)
        except psycopg.Error as e:  # refused, bad password, unknown database, malformed DSN
            raise BackendUnavailable(
                f"{self.name}: cannot connect to {public_dsn(dsn)}: {first_line(e)}") from None
        self._statements: dict[str, bytes] = {}  # check query -> its statement prepared on this connection
        if timeout_s:
            # A frozen server cannot enforce statement_timeout: the client-side deadline ends the op.
            self._watchdog = Watchdog(float(timeout_s), lambda: self.conn.fileno())

    @contextlib.contextmanager
    def _op_deadline(self) -> Iterator[None]:
        """Run one measured op within options["timeout_s"], client side: past it the op raises TimeoutError
        (the connection is made again by the next op)."""
        seq = self._op_begin()
        try:
            yield
        except Exception as e:
            if (err := self._op_error(seq, e)) is e:
                raise
            raise err from None
        finally:
            self._op_end(seq)

    def _op_begin(self) -> int | None:
        """Before a measured op: the connection made again if the last op's deadline shut it (or it broke),
        the watchdog armed; the arming's number, None when the op has no deadline."""
        wd = getattr(self, "_watchdog", None)
        if wd is None:
            return None
        # conn.closed or conn.broken, in one read
        if wd.tripped or self.conn.pgconn.status == pq.ConnStatus.BAD:
            wd.tripped = False
            with contextlib.suppress(Exception):
                self.conn.close()
            try:
                self.conn = psycopg.connect(self._dsn, **self._kwargs)
                self._statements = {}
            except psycopg.OperationalError as e:
                if "timeout" in str(e):
                    raise TimeoutError(
                        f"reconnect: no answer within {self._kwargs['connect_timeout']} s") from None
                raise
        return wd.arm()

    def _op_error(self, seq: int | None, e: BaseException) -> BaseException:
        """What a failed op raises: TimeoutError past the client-side deadline or the server's
        statement_timeout, else its own error."""
        wd = getattr(self, "_watchdog", None)
        if seq is None or wd is None or not isinstance(e, psycopg.Error):
            return e
        if wd.fired(seq):
            return TimeoutError(f"no answer within {wd.timeout_s:g} s (client-side deadline)")
        if isinstance(e, psycopg.errors.QueryCanceled):  # the server's statement_timeout
            return TimeoutError(f"statement_timeout ({wd.timeout_s:g} s): {first_line(e)}")
        return e

    def _op_end(self, seq: int | None) -> None:
        if seq is not None:
            self._watchdog.disarm()

    def close(self) -> None:
        if getattr(self, "_watchdog", None) is not None:
            self._watchdog.close()
        conn = getattr(self, "conn", None)
        if conn is not None:
            conn.close()

    def server_info(self) -> ServerInfo:
        version = str(self._one("SHOW server_version"))
        settings = self.endpoint.get("server_settings") or {}
        notes = ["tuned for benchmarking: " + ", ".join(f"{k}={v}" for k, v in settings.items()
                                                         if not k.startswith("log_"))] if settings else []
        # The official image's server is a Debian build too: only the endpoint can tell compose from native.
        where = self.endpoint.get("where") or (
            "Debian, native" if "Debian" in version and settings else "external")
        return ServerInfo("PostgreSQL", version, f"PostgreSQL {version.split()[0]} ({where})", notes=notes)

    # schema and data ---------------------------------------------------------------------------
    def create_schema(self) -> None:
        for stmt in self.sql["tables"]:
            self.conn.execute(stmt)

    def load(self, ds: Dataset, progress: Progress = no_progress) -> Load:
        """One binary COPY per batch. Each table is truncated and filled in one transaction, so COPY
        FREEZE can write its rows already frozen and all-visible: no VACUUM pass is needed before
        index-only scans work."""
        rows = yield Batches("postgres: COPY", self._copies(ds))
        return LoadStats(rows=rows, batch_rows=self.batch_rows,
                         notes={"method": "binary COPY FREEZE, one transaction per table"})

    def _copies(self, ds: Dataset) -> Iterator[Batch]:
        # group_org is metadata no permission reads; loading it would only cost time.
        for rel in ds.authz_relations():
            table = sql.Identifier(SCHEMA, rel)
            with self.conn.transaction():  # open while its batches are sent: they are sent one by one
                self.conn.execute(sql.SQL("TRUNCATE {}").format(table))
                copy_sql = sql.SQL("COPY {} FROM STDIN (FORMAT BINARY, FREEZE)").format(table)
                for df in ds.iter_batches(rel, self.batch_rows):
                    yield Batch(len(df), partial(self._copy, copy_sql, df))

    def _copy(self, copy_sql: sql.Composed, df: Any) -> None:
        # encoded inside the batch's time
        block = copy_block(df["object"].to_numpy(), df["subject"].to_numpy())
        with self.conn.cursor() as cur, cur.copy(copy_sql) as copy:
            copy.write(block)

    def build(self) -> Build:
        yield Step("index_seconds", lambda: [self.conn.execute(stmt) for stmt in self.sql["indexes"]])
        if self.model == "social":  # no closure: every social permission has a fixed depth
            yield Step("",
                       lambda: self.conn.execute(
                           "VACUUM (ANALYZE) " + ", ".join(f"{SCHEMA}.{t}" for t in SOCIAL_RELATIONS)))
            return BuildStats("primary keys + VACUUM ANALYZE")
        yield Step("closure_seconds", self._build_membership)
        # Fresh statistics, or the planner guesses row counts of freshly loaded tables; VACUUM sets the
        # visibility map of group_membership (filled by INSERT, not COPY FREEZE) so lookups through it
        # are index-only too. It skips the already all-visible pages of the frozen tables.
        members = yield Step("", self._vacuum_and_count)
        return BuildStats("indexes + group_membership closure (recursive CTE) + VACUUM ANALYZE", rows=members)

    def _build_membership(self) -> None:
        with self.conn.transaction():
            for stmt in self.sql["build_membership"]:
                self.conn.execute(stmt)

    def _vacuum_and_count(self) -> int:
        self.conn.execute(
            "VACUUM (ANALYZE) " + ", ".join(f"{SCHEMA}.{t}" for t in (*REBAC_RELATIONS, "group_membership")))
        return int(self._one("SELECT count(*) FROM authzbench.group_membership"))

    def loaded_hash(self) -> str | None:
        try:
            return self._one("SELECT value FROM authzbench.authz_meta WHERE key = 'dataset_hash'")
        except psycopg.errors.UndefinedTable:
            return None

    def mark_loaded(self, dataset_hash: str) -> None:
        self.conn.execute("INSERT INTO authzbench.authz_meta (key, value) VALUES ('dataset_hash', %s) "
                          "ON CONFLICT (key) DO UPDATE SET value = excluded.value", (dataset_hash,))

    # operations ----------------------------------------------------------------------------------
    @within_deadline
    def check(self, user: int, perm: str, resource: int) -> bool:
        # Parameters in check_statement()'s order (tests/unit/test_crosscheck.py holds the two together). The
        # query prepared once on the connection and run by libpq's own PQexecPrepared, its answer read in
        # binary: psycopg's cursor.execute (query conversion, its prepare cache, the result's row maker) cost
        # ~40 µs of a ~0.2 ms check, over what pgbench -M prepared spends (issue 56).
        if perm in SOCIAL_PERMISSIONS:
            query, first, second = CHECK_SQL[perm], user, resource
        else:
            query, first, second = CHECK_SQL[_perm(perm)], resource, user
        pg = self.conn.pgconn
        name = self._statements.get(query) or self._prepare(pg, query)
        res = pg.exec_prepared(name, [b"%d" % first, b"%d" % second], result_format=1)
        if res.status != pq.ExecStatus.TUPLES_OK:
            raise psycopg.errors.error_from_result(res, encoding=self.conn.info.encoding)
        return res.ntuples > 0 and res.get_value(0, 0) == b"\x01"

    def _prepare(self, pg: Any, query: str) -> bytes:
        """A check query prepared on this connection (again after a reconnect): its statement's name."""
        name = b"authzbench_check_%d" % len(self._statements)
        res = pg.prepare(name, pq_placeholders(query))
        if res.status != pq.ExecStatus.COMMAND_OK:
            raise psycopg.errors.error_from_result(res, encoding=self.conn.info.encoding)
        self._statements[query] = name
        return name

    @within_deadline
    def lookup_resources(self, user: int, perm: str) -> Iterator[int]:
        # stream() fetches in chunks of lookup_chunk rows (libpq chunked-rows mode): bounded client
        # memory for lookups of 100k+ resources, in one round trip - a named (server-side) cursor
        # would add DECLARE, FETCH and CLOSE round trips to every lookup.
        with self.conn.cursor() as cur:
            for (rid,) in cur.stream(LOOKUP_SQL[_perm(perm)], (user,), size=self.lookup_chunk):
                yield rid

    @within_deadline
    def write(self, rel: Relationship) -> None:
        self._change(rel, insert=True)

    @within_deadline
    def delete(self, rel: Relationship) -> None:
        self._change(rel, insert=False)

    def _change(self, rel: Relationship, *, insert: bool) -> None:
        try:
            obj_col, sub_col = COLUMNS[rel.relation]
        except KeyError:
            raise UserError(f"{self.name}: unknown relation {rel.relation!r}") from None
        table = sql.Identifier(SCHEMA, rel.relation)
        if insert:
            stmt = sql.SQL("INSERT INTO {} ({}, {}) VALUES (%s, %s) ON CONFLICT DO NOTHING").format(
                table, sql.Identifier(obj_col), sql.Identifier(sub_col))
        else:
            stmt = sql.SQL("DELETE FROM {} WHERE {} = %s AND {} = %s").format(
                table, sql.Identifier(obj_col), sql.Identifier(sub_col))
        if rel.relation not in GROUP_RELATIONS or self.model == "social":
            self.rows_touched += self.conn.execute(stmt, (rel.object, rel.subject)).rowcount
            return
        # A group edge changes membership of its group (the parent, for group_child) and of every
        # ancestor; recompute those groups in the same transaction. The advisory lock serializes
        # closure maintenance so two concurrent group writes cannot each recompute from a snapshot
        # missing the other's edge. Ancestors are taken on the graph that contains the edge (after an
        # insert, before a delete), so a cycle closed or opened by the edge is covered.
        with self.conn.transaction():
            self.conn.execute("SELECT pg_advisory_xact_lock(hashtext('authzbench.group_membership'))")
            if insert:
                self.rows_touched += self.conn.execute(stmt, (rel.object, rel.subject)).rowcount
            groups = [
                r[0] for r in self.conn.execute(self.sql["affected_groups"][0], {"groups": [rel.object]})]
            if not insert:
                self.rows_touched += self.conn.execute(stmt, (rel.object, rel.subject)).rowcount
            for s in self.sql["refresh_membership"]:  # closure rows deleted and re-inserted
                self.rows_touched += max(0, self.conn.execute(s, {"groups": groups}).rowcount)

    @within_deadline
    def baseline_roundtrip(self) -> None:
        self.conn.execute("SELECT 1").fetchone()

    def footprint(self) -> int:
        return int(self._one(
            "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c "
            "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = %s AND c.relkind IN ('r', 'm')",
            (SCHEMA,)))

    def drop(self) -> None:
        self.conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(SCHEMA)))

    # helpers -----------------------------------------------------------------------------------
    def _one(self, query: str, params: Any = None) -> Any:
        row = self.conn.execute(query, params).fetchone()
        return row[0] if row else None


def _perm(perm: str) -> str:
    if perm not in PERMISSIONS:
        raise UserError(f"unknown permission {perm!r}; valid: {', '.join(PERMISSIONS)}")
    return perm


assert set(COLUMNS) == set(REBAC_RELATIONS) | set(SOCIAL_RELATIONS), "COLUMNS must cover every relation"
