"""ScyllaDB / Cassandra over CQL (cassandra-driver): precomputed permission tables (schema/cql.cql).

The same code serves ScyllaDB (compose/external) and Apache Cassandra (native here): it speaks CQL
only. Permissions are expanded at load time with the shared vectorized closure, then written with
prepared statements in unlogged batches grouped by partition, with bounded concurrency.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from authzbench.backends.base import Backend, BuildStats, LoadStats, Progress, ServerInfo, no_progress
from authzbench.backends.sqlfile import schema_sections
from authzbench.closure import permission_keys
from authzbench.dataset import Dataset
from authzbench.errors import BackendUnavailable, UserError
from authzbench.model import REBAC_RELATIONS, Relationship

SCHEMA_FILE = Path(__file__).resolve().parents[2] / "schema" / "cql.cql"
SOURCE = [r for r, d in REBAC_RELATIONS.items() if d.authz]


class ScyllaBackend(Backend):
    name: ClassVar[str] = "scylla"
    batch_rows: ClassVar[int] = 50  # rows per unlogged batch, all in one partition (~42k rows/s measured)
    in_flight: ClassVar[int] = 96  # concurrent batches: enough to keep the node busy, bounded memory
    lookup_page: ClassVar[int] = 5000  # rows per page of a lookup's partition scan

    @classmethod
    def endpoint_from_url(cls, url: str) -> dict[str, Any]:
        """cql://host1,host2:9042/keyspace"""
        from urllib.parse import urlparse

        u = urlparse(url)
        hosts = (u.netloc.rsplit(":", 1)[0] if ":" in u.netloc else u.netloc).split(",")
        return {"hosts": hosts, "port": u.port or 9042, "keyspace": (u.path.strip("/") or "authzbench")}

    # lifecycle ---------------------------------------------------------------------------------
    def connect(self) -> None:
        from cassandra.cluster import EXEC_PROFILE_DEFAULT, Cluster, ExecutionProfile, NoHostAvailable
        from cassandra.policies import DCAwareRoundRobinPolicy, TokenAwarePolicy

        ep = self.endpoint
        self.ks = ep.get("keyspace", "authzbench")
        profile = ExecutionProfile(load_balancing_policy=TokenAwarePolicy(DCAwareRoundRobinPolicy()),
                                   request_timeout=float(self.options.get("timeout_s") or 60))
        self.cluster = Cluster(contact_points=ep["hosts"], port=int(ep["port"]), connect_timeout=5,
                               execution_profiles={EXEC_PROFILE_DEFAULT: profile})
        try:
            self.session = self.cluster.connect()
        except NoHostAvailable as e:
            self.cluster.shutdown()
            raise BackendUnavailable(f"scylla: no CQL node reachable at {ep['hosts']}:{ep['port']}: "
                                     f"{next(iter(e.errors.values()), e)!s:.200}") from None
        self.sql = {k: [s.format(ks=self.ks) for s in v] for k, v in schema_sections(SCHEMA_FILE).items()}
        self._prepared: dict[str, Any] = {}
        self._membership: dict[int, set[int]] | None = None

    def close(self) -> None:
        if getattr(self, "cluster", None) is not None:
            self.cluster.shutdown()

    def prep(self, cql: str):
        """Prepared-statement cache: each statement is prepared once per connection."""
        p = self._prepared.get(cql)
        if p is None:
            p = self._prepared[cql] = self.session.prepare(cql)
        return p

    def server_info(self) -> ServerInfo:
        row = self.session.execute("SELECT release_version FROM system.local").one()
        version = row.release_version
        try:  # ScyllaDB reports a Cassandra-compatible release_version and has system.versions
            scylla = self.session.execute("SELECT version FROM system.versions").one()
        except Exception:  # noqa: BLE001 - Cassandra has no such table
            scylla = None
        if scylla:
            return ServerInfo("ScyllaDB", scylla.version, f"ScyllaDB {scylla.version}")
        return ServerInfo("Apache Cassandra", version, f"Cassandra {version} (CQL, standing in for ScyllaDB)",
                          notes=["same CQL adapter as for ScyllaDB; Cassandra's figures are not ScyllaDB's"])

    # schema and data ---------------------------------------------------------------------------
    def create_schema(self) -> None:
        for stmt in self.sql["tables"]:
            self.session.execute(stmt, timeout=60)

    def _write_rows(self, cql: str, partitions: np.ndarray, columns: list[np.ndarray], progress: Progress,
                    batch_seconds: list[float]) -> int:
        """Unlogged batches of <= batch_rows rows sharing one partition key, in_flight at a time."""
        from cassandra.query import BatchStatement, BatchType

        stmt = self.prep(cql)
        n = len(partitions)
        if n == 0:
            return 0
        # batch boundaries: where the partition changes, and every batch_rows rows within one
        change = np.flatnonzero(np.diff(partitions)) + 1
        starts = np.unique(np.concatenate([[0], change, np.arange(0, n, self.batch_rows)]))
        ends = np.append(starts[1:], n)
        cols = [c.tolist() for c in columns]
        sem = threading.Semaphore(self.in_flight)
        errors: list[BaseException] = []
        lock = threading.Lock()

        def done(_result, t0=0.0, k=0):
            with lock:
                batch_seconds.append(time.perf_counter() - t0)
            progress(k)
            sem.release()

        def failed(exc, t0=0.0, k=0):
            errors.append(exc)
            sem.release()

        for s, e in zip(starts.tolist(), ends.tolist(), strict=True):
            batch = BatchStatement(batch_type=BatchType.UNLOGGED)
            for i in range(s, e):
                batch.add(stmt, tuple(c[i] for c in cols))
            sem.acquire()
            if errors:
                break
            t0 = time.perf_counter()
            fut = self.session.execute_async(batch)
            fut.add_callbacks(done, failed, callback_kwargs={"t0": t0, "k": e - s}, errback_kwargs={"t0": t0, "k": 0})
        for _ in range(self.in_flight):
            sem.acquire()
        if errors:
            raise BackendUnavailable(f"scylla: batch write failed: {errors[0]!s:.200}")
        return n

    def load(self, ds: Dataset, progress: Progress = no_progress) -> LoadStats:
        batch_seconds: list[float] = []
        rows = 0
        t0 = time.perf_counter()
        for rel in SOURCE:
            df = ds.table(rel)
            rows += self._write_rows(f"INSERT INTO {self.ks}.rel_{rel} (object, subject) VALUES (?, ?)",
                                     df["object"].to_numpy(), [df["object"].to_numpy(), df["subject"].to_numpy()],
                                     progress, batch_seconds)
        raw_s = time.perf_counter() - t0
        # The closure, vectorized (the oracle's code path), not recomputed per row.
        t1 = time.perf_counter()
        keys = permission_keys(ds)
        n_res = ds.entities["resource"]
        manage, view = keys["manage"], keys["view"]
        closure_s = time.perf_counter() - t1
        t2 = time.perf_counter()
        v_user, v_res = view // n_res, view % n_res
        is_manage = np.isin(view, manage, assume_unique=True)
        by_res = np.lexsort((v_user, v_res))
        perm_rows = self._write_rows(
            f"INSERT INTO {self.ks}.perm_by_resource (resource, user, manage) VALUES (?, ?, ?)",
            v_res[by_res], [v_res[by_res], v_user[by_res], is_manage[by_res]], progress, batch_seconds)
        for perm, k in (("view", view), ("manage", manage)):  # keys are sorted by (user, resource)
            u, r = k // n_res, k % n_res
            perm_rows += self._write_rows(
                f"INSERT INTO {self.ks}.perm_by_user (user, perm, resource) VALUES (?, '{perm}', ?)",
                u, [u, r], progress, batch_seconds)
        perm_s = time.perf_counter() - t2
        return LoadStats(rows=rows + perm_rows, batch_rows=self.batch_rows, batch_seconds=batch_seconds,
                         notes={"source_rows": rows, "permission_rows": perm_rows,
                                "closure_seconds": round(closure_s, 3),
                                "permission_rows_per_s": round(perm_rows / perm_s) if perm_s else None,
                                "raw_ingest_seconds": round(raw_s, 3),
                                "method": f"prepared INSERTs, unlogged batches of <= {self.batch_rows} rows per "
                                          f"partition, {self.in_flight} in flight"})

    def loaded_hash(self) -> str | None:
        try:
            row = self.session.execute(f"SELECT value FROM {self.ks}.meta WHERE key = 'dataset_hash'").one()
        except Exception:  # noqa: BLE001 - keyspace or table missing
            return None
        return row.value if row else None

    def mark_loaded(self, dataset_hash: str) -> None:
        self.session.execute(f"INSERT INTO {self.ks}.meta (key, value) VALUES ('dataset_hash', %s)", (dataset_hash,))

    # operations ----------------------------------------------------------------------------------
    def check(self, user: int, perm: str, resource: int) -> bool:
        row = self.session.execute(self.prep(
            f"SELECT manage FROM {self.ks}.perm_by_resource WHERE resource = ? AND user = ?"), (resource, user)).one()
        if perm == "view":
            return row is not None
        if perm == "manage":
            return bool(row and row.manage)
        raise UserError(f"unknown permission {perm!r}; valid: manage, view")

    def lookup_resources(self, user: int, perm: str) -> Iterable[int]:
        stmt = self.prep(f"SELECT resource FROM {self.ks}.perm_by_user WHERE user = ? AND perm = ?")
        stmt.fetch_size = self.lookup_page
        return [r.resource for r in self.session.execute(stmt, (user, perm))]

    def write(self, rel: Relationship) -> None:
        self._rel_change(rel, insert=True)

    def delete(self, rel: Relationship) -> None:
        self._rel_change(rel, insert=False)

    def _rel_change(self, rel: Relationship, *, insert: bool) -> None:
        table = f"{self.ks}.rel_{rel.relation}"
        if insert:
            self.session.execute(self.prep(f"INSERT INTO {table} (object, subject) VALUES (?, ?)"),
                                 (rel.object, rel.subject))
        else:
            self.session.execute(self.prep(f"DELETE FROM {table} WHERE object = ? AND subject = ?"),
                                 (rel.object, rel.subject))
        if rel.relation.startswith("resource_"):
            self._recompute([rel.object])  # only this resource's permissions can change
        else:
            # Group and org-admin edges fan out to many resources: recompute all of them (rare).
            self._membership = None
            self._recompute(self._all_resources())

    # recomputation from the source tables --------------------------------------------------------
    def _pairs(self, rel: str, obj: int | None = None) -> list[tuple[int, int]]:
        if obj is None:
            rows = self.session.execute(f"SELECT object, subject FROM {self.ks}.rel_{rel}")
        else:
            rows = self.session.execute(self.prep(f"SELECT object, subject FROM {self.ks}.rel_{rel} WHERE object = ?"),
                                        (obj,))
        return [(r.object, r.subject) for r in rows]

    def _members(self) -> dict[int, set[int]]:
        """membership(g), from the (small) group tables; cached until a group edge changes."""
        if self._membership is None:
            direct: dict[int, set[int]] = {}
            for rel in ("group_member", "group_manager"):
                for g, u in self._pairs(rel):
                    direct.setdefault(g, set()).add(u)
            children: dict[int, set[int]] = {}
            for p, c in self._pairs("group_child"):
                children.setdefault(p, set()).add(c)
            out: dict[int, set[int]] = {}
            for g in set(direct) | set(children):
                seen, stack, users = {g}, [g], set()
                while stack:  # `seen` makes a cyclic hierarchy terminate
                    x = stack.pop()
                    users |= direct.get(x, set())
                    for c in children.get(x, ()):
                        if c not in seen:
                            seen.add(c)
                            stack.append(c)
                out[g] = users
            self._membership = out
        return self._membership

    def _all_resources(self) -> list[int]:
        return sorted({r.object for r in self.session.execute(f"SELECT DISTINCT object FROM {self.ks}.rel_resource_org")})

    def _recompute(self, resources: list[int]) -> None:
        members = self._members()
        admins: dict[int, set[int]] = {}
        for o, u in self._pairs("org_admin"):
            admins.setdefault(o, set()).add(u)
        for r in resources:
            manage = {u for _, u in self._pairs("resource_manager_user", r)}
            for _, g in self._pairs("resource_manager_group", r):
                manage |= members.get(g, set())
            for _, o in self._pairs("resource_org", r):
                manage |= admins.get(o, set())
            view = set(manage) | {u for _, u in self._pairs("resource_viewer_user", r)}
            for _, g in self._pairs("resource_viewer_group", r):
                view |= members.get(g, set())
            current = {row.user: row.manage for row in self.session.execute(self.prep(
                f"SELECT user, manage FROM {self.ks}.perm_by_resource WHERE resource = ?"), (r,))}
            for u in set(current) - view:
                self.session.execute(self.prep(f"DELETE FROM {self.ks}.perm_by_resource WHERE resource = ? AND user = ?"),
                                     (r, u))
                for perm in ("view", "manage"):
                    self.session.execute(self.prep(
                        f"DELETE FROM {self.ks}.perm_by_user WHERE user = ? AND perm = ? AND resource = ?"), (u, perm, r))
            for u in view:
                m = u in manage
                if current.get(u) == m:
                    continue
                self.session.execute(self.prep(
                    f"INSERT INTO {self.ks}.perm_by_resource (resource, user, manage) VALUES (?, ?, ?)"), (r, u, m))
                self.session.execute(self.prep(
                    f"INSERT INTO {self.ks}.perm_by_user (user, perm, resource) VALUES (?, 'view', ?)"), (u, r))
                mstmt = (f"INSERT INTO {self.ks}.perm_by_user (user, perm, resource) VALUES (?, 'manage', ?)" if m else
                         f"DELETE FROM {self.ks}.perm_by_user WHERE user = ? AND perm = 'manage' AND resource = ?")
                self.session.execute(self.prep(mstmt), (u, r))

    def baseline_roundtrip(self) -> None:
        self.session.execute(self.prep("SELECT release_version FROM system.local")).one()

    def footprint(self) -> int:
        """Live data size as the node reports it (system.size_estimates is per-range and approximate)."""
        total = 0
        for row in self.session.execute("SELECT mean_partition_size, partitions_count FROM system.size_estimates "
                                        "WHERE keyspace_name = %s", (self.ks,)):
            total += (row.mean_partition_size or 0) * (row.partitions_count or 0)
        return int(total)

    def drop(self) -> None:
        self.session.execute(f"DROP KEYSPACE IF EXISTS {self.ks}", timeout=120)

    def build(self) -> BuildStats | None:
        return None
