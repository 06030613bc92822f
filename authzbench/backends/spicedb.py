"""SpiceDB over gRPC (authzed client): one adapter for SpiceDB on PostgreSQL and on CockroachDB.

Only the provisioner's datastore flags differ between `spicedb-pg` and `spicedb-crdb`; this code
path is the same. The schema is schema/rebac.zed or schema/social.zed, relationships map 1:1 from
the dataset's relation catalog (model.RelationDef), object ids are the dataset's decimal ids.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, ClassVar
from urllib.parse import parse_qs, urlparse

import grpc
from authzed.api.v1 import (
    CheckPermissionRequest,
    CheckPermissionResponse,
    Consistency,
    InsecureClient,
    LookupResourcesRequest,
    ObjectReference,
    ReadSchemaRequest,
    Relationship,
    RelationshipUpdate,
    SubjectReference,
    WriteRelationshipsRequest,
    WriteSchemaRequest,
    ZedToken,
)
from authzed.api.v1.permission_service_pb2 import ImportBulkRelationshipsRequest

from authzbench.backends.base import Backend, BuildStats, LoadStats, Progress, ServerInfo, no_progress
from authzbench.dataset import Dataset
from authzbench.errors import BackendUnavailable, UserError
from authzbench.model import RelationDef, relation_defs
from authzbench.model import Relationship as Rel

SCHEMA_DIR = Path(__file__).resolve().parents[2] / "schema"
HASH_MARK = re.compile(r"authzbench dataset ([0-9a-f]{64})")
# social checks name the object type through the permission: view_content -> content#view
SOCIAL_PERMS = {"view_user": ("user", "view"), "view_content": ("content", "view"),
                "view_interaction": ("interaction", "view")}


def _consistency(mode: str, token: ZedToken | None) -> Consistency:
    if mode == "fully_consistent":
        return Consistency(fully_consistent=True)
    if mode == "at_least_as_fresh" and token is not None:
        return Consistency(at_least_as_fresh=token)
    return Consistency(minimize_latency=True)


class SpiceDBBackend(Backend):
    name: ClassVar[str] = "spicedb-pg"
    models = frozenset({"rebac", "social"})
    # Relationships per ImportBulkRelationships message. Measured on baseline (452,883 relationships, this
    # 2-core machine): 1,000 -> 38,720/s, 5,000 -> 33,125/s, 20,000 -> 31,474/s; WriteRelationships
    # (the reference's path, 1,000 per call) -> 9,322/s.
    import_batch: ClassVar[int] = 1_000
    write_batch: ClassVar[int] = 1_000  # WriteRelationships max updates per call (server default)

    @classmethod
    def endpoint_from_url(cls, url: str) -> dict[str, Any]:
        """grpc://PRESHARED_KEY@host:port?datastore=cockroachdb[&tls=1&ca=/path]"""
        u = urlparse(url)
        q = parse_qs(u.query)
        if not u.hostname or not u.username:
            raise UserError("spicedb URL must look like grpc://PRESHARED_KEY@host:port?datastore=postgres")
        return {"addr": f"{u.hostname}:{u.port or 50051}", "preshared_key": u.username,
                "datastore": q.get("datastore", ["postgres"])[0], "tls": q.get("tls", ["0"])[0] == "1",
                "ca_certs": q.get("ca", [None])[0]}

    # lifecycle ---------------------------------------------------------------------------------
    def connect(self) -> None:
        ep = self.endpoint
        self.model = self.options.get("model", "rebac")
        self.mode = self.options.get("consistency") or "minimize_latency"
        self.timeout = float(self.options.get("timeout_s") or 60.0)
        self.token: ZedToken | None = None
        if ep.get("tls"):
            from authzed.api.v1 import Client
            from grpcutil import bearer_token_credentials

            ca = Path(ep["ca_certs"]).read_bytes() if ep.get("ca_certs") else None
            self.client = Client(ep["addr"], bearer_token_credentials(ep["preshared_key"], ca))
        else:
            self.client = InsecureClient(ep["addr"], ep["preshared_key"])
        try:
            self.client.ReadSchema(ReadSchemaRequest(), timeout=5)
        except grpc.RpcError as e:
            if e.code() == grpc.StatusCode.NOT_FOUND:  # no schema yet: connected and authorized
                return
            if e.code() in (grpc.StatusCode.UNAUTHENTICATED, grpc.StatusCode.PERMISSION_DENIED):
                raise UserError(f"{self.name}: SpiceDB at {ep['addr']} rejected the preshared key") from None
            raise BackendUnavailable(f"{self.name}: cannot reach SpiceDB at {ep['addr']}: {e.code().name}: "
                                     f"{(e.details() or '').splitlines()[0][:200]}") from None

    def close(self) -> None:
        ch = getattr(self.client, "_channel", None) or getattr(self.client, "channel", None)
        if ch is not None:
            ch.close()

    def server_info(self) -> ServerInfo:
        ep = self.endpoint
        version = ep.get("spicedb_version", "unknown")
        ds = {"postgres": "PostgreSQL", "cockroachdb": "CockroachDB"}.get(ep.get("datastore", ""), ep.get("datastore"))
        ds_version = (ep.get("datastore_version") or "").split(" ")[0]
        return ServerInfo("SpiceDB", version, f"SpiceDB {version} on {ds} {ds_version}".strip(),
                          notes=[f"measured phases use consistency={self.mode}; correctness tests use "
                                 "fully_consistent"])

    # schema and data ---------------------------------------------------------------------------
    def _schema_text(self, dataset_hash: str | None = None) -> str:
        text = (SCHEMA_DIR / ("social.zed" if self.model == "social" else "rebac.zed")).read_text()
        if dataset_hash:
            # Doc comments are kept by SpiceDB: the loaded dataset's hash travels with the schema.
            text = text.replace("definition user {", f"/** authzbench dataset {dataset_hash} */\ndefinition user {{",
                                1)
        return text

    def create_schema(self) -> None:
        self.client.WriteSchema(WriteSchemaRequest(schema=self._schema_text()), timeout=30)

    def _rel(self, d: RelationDef, obj: str, sub: str) -> Relationship:
        subject = SubjectReference(object=ObjectReference(object_type=d.subject_type, object_id="*" if d.wildcard
                                                          else sub), optional_relation=d.subject_relation or "")
        return Relationship(resource=ObjectReference(object_type=d.object_type, object_id=obj), relation=d.relation,
                            subject=subject)

    def _relationships(self, ds: Dataset) -> Iterator[list[Relationship]]:
        defs = relation_defs(ds.model)
        for name in ds.authz_relations():
            d = defs[name]
            for df in ds.iter_batches(name, self.import_batch):
                objs, subs = map(str, df["object"].tolist()), map(str, df["subject"].tolist())
                yield [self._rel(d, o, s) for o, s in zip(objs, subs, strict=True)]

    def load(self, ds: Dataset, progress: Progress = no_progress) -> LoadStats:
        # A relationship that must be visible once the import is: build() waits for it.
        rel = "user_self" if ds.model == "social" else "resource_manager_user"
        first = ds.table(rel).iloc[0]
        perm = "view_user" if ds.model == "social" else "manage"
        self._probe = (int(first["subject"]), perm, int(first["object"]))
        if self.options.get("ingest") == "write":
            return self._load_with_writes(ds, progress)
        batch_seconds: list[float] = []
        rows = 0
        last = time.perf_counter()

        def requests() -> Iterator[ImportBulkRelationshipsRequest]:
            # Client-streaming: the time between two yields is building one batch plus gRPC flow
            # control, i.e. what the client waits for per batch.
            nonlocal rows, last
            for batch in self._relationships(ds):
                yield ImportBulkRelationshipsRequest(relationships=batch)
                now = time.perf_counter()
                batch_seconds.append(now - last)
                last = now
                rows += len(batch)
                progress(len(batch))

        try:
            self.client.ImportBulkRelationships(requests(), timeout=3600)
        except grpc.RpcError as e:
            raise BackendUnavailable(f"{self.name}: ImportBulkRelationships failed: {e.code().name}: "
                                     f"{(e.details() or '')[:200]}") from None
        return LoadStats(rows=rows, batch_rows=self.import_batch, batch_seconds=batch_seconds,
                         notes={"method": "ImportBulkRelationships (one client stream, one transaction)",
                                "batch": self.import_batch})

    def _load_with_writes(self, ds: Dataset, progress: Progress) -> LoadStats:
        """The reference's path: WriteRelationships, <= 1,000 TOUCH updates per call."""
        batch_seconds: list[float] = []
        rows = 0
        for big in self._relationships(ds):
            for i in range(0, len(big), self.write_batch):
                chunk = big[i:i + self.write_batch]
                t0 = time.perf_counter()
                resp = self.client.WriteRelationships(WriteRelationshipsRequest(updates=[
                    RelationshipUpdate(operation=RelationshipUpdate.OPERATION_TOUCH, relationship=r) for r in chunk]),
                    timeout=self.timeout)
                batch_seconds.append(time.perf_counter() - t0)
                self.token = resp.written_at
                rows += len(chunk)
                progress(len(chunk))
        return LoadStats(rows=rows, batch_rows=self.write_batch, batch_seconds=batch_seconds,
                         notes={"method": "WriteRelationships TOUCH", "batch": self.write_batch})

    def build(self) -> BuildStats:
        """The import returns no ZedToken: wait until minimize_latency reads (quantized to 5 s by
        default) see the imported data, so measured phases never read a pre-import revision."""
        t0 = time.perf_counter()
        probe = self._probe
        if probe is None:
            return BuildStats("no probe (empty dataset)", 0.0)
        deadline = t0 + 60
        while time.perf_counter() < deadline:
            if self.check(*probe, mode="minimize_latency"):
                return BuildStats("wait until minimize_latency reads see the import", time.perf_counter() - t0)
            time.sleep(0.2)
        raise BackendUnavailable(f"{self.name}: imported data not visible to minimize_latency reads after 60 s")

    _probe: tuple[int, str, int] | None = None

    def loaded_hash(self) -> str | None:
        try:
            text = self.client.ReadSchema(ReadSchemaRequest(), timeout=10).schema_text
        except grpc.RpcError:
            return None
        m = HASH_MARK.search(text)
        return m.group(1) if m else None

    def mark_loaded(self, dataset_hash: str) -> None:
        self.client.WriteSchema(WriteSchemaRequest(schema=self._schema_text(dataset_hash)), timeout=30)

    # operations ----------------------------------------------------------------------------------
    def _target(self, perm: str) -> tuple[str, str]:
        return SOCIAL_PERMS.get(perm, ("resource", perm))

    def check(self, user: int, perm: str, resource: int, mode: str | None = None) -> bool:
        obj_type, permission = self._target(perm)
        resp = self.client.CheckPermission(CheckPermissionRequest(
            resource=ObjectReference(object_type=obj_type, object_id=str(resource)), permission=permission,
            subject=SubjectReference(object=ObjectReference(object_type="user", object_id=str(user))),
            consistency=_consistency(mode or self.mode, self.token)), timeout=self.timeout)
        return resp.permissionship == CheckPermissionResponse.PERMISSIONSHIP_HAS_PERMISSION

    def lookup_resources(self, user: int, perm: str) -> Iterable[int]:
        """Streamed; returned as SpiceDB sent them (the runner removes and counts duplicates)."""
        obj_type, permission = self._target(perm)
        stream = self.client.LookupResources(LookupResourcesRequest(
            resource_object_type=obj_type, permission=permission,
            subject=SubjectReference(object=ObjectReference(object_type="user", object_id=str(user))),
            consistency=_consistency(self.mode, self.token)), timeout=self.timeout)
        return [int(r.resource_object_id) for r in stream]

    def _update(self, rel: Rel, op: int) -> None:
        d = relation_defs(self.model)[rel.relation]
        resp = self.client.WriteRelationships(WriteRelationshipsRequest(updates=[RelationshipUpdate(
            operation=op, relationship=self._rel(d, str(rel.object), str(rel.subject)))]), timeout=self.timeout)
        self.token = resp.written_at

    def write(self, rel: Rel) -> None:
        self._update(rel, RelationshipUpdate.OPERATION_TOUCH)

    def delete(self, rel: Rel) -> None:
        self._update(rel, RelationshipUpdate.OPERATION_DELETE)

    def baseline_roundtrip(self) -> None:
        self.client.ReadSchema(ReadSchemaRequest(), timeout=self.timeout)

    def footprint(self) -> int:
        dsn = self.endpoint.get("datastore_dsn")
        if not dsn:
            return 0
        import psycopg

        with psycopg.connect(dsn, connect_timeout=5) as conn:
            row = conn.execute("SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c "
                               "JOIN pg_namespace n ON n.oid = c.relnamespace "
                               "WHERE n.nspname = 'public' AND c.relkind IN ('r', 'm')").fetchone()
        return int(row[0])

    def drop(self) -> None:
        """Delete every relationship of the schema's definitions, then the schema."""
        from authzed.api.v1 import DeleteRelationshipsRequest, RelationshipFilter

        try:
            text = self.client.ReadSchema(ReadSchemaRequest(), timeout=10).schema_text
        except grpc.RpcError:
            return
        for t in re.findall(r"definition\s+(\w+)", text):
            # No limit: one transaction per type (the server caps limited deletes at 1,000 rows a call).
            self.client.DeleteRelationships(DeleteRelationshipsRequest(
                relationship_filter=RelationshipFilter(resource_type=t)), timeout=600)
