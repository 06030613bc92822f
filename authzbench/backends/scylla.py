"""ScyllaDB / Cassandra over CQL (cassandra-driver): precomputed permission tables (schema/cql.cql).

The same code serves ScyllaDB (compose/external) and Apache Cassandra (native here). Permissions are
expanded at load time with the shared vectorized closure, chunk by chunk, and loaded by one of two paths:
- `sstable` (the default where the node is local: native): the rows are streamed to a Java helper
  (provision/native/cassandra_bulk/SSTableBulk.java) that writes them as SSTables, one sorted SSTable per
  block, the blocks in token order (cql_tokens.py) so that no two overlap, which the node then imports (`nodetool import`'s JMX call: files moved into the table, no
  write path, no memtables, no commit log). What operators use for a bulk load.
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
"""

from __future__ import annotations

import contextlib
import io
import itertools
import math
import re
import shutil
import struct
import subprocess
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from authzbench.backends import closure_maintenance as maintenance
from authzbench.backends.base import Backend, BackendOptions, LoadStats, Progress, ServerInfo, no_progress
from authzbench.backends.cql_tokens import TokenSpill, id_tokens, ring_order
from authzbench.backends.expansion import Expansion, timed
from authzbench.backends.locks import EXPIRE_S, spin_lock
from authzbench.backends.sqlfile import schema_sections
from authzbench.dataset import Dataset
from authzbench.errors import BackendUnavailable, UserError
from authzbench.model import PERMISSIONS, REBAC_RELATIONS, Relationship
from authzbench.model_rules import ACL_ROLE, Reach, walk

SCHEMA_FILE = Path(__file__).resolve().parents[2] / "schema" / "cql.cql"
# A source row (serialized per row in Python) costs ~5 permission rows (one numpy-built slice per batch):
# measured 77k vs 345k rows/s at large, 58k vs 370-418k at baseline. Progress weighs rows by it: counted
# alike, the first 30 s (source rows) projected large to 33 min where it loads in 6.
SOURCE_ROW_COST = 5
# Through SSTables a source row costs ~3 permission rows (the tables are sorted by partition in numpy first):
# at xl the first 30 s wrote ~16M source rows (~530k/s) where baseline wrote permission rows at 1.6M/s.
# Counted alike, those 30 s projected xl to 34 min and the load bound stopped it.
SSTABLE_SOURCE_ROW_COST = 3
# Source relations by object type: each lands in rel_<type> (one partition per object).
SOURCE_TABLE = {"organization": "rel_org", "group": "rel_group", "resource": "rel_resource"}
# Relations whose reverse (subject -> objects) the write path walks; see schema/cql.cql.
REVERSE = ("group_member", "group_manager", "group_child", "org_admin", "resource_org",
           "resource_manager_group", "resource_viewer_group")
# rel_resource stores the relation name without its "resource_" prefix (shorter clustering keys).
RECOMPUTE_CHUNK = 256  # permission-row batches a write sends before it counts them as progress (~25k rows)
INGEST_PATHS = ("sstable", "cql")
# Rows a block sent to the SSTable helper; each block becomes one SSTable. Bounds the helper's memory
# (a block a table in work plus two queued: 3 int arrays of 4 MiB each) and makes a baseline load
# ~30 SSTables; written in token order each holds its own slice of the ring, so on Cassandra's
# UnifiedCompactionStrategy (schema/cql.cql) none overlaps another and none needs merging.
SSTABLE_BLOCK_ROWS = 1 << 20
# The permission rows as spilled to disk before they are written in token order (cql_tokens.TokenSpill).
_RESOURCE_ROW = np.dtype([("resource", "<i4"), ("user", "<i4"), ("manage", "u1")])
_USER_ROW = np.dtype([("user", "<i4"), ("perm", "u1"), ("resource", "<i4")])
# A batch the node timed out or shed is sent up to 5 times in all (unlogged inserts are idempotent), as
# the driver's docs advise for idempotent writes; the driver's default policy never retries an unlogged
# batch's write timeout, and without a retry one slow moment of a node ends a whole load.
BATCH_TRIES = 5


def _short(rel: str) -> str:
    return rel.removeprefix("resource_").removeprefix("group_").removeprefix("org_")


def _ser_int(a: np.ndarray) -> list[bytes]:
    """CQL int values, serialized by numpy (big-endian int32), not one Python call per value."""
    return np.ascontiguousarray(a, dtype=">i4").view("V4").tolist()


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


