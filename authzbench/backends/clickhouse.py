"""ClickHouse through clickhouse-connect: embedded chdb locally (chdb:///DATA_DIR), a ClickHouse server
over HTTP under compose/external (http://user:pw@host:8123). Same code path; only the DSN differs.

Model in schema/clickhouse.sql: MergeTree relations, a closed group membership, and streaming
materialized views expanding every ACL insert into perm(user, resource, perm).
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any, ClassVar

import pyarrow as pa

from authzbench.backends.base import Backend, BuildStats, LoadStats, Progress, ServerInfo, no_progress
from authzbench.backends.sqlfile import schema_sections
from authzbench.dataset import Dataset
from authzbench.errors import BackendUnavailable, UserError
from authzbench.model import ACL_RELATIONS, Relationship

SCHEMA_FILE = Path(__file__).resolve().parents[2] / "schema" / "clickhouse.sql"
# Load order: the closure's inputs first, then what the materialized views expand (they join the
# closure and org_admin at insert time).
CLOSURE_INPUTS = ("org_admin", "org_member", "group_member", "group_manager", "group_child")
EXPANDED = ("resource_org", *ACL_RELATIONS)
PERM_FILTER = {"manage": "perm = 'manage'", "view": "perm IN ('manage', 'view')"}


class ClickHouseBackend(Backend):
    name: ClassVar[str] = "clickhouse"
    # chdb is an in-process engine: workers are threads sharing it (one engine per process).
    concurrency: ClassVar[str] = "thread"
    batch_rows: ClassVar[int] = 1_000_000  # rows per insert block (large blocks: ClickHouse likes few parts)
    db: ClassVar[str] = "authzbench"

    @classmethod
    def endpoint_from_url(cls, url: str) -> dict[str, Any]:
        return {"dsn": url}

    def connect(self) -> None:
        import clickhouse_connect

        dsn = self.endpoint.get("dsn", "")
        self.embedded = dsn.startswith("chdb:")
        # Timeouts mean something only over HTTP (chdb would warn and ignore them).
        kwargs = {} if self.embedded else {"connect_timeout": 5,
                                           "send_receive_timeout": int(self.options.get("timeout_s") or 60)}
        try:
            self.client = clickhouse_connect.get_client(dsn=dsn, **kwargs)
            self.version = self.client.query("SELECT version()").result_rows[0][0]
        except ImportError as e:
            raise BackendUnavailable(f"clickhouse: {e}; pip install 'authzbench[chdb]'") from None
        except Exception as e:  # noqa: BLE001 - any driver/transport failure is one line
            raise BackendUnavailable(f"clickhouse: cannot connect to {_public(dsn)}: "
                                     f"{str(e).strip().splitlines()[0][:200]}") from None
        self.sql = {k: [s.replace("{db}", self.db) for s in v] for k, v in schema_sections(SCHEMA_FILE).items()}

    def close(self) -> None:
        client = getattr(self, "client", None)
        if client is not None and not self.embedded:
            client.close()

    def server_info(self) -> ServerInfo:
        if self.embedded:
            return ServerInfo("ClickHouse", self.version, f"ClickHouse {self.version} embedded (chdb)",
                              comparable=False, notes=["in-process engine: latencies include no network round "
                                                       "trip and no server, so they are not comparable with a "
                                                       "ClickHouse server's"])
        return ServerInfo("ClickHouse", self.version, f"ClickHouse {self.version} (HTTP)")

    def _run(self, section: str, **fmt: str) -> None:
        for stmt in self.sql[section]:
            self.client.command(stmt.format(**fmt) if fmt else stmt)

    # schema and data ---------------------------------------------------------------------------
    def create_schema(self) -> None:
        self._run("tables")
        self._run("views")

    def load(self, ds: Dataset, progress: Progress = no_progress) -> LoadStats:
        batch_seconds: list[float] = []
        rows = 0

        def insert(rel: str) -> None:
            nonlocal rows
            for df in ds.iter_batches(rel, self.batch_rows):
                t0 = time.perf_counter()
                self.client.insert_arrow(rel, pa.Table.from_pandas(df, preserve_index=False), database=self.db)
                batch_seconds.append(time.perf_counter() - t0)
                rows += len(df)
                progress(len(df))

        for rel in CLOSURE_INPUTS:
            insert(rel)
        t0 = time.perf_counter()
        self._close_groups()
        closure_s = time.perf_counter() - t0
        for rel in EXPANDED:  # each insert is expanded into perm by its materialized view
            insert(rel)
        self._last_acl = {rel: ds.table(rel).iloc[-1] for rel in ("resource_manager_user", "resource_viewer_user")}
        return LoadStats(rows=rows, batch_rows=self.batch_rows, batch_seconds=batch_seconds,
                         notes={"method": "insert_arrow blocks; ACLs expanded by materialized views at insert",
                                "group_closure_seconds": round(closure_s, 3)})

    def _close_groups(self) -> None:
        """Group reach as a fixpoint (terminates on cycles), then membership = reach x direct members."""
        for t in ("group_reach", "group_membership"):
            self.client.command(f"TRUNCATE TABLE {self.db}.{t}")
        self._run("reach_init")
        count = self._count("group_reach")
        while True:
            self._run("reach_step")
            new = self._count("group_reach")
            if new == count:
                break
            count = new
        self._run("membership")

    def build(self) -> BuildStats:
        """Ingest-to-closure lag: from the last insert until the expanded table answers the last
        inserted ACL rows correctly (materialized views in chdb run synchronously in the insert)."""
        t0 = time.perf_counter()
        probes = [(int(r["subject"]), "manage" if "manager" in rel else "view", int(r["object"]))
                  for rel, r in getattr(self, "_last_acl", {}).items()]
        while not all(self.check(*p) for p in probes):
            if time.perf_counter() - t0 > 60:
                raise BackendUnavailable("clickhouse: expanded table incomplete 60 s after the last insert")
            time.sleep(0.05)
        rows = self._count("perm")
        return BuildStats("ingest-to-closure lag (expanded table answers the last inserted ACLs)",
                          time.perf_counter() - t0, rows=rows, notes={"perm_rows": rows})

    def _count(self, table: str) -> int:
        return int(self.client.query(f"SELECT count() FROM {self.db}.{table}").result_rows[0][0])

    def loaded_hash(self) -> str | None:
        try:
            rows = self.client.query(f"SELECT value FROM {self.db}.meta FINAL WHERE key = 'dataset_hash'").result_rows
        except Exception:  # noqa: BLE001 - no database yet
            return None
        return rows[0][0] if rows else None

    def mark_loaded(self, dataset_hash: str) -> None:
        self.client.command(f"INSERT INTO {self.db}.meta VALUES ('dataset_hash', %(h)s)", parameters={"h": dataset_hash})

    # operations ----------------------------------------------------------------------------------
    def check(self, user: int, perm: str, resource: int) -> bool:
        rows = self.client.query(
            f"SELECT 1 FROM {self.db}.perm WHERE user = {{u:Int32}} AND resource = {{r:Int32}} AND "
            f"{_filter(perm)} LIMIT 1", parameters={"u": user, "r": resource}).result_rows
        return bool(rows)

    def lookup_resources(self, user: int, perm: str) -> Iterable[int]:
        with self.client.query_row_block_stream(
                f"SELECT DISTINCT resource FROM {self.db}.perm WHERE user = {{u:Int32}} AND {_filter(perm)}",
                parameters={"u": user}) as stream:
            for block in stream:
                yield from (r[0] for r in block)

    def write(self, rel: Relationship) -> None:
        self.client.insert(rel.relation, [[rel.object, rel.subject]], column_names=["object", "subject"],
                           database=self.db)  # an ACL row flows through its materialized view
        if rel.relation not in EXPANDED:
            self._rebuild_all()

    def delete(self, rel: Relationship) -> None:
        self.client.command(f"DELETE FROM {self.db}.{rel.relation} WHERE object = %(o)s AND subject = %(s)s",
                            parameters={"o": rel.object, "s": rel.subject})
        if rel.relation in ACL_RELATIONS:
            # Another path may still grant the same pair: drop the resource's rows, re-expand it.
            self.client.command(f"DELETE FROM {self.db}.perm WHERE resource = %(r)s", parameters={"r": rel.object})
            self._run("expand", where_obj=f"object = {int(rel.object)}", where_r=f"r.object = {int(rel.object)}")
        else:
            self._rebuild_all()

    def _rebuild_all(self) -> None:
        """Group or admin changes: recompute the closure and the whole expanded table."""
        self._close_groups()
        self.client.command(f"TRUNCATE TABLE {self.db}.perm")
        self._run("expand", where_obj="1", where_r="1")

    def baseline_roundtrip(self) -> None:
        self.client.query("SELECT 1")

    def footprint(self) -> int:
        rows = self.client.query("SELECT sum(bytes_on_disk) FROM system.parts WHERE database = %(d)s AND active",
                                 parameters={"d": self.db}).result_rows
        return int(rows[0][0] or 0)

    def drop(self) -> None:
        self.client.command(f"DROP DATABASE IF EXISTS {self.db}")


def _filter(perm: str) -> str:
    try:
        return PERM_FILTER[perm]
    except KeyError:
        raise UserError(f"unknown permission {perm!r}; valid: manage, view") from None


def _public(dsn: str) -> str:
    import re

    return re.sub(r"(://[^:/@]+):[^@]*@", r"\1:***@", dsn)
