"""What `authzbench crosscheck` needs of postgres: pgbench runs the adapter's own check statement, and the
bare driver call is that statement prepared on the adapter's connection (libpq's PQexecPrepared)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from authzbench.systems.postgres.adapter import check_statement

TOOL = "pgbench"
CLIENT = "psycopg 3 over libpq, the query prepared after 5 runs (psycopg's default)"
statement = check_statement  # perm -> (sql, params): the script pgbench runs


def driver_call(backend: Any, args: tuple) -> Callable[[], Any]:
    user, perm, resource = args
    sql, params = check_statement(perm)
    values = [b"%d" % {"user": user, "resource": resource}[p] for p in params]
    pg = backend.conn.pgconn
    stmt = backend._statements.get(sql) or backend._prepare(pg, sql)
    return lambda: pg.exec_prepared(stmt, values, result_format=1)