class ScyllaBackend(Backend):
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
        from authzbench.provision.compose import compose_cmd

        # compose_*: how `--option ingest=sstable` reaches the container to upload its files and refresh
        return {"hosts": ["127.0.0.1"], "port": c.port("scylla", 9042), "keyspace": "authzbench",
                "compose_cmd": compose_cmd(), "compose_service": "scylla"}

    # lifecycle ---------------------------------------------------------------------------------
    def connect(self) -> None:
        from cassandra import ConsistencyLevel
        from cassandra.cluster import EXEC_PROFILE_DEFAULT, Cluster, ExecutionProfile, NoHostAvailable
        from cassandra.policies import DCAwareRoundRobinPolicy, TokenAwarePolicy
        from cassandra.query import tuple_factory

        ep = self.endpoint
        self.ks = ep.get("keyspace", "authzbench")
        if not re.fullmatch(r"[A-Za-z][A-Za-z0-9_]{0,47}", self.ks):
            raise UserError(f"scylla: invalid keyspace name {self.ks!r} (letters, digits, _; 48 characters at most)")
        self.timeout = float(self.options.get("timeout_s") or 60)
        # LOCAL_QUORUM: a write's recomputation reads its own writes on a replicated cluster too
        # (the same as ONE on the single native node). tuple rows: lookups decode thousands of rows.
        profile = ExecutionProfile(load_balancing_policy=TokenAwarePolicy(DCAwareRoundRobinPolicy()),
                                   request_timeout=self.timeout, consistency_level=ConsistencyLevel.LOCAL_QUORUM,
                                   row_factory=tuple_factory)
        self.cluster = Cluster(contact_points=list(ep["hosts"]), port=int(ep["port"]), connect_timeout=5,
                               control_connection_timeout=5, execution_profiles={EXEC_PROFILE_DEFAULT: profile})
        try:
            self.session = self.cluster.connect()
        except NoHostAvailable as e:
            self.cluster.shutdown()
            raise BackendUnavailable(f"scylla: no CQL node reachable at {','.join(ep['hosts'])}:{ep['port']}: "
                                     f"{next(iter(e.errors.values()), e)!s:.200}") from None
        except Exception as e:  # noqa: BLE001 - any driver error at connect is one line for the user
            self.cluster.shutdown()
            raise BackendUnavailable(f"scylla: cannot connect to {','.join(ep['hosts'])}:{ep['port']}: "
                                     f"{type(e).__name__}: {e!s:.200}") from None
        # Session.prepare() waits session.default_timeout, which a profile-based cluster cannot set through
        # the public setter: without this a prepare against a frozen node would wait 10 s, not timeout_s.
        self.session._default_timeout = self.timeout  # noqa: SLF001
        rf = int(self.options.get("replication_factor") or ep.get("replication_factor") or 1)
        self.sql = {k: [s.format(ks=self.ks, rf=rf) for s in v] for k, v in schema_sections(SCHEMA_FILE).items()}
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
        return ServerInfo("Apache Cassandra", version, f"Cassandra {version} (CQL, standing in for ScyllaDB)",
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

    def load(self, ds: Dataset, progress: Progress = no_progress) -> LoadStats:
        path = self._ingest_path()
        batch_seconds: list[float] = []
        cpu0 = time.process_time()
        # The expansion's exact closure sizes for the progress bar, then the closure itself chunk by chunk
        # (bounded memory: at xl it is ~600M keys).
        t0 = time.perf_counter()
        expansion = Expansion(ds)
        view_n, manage_n = expansion.total("view"), expansion.total("manage")
        spent = [time.perf_counter() - t0]  # closure seconds, the chunks' expansion added as it streams
        source = {rel: ds.table(rel) for rel in ds.relations()}
        source_n = sum(len(df) for df in source.values()) + sum(len(source[r]) for r in REVERSE if r in source)
        # The CQL path serializes a source row in Python per row (see SOURCE_ROW_COST); the SSTable path
        # sorts the source tables first (SSTABLE_SOURCE_ROW_COST).
        cost = SOURCE_ROW_COST if path == "cql" else SSTABLE_SOURCE_ROW_COST
        planned = cost * source_n + 2 * view_n + manage_n
        # The bar counts relationships: each written row advances it by its cost x relationships / cost
        # planned, so --max-load-minutes projects from a rate that holds for the whole load.
        tick = _Ticker(progress, ds.total_relationships / max(planned, 1))
        if path == "sstable":
            stats = self._load_sstables(source, expansion, tick, spent)
        else:
            stats = self._load_cql(source, expansion, tick, spent, batch_seconds)
        tick.flush()
        closure_s = spent[0]
        notes = {"closure_seconds": closure_s, "group_membership_pairs": expansion.membership_pairs,
                 # where the time goes: this process's CPU (the node's is in the ingest monitor)
                 "client_cpu_seconds": round(time.process_time() - cpu0, 3), "ingest": path, **stats,
                 "rates": {"source_rows_per_s": ["source_rows", "source_seconds"],
                           "permission_rows_per_s": ["permission_rows", "permission_seconds"],
                           # over the whole load (the ingest record's load_seconds, closure included)
                           "bytes_written_per_s": ["bytes_written", "load_seconds"]}}
        return LoadStats(rows=stats["source_rows"] + stats["permission_rows"], batch_seconds=batch_seconds,
                         batch_rows=self.batch_rows if path == "cql" else SSTABLE_BLOCK_ROWS, notes=notes)

    def _ingest_path(self) -> str:
        """sstable where the node can import files written here (native: the endpoint names its JMX port
        and the helper), cql otherwise, unless options["ingest"] names one."""
        path = self.options.ingest or ("sstable" if self.endpoint.get("jmx_port") else "cql")
        if path == "sstable" and not (self.endpoint.get("jmx_port") or self.endpoint.get("compose_service")):
            raise UserError("scylla: ingest=sstable needs a node started here (--provision native) or under "
                            "compose; for an external cluster use ingest=cql")
        return path

    def _load_cql(self, source: dict[str, Any], expansion: Expansion, tick: _Ticker, spent: list[float],
                  batch_seconds: list[float]) -> dict[str, Any]:
        """Prepared INSERTs in unlogged batches; the permission rows serialized by numpy."""
        t1 = time.perf_counter()
        source_rows = self._load_source(source, tick, batch_seconds)
        raw_s = time.perf_counter() - t1
        t2 = time.perf_counter()
        before = spent[0]
        perm_rows = self._load_permissions(expansion, tick, batch_seconds, spent)
        perm_s = time.perf_counter() - t2 - (spent[0] - before)  # the chunks' expansion is not ingest
        # bytes_written: the BATCH entries sent (statement ids, values and their lengths)
        return {"source_rows": source_rows, "source_seconds": raw_s, "permission_rows": perm_rows,
                "permission_seconds": perm_s, "bytes_written": self._cql_value_bytes,
                "batch_retries": self._batch_retries,
                "method": f"closure in numpy chunk by chunk ({spent[0]:.2f} s), prepared INSERTs "
                          f"in unlogged batches of <= {self.batch_rows} rows of one partition, "
                          f"{self.in_flight} batches in flight; permission rows serialized "
                          f"by numpy straight into the BATCH frame, <= {self.fixed_batch_rows} per batch"}

    def _load_sstables(self, source: dict[str, Any], expansion: Expansion, tick: _Ticker,
                       spent: list[float]) -> dict[str, Any]:
        """Every table written as SSTables by the helper, then imported by the node."""
        t1 = time.perf_counter()
        work = Path(self.endpoint.get("data_dir") or tempfile.gettempdir()) / "bulk"  # same disk: a move
        work.mkdir(parents=True, exist_ok=True)
        out = Path(tempfile.mkdtemp(prefix="sstables-", dir=work))
        try:
            with _SSTableWriter(self._bulk_cmd(), out, self.ks, self.sql["tables"]) as w:
                source_rows = self._sstable_source(w, source, tick)
                raw_s = time.perf_counter() - t1
                t2, before = time.perf_counter(), spent[0]
                perm_rows = self._sstable_permissions(w, expansion, tick, spent, out)
                written = w.finish()
            write_s = time.perf_counter() - t1 - (spent[0] - before)
            perm_s = time.perf_counter() - t2 - (spent[0] - before)
            t3 = time.perf_counter()
            self._compaction_s = None
            self._import_sstables({t: out / self.ks / t for t in written})
            import_s = time.perf_counter() - t3
        finally:
            shutil.rmtree(out, ignore_errors=True)
        return {"source_rows": source_rows, "source_seconds": raw_s, "permission_rows": perm_rows,
                "permission_seconds": perm_s, "sstable_write_seconds": write_s, "import_seconds": import_s,
                "compaction_seconds": self._compaction_s,
                "bytes_written": sum(t["bytes"] for t in written.values()),
                "sstables": sum(t["sstables"] for t in written.values()),
                "method": f"closure in numpy chunk by chunk ({spent[0]:.2f} s), rows streamed to a Java helper "
                          f"writing SSTables in token order (CQLSSTableWriter's sorted writer, one SSTable "
                          f"per <= {SSTABLE_BLOCK_ROWS:,} rows, each a slice of the ring), then imported by the node ({self._import_how()}"
                          f"{', its compactions run and waited for' if self._compaction_s is not None else ''})"}

    def _sstable_source(self, w: _SSTableWriter, source: dict[str, Any], tick: _Ticker) -> int:
        """The source tables as the CQL path writes them, as dictionary-coded columns."""
        rows = 0
        for table in dict.fromkeys(SOURCE_TABLE.values()):
            rels = [r for r in source if SOURCE_TABLE[REBAC_RELATIONS[r].object_type] == table]
            obj, sub, words, codes = _coded(source, rels, _short)
            order = _lex_order(obj, codes, sub)  # by partition, then clustering (relation, subject)
            order = order[ring_order(obj[order], id_tokens(int(obj.max()) + 1))]  # partitions in ring order
            w.table(table, "object,relation,subject", "iti", words)
            rows += w.rows(table, [obj[order], codes[order], sub[order]], tick)
            w.close(table)
        rels = [r for r in REVERSE if r in source]
        obj, sub, words, codes = _coded(source, rels, str)
        order = _lex_order(codes, sub, obj)  # partition (relation, subject), clustering object
        n_sub = int(sub.max()) + 1
        tokens = np.concatenate([id_tokens(n_sub, before=word.encode()) for word in words])
        order = order[ring_order(codes[order].astype(np.int64) * n_sub + sub[order], tokens)]
        w.table("rel_by_subject", "relation,subject,object", "tii", words)
        rows += w.rows("rel_by_subject", [codes[order], sub[order], obj[order]], tick)
        w.close("rel_by_subject")
        return rows

    def _sstable_permissions(self, w: _SSTableWriter, expansion: Expansion, tick: _Ticker,
                             closure_s: list[float], work: Path) -> int:
        """Both permission tables from the closure, chunk by chunk, spilled to per-token-range files
        (TokenSpill), then written range by range in token order, as the CQL path writes them."""
        U, R = expansion.n_users, expansion.n_resources
        view_n, manage_n = expansion.total("view"), expansion.total("manage")
        res_tok = id_tokens(R)
        user_tok = np.stack([id_tokens(U, after=p.encode()) for p in ("manage", "view")])  # the dictionary's order
        by_res = TokenSpill(work, "perm_by_resource", _RESOURCE_ROW, view_n)
        by_user = TokenSpill(work, "perm_by_user", _USER_ROW, view_n + manage_n)
        by_resource = timed(expansion.iter_resource_keys(), closure_s)  # keys (resource - lo) * U + user
        for res_chunk, user_chunk in itertools.zip_longest(by_resource, timed(expansion.iter_user_keys(), closure_s)):
            if res_chunk is not None:
                lo, _hi, manage, view = res_chunk
                rows = np.empty(len(view), _RESOURCE_ROW)
                rows["resource"], rows["user"] = lo + view // U, view % U
                rows["manage"] = np.isin(view, manage, assume_unique=True)
                by_res.add(res_tok[rows["resource"]], rows)
                tick.done += len(rows) / 2
            for code, k in enumerate(user_chunk or ()):  # keys user * R + resource: manage, then view
                rows = np.empty(len(k), _USER_ROW)
                rows["user"], rows["perm"], rows["resource"] = k // R, code, k % R
                by_user.add(user_tok[code, rows["user"]], rows)
                tick.done += len(rows) / 2
            tick.flush()
        return self._sstable_ranges(w, by_res, by_user, res_tok, user_tok, tick)

    @staticmethod
    def _sstable_ranges(w: _SSTableWriter, by_res: TokenSpill, by_user: TokenSpill, res_tok: np.ndarray,
                        user_tok: np.ndarray, tick: _Ticker) -> int:
        """Each spilled range's partitions put in token order (ring_order: whole partitions move, their rows
        in clustering order; a stable argsort of every row's token gave the same bytes, the large profile's
        ranges in 9.3 s against 6.2) and sent, the two tables' ranges in turn."""
        rows = 0
        w.table("perm_by_resource", "resource,user,manage", "iib", [])
        w.table("perm_by_user", "user,perm,resource", "iti", ["manage", "view"])
        flat_user_tok = user_tok.reshape(-1)  # partition (perm code, user) at code * U + user
        for r, u in itertools.zip_longest(by_res.ranges(), by_user.ranges()):
            if r is not None:
                r = r[ring_order(r["resource"], res_tok)]
                rows += w.rows("perm_by_resource", [r["resource"], r["user"], r["manage"].astype(bool)], tick, 0.5)
            if u is not None:
                u = u[ring_order(u["perm"].astype(np.int64) * user_tok.shape[1] + u["user"], flat_user_tok)]
                rows += w.rows("perm_by_user", [u["user"], u["perm"], u["resource"]], tick, 0.5)
        w.close("perm_by_resource")
        w.close("perm_by_user")
        return rows

    def _bulk_cmd(self) -> list[str]:
        cmd = self.endpoint.get("bulk_cmd")
        if cmd:
            return list(cmd)
        from authzbench.provision.native.cassandra import bulk_tool  # compose: the helper built here

        return bulk_tool()

    def _import_how(self) -> str:
        return ("nodetool import over JMX" if self.endpoint.get("jmx_port") else
                "uploaded into the container, nodetool refresh --load-and-stream")

    def _import_sstables(self, dirs: dict[str, Path]) -> None:
        """Native Cassandra: nodetool import's JMX call per table (files moved into the table). Compose
        (ScyllaDB, untested here): copy each table's files into its upload directory in the container,
        then `nodetool refresh --load-and-stream`."""
        if self.endpoint.get("jmx_port"):
            proc = subprocess.run([*self._bulk_cmd(), "import", self.endpoint["hosts"][0],
                                   str(self.endpoint["jmx_port"]), self.ks, *(f"{t}={d}" for t, d in dirs.items())],
                                  capture_output=True, text=True, timeout=3600)
            if proc.returncode != 0 or "done" not in proc.stdout:
                raise BackendUnavailable(f"scylla: SSTable import failed (exit {proc.returncode}): "
                                         f"{_last_line(proc.stdout + proc.stderr)}")
            if m := re.search(r"^compacted seconds ([\d.]+)$", proc.stdout, re.M):
                self._compaction_s = float(m.group(1))
            return
        compose = list(self.endpoint["compose_cmd"])
        service = self.endpoint["compose_service"]
        for table, d in dirs.items():
            found = subprocess.run([*compose, "exec", "-T", service, "sh", "-c",
                                    f"ls -d /var/lib/scylla/data/{self.ks}/{table}-*"],
                                   capture_output=True, text=True, timeout=60)
            target = (found.stdout.split() or [""])[0]
            if found.returncode != 0 or not target:
                raise BackendUnavailable(f"scylla: no data directory for {self.ks}.{table} in {service}")
            for cmd in ([*compose, "cp", f"{d}/.", f"{service}:{target}/upload/"],
                        [*compose, "exec", "-T", service, "nodetool", "refresh", self.ks, table,
                         "--load-and-stream"]):
                proc = subprocess.run(cmd, capture_output=True, text=True, timeout=3600)
                if proc.returncode != 0:
                    raise BackendUnavailable(f"scylla: docker compose {cmd[len(compose)]} failed: "
                                             f"{_last_line(proc.stdout + proc.stderr)}")

    def _load_source(self, source: dict[str, Any], tick: _Ticker, batch_seconds: list[float]) -> int:
        """The relationships as stored: by object (one table per object type) and by subject."""
        source_rows = 0
        # All relations of one object type together, sorted by object: a resource's whole ACL (~14 rows
        # at baseline) is one batch, where one batch per (relation, resource) averaged ~3 rows and made
        # the source ingest request-bound (3.7k rows/s measured).
        for table in dict.fromkeys(SOURCE_TABLE.values()):
            rels = [r for r in source if SOURCE_TABLE[REBAC_RELATIONS[r].object_type] == table]
            obj, sub, rel_b = _stacked(source, rels, _short)
            order = np.argsort(obj, kind="stable")
            ob = _ser_int(obj[order])
            source_rows += self._ingest(
                f"INSERT INTO {{ks}}.{table} (object, relation, subject) VALUES (?, ?, ?)",
                obj[order], [ob, rel_b[order].tolist(), _ser_int(sub[order])], lambda i, ob=ob: ob[i],
                tick, batch_seconds)
        rels = [r for r in REVERSE if r in source]
        obj, sub, rel_b = _stacked(source, rels, str)
        code = np.repeat(np.arange(len(rels)), [len(source[r]) for r in rels])
        key = code * (1 << 32) + sub  # partition (relation, subject)
        order = np.argsort(key, kind="stable")
        rb, sb = rel_b[order].tolist(), _ser_int(sub[order])
        return source_rows + self._ingest(
            "INSERT INTO {ks}.rel_by_subject (relation, subject, object) VALUES (?, ?, ?)",
            key[order], [rb, sb, _ser_int(obj[order])], lambda i: _routing(rb[i], sb[i]), tick, batch_seconds)

    def _load_permissions(self, expansion: Expansion, tick: _Ticker, batch_seconds: list[float],
                          closure_s: list[float]) -> int:
        """The precomputed permissions, by resource and by user, from the closure chunk by chunk."""
        perm_rows, U, R = 0, expansion.n_users, expansion.n_resources
        for lo, _hi, manage, view in timed(expansion.iter_resource_keys(), closure_s):  # keys (resource, user)
            v_res, v_user = lo + view // U, view % U
            rb = _ser_int(v_res)
            perm_rows += self._ingest_fixed(
                "INSERT INTO {ks}.perm_by_resource (resource, user, manage) VALUES (?, ?, ?)",
                v_res, [v_res, v_user, np.isin(view, manage, assume_unique=True)], lambda i, rb=rb: rb[i],
                tick, batch_seconds)
        for chunk in timed(expansion.iter_user_keys(), closure_s):  # keys user * R + resource
            for perm, k in zip(("manage", "view"), chunk, strict=True):
                ub = _ser_int(k // R)
                rk = _composite_after(perm.encode())
                perm_rows += self._ingest_fixed(
                    f"INSERT INTO {{ks}}.perm_by_user (user, perm, resource) VALUES (?, '{perm}', ?)",
                    k // R, [k // R, k % R], lambda i, ub=ub, rk=rk: rk(ub[i]), tick, batch_seconds)
        return perm_rows

    def _ingest(self, cql: str, key: np.ndarray, cols: list[list[bytes]], routing: Callable[[int], bytes],
                tick: _Ticker, batch_seconds: list[float]) -> int:
        """Write rows sorted by partition `key` in unlogged batches of <= batch_rows rows of one partition.
        Values come pre-serialized (numpy), so the per-row Python work is one list append; the batch still
        carries the prepared statement's id and a routing key, exactly what BatchStatement.add(prepared,
        values) would produce (cassandra-driver 3.30)."""
        qid, width = self.prep(cql).query_id, len(cols)
        # each BATCH entry: kind, id, value count, then each value with its 4-byte length
        self._cql_value_bytes += len(key) * (5 + len(qid) + 4 * width) + sum(sum(map(len, c)) for c in cols)

        def fill(batch: Any, s: int, e: int) -> None:
            add = batch._add_statement_and_params  # noqa: SLF001 - skips re-serializing each value
            if width == 2:
                c0, c1 = cols
                for i in range(s, e):
                    add(True, qid, [c0[i], c1[i]])
            else:
                for i in range(s, e):
                    add(True, qid, [c[i] for c in cols])

        return self._batches(key, fill, routing, tick, batch_seconds, cost=SOURCE_ROW_COST)

    def _ingest_fixed(self, cql: str, key: np.ndarray, cols: list[np.ndarray], routing: Callable[[int], bytes],
                      tick: _Ticker, batch_seconds: list[float]) -> int:
        """As _ingest, for statements whose values are all int or boolean: every row's BATCH entry is
        built by numpy in one pass and each batch body is one slice of it, no Python per row (the 13M
        permission rows of baseline-v1 were ~10 client CPU-µs each through BatchStatement.add)."""
        _encoded_batches()
        rec = _fixed_rows(self.prep(cql).query_id, cols)
        self._cql_value_bytes += rec.nbytes

        def fill(batch: Any, s: int, e: int) -> None:
            batch._statements_and_parameters = _Encoded(rec[s:e].tobytes(), e - s)  # noqa: SLF001

        return self._batches(key, fill, routing, tick, batch_seconds, self.fixed_batch_rows)

    def _batches(self, key: np.ndarray, fill: Callable[[Any, int, int], None], routing: Callable[[int], bytes],
                 tick: _Ticker, batch_seconds: list[float], batch_rows: int | None = None, cost: int = 1) -> int:
        """Rows sorted by partition `key`, cut into unlogged batches of <= batch_rows rows of one partition,
        at most in_flight at a time; fill(batch, start, end) puts rows start..end-1 in a batch. Each row
        advances the progress by `cost`."""
        from cassandra.query import BatchStatement, BatchType

        n = len(key)
        if n == 0:
            return 0
        idx = np.arange(n)
        first = np.ones(n, dtype=bool)
        first[1:] = key[1:] != key[:-1]
        pos = idx - np.maximum.accumulate(np.where(first, idx, 0))  # row's position within its partition
        starts = np.flatnonzero(pos % (batch_rows or self.batch_rows) == 0).tolist()
        ends = [*starts[1:], n]
        sem = threading.Semaphore(self.in_flight)
        errors: list[BaseException] = []
        lock = threading.Lock()
        retryable = _retryable_errors()

        def send(batch: Any, k: int, tries: int) -> None:
            t0 = time.perf_counter()
            fut = self.session.execute_async(batch, timeout=max(self.timeout, 60.0))
            fut.add_callbacks(done, failed, callback_kwargs={"t0": t0, "k": k},
                              errback_kwargs={"batch": batch, "k": k, "tries": tries})

        def done(_result: Any, t0: float, k: int) -> None:
            with lock:
                batch_seconds.append(time.perf_counter() - t0)
                tick.done += k * cost
            sem.release()

        def failed(exc: BaseException, batch: Any, k: int, tries: int) -> None:
            # The rows are plain inserts (idempotent): a batch the node timed out or shed is sent again
            if isinstance(exc, retryable) and tries < BATCH_TRIES:
                with lock:
                    self._batch_retries += 1
                with contextlib.suppress(Exception):
                    send(batch, k, tries + 1)
                    return
            errors.append(exc)
            sem.release()

        ks = self.ks
        for s, e in zip(starts, ends, strict=True):
            batch = BatchStatement(batch_type=BatchType.UNLOGGED)
            fill(batch, s, e)
            batch.keyspace, batch.routing_key = ks, routing(s)  # token-aware: straight to a replica
            sem.acquire()
            if errors:
                sem.release()  # this slot sends nothing: the drain below waits for every slot
                break
            send(batch, e - s, 1)
            tick.flush()
        for _ in range(self.in_flight):
            sem.acquire()
        if errors:
            raise BackendUnavailable(f"scylla: batch write failed: {type(errors[0]).__name__}: {errors[0]!s:.200}")
        return n

    def loaded_hash(self) -> str | None:
        if self.options.recreate:
            return None  # recreate on request: never report the existing keyspace as reusable
        try:
            row = self.session.execute(f"SELECT value FROM {self.ks}.meta WHERE key = 'dataset_hash'").one()
        except Exception:  # noqa: BLE001 - keyspace or table missing
            return None
        return row[0] if row else None

    def mark_loaded(self, dataset_hash: str) -> None:
        self.session.execute(f"INSERT INTO {self.ks}.meta (key, value) VALUES ('dataset_hash', %s)", (dataset_hash,))

    # operations ----------------------------------------------------------------------------------
    def check(self, user: int, perm: str, resource: int) -> bool:
        if perm not in PERMISSIONS:
            raise UserError(f"unknown permission {perm!r}; valid: {', '.join(PERMISSIONS)}")
        row = self.session.execute(self.prep(
            "SELECT manage FROM {ks}.perm_by_resource WHERE resource = ? AND user = ?"), (resource, user)).one()
        return row is not None and (perm == "view" or bool(row[0]))

    def lookup_resources(self, user: int, perm: str) -> Iterable[int]:
        if perm not in PERMISSIONS:
            raise UserError(f"unknown permission {perm!r}; valid: {', '.join(PERMISSIONS)}")
        stmt = self.prep("SELECT resource FROM {ks}.perm_by_user WHERE user = ? AND perm = ?")
        stmt.fetch_size = self.lookup_page
        return [r[0] for r in self.session.execute(stmt, (user, perm))]

    def baseline_roundtrip(self) -> None:
        self.session.execute(self.prep("SELECT release_version FROM system.local")).one()

    # writes: source tables, then exactly the affected permission pairs -------------------------
    def write(self, rel: Relationship) -> None:
        self._apply(rel, insert=True)

    def delete(self, rel: Relationship) -> None:
        self._apply(rel, insert=False)

    def _apply(self, rel: Relationship, *, insert: bool) -> None:
        """The source tables, then exactly the affected permission pairs (closure_maintenance)."""
        if rel.relation not in REBAC_RELATIONS:
            raise UserError(f"unknown relation {rel.relation!r}; valid: {', '.join(REBAC_RELATIONS)}")
        self._walk = _Walk(self)  # graph walks memoized for this write only
        maintenance.apply(self, rel, insert=insert)

    def group_lock(self) -> contextlib.AbstractContextManager:
        """A lightweight transaction (Paxos) on a lock row (locks.py) that expires by TTL if its writer died."""
        token = uuid.uuid4().hex
        take = self.prep(f"INSERT INTO {{ks}}.meta (key, value) VALUES ('group_write_lock', ?) IF NOT EXISTS "
                         f"USING TTL {int(EXPIRE_S)}")
        give = self.prep("DELETE FROM {ks}.meta WHERE key = 'group_write_lock' IF value = ?")
        return spin_lock(lambda: bool(self.session.execute(take, (token,)).one()[0]),
                         lambda: self.session.execute(give, (token,)), "scylla")

    # closure_maintenance.Store: the storage calls -------------------------------------------------
    keeps_closures = False  # a user's closure is computed from the source tables when a pair needs it

    def write_edge(self, rel: Relationship, *, insert: bool) -> None:
        o, s = int(rel.object), int(rel.subject)
        table = SOURCE_TABLE[REBAC_RELATIONS[rel.relation].object_type]
        stmts: list[tuple[str, tuple]] = [(
            f"INSERT INTO {{ks}}.{table} (object, relation, subject) VALUES (?, ?, ?)" if insert else
            f"DELETE FROM {{ks}}.{table} WHERE object = ? AND relation = ? AND subject = ?",
            (o, _short(rel.relation), s))]
        if rel.relation in REVERSE:
            stmts.append(("INSERT INTO {ks}.rel_by_subject (relation, subject, object) VALUES (?, ?, ?)" if insert else
                          "DELETE FROM {ks}.rel_by_subject WHERE relation = ? AND subject = ? AND object = ?",
                          (rel.relation, s, o)))
        self.rows_touched += len(stmts)
        self._execute_all(stmts)
        self._walk = _Walk(self)  # what was walked before a delete may include the deleted edge

    def find_resources(self, rc: Reach) -> set[int]:
        """The resources of a Reach (model_rules.reach), from the source tables."""
        w = self._walk
        if rc.empty:
            return set()
        return {"resource": lambda r: {r}, "org_resources": lambda org: w.objects("resource_org", org),
                "granted_via_ancestors": lambda g: w.resources_via(w.ancestors(g))}[rc.resources](rc.resource_arg)

    def find_users(self, rc: Reach) -> set[int]:
        """The users of a Reach, from the source tables."""
        w = self._walk
        if rc.empty:
            return set()
        return {"user": lambda u: {u}, "membership": w.membership,
                "org_admins": lambda org: w.subjects("rel_org", org, "admin")}[rc.users](rc.user_arg)

    def parents(self, groups: list[int]) -> list[int]:
        return [p for g in groups for p in self._walk.parents(g)]

    def user_states(self, users: set[int], closure: maintenance.Closure, *, refresh: bool
                    ) -> dict[int, maintenance.UserState]:
        """Each user's closure from the direct groups, and the orgs the user administers (reads issued
        concurrently)."""
        us = sorted(users)
        got = iter(self._execute_all([("SELECT object FROM {ks}.rel_by_subject WHERE relation = ? AND subject = ?",
                                       (rel, u)) for u in us for rel in ("group_member", "group_manager", "org_admin")]))
        out = {}
        for u in us:
            direct = [row[0] for row in next(got)] + [row[0] for row in next(got)]
            out[u] = maintenance.UserState(closure(direct), {row[0] for row in next(got)})
        return out

    def rewrite_pairs(self, resources: set[int], users: dict[int, maintenance.UserState]) -> None:
        """Each resource's ACL and permission rows (reads issued concurrently); only the rows that differ
        are written to the three permission rows of a pair."""
        rs = sorted(resources)
        reads = [("SELECT relation, subject FROM {ks}.rel_resource WHERE object = ?", (r,)) for r in rs]
        reads += [("SELECT user, manage FROM {ks}.perm_by_resource WHERE resource = ?", (r,)) for r in rs]
        got = list(self._execute_all(reads))
        stmts: list[tuple[str, tuple, tuple]] = []
        for r, acl_rows, perm_rows in zip(rs, got[:len(rs)], got[len(rs):], strict=True):
            acl: dict[str, set[int]] = {}
            for rel, sub in acl_rows:  # rel_resource keeps the relation without its "resource_" prefix
                acl.setdefault(ACL_ROLE["resource_" + rel], set()).add(sub)
            current = dict(perm_rows)
            for u, old, new in maintenance.changes(acl, lambda u, cur=current: maintenance.stored_state(
                    u in cur and bool(cur[u]), u in cur and not cur[u]), users):
                stmts += _pair_statements(r, u, old, new)
        self._execute_batched(stmts)

    def finish(self) -> None:
        pass

    def _execute_batched(self, stmts: list[tuple[str, tuple, tuple]]) -> None:
        """Permission-row statements grouped by partition into unlogged batches of <= batch_rows (one
        mutation per partition per batch, as the load writes them): a hierarchy change under a hot parent
        sets ~10^5-10^6 rows (single-row inserts: ~2k rows/s, batched load: ~45k rows/s, see load()).
        rows_touched (one per statement: each writes or deletes one row) advances as each group of
        RECOMPUTE_CHUNK batches completes: the runner reads it as the write's progress."""
        from cassandra.concurrent import execute_concurrent
        from cassandra.query import BatchStatement, BatchType

        parts: dict[tuple, list[tuple[str, tuple]]] = {}
        for q, p, partition in stmts:
            parts.setdefault(partition, []).append((q, p))
        batches: list[tuple[Any, int]] = []
        for rows in parts.values():
            for i in range(0, len(rows), self.batch_rows):
                batch = BatchStatement(batch_type=BatchType.UNLOGGED)
                for q, p in rows[i:i + self.batch_rows]:
                    batch.add(self.prep(q), p)
                batches.append((batch, len(rows[i:i + self.batch_rows])))
        for i in range(0, len(batches), RECOMPUTE_CHUNK):
            chunk = batches[i:i + RECOMPUTE_CHUNK]
            execute_concurrent(self.session, [(b, None) for b, _ in chunk], concurrency=32, raise_on_first_error=True)
            self.rows_touched += sum(n for _, n in chunk)

    def _execute_all(self, stmts: list[tuple[str, tuple]]) -> list[list[tuple]]:
        """Run statements concurrently (at most 32 in flight); rows of each, in order. Raises the first error."""
        from cassandra.concurrent import execute_concurrent

        if not stmts:
            return []
        results = execute_concurrent(self.session, [(self.prep(q), p) for q, p in stmts], concurrency=32,
                                     raise_on_first_error=True)
        return [list(r.result_or_exc) for r in results]

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
            rows = self.session.execute("SELECT mebibytes FROM system_views.disk_usage WHERE keyspace_name = %s",
                                        (self.ks,))
            return int(sum(r[0] or 0 for r in rows)) << 20
        except Exception:  # noqa: BLE001 - ScyllaDB has no system_views.disk_usage
            total = 0
            for row in self.session.execute("SELECT mean_partition_size, partitions_count FROM system.size_estimates "
                                            "WHERE keyspace_name = %s", (self.ks,)):
                total += (row[0] or 0) * (row[1] or 0)
            return int(total)

    def drop(self) -> None:
        self.session.execute(f"DROP KEYSPACE IF EXISTS {self.ks}", timeout=180)
        self._prepared.clear()


def _pair_statements(r: int, u: int, old: str | None, new: str | None) -> list[tuple[str, tuple, tuple]]:
    """The permission rows of one (resource, user) pair that differ between states `old` and `new` (None,
    view or manage), each with the partition it writes (perm_by_resource: the resource; perm_by_user: user
    and permission). A pair gaining view writes 2 rows, not 3: a manage row it never had is not deleted
    (each such delete was a tombstone for nothing, a third of a hierarchy change's rows)."""
    out: list[tuple[str, tuple, tuple]] = []
    if new is None:
        out.append(("DELETE FROM {ks}.perm_by_resource WHERE resource = ? AND user = ?", (r, u), ("r", r)))
    else:
        out.append(("INSERT INTO {ks}.perm_by_resource (resource, user, manage) VALUES (?, ?, ?)",
                    (r, u, new == "manage"), ("r", r)))
    for perm, held_old, held_new in (("view", old is not None, new is not None),
                                     ("manage", old == "manage", new == "manage")):
        if held_old == held_new:
            continue
        out.append((f"INSERT INTO {{ks}}.perm_by_user (user, perm, resource) VALUES (?, '{perm}', ?)" if held_new else
                    f"DELETE FROM {{ks}}.perm_by_user WHERE user = ? AND perm = '{perm}' AND resource = ?", (u, r),
                    ("u", u, perm)))
    return out


class _Walk:
    """Graph walks over the source tables for one write, memoized for that write only: nothing is
    cached across calls, because other processes write too."""

    def __init__(self, b: ScyllaBackend):
        self.b = b
        self._parents: dict[int, set[int]] = {}

    def objects(self, relation: str, subject: int) -> set[int]:
        return {r[0] for r in self.b._rows(
            "SELECT object FROM {ks}.rel_by_subject WHERE relation = ? AND subject = ?", relation, subject)}

    def subjects(self, table: str, obj: int, relation: str) -> set[int]:
        return {r[0] for r in self.b._rows(
            f"SELECT subject FROM {{ks}}.{table} WHERE object = ? AND relation = ?", obj, relation)}

    def parents(self, g: int) -> set[int]:
        """The groups right above g."""
        if g not in self._parents:
            self._parents[g] = self.objects("group_child", g)
        return self._parents[g]

    def ancestors(self, g: int) -> set[int]:
        """g and every group that has g below it."""
        return walk([g], lambda frontier: [p for x in frontier for p in self.parents(x)])

    def membership(self, g: int) -> set[int]:
        """Direct members and managers of g and of every group below it."""
        users: set[int] = set()

        def children(frontier: list[int]) -> list[int]:
            kids = []
            for x in frontier:
                for rel, sub in self.b._rows("SELECT relation, subject FROM {ks}.rel_group WHERE object = ?", x):
                    if rel in ("member", "manager"):
                        users.add(sub)
                    elif rel == "child":
                        kids.append(sub)
            return kids

        walk([g], children)
        return users

    def resources_via(self, groups: set[int]) -> set[int]:
        out: set[int] = set()
        for g in groups:
            out |= self.objects("resource_manager_group", g) | self.objects("resource_viewer_group", g)
        return out


class _SSTableWriter:
    """The SSTable helper process (SSTableBulk.java `write`): tables declared, then blocks of rows sent as
    big-endian column arrays (its frame format is in its source), then closed; the pipe's back-pressure
    bounds what is in flight. Its stderr goes to a log beside the files."""

    def __init__(self, cmd: list[str], out: Path, ks: str, schema: list[str]):
        self.ks, self.out = ks, out
        self.schema = {re.search(r"TABLE\s+(?:IF NOT EXISTS\s+)?\S+\.(\w+)", q).group(1):  # type: ignore[union-attr]
                       re.sub(r"IF NOT EXISTS\s+", "", q) for q in schema if " TABLE " in q}
        self.ids: dict[str, int] = {}
        self.log = out / "helper.log"
        self.proc = subprocess.Popen([*cmd, "write", str(out)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=open(self.log, "wb"))  # noqa: SIM115 - the child owns it
        assert self.proc.stdin is not None
        self.pipe = self.proc.stdin

    def __enter__(self) -> _SSTableWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def _send(self, data: bytes) -> None:
        try:
            self.pipe.write(data)
        except (BrokenPipeError, OSError):
            self.proc.wait()
            raise BackendUnavailable(f"scylla: the SSTable helper stopped (exit {self.proc.returncode}): "
                                     f"{_last_line(self.log.read_text(errors='replace'))}") from None

    def table(self, name: str, columns: str, kinds: str, words: list[str]) -> None:
        self.ids[name] = len(self.ids) + 1
        insert = f"INSERT INTO {self.ks}.{name} ({columns.replace(',', ', ')}) VALUES ({', '.join('?' * len(kinds))})"
        self._send(struct.pack(">ii", 1, self.ids[name]) + b"".join(
            _utf(x) for x in (self.schema[name], insert, columns, kinds)) + struct.pack(">i", len(words))
                   + b"".join(_utf(x) for x in words))

    def rows(self, name: str, cols: list[np.ndarray], tick: _Ticker, weight: float = 1.0) -> int:
        """Rows grouped by partition, in blocks of <= SSTABLE_BLOCK_ROWS (each one SSTable); each row
        counts `weight` of a row's progress."""
        n = len(cols[0])
        for s in range(0, n, SSTABLE_BLOCK_ROWS):
            e = min(n, s + SSTABLE_BLOCK_ROWS)
            body = [np.ascontiguousarray(c[s:e], dtype="u1" if c.dtype == np.bool_ else ">i4").tobytes()
                    for c in cols]
            self._send(struct.pack(">iii", 2, self.ids[name], e - s) + b"".join(body))
            tick.done += (e - s) * weight
            tick.flush()
        return n

    def close(self, name: str) -> None:
        self._send(struct.pack(">ii", 3, self.ids[name]))

    def finish(self) -> dict[str, dict[str, float]]:
        """Waits for every SSTable; per table its rows, SSTables, bytes and seconds (the helper's lines)."""
        self._send(struct.pack(">i", 0))
        out, _ = self.proc.communicate(timeout=3600)
        lines = out.decode(errors="replace").splitlines()
        if self.proc.returncode != 0 or "done" not in lines:
            raise BackendUnavailable(f"scylla: the SSTable helper failed (exit {self.proc.returncode}): "
                                     f"{_last_line(self.log.read_text(errors='replace'))}")
        tables = {}
        for line in lines:  # table NAME rows N sstables S bytes B seconds T
            f = line.split()
            if f and f[0] == "table":
                tables[f[1]] = {k: float(v) for k, v in zip(f[2::2], f[3::2], strict=True)}
        return tables


def _utf(text: str) -> bytes:
    """Java's DataInput.readUTF: a 2-byte length, then the bytes (ASCII here)."""
    b = text.encode()
    return struct.pack(">H", len(b)) + b


def _last_line(text: str) -> str:
    lines = [x for x in text.strip().splitlines() if x.strip()]
    return (lines[-1] if lines else "no output")[:300]


def _retryable_errors() -> tuple[type[BaseException], ...]:
    """A node's write timeout, a client-side timeout, an overloaded or bootstrapping node: worth a retry."""
    from cassandra import OperationTimedOut, WriteTimeout
    from cassandra.protocol import OverloadedErrorMessage

    return (OperationTimedOut, WriteTimeout, OverloadedErrorMessage)


class _Ticker:
    """Progress in relationships while rows are written: `done` rows (updated by driver callbacks)
    are reported, scaled, from the loading thread."""

    def __init__(self, progress: Progress, scale: float):
        self.progress, self.scale = progress, scale
        self.done: float = 0
        self._reported = 0

    def flush(self) -> None:
        target = int(self.done * self.scale)
        if target > self._reported:
            self.progress(target - self._reported)
            self._reported = target


def _stacked(source: dict, rels: list[str], name: Callable[[str], str]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Objects, subjects and serialized relation names of several relations, concatenated."""
    obj = np.concatenate([source[r]["object"].to_numpy(np.int64) for r in rels])
    sub = np.concatenate([source[r]["subject"].to_numpy(np.int64) for r in rels])
    names = np.array([name(r).encode() for r in rels], dtype=object)
    return obj, sub, names[np.repeat(np.arange(len(rels)), [len(source[r]) for r in rels])]


def _coded(source: dict, rels: list[str], name: Callable[[str], str]
           ) -> tuple[np.ndarray, np.ndarray, list[str], np.ndarray]:
    """Objects and subjects of several relations, concatenated, with their relation names as codes into
    the sorted list of names (so code order is the text's clustering order)."""
    # int32 ids and int8 codes, as the helper receives them: at xl (52M source rows) int64 columns, their
    # sort order and the sorted copies took the suite to 3.4 GiB during this step, over its 4 GB bound
    words = sorted({name(r) for r in rels})
    obj = np.concatenate([source[r]["object"].to_numpy(np.int32) for r in rels])
    sub = np.concatenate([source[r]["subject"].to_numpy(np.int32) for r in rels])
    codes = np.repeat(np.array([words.index(name(r)) for r in rels], dtype=np.int8), [len(source[r]) for r in rels])
    return obj, sub, words, codes


def _lex_order(*cols: np.ndarray) -> np.ndarray:
    """np.lexsort's order of non-negative int columns, the most significant first, as one stable sort of
    a combined int64 key when it fits: the tables come sorted by object, relation by relation, so that
    sort merges a few sorted runs (xl rel_resource, 37.9M rows: 1.1 s where lexsort took 9.0 s)."""
    widths = [int(c.max()) + 1 if len(c) else 1 for c in cols]
    if math.prod(widths) >= 2**63:
        return np.lexsort(cols[::-1])
    key = cols[0].astype(np.int64)
    for c, w in zip(cols[1:], widths[1:], strict=True):
        key *= w
        key += c
    return np.argsort(key, kind="stable")


def _routing(*parts: bytes) -> bytes:
    """Routing key of a composite partition key: each component as <length><bytes><0>."""
    return b"".join(struct.pack(">H", len(p)) + p + b"\x00" for p in parts)


def _composite_after(second: bytes) -> Callable[[bytes], bytes]:
    """Routing key of an (int, text) partition key, the text fixed."""
    tail = b"\x00" + struct.pack(">H", len(second)) + second + b"\x00"
    head = struct.pack(">H", 4)
    return lambda first: head + first + tail


class _Encoded(list):
    """The statements of a BATCH already serialized: `body` holds `count` entries in the protocol's
    layout. An empty list to everything but the patched BatchMessage.send_body."""

    def __init__(self, body: bytes, count: int):
        super().__init__()
        self.body, self.count = body, count


def _fixed_rows(query_id: bytes, cols: list[np.ndarray]) -> np.ndarray:
    """One packed record per row, the BATCH entry of a prepared statement (protocol v3-v5):
    [byte 1][short id length][id][short value count] then per value [int length][bytes]; int columns
    as 4-byte big-endian ints, bool columns as one byte."""
    fields: list[tuple] = [("kind", "u1"), ("id_len", ">u2"), ("id", "u1", (len(query_id),)), ("n", ">u2")]
    for i, c in enumerate(cols):
        fields += [(f"len{i}", ">i4"), (f"v{i}", "u1" if c.dtype == np.bool_ else ">i4")]
    rec = np.empty(len(cols[0]), dtype=np.dtype(fields))
    rec["kind"], rec["id_len"], rec["n"] = 1, len(query_id), len(cols)
    rec["id"] = np.frombuffer(query_id, dtype=np.uint8)
    for i, c in enumerate(cols):
        rec[f"len{i}"] = 1 if c.dtype == np.bool_ else 4
        rec[f"v{i}"] = c
    return rec


_PATCH_LOCK = threading.Lock()


def _encoded_batches() -> None:
    """Teach the driver's BatchMessage to write an _Encoded body: the header and tail (consistency,
    flags, keyspace...) still come from the driver's own send_body, called with no statements."""
    from cassandra import protocol

    with _PATCH_LOCK:
        original = protocol.BatchMessage.send_body
        if getattr(original, "authzbench_encoded", False):
            return

        def send_body(self: Any, f: Any, protocol_version: int) -> None:
            q = self.queries
            if not isinstance(q, _Encoded):
                return original(self, f, protocol_version)
            buf = io.BytesIO()
            self.queries = []
            try:
                original(self, buf, protocol_version)
            finally:
                self.queries = q
            head = buf.getvalue()  # [byte batch type][short 0][consistency, flags, ...]
            f.write(head[:1] + struct.pack(">H", q.count) + q.body + head[3:])

        send_body.authzbench_encoded = True  # type: ignore[attr-defined]
        protocol.BatchMessage.send_body = send_body
