"""Bytes on disk of one schema of a PostgreSQL database: the footprint of the engines that keep their data
in a PostgreSQL we can reach (SpiceDB's and OpenFGA's datastores)."""

from __future__ import annotations


def schema_bytes(dsn: str | None, password: str | None = None, schema: str = "public") -> int:
    """Tables and materialized views with their indexes and TOAST; 0 without a DSN (an external server
    whose datastore is not reachable from here: server_info says so)."""
    if not dsn:
        return 0
    import psycopg

    with psycopg.connect(dsn, password=password, connect_timeout=5) as conn:
        row = conn.execute("SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c "
                           "JOIN pg_namespace n ON n.oid = c.relnamespace "
                           "WHERE n.nspname = %s AND c.relkind IN ('r', 'm')", (schema,)).fetchone()
    return int(row[0]) if row else 0
