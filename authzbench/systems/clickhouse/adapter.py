"""ClickHouse through clickhouse-connect: embedded chdb locally (chdb:///DATA_DIR), a ClickHouse server
over HTTP under compose/external (http://user:pw@host:8123). Same code path; only the DSN differs.

Model in clickhouse.sql (its header explains it): MergeTree relations, a group closure built
after the group tables are loaded, and streaming materialized views expanding every ACL insert into
perm(user, resource, perm). Writes and deletes recompute exactly the affected slice of perm.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, ClassVar

import pyarrow as pa
import pyarrow.parquet as pq

from authzbench.backends import closure_maintenance as maintenance
from authzbench.backends.base import (
    Backend,
    BackendOptions,
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
from authzbench.backends.sqlfile import schema_sections
from authzbench.core.errors import BackendUnavailable, UserError
from authzbench.schema.dataset import Dataset
from authzbench.schema.model import ACL_RELATIONS, Relationship
from authzbench.schema.model_rules import Reach

SCHEMA_FILE = Path(__file__).resolve().parent / "clickhouse.sql"
# Load order: the closure's inputs first, then what the materialized views expand (they join the
# closure and org_admin as they stand at insert time).
CLOSURE_INPUTS = ("org_admin", "org_member", "group_member", "group_manager", "group_child")
EXPANDED = ("resource_org", *ACL_RELATIONS)  # each has a materialized view into perm
RELATIONS = (*CLOSURE_INPUTS, *EXPANDED)
PERMS = ("manage", "view")
# Group edges rebuild group_reach (TRUNCATE + fixpoint) and users' rows: two at once would interleave. The
# workers are threads of one process (concurrency "thread"), so a process-wide lock serializes them.
GROUP_LOCK = threading.Lock()
# build(): give up on the expanded table after this many probe rounds, PROBE_PAUSE_S apart (>= 60 s)
PROBE_ROUNDS, PROBE_PAUSE_S = 1200, 0.05
# A check reads one granule: a single reading thread halves its latency (measured 4.7 -> 2.2 ms in
# chdb on 2 cores), where the default spins up a reader per core for nothing.
POINT = {"max_threads": 1}


@dataclass(frozen=True)
class ClickHouseOptions(BackendOptions):
    optimize: bool = True  # build(): merge perm into one part (OPTIMIZE ... FINAL)
    data_dir: str | None = None  # native provisioner: keep chdb's database here across runs
    chdb_data_dir: str | None = None  # the same, under its older name


class ClickHouseBackend(Backend):
    Options = ClickHouseOptions
    name: ClassVar[str] = "clickhouse"
    # chdb is an in-process engine: workers are threads sharing it (one engine per process).
    concurrency: ClassVar[str] = "thread"
    batch_rows: ClassVar[int] = 1_000_000  # rows per insert block (large blocks: ClickHouse likes few parts)

    def __init__(self, endpoint: dict[str, Any], options: dict[str, Any] | None = None) -> None:
        super().__init__(endpoint, options)
        self.db = str(self.endpoint.get("database") or "authzbench")
        self.embedded = str(self.endpoint.get("dsn", "")).startswith("chdb:")
        self._probes: list[tuple[int, str, int]] = []

    @classmethod
    def endpoint_from_url(cls, url: str) -> dict[str, Any]:
        return {"dsn": url}

    @classmethod
    def endpoint_from_compose(cls, c: Any) -> dict[str, Any]:
        return {"dsn": f"http://default:@127.0.0.1:{c.port('clickhouse', 8123)}"}

    # lifecycle ---------------------------------------------------------------------------------
    def connect(self) -> None:
        dsn = str(self.endpoint.get("dsn") or "")
        if not re.match(r"(chdb|https?|clickhouse)://", dsn):
            raise UserError(f"clickhouse: DSN must be chdb:///DATA_DIR or http(s)://user:password@host:port, "
                            f"got {public_dsn(dsn)!r}")
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", self.db):
            raise UserError(f"clickhouse: invalid database name {self.db!r}")
        try:
            import clickhouse_connect
        except ImportError:
            raise BackendUnavailable("clickhouse: clickhouse-connect is not installed: pip install "
                                     "'authzbench[clickhouse]'") from None
        # max_execution_time is enforced by the engine itself, embedded or not; the socket timeouts
        # mean something only over HTTP (chdb would warn and ignore them).
        timeout = self.options.get("timeout_s")
        settings = {"max_execution_time": max(1, round(float(timeout)))} if timeout else {}
        kwargs: dict[str, Any] = {} if self.embedded else {
            "connect_timeout": 5, "send_receive_timeout": int(float(timeout or 60)) + 5}
        try:
            self.client = clickhouse_connect.get_client(dsn=dsn, settings=settings, **kwargs)
            self.version = str(self.client.query("SELECT version()").result_rows[0][0])
        except ImportError as e:  # chdb:// without the chdb package
            raise BackendUnavailable(f"clickhouse: {e.name or e} is not installed: pip install "
                                     f"'authzbench[clickhouse]'") from None
        except Exception as e:  # noqa: BLE001 - any driver/transport failure is one line
            why = (
                "the data dir is in use by another process (chdb opens a data dir in one process at a time)"
                if self.embedded and _locked(dsn)
                else first_line(e, 200))
            raise BackendUnavailable(f"clickhouse: cannot connect to {public_dsn(dsn)}: {why}") from None
        self.sql = {
            k: [s.replace("{db}", self.db) for s in v] for k, v in schema_sections(SCHEMA_FILE).items()}
        db = self.db
        self._check_sql = {
            "manage": f"SELECT 1 FROM {db}.perm WHERE user = {{u:Int32}} AND resource = {{r:Int32}} "
                      f"AND perm = 'manage' LIMIT 1",
            # manage implies view: any row grants view
            "view": f"SELECT 1 FROM {db}.perm WHERE user = {{u:Int32}} AND resource = {{r:Int32}} LIMIT 1"}
        self._lookup_sql = {
            "manage": f"SELECT DISTINCT resource FROM {db}.perm WHERE user = {{u:Int32}} AND perm = 'manage'",
            "view": f"SELECT DISTINCT resource FROM {db}.perm WHERE user = {{u:Int32}}"}

    def close(self) -> None:
        client = getattr(self, "client", None)
        # Embedded: every client of the process shares one chdb engine; closing one would end the
        # other threads' sessions too.
        if client is not None and not self.embedded:
            client.close()

    def server_info(self) -> ServerInfo:
        if self.embedded:
            return ServerInfo(
                "ClickHouse", self.version, f"ClickHouse {self.version} embedded (chdb)", comparable=False,
                notes=["in-process engine: latencies include no network round "
                       "trip and no server, so they are not comparable with a ClickHouse server's"])
        return ServerInfo("ClickHouse", self.version, f"ClickHouse {self.version} (HTTP)")

    def _run(self, section: str, where: str = "1") -> None:
        for stmt in self.sql[section]:
            self.client.command(stmt.replace("{where}", where))

    def _ints(self, sql: str, **params: Any) -> list[int]:
        return [int(r[0]) for r in self.client.query(sql, parameters=params).result_rows]

    # schema and data ---------------------------------------------------------------------------
    def create_schema(self) -> None:
        self._run("tables")
        self._run("views")

    def load(self, ds: Dataset, progress: Progress = no_progress) -> Load:
        last: dict[str, tuple[int, int]] = {}
        source_rows = yield Batches("clickhouse: insert_arrow", self._blocks(ds, CLOSURE_INPUTS, last),
                                    name="group_inputs_seconds")
        yield Step("group_closure_seconds", lambda: (self._close_groups(), self._run("membership")))
        # each block is expanded by its MV in the insert
        expanded_rows = yield Batches("clickhouse: insert_arrow", self._blocks(ds, EXPANDED, last),
                                      name="expanded_insert_seconds")
        self._probes = self._probes_for(last)
        perm_rows, reach, members = (self._count(t) for t in ("perm", "group_reach", "group_membership"))
        return LoadStats(
            rows=source_rows + expanded_rows + reach + members + perm_rows, batch_rows=self.batch_rows,
            notes={"method": "insert_arrow blocks; resource_org and ACL blocks expanded into perm by "
                             "materialized "
                   "views inside the INSERT", "source_rows": source_rows + expanded_rows,
                   "group_reach_pairs": reach, "group_membership_pairs": members, "perm_rows": perm_rows})

    def _blocks(
        self, ds: Dataset, relations: Iterable[str], last: dict[str, tuple[int, int]]) -> Iterator[Batch]:
        """One insert_arrow of batch_rows rows at a time, relation by relation; `last` keeps each relation's
        last row (the build's probes)."""
        for rel in relations:
            for batch in pq.ParquetFile(ds.file(rel)).iter_batches(batch_size=self.batch_rows,
                                                                     columns=["object", "subject"]):
                yield Batch(batch.num_rows, partial(self._insert, rel, batch))
                if batch.num_rows:
                    last[rel] = (int(batch.column(0)[-1].as_py()), int(batch.column(1)[-1].as_py()))

    def _insert(self, rel: str, batch: pa.RecordBatch) -> None:
        self.client.insert_arrow(rel, pa.Table.from_batches([batch]), database=self.db)

    def _close_groups(self) -> None:
        """group_reach as a fixpoint over the hierarchy: stops when a step adds no pair (cycles too)."""
        self.client.command(f"TRUNCATE TABLE {self.db}.group_reach")
        self._run("reach_init")
        count = self._count("group_reach")
        while True:
            self._run("reach_step")
            new = self._count("group_reach")
            if new == count:
                return
            count = new

    def _probes_for(self, last: dict[str, tuple[int, int]]) -> list[tuple[int, str, int]]:
        """Checks that must hold once the last inserted block of each expanded relation is expanded,
        derived from the source tables only: (user, perm, resource)."""
        probes: list[tuple[int, str, int]] = []
        for rel, (obj, sub) in last.items():
            perm = ("manage"
                    if rel in ("resource_org", "resource_manager_user", "resource_manager_group")
                    else "view")
            if rel.endswith("_user"):
                users = [sub]
            elif rel.endswith("_group"):
                users = self._ints(
                    f"SELECT subject FROM (SELECT subject FROM {self.db}.group_member WHERE object = "
                    f"{{g:Int32}} UNION ALL SELECT subject FROM {self.db}.group_manager WHERE object = "
                    f"{{g:Int32}}) LIMIT 1",
                    g=sub)
            elif rel == "resource_org":
                users = self._ints(
                    f"SELECT subject FROM {self.db}.org_admin WHERE object = {{o:Int32}} LIMIT 1", o=sub)
            else:
                continue
            probes += [(u, perm, obj) for u in users]
        return probes

    def build(self) -> Build:
        """Measures the ingest-to-closure lag, then merges perm into one part.

        Lag (a Step, timed by the run layer, so part of the build's seconds): from the end of the load (its
        last INSERT, then its row counts) until the expanded table answers a probe per expanded relation (its
        last inserted row, checked against the source tables). Materialized views run inside the INSERT (in
        chdb and on a server alike), so one round of probes is expected. Merge: each MV insert leaves its own
        part; a check then searches every part's index. One part made checks ~25% faster on baseline (2.8 vs
        3.7 ms p50 in chdb); background merges would get there eventually, this makes the timed phases not
        depend on when they do."""
        if not self._probes:
            return None
        rounds = yield Step("ingest_to_closure_lag_s", self._wait_for_closure)
        if self.options.optimize:
            yield Step("", lambda: self.client.command(f"OPTIMIZE TABLE {self.db}.perm FINAL"))
        return BuildStats(
            "OPTIMIZE TABLE perm FINAL (one part per table for point reads)", rows=self._count("perm"),
            notes={"lag_probes": len(self._probes), "lag_probe_rounds": rounds,
                   "lag_what": "from the end of the load (its last INSERT, then its row counts) until a "
                   "check per expanded relation (its last row) is answered; MVs are synchronous"})

    def _wait_for_closure(self) -> int:
        """Probe rounds until every probe holds (one is expected: MVs run inside the INSERT); the rounds."""
        for rounds in range(1, PROBE_ROUNDS + 1):
            if all(self.check(*p) for p in self._probes):
                return rounds
            time.sleep(PROBE_PAUSE_S)
        raise BackendUnavailable(
            f"clickhouse: expanded table still incomplete after {PROBE_ROUNDS} probe rounds "
            f"(~{PROBE_ROUNDS * PROBE_PAUSE_S:.0f} s) after the last insert")

    def _count(self, table: str) -> int:
        return int(self.client.query(f"SELECT count() FROM {self.db}.{table}").result_rows[0][0])

    def loaded_hash(self) -> str | None:
        exists = self.client.query(
            "SELECT count() FROM system.tables WHERE database = {d:String} AND name = 'meta'",
            parameters={"d": self.db}).result_rows[0][0]
        if not exists:
            return None
        self._run("views")  # a database loaded before a view was added gains it (each is IF NOT EXISTS)
        rows = self.client.query(
            f"SELECT value FROM {self.db}.meta FINAL WHERE key = 'dataset_hash'").result_rows
        return str(rows[0][0]) if rows else None

    def mark_loaded(self, dataset_hash: str) -> None:
        self.client.insert(
            "meta", [["dataset_hash", dataset_hash]], column_names=["key", "value"], database=self.db)

    # operations ----------------------------------------------------------------------------------
    def check(self, user: int, perm: str, resource: int) -> bool:
        sql = self._check_sql.get(perm) or _bad_perm(perm)
        return bool(self.client.query(sql, parameters={"u": user, "r": resource}, settings=POINT).result_rows)

    def lookup_resources(self, user: int, perm: str) -> Iterable[int]:
        sql = self._lookup_sql.get(perm) or _bad_perm(perm)
        with self.client.query_column_block_stream(sql, parameters={"u": user}) as stream:
            for block in stream:
                yield from block[0]

    def write(self, rel: Relationship) -> None:
        _relation(rel)
        self._insert, self._rel = True, rel.relation
        maintenance.apply(self, rel, insert=True)

    def delete(self, rel: Relationship) -> None:
        _relation(rel)
        self._insert, self._rel = False, rel.relation
        maintenance.apply(self, rel, insert=False)

    # closure_maintenance.Store: the storage calls. The closures and pairs are re-derived in SQL from
    # the source tables (the schema's sections), so the pairs' states are not compared in Python.
    keeps_closures = True  # group_reach and group_membership

    def group_lock(self) -> threading.Lock:
        return GROUP_LOCK

    def write_edge(self, rel: Relationship, *, insert: bool) -> None:
        if insert:  # resource_org and ACL rows flow through their MV here
            self.client.insert(rel.relation, [[int(rel.object), int(rel.subject)]],
                               column_names=["object", "subject"], database=self.db)
        else:
            self.client.command(f"DELETE FROM {self.db}.{rel.relation} WHERE object = {int(rel.object)} "
                                f"AND subject = {int(rel.subject)}")
        if rel.relation == "group_child":
            self._close_groups()  # group_reach again (membership(child), read next, does not depend on it)

    def find_resources(self, rc: Reach) -> tuple[int | None, ...]:
        """(the one resource, or None: all of the users' resources); () for none."""
        return () if rc.resources == "none" else (rc.resource_arg if rc.resources == "resource" else None,)

    def find_users(self, rc: Reach) -> list[int]:
        """The users of a Reach (model_rules), from the source tables and the membership closure; none
        after an insert the MVs derived (no MV on org_admin or the group tables)."""
        if self._insert and not (rc.closure_changes or self._rel == "org_admin"):
            return []
        if rc.users == "user":
            return [rc.user_arg]
        if rc.users == "membership":
            return self._members(rc.user_arg)
        if rc.users == "org_admins":
            return self._ints(f"SELECT DISTINCT subject FROM {self.db}.org_admin WHERE object = {{o:Int32}}",
                              o=rc.user_arg)
        return []

    def parents(self, groups: list[int]) -> list[int]:
        return self._ints(f"SELECT object FROM {self.db}.group_child WHERE subject IN {_in(groups)}")

    def user_states(self, users: list[int], closure: maintenance.Closure, *, refresh: bool
                    ) -> dict[int, maintenance.UserState]:
        """refresh: the users' group_membership rows re-derived."""
        if refresh:
            self._rederive("group_membership", "membership", f"user IN {_in(users)}")
        return {u: maintenance.UserState() for u in users}

    def rewrite_pairs(
        self, resources: tuple[int | None, ...], users: dict[int, maintenance.UserState]) -> None:
        """The users' perm rows re-derived: on one resource, or on all of theirs. Another path may still
        grant what a deleted edge granted: the rows derived again are compared with the stored ones."""
        resource = resources[0]
        self._rederive("perm", "perm", f"user IN {_in(users)}" + (f" AND resource = {int(resource)}"
                                                                 if resource is not None else ""))

    def _rederive(self, table: str, section: str, where: str) -> None:
        """The slice `where` of `table` made equal to its source: missing rows first, then stale ones."""
        (missing,), (stale,) = (self.sql[f"{section}_{k}"] for k in ("missing", "stale"))
        self.client.command(f"INSERT INTO {self.db}.{table} " + missing.replace("{where}", where))
        stale = stale.replace("{where}", where)
        if self.client.query(f"SELECT 1 FROM {self.db}.{table} WHERE {stale} LIMIT 1").result_rows:
            self.client.command(f"DELETE FROM {self.db}.{table} WHERE {stale}")

    def finish(self) -> None:
        pass

    def _members(self, group: int) -> list[int]:
        return self._ints(
            f"SELECT DISTINCT user FROM {self.db}.group_membership WHERE group = {{g:Int32}}", g=group)

    def baseline_roundtrip(self) -> None:
        self.client.query("SELECT 1")

    def footprint(self) -> int:
        rows = self.client.query(
            "SELECT sum(bytes_on_disk) FROM system.parts WHERE database = {d:String} AND active",
            parameters={"d": self.db}).result_rows
        return int(rows[0][0] or 0)

    def drop(self) -> None:
        # SYNC: an Atomic database otherwise keeps the dropped data on disk for minutes.
        self.client.command(f"DROP DATABASE IF EXISTS {self.db} SYNC")
        self._probes = []


def _bad_perm(perm: str) -> str:
    raise UserError(f"unknown permission {perm!r}; valid: {', '.join(PERMS)}")


def _relation(rel: Relationship) -> None:
    if rel.relation not in RELATIONS:
        raise UserError(f"clickhouse: unknown relation {rel.relation!r}; valid: {', '.join(RELATIONS)}")


def _in(ids: Iterable[int]) -> str:
    """An IN list of integers (int() on every value: nothing else reaches the SQL text)."""
    return "(" + ",".join(str(int(i)) for i in ids) + ")"


def _locked(dsn: str) -> bool:
    """Whether another process holds the chdb data dir (the engine flocks DATA_DIR/status; its own error
    text only says the embedded server failed to start)."""
    import fcntl

    status = Path(dsn.removeprefix("chdb://").split("?")[0]) / "status"
    try:
        with status.open("rb") as f:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
            fcntl.flock(f, fcntl.LOCK_UN)
    except BlockingIOError:
        return True
    except OSError:
        return False
    return False
