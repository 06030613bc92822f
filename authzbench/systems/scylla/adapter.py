"""ScyllaDB / Cassandra over CQL (cassandra-driver): precomputed permission tables (cql.cql).

The same code serves ScyllaDB (compose/external) and Apache Cassandra (native here). Permissions are
expanded at load time with the shared vectorized closure, chunk by chunk, and loaded by one of two paths:
- `sstable` (the default where the node is local: native): the rows are streamed to a Java helper
  (systems/scylla/cassandra_bulk/SSTableBulk.java) that writes them as SSTables, one sorted SSTable per
  block, the blocks in token order (cql_tokens.py) so that no two overlap, which the node then imports
  (`nodetool import`'s JMX call: files moved into the table, no write path, no memtables, no commit log).
  What operators use for a bulk load.
- `cql` (the ingest variant `CQL`; the default on compose/external): prepared statements in unlogged
  batches grouped by partition, with bounded concurrency.
Under compose (ScyllaDB), `--option ingest=sstable` writes the same files here (the helper needs the
JDK and Maven of the native recipe), copies each table's into its `upload/` directory in the container
(`docker compose cp`) and runs `nodetool refresh KS TABLE --load-and-stream` there. Untested (no
ScyllaDB server here), and known not to work as it stands: ScyllaDB reads SSTable formats up to
Cassandra 4.x's `me`, while Cassandra 5's writer produces `oa`; a writer from cassandra-all 4.x, or
ScyllaDB's own tools, would be needed, and the copied files' owner may need to be the container's
scylla user. Compose therefore defaults to the CQL path.
Writes and deletes keep the permission tables consistent by recomputing, from the source tables,
exactly the (resource, user) pairs the changed relationship can affect (model_rules.reach).

This module is the adapter (connection, schema, load, reads); its other jobs are mixins beside it, named
for the backend so that the backend stays one adapter module plus its parts: scylla_cql.py (the CQL
ingest path), scylla_sstable.py (the SSTable ingest path and its helper's protocol), scylla_writes.py
(writes and deletes over closure_maintenance) and scylla_tables.py (the table layout and load progress
they share).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from authzbench.backends.base import (
    Backend,
    BackendOptions,
    Load,
    LoadStats,
    Progress,
    ServerInfo,
    Step,
    no_progress,
)
from authzbench.backends.expansion import Expansion
from authzbench.backends.sqlfile import schema_sections
from authzbench.core.errors import BackendUnavailable, UserError
from authzbench.schema.dataset import Dataset
from authzbench.schema.model import PERMISSIONS
from authzbench.systems.scylla.cql import CqlIngest
from authzbench.systems.scylla.sstable import SSTABLE_BLOCK_ROWS, SSTableIngest
from authzbench.systems.scylla.tables import REVERSE, SOURCE_ROW_COST, SSTABLE_SOURCE_ROW_COST, _Ticker
from authzbench.systems.scylla.writes import ScyllaWrites

SCHEMA_FILE = Path(__file__).resolve().parent / "cql.cql"
INGEST_PATHS = ("sstable", "cql")


@dataclass(frozen=True)
class ScyllaOptions(BackendOptions):
    replication_factor: int | None = None  # of the keyspace (None: the endpoint's, else 1)
    batch_rows: int | None = None  # rows per unlogged batch (None: ScyllaBackend.batch_rows)
    in_flight: int | None = None  # batches in flight during a load (None: ScyllaBackend.in_flight)
    recreate: bool = False  # drop and recreate the keyspace even when it is loaded
    cassandra_heap: str | None = None  # native provisioner: the JVM heap (-Xmx), default 1536M
    fixed_batch_rows: int | None = None  # permission rows per numpy-encoded batch (None: fixed_batch_rows)
    # ingest (BackendOptions): "sstable" or "cql"; None: sstable where the node is local, else cql

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.ingest is not None and self.ingest not in INGEST_PATHS:
            raise UserError(f"scylla: option ingest={self.ingest!r}; valid: {', '.join(INGEST_PATHS)}")


def _sized(ds: Dataset) -> tuple[Expansion, int, int]:
    """The dataset's expansion and its closure's sizes (view pairs, manage pairs)."""
    expansion = Expansion(ds)
    return expansion, expansion.total("view"), expansion.total("manage")


class ScyllaBackend(CqlIngest, SSTableIngest, ScyllaWrites, Backend):
    Options = ScyllaOptions
    name: ClassVar[str] = "scylla"
    worker_modules = ("cassandra.cluster", "cassandra.query", "cassandra.policies")
    counts_rows = True
    # Unlogged batches of <= 100 rows, all in one partition: one mutation per batch on the replica
    # (~2-3 KiB, under the default 5 KiB batch-size warning). Baseline, 11.0M permission rows, 48 in
    # flight, on the shared 2-core machine: 50 rows 39.8k rows/s (26.8k under heavier load), 100 rows
    # 45.8k rows/s. Single-row inserts: ~2k rows/s (PROVISIONING.md). options: batch_rows, in_flight.
    batch_rows: ClassVar[int] = 100
    in_flight: ClassVar[int] = 48  # concurrent batches: keeps a node busy, bounds client memory
    # Numpy-encoded permission rows: the client is no longer the bottleneck, the node is (144% CPU of 2
    # cores at 118k rows/s), so fewer, larger single-partition batches (~12 KiB at 500 rows, under the
    # native node's 64 KiB warning threshold). options: fixed_batch_rows.
    fixed_batch_rows: ClassVar[int] = 500
    lookup_page: ClassVar[int] = 5000  # rows per page of a lookup's partition scan (the driver pages)
    # The CQL path, measured beside the default SSTable one (`--ingest-variants CQL`).
    ingest_variants: ClassVar[dict[str, dict[str, Any]]] = {"CQL": {"ingest": "cql"}}

    @classmethod
    def endpoint_from_url(cls, url: str) -> dict[str, Any]:
        """cql://host1,host2:9042/keyspace"""
        from urllib.parse import urlparse

        u = urlparse(url)
        hosts = (u.netloc.rsplit(":", 1)[0] if ":" in u.netloc else u.netloc).split(",")
        return {"hosts": hosts, "port": u.port or 9042, "keyspace": (u.path.strip("/") or "authzbench")}

    @classmethod
    def endpoint_from_compose(cls, c: Any) -> dict[str, Any]:
        # compose_*: how `--option ingest=sstable` reaches the container to upload its files and refresh
        return {"hosts": ["127.0.0.1"], "port": c.port("scylla", 9042), "keyspace": "authzbench",
                "compose_cmd": c.cli(), "compose_service": "scylla"}

    # lifecycle ---------------------------------------------------------------------------------
    def connect(self) -> None:
        from cassandra import ConsistencyLevel
        from cassandra.cluster import EXEC_PROFILE_DEFAULT, Cluster, ExecutionProfile, NoHostAvailable
        from cassandra.policies import DCAwareRoundRobinPolicy, TokenAwarePolicy
        from cassandra.query import tuple_factory

        ep = self.endpoint
        self.ks = ep.get("keyspace", "authzbench")
        if not re.fullmatch(r"[A-Za-z][A-Za-z0-9_]{0,47}", self.ks):
            raise UserError(
                f"scylla: invalid keyspace name {self.ks!r} (letters, digits, _; 48 characters at most)")
        self.timeout = float(self.options.get("timeout_s") or 60)
        # LOCAL_QUORUM: a write's recomputation reads its own writes on a replicated cluster too
        # (the same as ONE on the single native node). tuple rows: lookups decode thousands of rows.
        profile = ExecutionProfile(
            load_balancing_policy=TokenAwarePolicy(DCAwareRoundRobinPolicy()), request_timeout=self.timeout,
            consistency_level=ConsistencyLevel.LOCAL_QUORUM, row_factory=tuple_factory)
        self.cluster = Cluster(
            contact_points=list(ep["hosts"]), port=int(ep["port"]), connect_timeout=5,
            control_connection_timeout=5, execution_profiles={EXEC_PROFILE_DEFAULT: profile})
        try:
            self.session = self.cluster.connect()
        except NoHostAvailable as e:
            self.cluster.shutdown()
            raise BackendUnavailable(
                f"scylla: no CQL node reachable at {','.join(ep['hosts'])}:{ep['port']}: "
                f"{next(iter(e.errors.values()), e)!s:.200}") from None
        except Exception as e:  # noqa: BLE001 - any driver error at connect is one line for the user
            self.cluster.shutdown()
            raise BackendUnavailable(f"scylla: cannot connect to {','.join(ep['hosts'])}:{ep['port']}: "
                                     f"{type(e).__name__}: {e!s:.200}") from None
        # Session.prepare() waits session.default_timeout, which a profile-based cluster cannot set through
        # the public setter: without this a prepare against a frozen node would wait 10 s, not timeout_s.
        self.session._default_timeout = self.timeout  # noqa: SLF001
        rf = int(self.options.get("replication_factor") or ep.get("replication_factor") or 1)
        self.sql = {
            k: [s.format(ks=self.ks, rf=rf) for s in v] for k, v in schema_sections(SCHEMA_FILE).items()}
        self._prepared: dict[str, Any] = {}
        self.batch_rows = int(self.options.get("batch_rows") or type(self).batch_rows)
        self.in_flight = int(self.options.get("in_flight") or type(self).in_flight)
        self.fixed_batch_rows = int(self.options.get("fixed_batch_rows") or type(self).fixed_batch_rows)
        self._cql_value_bytes = 0  # bytes of the statements' entries a CQL load sent
        self._batch_retries = 0  # batches sent again after a timeout or an overloaded node

    def close(self) -> None:
        if getattr(self, "cluster", None) is not None:
            self.cluster.shutdown()
            self.cluster = None

    def prep(self, cql: str):
        """Prepared-statement cache: each statement is prepared once per connection."""
        p = self._prepared.get(cql)
        if p is None:
            p = self._prepared[cql] = self.session.prepare(cql.format(ks=self.ks))
        return p

    def _rows(self, cql: str, *args: Any) -> list[tuple]:
        return list(self.session.execute(self.prep(cql), args))

    def server_info(self) -> ServerInfo:
        version = self.session.execute("SELECT release_version FROM system.local").one()[0]
        try:  # ScyllaDB reports a Cassandra-compatible release_version; its own version is in system.versions
            scylla = self.session.execute("SELECT version FROM system.versions").one()
        except Exception:  # noqa: BLE001 - Cassandra has no such table
            scylla = None
        if scylla:
            return ServerInfo("ScyllaDB", scylla[0], f"ScyllaDB {scylla[0]}",
                              notes=[f"CQL release_version {version}"])
        return ServerInfo(
            "Apache Cassandra", version, f"Cassandra {version} (CQL, standing in for ScyllaDB)",
            stands_in_for="ScyllaDB",
            notes=["same CQL adapter and tables as for ScyllaDB; Cassandra's figures are not ScyllaDB's"])

    # schema and data ---------------------------------------------------------------------------
    def create_schema(self) -> None:
        if self.options.recreate:
            self.drop()
        for stmt in self.sql["tables"]:
            self.session.execute(stmt, timeout=120)
        if self.server_info().engine == "Apache Cassandra":
            for stmt in self.sql["cassandra"]:
                self.session.execute(stmt, timeout=120)

    def load(self, ds: Dataset, progress: Progress = no_progress) -> Load:
        path = self._ingest_path()
        # The expansion's exact closure sizes for the progress bar, then the closure itself chunk by chunk
        # (bounded memory: at xl it is ~600M keys), each chunk a closure Step too.
        expansion, view_n, manage_n = yield Step("closure_seconds", lambda: _sized(ds))
        source = {rel: ds.table(rel) for rel in ds.relations()}
        source_n = sum(len(df) for df in source.values()) + sum(
            len(source[r]) for r in REVERSE if r in source)
        # The CQL path serializes a source row in Python per row (see SOURCE_ROW_COST); the SSTable path
        # sorts the source tables first (SSTABLE_SOURCE_ROW_COST).
        cost = SOURCE_ROW_COST if path == "cql" else SSTABLE_SOURCE_ROW_COST
        planned = cost * source_n + 2 * view_n + manage_n
        # The bar counts relationships: each written row advances it by its cost x relationships / cost
        # planned, so --max-load-minutes projects from a rate that holds for the whole load.
        tick = _Ticker(progress, ds.total_relationships / max(planned, 1))
        if path == "sstable":
            stats = yield from self._load_sstables(source, expansion, tick)
        else:
            stats = yield from self._load_cql(source, expansion, tick)
        tick.flush()
        notes = {"group_membership_pairs": expansion.membership_pairs, "ingest": path, **stats}
        return LoadStats(rows=stats["source_rows"] + stats["permission_rows"],
                         batch_rows=self.batch_rows if path == "cql" else SSTABLE_BLOCK_ROWS, notes=notes)

    def _ingest_path(self) -> str:
        """sstable where the node can import files written here (native: the endpoint names its JMX port
        and the helper), cql otherwise, unless options["ingest"] names one."""
        path = self.options.ingest or ("sstable" if self.endpoint.get("jmx_port") else "cql")
        if path == "sstable" and not (self.endpoint.get("jmx_port") or self.endpoint.get("compose_service")):
            raise UserError("scylla: ingest=sstable needs a node started here (--provision native) or under "
                            "compose; for an external cluster use ingest=cql")
        return path

    def loaded_hash(self) -> str | None:
        if self.options.recreate:
            return None  # recreate on request: never report the existing keyspace as reusable
        try:
            row = self.session.execute(f"SELECT value FROM {self.ks}.meta WHERE key = 'dataset_hash'").one()
        except Exception:  # noqa: BLE001 - keyspace or table missing
            return None
        return row[0] if row else None

    def mark_loaded(self, dataset_hash: str) -> None:
        self.session.execute(
            f"INSERT INTO {self.ks}.meta (key, value) VALUES ('dataset_hash', %s)", (dataset_hash,))

    # operations ----------------------------------------------------------------------------------
    def check(self, user: int, perm: str, resource: int) -> bool:
        if perm not in PERMISSIONS:
            raise UserError(f"unknown permission {perm!r}; valid: {', '.join(PERMISSIONS)}")
        row = self.session.execute(
            self.prep("SELECT manage FROM {ks}.perm_by_resource WHERE resource = ? AND user = ?"),
            (resource, user)).one()
        return row is not None and (perm == "view" or bool(row[0]))

    def lookup_resources(self, user: int, perm: str) -> Iterable[int]:
        if perm not in PERMISSIONS:
            raise UserError(f"unknown permission {perm!r}; valid: {', '.join(PERMISSIONS)}")
        stmt = self.prep("SELECT resource FROM {ks}.perm_by_user WHERE user = ? AND perm = ?")
        stmt.fetch_size = self.lookup_page
        return [r[0] for r in self.session.execute(stmt, (user, perm))]

    def baseline_roundtrip(self) -> None:
        self.session.execute(self.prep("SELECT release_version FROM system.local")).one()



    # footprint and drop ----------------------------------------------------------------------------
    def footprint(self) -> int:
        """Bytes on disk: the keyspace's SSTables plus the commit log when the node is local (native);
        otherwise the node's own per-table disk usage (Cassandra's system_views.disk_usage, MiB) or
        ScyllaDB's size estimates."""
        data_dir = self.endpoint.get("data_dir")
        if data_dir and Path(data_dir).is_dir():
            root = Path(data_dir)
            files = [*(root / "data").glob(f"{self.ks}/**/*"), *(root / "commitlog").glob("*")]
            return sum(f.stat().st_size for f in files if f.is_file())
        try:
            rows = self.session.execute(
                "SELECT mebibytes FROM system_views.disk_usage WHERE keyspace_name = %s", (self.ks,))
            return int(sum(r[0] or 0 for r in rows)) << 20
        except Exception:  # noqa: BLE001 - ScyllaDB has no system_views.disk_usage
            total = 0
            for row in self.session.execute(
                "SELECT mean_partition_size, partitions_count FROM system.size_estimates "
                "WHERE keyspace_name = %s", (self.ks,)):
                total += (row[0] or 0) * (row[1] or 0)
            return int(total)

    def drop(self) -> None:
        self.session.execute(f"DROP KEYSPACE IF EXISTS {self.ks}", timeout=180)
        self._prepared.clear()
