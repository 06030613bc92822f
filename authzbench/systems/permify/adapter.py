"""Permify over its gRPC API, on a PostgreSQL datastore.

The model is rebac.perm or social.perm (Permify's schema language). Tuples map 1:1 from the
dataset's relation catalog (model.RelationDef), as for SpiceDB and OpenFGA, with one exception: the social
model's public flag is a boolean attribute `is_public` (as Permify's own load-test schema writes it),
where SpiceDB and OpenFGA use the wildcard user:*. A public row (x, 0) is the attribute x.is_public=true;
deleting the row deletes the attribute (absent = false).

One tenant per model (`authzbench-rebac`, `authzbench-social`); the loaded dataset's hash is the argument
of a data bundle named `authzbench-dataset` (bundles are stored metadata: they never change an answer),
written by mark_loaded and deleted by create_schema, so a new schema reads as "nothing loaded".

Consistency is Permify's snap token: `fully_consistent` sends none (Permify reads its head snapshot on
every request), `at_least_as_fresh` sends the token of this client's last write (Permify reads at that
snapshot, and answers from its check cache when that snapshot was already checked).

Lookups use LookupEntity, paged (page_size results a request, continuous_token to the next page) until a
page comes back empty or without a token: every page is fetched, nothing is capped.

The client is gRPC (grpcio), message classes built at connect from the server's own reflection
(authzbench.systems.permify.grpc); CLIENT_NOTE says why gRPC and not the REST API.

External servers (`--provision external`, AUTHZBENCH_PERMIFY_URL):
    http://PRESHARED_KEY@host:port        (the HTTP API's address; https:// for TLS, gRPC then over TLS too)
    optional: ?grpc=host:port (the gRPC API the adapter calls; default: the same host, port 3478),
              &max_data_per_write=1000 (the server's --database-max-data-per-write; Permify's default 1000
              is assumed when absent), &datastore_dsn=postgresql://user@host:port/db&datastore_version=15.4
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar
from urllib.parse import parse_qs, unquote, urlparse

from authzbench.backends.base import (
    Backend,
    BackendOptions,
    Build,
    BuildStats,
    Load,
    Progress,
    ServerInfo,
    Step,
    load_concurrently,
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
PUBLIC_ATTRIBUTE = "is_public"  # the social wildcard relations become this boolean attribute
BOOL_TYPE = "type.googleapis.com/base.v1.BooleanValue"
TRUE = {"type_url": BOOL_TYPE, "value": b"\x08\x01"}  # google.protobuf.Any of BooleanValue{data: true}
MARK_BUNDLE = "authzbench-dataset"
CONSISTENCY = ("at_least_as_fresh", "fully_consistent")
DEFAULT_GRPC_PORT = 3478  # Permify's --grpc-port default
DEFAULT_MAX_DATA_PER_WRITE = 1000  # Permify's --database-max-data-per-write default (pkg/database/postgres)
BARRIER = ("user", "authzbench-barrier")  # an entity no dataset has: build()'s delete matches nothing
DEPTH = 50  # the check's recursion budget: deeper than any group chain the generator makes (default 20)


def schema_text(model: str) -> str:
    return (SCHEMA_DIR / f"{'social' if model == 'social' else 'rebac'}.perm").read_text()


# catalog relation -> (Permify relation, subject relation): a subject relation may not name a permission in
# Permify, so the child-group edge is its own relation (rebac.perm).
RENAMES = {"group_child": ("subgroup", None)}


def tuple_json(d: RelationDef, obj: int | str, sub: int | str) -> dict[str, Any]:
    relation, subject_relation = RENAMES.get(d.name, (d.relation, d.subject_relation))
    subject: dict[str, Any] = {"type": d.subject_type, "id": str(sub)}
    if subject_relation:
        subject["relation"] = subject_relation
    return {"entity": {"type": d.object_type, "id": str(obj)}, "relation": relation, "subject": subject}


def attribute_json(d: RelationDef, obj: int | str) -> dict[str, Any]:
    return {"entity": {"type": d.object_type, "id": str(obj)}, "attribute": PUBLIC_ATTRIBUTE, "value": TRUE}


# Named in server_info(), so a report says which client its Permify figures went through. Why gRPC
# (authzbench.systems.permify.tools.clients, reports/permify-clients.md: 3,000 checks on rebac tiny, 0
# mismatches): the REST path (plain-dict JSON over the permify package's urllib3 pool) took 844 us client CPU
# and 1,480 us Permify CPU a check, p50 2.25 ms; gRPC 0.64x that client CPU (rounds 0.40-0.81), 890 us Permify
# CPU (its REST server is a grpc-gateway calling its own gRPC server: one hop more), p50 1.28 ms.
CLIENT_NOTE = ("client: gRPC (grpcio), message classes from the server's reflection (authzbench.tools."
               "permify_clients: 0.64x the REST path's client CPU and 0.60x Permify's CPU per check)")


@dataclass(frozen=True)
class PermifyOptions(BackendOptions):
    write_batch: int | None = None  # tuples per Data.Write while loading (None: write_batch)
    write_workers: int | None = None  # Data.Write requests in flight while loading (None: write_workers)
    page_size: int | None = None  # LookupEntity results a request (None: page_size)
    tenant: str | None = None  # the tenant (None: authzbench-<model>)


class PermifyBackend(Backend):
    name: ClassVar[str] = "permify"
    worker_modules = ("authzbench.systems.permify.grpc",)  # grpcio, protobuf and the reflection stubs
    Options = PermifyOptions
    counts_rows = True
    consistency_modes = CONSISTENCY
    # Tuples per Data.Write request and requests in flight while loading (options override). Swept on
    # baseline (401,577 tuples, native v1.7.3 on gRPC, `prepare --reload`, two rounds in opposite order),
    # seconds per load: 1000 x 4: 19.7 / 28.4; 1000 x 8: 22.0 / 26.0; 1000 x 2: 22.3 / 25.1; 500 x 8:
    # 22.5 / 26.6; 2000 x 4: 23.1 / 22.4; 5000 x 4: 22.6 / 23.9. No choice stands out from the drift between
    # rounds: Permify and its PostgreSQL take both cores whatever the client sends, so the default stays.
    write_batch: ClassVar[int] = 1_000
    write_workers: ClassVar[int] = 4
    page_size: ClassVar[int] = 1_000  # Permify's own default page

    def __init__(self, endpoint: dict[str, Any], options: dict[str, Any] | None = None) -> None:
        super().__init__(endpoint, options)
        self.api: Any = None  # permify_grpc.Api once connected
        self.token = ""  # snap token of this client's last write
        self.schema_version = ""  # the tenant's head schema, named in every request (as the load-test script)

    @classmethod
    def endpoint_from_url(cls, url: str) -> dict[str, Any]:
        u = urlparse(url)
        q = {k: v[0] for k, v in parse_qs(u.query).items()}
        if u.scheme not in ("http", "https") or not u.hostname:
            raise UserError("permify URL must look like http://PRESHARED_KEY@host:port (https:// for TLS)")
        try:
            per_write = int(q.get("max_data_per_write", DEFAULT_MAX_DATA_PER_WRITE))
        except ValueError:
            raise UserError("permify URL: max_data_per_write must be a number") from None
        grpc_addr = q.get("grpc") or f"{u.hostname}:{DEFAULT_GRPC_PORT}"
        if not re.fullmatch(r"[^:/?#]+:\d+|\[[0-9a-fA-F:.]+\]:\d+", grpc_addr):
            raise UserError(f"permify URL: grpc={grpc_addr!r} must be host:port (Permify's gRPC API)")
        return {"url": f"{u.scheme}://{u.hostname}:{u.port or 3476}", "grpc_addr": grpc_addr,
                "grpc_tls": u.scheme == "https", "preshared_key": unquote(u.username or ""),
                "max_data_per_write": per_write, "datastore_dsn": q.get("datastore_dsn"),
                "datastore_version": q.get("datastore_version", ""), "permify_version": q.get("version", "")}

    @classmethod
    def endpoint_from_compose(cls, c: Any) -> dict[str, Any]:
        p, db = c.environment("permify"), c.environment("permify-db")
        return {"url": f"http://127.0.0.1:{c.port('permify', 3476)}",
                "grpc_addr": f"127.0.0.1:{c.port('permify', DEFAULT_GRPC_PORT)}",
                "preshared_key": p["PERMIFY_AUTHN_PRESHARED_KEYS"],
                "max_data_per_write": int(p["PERMIFY_DATABASE_MAX_DATA_PER_WRITE"]),
                "permify_version": c.env["PERMIFY_VERSION"], "datastore_version": c.env["POSTGRES_VERSION"],
                "datastore_dsn": f"postgresql://postgres:{db['POSTGRES_PASSWORD']}@127.0.0.1:"
                                 f"{c.port('permify-db', 5432)}/{db['POSTGRES_DB']}"}

    # lifecycle ---------------------------------------------------------------------------------
    def connect(self) -> None:
        from authzbench.systems.permify.grpc import Api

        ep = self.endpoint
        self.model = self.options.get("model", "rebac")
        self.mode = self.options.get("consistency") or "at_least_as_fresh"
        if self.mode == "minimize_latency":  # the harness's default name for "the backend's fast mode"
            self.mode = "at_least_as_fresh"
        if self.mode not in CONSISTENCY:
            raise UserError(f"permify: --consistency {self.mode!r}; valid: {', '.join(CONSISTENCY)}")
        if not ep.get("grpc_addr"):
            raise UserError("permify: the endpoint names no gRPC address (grpc_addr); for an external server "
                            "add ?grpc=host:port to AUTHZBENCH_PERMIFY_URL")
        self.timeout = float(self.options.get("timeout_s") or 60.0)
        self.write_batch = min(int(self.options.get("write_batch") or type(self).write_batch),  # type: ignore[misc]
                               int(ep.get("max_data_per_write") or DEFAULT_MAX_DATA_PER_WRITE))
        self.write_workers = int(self.options.get("write_workers") or type(self).write_workers)  # type: ignore[misc]
        self.page_size = int(self.options.get("page_size") or type(self).page_size)  # type: ignore[misc]
        self.tenant = self.options.get("tenant") or f"authzbench-{self.model}"
        try:
            # The reflection call that builds the message classes is the first authenticated request.
            self.api = Api(ep["grpc_addr"], ep.get("preshared_key") or "", self.timeout,
                           tls=bool(ep.get("grpc_tls")))
            self.allowed = self.api.enum("Permission.Check", "can", "CHECK_RESULT_ALLOWED")
            self._prebuilt = Prebuilt()  # check messages of this connection's classes (its reflection pool)
            exists = self._tenant_exists()
        except BackendUnavailable as e:
            self.close()
            raise BackendUnavailable(str(e).replace("lost the connection to", "cannot reach")) from None
        except UserError:
            self.close()
            raise
        if exists:
            self.schema_version = self._call("Schema.List", page_size=1).head

    def close(self) -> None:
        if self.api is not None:
            self.api.close()
            self.api = None

    def _call(self, method: str, /, **fields: Any) -> Any:
        """A base.v1 method of this tenant."""
        assert self.api is not None, "permify: not connected"
        return self.api(method, tenant_id=self.tenant, **fields)

    def server_info(self) -> ServerInfo:
        ep = self.endpoint
        version = ep.get("permify_version") or "unknown"
        ds_version = (ep.get("datastore_version") or "").split(" ")[0]
        notes = [CLIENT_NOTE,
                 f"measured phases use consistency={self.mode} (snap tokens); correctness tests use "
                 "fully_consistent",
                 f"lookups: LookupEntity, every page fetched ({self.page_size} results a page)",
                 "social model: public content and profiles are the boolean attribute is_public "
                 "(SpiceDB and OpenFGA: the wildcard user:*)"]
        if not ep.get("datastore_dsn"):
            notes.append("footprint unknown (no datastore_dsn in the endpoint): reported as 0")
        return ServerInfo(
            "Permify", version, f"Permify {version} on PostgreSQL {ds_version}".strip(), notes=notes,
            consistency=self.mode)

    # schema and data ---------------------------------------------------------------------------
    def _tenant_exists(self) -> bool:
        assert self.api is not None
        token = ""
        while True:
            resp = self.api("Tenancy.List", page_size=100, continuous_token=token)
            if any(t.id == self.tenant for t in resp.tenants):
                return True
            token = resp.continuous_token
            if not token or not resp.tenants:
                return False

    def create_schema(self) -> None:
        assert self.api is not None
        if not self._tenant_exists():
            self.api("Tenancy.Create", id=self.tenant, name=self.tenant)
        self.schema_version = self._call("Schema.Write", schema=schema_text(self.model)).schema_version
        self._delete_mark()

    def _bodies(self, ds: Dataset, n: int) -> Iterator[tuple[int, dict[str, Any]]]:
        """(rows, Data.Write fields) as plain dicts, at most n tuples and attributes each."""
        for d, objs, subs in relationship_batches(ds, n):
            pairs = zip(objs, subs, strict=True)
            if d.wildcard:
                body = {"attributes": [attribute_json(d, o) for o, _ in pairs]}
            else:
                body = {"tuples": [tuple_json(d, o, s) for o, s in pairs]}
            yield len(objs), {"metadata": {"schema_version": self.schema_version}, **body}

    def _write_body(self, body: dict[str, Any]) -> None:
        self.token = self._call("Data.Write", **body).snap_token or self.token

    def load(self, ds: Dataset, progress: Progress = no_progress) -> Load:
        """Data.Write requests of write_batch tuples, write_workers of them in flight (each one
        transaction)."""
        return load_concurrently("permify: Data.Write", self._bodies(ds, self.write_batch), self._write_body,
                                 self.write_batch, self.write_workers)

    def build(self) -> Build:
        """One write after the load: Permify's head snapshot is the snapshot its latest write transaction
        started with, so right after concurrent Data.Writes it can miss a load transaction still in flight
        when that one began (lookups came back 2-3 results short on tiny). A delete matching nothing, run
        alone, starts a transaction that sees every committed load batch."""
        yield Step("", self._barrier)
        return BuildStats("a snapshot barrier: one write after the concurrent load")

    def _barrier(self) -> None:
        self.token = (
            self._call("Data.Delete", tuple_filter={"entity": {"type": BARRIER[0], "ids": [BARRIER[1]]}},
                       attribute_filter={}).snap_token
            or self.token)

    def loaded_hash(self) -> str | None:
        from authzbench.systems.permify.grpc import PermifyError

        if self.api is None or not self._tenant_exists():
            return None
        try:
            args = self._call("Bundle.Read", name=MARK_BUNDLE).bundle.arguments
        except PermifyError:
            return None  # no such bundle
        return args[0] if args else None

    def mark_loaded(self, dataset_hash: str) -> None:
        # A bundle must hold an operation: one that writes nothing (its argument is never substituted).
        self._call(
            "Bundle.Write", bundles=[{"name": MARK_BUNDLE, "arguments": [dataset_hash], "operations": [{}]}])

    def _delete_mark(self) -> None:
        from authzbench.systems.permify.grpc import PermifyError

        with contextlib.suppress(PermifyError):  # none written yet
            self._call("Bundle.Delete", name=MARK_BUNDLE)

    def drop(self) -> None:
        """Delete the tenant (its schema, tuples, attributes and bundles go with it)."""
        assert self.api is not None
        if self._tenant_exists():
            self.api("Tenancy.Delete", id=self.tenant)
        self.token = ""

    # operations ----------------------------------------------------------------------------------
    def _metadata(self, mode: str | None = None) -> dict[str, Any]:
        token = self.token if (mode or self.mode) == "at_least_as_fresh" else ""
        return {"snap_token": token, "schema_version": self.schema_version, "depth": DEPTH}

    def check_fields(self, user: int, perm: str, resource: int, mode: str | None = None) -> dict[str, Any]:
        """The fields of the Permission.Check request check() sends, tenant included (also what `authzbench
        crosscheck` hands to ghz)."""
        obj_type, permission = permission_target("permify", self.model, perm)
        return {"tenant_id": self.tenant, "metadata": self._metadata(mode),
                "entity": {"type": obj_type, "id": str(resource)}, "permission": permission,
                "subject": {"type": "user", "id": str(user)}}

    def check(self, user: int, perm: str, resource: int, mode: str | None = None) -> bool:
        assert self.api is not None, "permify: not connected"
        m = mode or self.mode
        key = (self.tenant, self.schema_version, user, perm, resource, m,
               self.token if m == "at_least_as_fresh" else "")
        msg = self._prebuilt.get(key, self._check_message, user, perm, resource, mode)
        return self.api.send("Permission.Check", msg).can == self.allowed

    def _check_message(self, user: int, perm: str, resource: int, mode: str | None) -> Any:
        assert self.api is not None, "permify: not connected"
        return self.api.message("Permission.Check", **self.check_fields(user, perm, resource, mode))

    def lookup_resources(self, user: int, perm: str) -> Iterable[int]:
        """Every page, as the server sent them (copies across pages are the runner's to count)."""
        obj_type, permission = permission_target("permify", self.model, perm)
        fields = {
            "metadata": self._metadata(), "entity_type": obj_type, "permission": permission,
            "subject": {"type": "user", "id": str(user)}, "page_size": self.page_size, "continuous_token": ""}
        out: list[int] = []
        while True:
            resp = self._call("Permission.LookupEntity", **fields)
            ids = resp.entity_ids
            out += [int(i) for i in ids]
            if not ids or not resp.continuous_token:
                return out
            fields["continuous_token"] = resp.continuous_token

    def _relation(self, rel: Rel) -> RelationDef:
        try:
            return relation_defs(self.model)[rel.relation]
        except KeyError:
            raise UserError(
                f"permify: unknown relation {rel.relation!r} for the {self.model} model") from None

    def write(self, rel: Rel) -> None:
        d = self._relation(rel)
        body = ({"attributes": [attribute_json(d, rel.object)]} if d.wildcard
                else {"tuples": [tuple_json(d, rel.object, rel.subject)]})
        self._write_body({"metadata": {"schema_version": self.schema_version}, **body})
        self.rows_touched += 1  # one tuple or attribute; Permify computes permissions at read time

    def delete(self, rel: Rel) -> None:
        d = self._relation(rel)
        entity = {"type": d.object_type, "ids": [str(rel.object)]}
        if d.wildcard:
            fields = {
                "tuple_filter": {}, "attribute_filter": {"entity": entity, "attributes": [PUBLIC_ATTRIBUTE]}}
        else:
            t = tuple_json(d, rel.object, rel.subject)
            subject = {"type": t["subject"]["type"], "ids": [t["subject"]["id"]],
                       "relation": t["subject"].get("relation", "")}
            fields = {"tuple_filter": {"entity": entity, "relation": t["relation"], "subject": subject},
                      "attribute_filter": {}}
        self.token = self._call("Data.Delete", **fields).snap_token or self.token
        self.rows_touched += 1

    def baseline_roundtrip(self) -> None:
        """Tenancy.List of one tenant: authenticated, one indexed read of the tenants table."""
        assert self.api is not None
        self.api("Tenancy.List", page_size=1)

    def footprint(self) -> int:
        """Bytes of Permify's tables in its PostgreSQL database (0 when that is not reachable from here)."""
        return schema_bytes(self.endpoint.get("datastore_dsn"), self.endpoint.get("datastore_password"))
