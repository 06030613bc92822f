"""SpiceDB over gRPC (authzed client): one adapter for SpiceDB on PostgreSQL and on CockroachDB.

Only the provisioner's datastore flags differ between `spicedb-pg` and `spicedb-crdb`; this code
path is the same, and the backend's name follows the endpoint's datastore. The schema is
rebac.zed or social.zed, relationships map 1:1 from the dataset's relation catalog
(model.RelationDef; group_child is group:PARENT#member@group:CHILD#membership, metadata such as
group_org is not loaded), object ids are the dataset's decimal ids.

External servers (`--provision external`, AUTHZBENCH_SPICEDB_PG_URL / AUTHZBENCH_SPICEDB_CRDB_URL):
    grpc://PRESHARED_KEY@host:port?datastore=postgres|cockroachdb
    grpcs://PRESHARED_KEY@host:port?datastore=cockroachdb&ca=/path/ca.pem   (TLS; ca optional)
    optional: &datastore_dsn=postgresql://user@host:port/db&datastore_version=15.4 (for footprint/report)
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, ClassVar, NoReturn
from urllib.parse import parse_qs, urlparse

import grpc
from authzed.api.v1 import (
    CheckPermissionRequest,
    CheckPermissionResponse,
    Client,
    Consistency,
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
from authzed.api.v1.permission_service_pb2 import ImportBulkRelationshipsResponse

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
    Stream,
    no_progress,
)
from authzbench.backends.common import permission_target
from authzbench.backends.pgsize import schema_bytes
from authzbench.backends.zanzibar import Prebuilt, relationship_batches
from authzbench.core.errors import BackendUnavailable, UserError
from authzbench.schema.dataset import Dataset
from authzbench.schema.model import RelationDef, relation_defs
from authzbench.schema.model import Relationship as Rel

SCHEMA_DIR = Path(__file__).resolve().parent
HASH_MARK = re.compile(r"authzbench dataset ([0-9a-f]{64})")
DATASTORES = {"postgres": ("spicedb-pg", "PostgreSQL"), "cockroachdb": ("spicedb-crdb", "CockroachDB")}
IMPORT_METHOD = "/authzed.api.v1.PermissionsService/ImportBulkRelationships"
# SpiceDB's serverversion middleware answers this request header with a response trailer.
VERSION_REQUEST = ("io.spicedb.requestversion", "1")
# build(): minimize_latency reads must see the import within this many probes, VISIBLE_PAUSE_S apart (>= 60 s)
VISIBLE_ROUNDS, VISIBLE_PAUSE_S = 300, 0.2
VERSION_TRAILER = "io.spicedb.debug.version"


def _consistency(mode: str, token: ZedToken | None) -> Consistency:
    if mode == "fully_consistent":
        return Consistency(fully_consistent=True)
    if mode == "at_least_as_fresh" and token is not None:
        return Consistency(at_least_as_fresh=token)
    return Consistency(minimize_latency=True)


class _Stubs(Client):
    """The authzed client's service stubs on a channel we own (InsecureClient keeps no handle to
    close, and its Python auth interceptor would add its own cost to every measured call)."""

    def __init__(self, channel: grpc.Channel) -> None:
        self.init_stubs(channel)


# Protobuf wire encoding of ImportBulkRelationshipsRequest. Building ~450k Relationship messages
# through the protobuf API costs more CPU than the server spends importing them (~50k/s on one
# core); concatenating their bytes directly is ~5x faster and byte-identical (tests/unit/
# test_spicedb_wire.py), so the import measures SpiceDB rather than Python object construction.
_VARINT = [bytes([n]) if n < 128 else bytes([(n & 0x7F) | 0x80, n >> 7]) for n in range(1 << 14)]


def _field(tag: int, payload: bytes) -> bytes:
    """A length-delimited field (wire type 2); payloads here are far below 16 KiB."""
    return bytes([tag << 3 | 2]) + _VARINT[len(payload)] + payload


def encode_relationships(d: RelationDef, objects: Iterable[int], subjects: Iterable[int]) -> bytes:
    """Serialized ImportBulkRelationshipsRequest{relationships: [d(object, subject)...]}.

    Relationship{1: resource ObjectReference{1: type, 2: id}, 2: relation,
                 3: subject SubjectReference{1: object ObjectReference, 2: optional_relation}}
    """
    res_pre = _field(1, d.object_type.encode()) + b"\x12"  # then varint(len(id)) + id
    mid = _field(2, d.relation.encode())
    sub_pre = _field(1, d.subject_type.encode()) + b"\x12"
    sub_tail = _field(2, d.subject_relation.encode()) if d.subject_relation else b""
    var = _VARINT
    parts: list[bytes] = []
    add = parts.append
    for o, s in zip(objects, subjects, strict=True):
        oid = str(o).encode()
        sid = b"*" if d.wildcard else str(s).encode()
        res = res_pre + var[len(oid)] + oid
        sobj = sub_pre + var[len(sid)] + sid
        sub = b"\x0a" + var[len(sobj)] + sobj + sub_tail
        body = b"\x0a" + var[len(res)] + res + mid + b"\x1a" + var[len(sub)] + sub
        add(b"\x0a" + var[len(body)] + body)
    return b"".join(parts)


@dataclass(frozen=True)
class SpiceDBOptions(BackendOptions):
    import_batch: int | None = None  # relationships per ImportBulkRelationships message (None: import_batch)
    import_stream_rows: int | None = None  # relationships per import stream (None: import_stream_rows)
    import_streams: int | None = None  # import streams in flight at once (None: import_streams)

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.import_streams is not None and self.import_streams < 1:
            raise UserError(f"spicedb: option import_streams={self.import_streams}; must be 1 or more")


class SpiceDBBackend(Backend):
    name: ClassVar[str] = "spicedb-pg"
    Options = SpiceDBOptions
    counts_rows = True
    consistency_modes = ("minimize_latency", "at_least_as_fresh", "fully_consistent")
    # Relationships per ImportBulkRelationships message (options["import_batch"] overrides).
    # Measured on baseline, see the commit that set it.
    # The reference suite loaded with WriteRelationships: measured too, so the report shows both paths.
    ingest_variants: ClassVar[dict[str, dict[str, Any]]] = {"WriteRelationships": {"ingest": "write"}}
    import_batch: ClassVar[int] = 1_000
    write_batch: ClassVar[int] = 1_000  # WriteRelationships max updates per call (server default)
    # Relationships per import stream (options["import_stream_rows"]): seconds of work each, well
    # inside the server's 30 s streaming timeout (see _stream_chunks). 100,000 failed at xl: with 8 streams
    # sharing 2 cores and the tables at tens of millions of rows, one stream took over 30 s.
    import_stream_rows: ClassVar[int] = 25_000
    # Import streams in flight, each over its own disjoint chunk (options["import_streams"]). Swept on
    # baseline (401,577 relationships, native v1.54.0 on PostgreSQL 15, `prepare --reload --option
    # import_streams=N`, two rounds in opposite order, the 2 cores shared with another benchmark), seconds
    # per load: 1 stream 8.6 / 11.5; 2: 9.2 / 7.4; 4: 10.9 / 7.7; 8: 7.8 / 7.6. The server and its
    # PostgreSQL take both cores whatever N: streams fill the gaps of one stream's commit and round trips.
    import_streams: ClassVar[int] = 8

    def __init__(self, endpoint: dict[str, Any], options: dict[str, Any] | None = None) -> None:
        super().__init__(endpoint, options)
        # Same code for both registry names: the datastore decides which one this is.
        self.name = DATASTORES.get(endpoint.get("datastore", "postgres"), ("spicedb-pg",))[0]  # type: ignore[misc]
        self.token: ZedToken | None = None
        self._prebuilt = Prebuilt()  # check requests, built once per arguments and token
        self.server_version: str | None = None
        self._channel: grpc.Channel | None = None
        self._probe: tuple[int, str, int, str] | None = None

    @classmethod
    def endpoint_from_url(cls, url: str) -> dict[str, Any]:
        """grpc://PRESHARED_KEY@host:port?datastore=cockroachdb (grpcs:// for TLS, &ca=/path/ca.pem)."""
        u = urlparse(url)
        q = {k: v[0] for k, v in parse_qs(u.query).items()}
        if u.scheme not in ("grpc", "grpcs") or not u.hostname or not u.username:
            raise UserError("spicedb URL must look like grpc://PRESHARED_KEY@host:port?datastore=postgres "
                            "(grpcs:// for TLS)")
        datastore = q.get("datastore", "postgres")
        if datastore not in DATASTORES:
            raise UserError(f"spicedb URL: datastore={datastore!r}; valid: {', '.join(DATASTORES)}")
        tls = u.scheme == "grpcs" or q.get("tls") == "1"
        return {
            "addr": f"{u.hostname}:{u.port or 50051}", "preshared_key": u.username, "datastore": datastore,
            "tls": tls, "ca_certs": q.get("ca"), "datastore_dsn": q.get("datastore_dsn"),
            "datastore_version": q.get("datastore_version", "")}

    @classmethod
    def endpoint_from_compose(cls, c: Any) -> dict[str, Any]:
        """One service per datastore (spicedb-pg, spicedb-crdb), named like the backend."""
        ep: dict[str, Any] = {"addr": f"127.0.0.1:{c.port(c.name, 50051)}",
                              "preshared_key": c.flag(c.name, "--grpc-preshared-key"),
                              "datastore": c.flag(c.name, "--datastore-engine"),
                              "spicedb_version": c.env["SPICEDB_VERSION"]}
        if ep["datastore"] == "postgres":
            db = c.environment(f"{c.name}-db")
            ep["datastore_version"] = c.env["POSTGRES_VERSION"]
            # footprint() sums pg_total_relation_size over this database.
            ep["datastore_dsn"] = (f"postgresql://postgres:{db['POSTGRES_PASSWORD']}@127.0.0.1:"
                                   f"{c.port(f'{c.name}-db', 5432)}/{db['POSTGRES_DB']}")
        else:
            # No datastore_dsn: footprint()'s pg_total_relation_size query is PostgreSQL-only.
            ep["datastore_version"] = c.env["COCKROACH_VERSION"]
        return ep

    # lifecycle ---------------------------------------------------------------------------------
    def connect(self) -> None:
        ep = self.endpoint
        self.model = self.options.get("model", "rebac")
        self.mode = self.options.get("consistency") or "minimize_latency"
        self.timeout = float(self.options.get("timeout_s") or 60.0)
        self.import_batch = int(self.options.get("import_batch") or type(self).import_batch)  # type: ignore[misc]
        self.import_stream_rows = int(self.options.get("import_stream_rows")  # type: ignore[misc]
                                      or type(self).import_stream_rows)
        self.import_streams = int(self.options.get("import_streams") or type(self).import_streams)  # type: ignore[misc]
        if ep.get("tls"):
            ca = Path(ep["ca_certs"]).read_bytes() if ep.get("ca_certs") else None
            creds = grpc.composite_channel_credentials(grpc.ssl_channel_credentials(ca),
                                                       grpc.access_token_call_credentials(ep["preshared_key"]))
            self._channel = grpc.secure_channel(ep["addr"], creds)
            self._md: tuple[tuple[str, str], ...] = ()
        else:
            self._channel = grpc.insecure_channel(ep["addr"])
            self._md = (("authorization", f"Bearer {ep['preshared_key']}"),)
        self.client = _Stubs(self._channel)
        # Pre-serialized requests (encode_relationships) go out as they are.
        self._import = self._channel.stream_unary(IMPORT_METHOD, request_serializer=None,
                                                  response_deserializer=ImportBulkRelationshipsResponse.FromString)
        for attempt in range(3):
            try:  # a cheap authenticated call that also asks the server for its version
                _, call = self.client.ReadSchema.with_call(ReadSchemaRequest(), timeout=5,
                                                           metadata=(*self._md, VERSION_REQUEST))
                self.server_version = self._version_from(call)
                return
            except grpc.RpcError as e:
                if e.code() == grpc.StatusCode.NOT_FOUND:  # no schema yet: connected and authorized
                    self.server_version = self._version_from(e)
                    return
                # UNKNOWN "unable to find revision: timeout": SpiceDB's read of its datastore timed out
                # once, right after a load (a clean-clone make test lost a whole bench to it): asked again
                if e.code() == grpc.StatusCode.UNKNOWN and "revision" in (e.details() or "") and attempt < 2:
                    time.sleep(1)
                    continue
                self._refuse(e)

    def _refuse(self, e: grpc.RpcError) -> NoReturn:
        """The connect check's error as one line: a rejected key is the user's, anything else unreachable."""
        ep = self.endpoint
        self.close()
        if e.code() in (grpc.StatusCode.UNAUTHENTICATED, grpc.StatusCode.PERMISSION_DENIED):
            raise UserError(f"{self.name}: SpiceDB at {ep['addr']} rejected the preshared key") from None
        raise BackendUnavailable(f"{self.name}: cannot reach SpiceDB at {ep['addr']}: {e.code().name}: "
                                 f"{((e.details() or '').splitlines() or [''])[0][:200]}") from None

    @staticmethod
    def _version_from(call: Any) -> str | None:
        for k, v in call.trailing_metadata() or ():
            if k == VERSION_TRAILER:
                return v if isinstance(v, str) else v.decode()
        return None

    def close(self) -> None:
        if self._channel is not None:
            self._channel.close()
            self._channel = None

    def server_info(self) -> ServerInfo:
        ep = self.endpoint
        version = self.server_version or ep.get("spicedb_version") or "unknown"
        ds = DATASTORES.get(ep.get("datastore", ""), ("", ep.get("datastore", "?")))[1]
        ds_version = (ep.get("datastore_version") or "").split(" ")[0]
        notes = [f"measured phases use consistency={self.mode}; correctness tests use fully_consistent",
                 "version as reported by the server" if self.server_version else
                 "version from the provisioner (the server did not report one)"]
        if not ep.get("datastore_dsn"):
            notes.append("footprint unknown (no datastore_dsn in the endpoint): reported as 0")
        return ServerInfo("SpiceDB", version, f"SpiceDB {version} on {ds} {ds_version}".strip(), notes=notes,
                          consistency=self.mode)

    # schema and data ---------------------------------------------------------------------------
    def _schema_text(self, dataset_hash: str | None = None) -> str:
        text = (SCHEMA_DIR / ("social.zed" if self.model == "social" else "rebac.zed")).read_text()
        if dataset_hash:
            # Doc comments are kept by SpiceDB: the loaded dataset's hash travels with the schema.
            text = text.replace(
                "definition user {", f"/** authzbench dataset {dataset_hash} */\ndefinition user {{", 1)
        return text

    def create_schema(self) -> None:
        self.client.WriteSchema(WriteSchemaRequest(schema=self._schema_text()), timeout=30, metadata=self._md)

    def _rel(self, d: RelationDef, obj: str, sub: str) -> Relationship:
        subject = SubjectReference(
            object=ObjectReference(object_type=d.subject_type, object_id="*" if d.wildcard else sub),
            optional_relation=d.subject_relation or "")
        return Relationship(
            resource=ObjectReference(object_type=d.object_type, object_id=obj), relation=d.relation,
            subject=subject)

    def load(self, ds: Dataset, progress: Progress = no_progress) -> Load:
        # A relationship that must be visible once the import is: build() waits for it.
        rel = "user_self" if ds.model == "social" else "resource_manager_user"
        first = ds.table(rel).iloc[0]
        perm = "view_user" if ds.model == "social" else "manage"
        self._probe = (int(first["subject"]), perm, int(first["object"]), rel)
        if self.options.ingest == "write":
            return (yield from self._load_with_writes(ds))
        streams, sizes, made = self.import_streams, [], []
        # chunks read ahead only as streams free up: bounded memory
        rows = yield Batches(f"{self.name}: ImportBulkRelationships", self._import_requests(ds, sizes, made),
                             streams, ahead=0)
        return LoadStats(
            rows=rows, batch_rows=self.import_batch,
            notes={"method": f"ImportBulkRelationships: {streams} client streams at once, each over "
                   f"its own chunk of ~{self.import_stream_rows:,} relationships, one "
                   "transaction each (batch times overlap)", "batch": self.import_batch, "streams": len(made),
                   "streams_in_flight": streams, "bytes_written": sum(sizes)})

    def _import_requests(self, ds: Dataset, sizes: list[int], made: list[int]) -> Iterator[Stream]:
        """One import stream per chunk of ~import_stream_rows (`made` counts them)."""
        for chunk in self._stream_chunks(ds):
            n = sum(len(objs) for _, objs, _ in chunk)
            made.append(n)
            yield Stream(
                n, self._messages(chunk, sizes), partial(self._import_stream, n), answer="commit_seconds")

    @staticmethod
    def _messages(chunk: list[tuple[RelationDef, list[int], list[int]]], sizes: list[int]
                  ) -> Iterator[tuple[int, bytes]]:
        """(relationships, message) of one stream, each message encoded as the stream takes it (inside its
        time: the client-observed time per message is encoding plus flow control); its bytes kept in sizes."""
        for d, objs, subs in chunk:
            msg = encode_relationships(d, objs, subs)
            sizes.append(len(msg))  # list.append is atomic across the streams' threads
            yield len(objs), msg

    def _import_stream(self, n: int, messages: Iterator[bytes]) -> None:
        """One ImportBulkRelationships stream of `n` relationships over `messages`, answered at its end."""
        try:
            resp = self._import(messages, timeout=3600, metadata=self._md)
        except grpc.RpcError as e:
            hint = (
                " (the server's --streaming-api-response-delay-timeout: lower options['import_stream_rows'])"
                if "longer than allowed" in (e.details() or "")
                else "")
            raise BackendUnavailable(f"{e.code().name}: {(e.details() or '')[:200]}{hint}") from None
        if resp.num_loaded != n:
            raise BackendUnavailable(f"loaded {resp.num_loaded} of {n}")

    def _stream_chunks(self, ds: Dataset) -> Iterator[list[tuple[RelationDef, list[int], list[int]]]]:
        """Batches grouped into streams of ~import_stream_rows. SpiceDB cancels a stream that sends
        no response for --streaming-api-response-delay-timeout (30 s by default), and an import
        answers only at its end: one stream per dataset would fail beyond ~30 s of import."""
        chunk: list[tuple[RelationDef, list[int], list[int]]] = []
        n = 0
        for item in relationship_batches(ds, self.import_batch):
            chunk.append(item)
            n += len(item[1])
            if n >= self.import_stream_rows:
                yield chunk
                chunk, n = [], 0
        if chunk:
            yield chunk

    def _load_with_writes(self, ds: Dataset) -> Load:
        """The reference's path: WriteRelationships, <= 1,000 TOUCH updates per call."""
        rows = yield Batches(f"{self.name}: WriteRelationships",
                             (Batch(len(objs), partial(self._touch, d, objs, subs))
                              for d, objs, subs in relationship_batches(ds, self.write_batch)))
        return LoadStats(rows=rows, batch_rows=self.write_batch,
                         notes={"method": "WriteRelationships TOUCH", "batch": self.write_batch})

    def _touch(self, d: RelationDef, objs: list[int], subs: list[int]) -> None:
        # Built inside the batch's time, as the import's per-message time includes its encoding.
        req = WriteRelationshipsRequest(
            updates=[
                RelationshipUpdate(
                    operation=RelationshipUpdate.OPERATION_TOUCH, relationship=self._rel(d, str(o), str(s)))
                for o, s in zip(objs, subs, strict=True)])
        self.token = self.client.WriteRelationships(req, timeout=self.timeout, metadata=self._md).written_at

    def build(self) -> Build:
        """The import returns no ZedToken. TOUCH one imported relationship (no data change) for a
        token at or after the import, so at_least_as_fresh reads see it; then wait until
        minimize_latency reads (quantized to 5 s by default) see it too, so measured phases never
        read a pre-import revision."""
        if self._probe is None:
            return BuildStats("no probe (no load in this session)")
        yield Step("", self._wait_for_import)
        return BuildStats("wait until minimize_latency reads see the import")

    def _wait_for_import(self) -> None:
        user, perm, obj, rel = self._probe
        self.write(Rel(rel, obj, user))
        for _ in range(VISIBLE_ROUNDS):
            if self.check(user, perm, obj, mode="minimize_latency"):
                return
            time.sleep(VISIBLE_PAUSE_S)
        raise BackendUnavailable(f"{self.name}: imported data not visible to minimize_latency reads after "
                                 f"{VISIBLE_ROUNDS} probes {VISIBLE_PAUSE_S} s apart")

    def loaded_hash(self) -> str | None:
        try:
            text = self.client.ReadSchema(ReadSchemaRequest(), timeout=10, metadata=self._md).schema_text
        except grpc.RpcError:
            return None
        m = HASH_MARK.search(text)
        return m.group(1) if m else None

    def mark_loaded(self, dataset_hash: str) -> None:
        self.client.WriteSchema(WriteSchemaRequest(schema=self._schema_text(dataset_hash)), timeout=30,
                                metadata=self._md)

    # operations ----------------------------------------------------------------------------------
    def _target(self, perm: str) -> tuple[str, str]:
        # the server answers an unknown one
        return permission_target("spicedb", self.model, perm, strict=False)

    def check_request(
        self, user: int, perm: str, resource: int, mode: str | None = None) -> CheckPermissionRequest:
        """The CheckPermissionRequest check() sends (also what `authzbench crosscheck` hands to ghz)."""
        obj_type, permission = self._target(perm)
        return CheckPermissionRequest(
            resource=ObjectReference(object_type=obj_type, object_id=str(resource)), permission=permission,
            subject=SubjectReference(object=ObjectReference(object_type="user", object_id=str(user))),
            consistency=_consistency(mode or self.mode, self.token))

    def check(self, user: int, perm: str, resource: int, mode: str | None = None) -> bool:
        m = mode or self.mode
        token = self.token.token if m == "at_least_as_fresh" and self.token is not None else None
        req = self._prebuilt.get(
            (user, perm, resource, m, token), self.check_request, user, perm, resource, mode)
        resp = self.client.CheckPermission(req, timeout=self.timeout, metadata=self._md)
        return resp.permissionship == CheckPermissionResponse.PERMISSIONSHIP_HAS_PERMISSION

    def lookup_resources(self, user: int, perm: str) -> Iterable[int]:
        """Streamed to the end and returned as streamed: SpiceDB may send a resource once per path to
        it, and the runner counts those copies (the report's Duplicates column), so none are removed here."""
        obj_type, permission = self._target(perm)
        stream = self.client.LookupResources(LookupResourcesRequest(
            resource_object_type=obj_type, permission=permission,
            subject=SubjectReference(object=ObjectReference(object_type="user", object_id=str(user))),
            consistency=_consistency(self.mode, self.token)), timeout=self.timeout, metadata=self._md)
        return [int(r.resource_object_id) for r in stream]

    def _update(self, rel: Rel, op: int) -> None:
        d = relation_defs(self.model)[rel.relation]
        resp = self.client.WriteRelationships(
            WriteRelationshipsRequest(
                updates=[RelationshipUpdate(
                             operation=op, relationship=self._rel(d, str(rel.object), str(rel.subject)))]),
            timeout=self.timeout, metadata=self._md)
        self.token = resp.written_at
        self.rows_touched += 1  # one relationship; SpiceDB computes permissions at read time

    def write(self, rel: Rel) -> None:
        self._update(rel, RelationshipUpdate.OPERATION_TOUCH)

    def delete(self, rel: Rel) -> None:
        self._update(rel, RelationshipUpdate.OPERATION_DELETE)

    def baseline_roundtrip(self) -> None:
        self.client.ReadSchema(ReadSchemaRequest(), timeout=self.timeout, metadata=self._md)

    def footprint(self) -> int:
        """Bytes of SpiceDB's tables in its PostgreSQL database (0 when that is not reachable from here)."""
        return schema_bytes(self.endpoint.get("datastore_dsn"), self.endpoint.get("datastore_password"))

    def drop(self) -> None:
        """Delete every relationship of the schema's definitions, then rewrite the schema without
        the loaded-dataset mark so the next `prepare` loads again."""
        from authzed.api.v1 import DeleteRelationshipsRequest, RelationshipFilter

        try:
            text = self.client.ReadSchema(ReadSchemaRequest(), timeout=10, metadata=self._md).schema_text
        except grpc.RpcError:
            return
        for t in re.findall(r"definition\s+(\w+)", text):
            # No limit: one transaction per type (the server caps limited deletes at 1,000 rows a call).
            self.client.DeleteRelationships(DeleteRelationshipsRequest(
                relationship_filter=RelationshipFilter(resource_type=t)), timeout=600, metadata=self._md)
        self.create_schema()
