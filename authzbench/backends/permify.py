"""Permify over its HTTP API, on a PostgreSQL datastore.

The model is schema/rebac.perm or schema/social.perm (Permify's schema language). Tuples map 1:1 from the
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

The client is the PyPI `permify` package's urllib3 pool and configuration (REST), with request bodies
built as plain dicts; `Transport` says what it was measured against (gRPC is cheaper; the switch is open).

External servers (`--provision external`, AUTHZBENCH_PERMIFY_URL):
    http://PRESHARED_KEY@host:port        (https:// for TLS)
    optional: ?max_data_per_write=1000 (the server's --database-max-data-per-write; Permify's default 1000
              is assumed when absent), &datastore_dsn=postgresql://user@host:port/db&datastore_version=15.4
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar
from urllib.parse import parse_qs, unquote, urlparse

from authzbench.backends.base import (
    Backend,
    BackendOptions,
    BuildStats,
    LoadStats,
    Progress,
    ServerInfo,
    load_concurrently,
    no_progress,
)
from authzbench.backends.pgsize import schema_bytes
from authzbench.dataset import Dataset
from authzbench.errors import BackendUnavailable, UserError
from authzbench.model import PERMISSION_TARGETS, RelationDef, relation_defs
from authzbench.model import Relationship as Rel

SCHEMA_DIR = Path(__file__).resolve().parents[2] / "schema"
PUBLIC_ATTRIBUTE = "is_public"  # the social wildcard relations become this boolean attribute
BOOL_TYPE = "type.googleapis.com/base.v1.BooleanValue"
MARK_BUNDLE = "authzbench-dataset"
CONSISTENCY = ("at_least_as_fresh", "fully_consistent")
DEFAULT_MAX_DATA_PER_WRITE = 1000  # Permify's --database-max-data-per-write default (pkg/database/postgres)
BARRIER = ("user", "authzbench-barrier")  # an entity no dataset has: build()'s delete matches nothing
DEPTH = 50  # the check's recursion budget: deeper than any group chain the generator makes (default 20)


def schema_text(model: str) -> str:
    return (SCHEMA_DIR / f"{'social' if model == 'social' else 'rebac'}.perm").read_text()


# catalog relation -> (Permify relation, subject relation): a subject relation may not name a permission in
# Permify, so the child-group edge is its own relation (schema/rebac.perm).
RENAMES = {"group_child": ("subgroup", None)}


def tuple_json(d: RelationDef, obj: int | str, sub: int | str) -> dict[str, Any]:
    relation, subject_relation = RENAMES.get(d.name, (d.relation, d.subject_relation))
    subject: dict[str, Any] = {"type": d.subject_type, "id": str(sub)}
    if subject_relation:
        subject["relation"] = subject_relation
    return {"entity": {"type": d.object_type, "id": str(obj)}, "relation": relation, "subject": subject}


def attribute_json(d: RelationDef, obj: int | str) -> dict[str, Any]:
    return {"entity": {"type": d.object_type, "id": str(obj)}, "attribute": PUBLIC_ATTRIBUTE,
            "value": {"@type": BOOL_TYPE, "data": True}}


# Named in server_info(), so a report says which client its Permify figures went through.
CLIENT_NOTE = ("client: REST over the permify package's urllib3 pool, plain-dict bodies (authzbench.tools."
               "permify_clients: gRPC took 0.64x its client CPU and 0.60x Permify's CPU per check; not switched yet)")


class Transport:
    """POST JSON to the server over the permify package's urllib3 pool, bodies as plain dicts.

    Measured by authzbench.tools.permify_clients (reports/permify-clients.md: the same 3,000 checks on
    rebac tiny through each client in 6 interleaved rounds, 2 cores at load average 5.5-6.5, 0 mismatches):

    | client | client CPU/check | ÷ this one's, paired rounds | p50 | Permify's CPU/check |
    | typed API (pydantic models) | 1,123 µs | 1.33 (1.21-1.55) | 2.63 ms | 1,560 µs |
    | this one (plain dicts) | 844 µs | 1 | 2.25 ms | 1,480 µs |
    | gRPC, classes from server reflection | 530 µs | 0.64 (0.40-0.81) | 1.28 ms | 890 µs |

    Each transport's round trip (GET /healthz; grpc.health.v1 Check) cost 568 / 348 µs of client CPU, so
    above its floor this path spends 276 µs a check, the typed API 555, gRPC 182. Three earlier runs at
    load 3.3-6.0 gave gRPC 0.59-0.68x this path's client CPU.

    Plain dicts over the typed API: 1.33x more client CPU in every round. gRPC is clearly cheaper on both
    sides (REST goes through Permify's grpc-gateway, which calls its own gRPC server) but is not switched to
    yet; what switching takes is issue 28's open part: a transport with this one's post() interface mapping
    each REST path the adapter uses (permissions check / lookup-entity, data write / delete, schemas write /
    list, tenants create / list / delete, bundle write / read / delete) to its base.v1 RPC, messages built
    from a descriptor set fetched by reflection (or committed, so workers need no reflection call) and
    json_format.ParseDict for the cold paths, grpc.RpcError codes mapped to PermifyError / UserError, and
    the gRPC port in every endpoint (native has grpc_addr; compose and AUTHZBENCH_PERMIFY_URL do not yet)."""

    def __init__(self, url: str, key: str, timeout: float, pool: int = 4) -> None:
        import permify
        import urllib3

        cfg = permify.Configuration(host=url)
        cfg.connection_pool_maxsize = pool
        self.pool = permify.ApiClient(cfg).rest_client.pool_manager
        self.url = url
        self.headers = {"Content-Type": "application/json", **({"Authorization": f"Bearer {key}"} if key else {})}
        self.timeout = urllib3.Timeout(total=timeout)
        self.retries = urllib3.Retry(total=0, redirect=0, raise_on_redirect=False)

    def post(self, path: str, body: dict[str, Any] | None, method: str = "POST") -> dict[str, Any]:
        import urllib3

        try:
            r = self.pool.request(method, self.url + path, body=None if body is None else json.dumps(body).encode(),
                                  headers=self.headers,
                                  timeout=self.timeout, retries=self.retries)
        except (urllib3.exceptions.HTTPError, OSError) as e:
            cause = e.__context__ or getattr(e, "reason", None) or e
            raise BackendUnavailable(f"permify: lost the connection to Permify at {self.url}: "
                                     f"{type(e).__name__} ({type(cause).__name__})") from None
        data = json.loads(r.data or b"{}")
        if r.status == 401 or r.status == 403:
            raise UserError(f"permify: Permify at {self.url} rejected the preshared key")
        if r.status >= 400:
            raise PermifyError(r.status, str(data.get("message") or r.data[:200]))
        return data

    def close(self) -> None:
        self.pool.clear()


class PermifyError(BackendUnavailable):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"permify: {status} {message}"[:300])
        self.status, self.message = status, message


@dataclass(frozen=True)
class PermifyOptions(BackendOptions):
    write_batch: int | None = None  # tuples per data/write while loading (None: write_batch)
    write_workers: int | None = None  # data/write requests in flight while loading (None: write_workers)
    page_size: int | None = None  # LookupEntity results a request (None: page_size)
    tenant: str | None = None  # the tenant (None: authzbench-<model>)


class PermifyBackend(Backend):
    name: ClassVar[str] = "permify"
    worker_modules = ("permify", "urllib3")
    Options = PermifyOptions
    counts_rows = True
    consistency_modes = CONSISTENCY
    # Tuples per data/write request and requests in flight while loading (options override).
    write_batch: ClassVar[int] = 1_000
    write_workers: ClassVar[int] = 4
    page_size: ClassVar[int] = 1_000  # Permify's own default page

    def __init__(self, endpoint: dict[str, Any], options: dict[str, Any] | None = None) -> None:
        super().__init__(endpoint, options)
        self.http: Transport | None = None
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
        return {"url": f"{u.scheme}://{u.hostname}:{u.port or 3476}", "preshared_key": unquote(u.username or ""),
                "max_data_per_write": per_write, "datastore_dsn": q.get("datastore_dsn"),
                "datastore_version": q.get("datastore_version", ""), "permify_version": q.get("version", "")}

    @classmethod
    def endpoint_from_compose(cls, c: Any) -> dict[str, Any]:
        p, db = c.environment("permify"), c.environment("permify-db")
        return {"url": f"http://127.0.0.1:{c.port('permify', 3476)}",
                "preshared_key": p["PERMIFY_AUTHN_PRESHARED_KEYS"],
                "max_data_per_write": int(p["PERMIFY_DATABASE_MAX_DATA_PER_WRITE"]),
                "permify_version": c.env["PERMIFY_VERSION"], "datastore_version": c.env["POSTGRES_VERSION"],
                "datastore_dsn": f"postgresql://postgres:{db['POSTGRES_PASSWORD']}@127.0.0.1:"
                                 f"{c.port('permify-db', 5432)}/{db['POSTGRES_DB']}"}

    # lifecycle ---------------------------------------------------------------------------------
    def connect(self) -> None:
        ep = self.endpoint
        self.model = self.options.get("model", "rebac")
        self.mode = self.options.get("consistency") or "at_least_as_fresh"
        if self.mode == "minimize_latency":  # the harness's default name for "the backend's fast mode"
            self.mode = "at_least_as_fresh"
        if self.mode not in CONSISTENCY:
            raise UserError(f"permify: --consistency {self.mode!r}; valid: {', '.join(CONSISTENCY)}")
        self.timeout = float(self.options.get("timeout_s") or 60.0)
        self.write_batch = min(int(self.options.get("write_batch") or type(self).write_batch),  # type: ignore[misc]
                               int(ep.get("max_data_per_write") or DEFAULT_MAX_DATA_PER_WRITE))
        self.write_workers = int(self.options.get("write_workers") or type(self).write_workers)  # type: ignore[misc]
        self.page_size = int(self.options.get("page_size") or type(self).page_size)  # type: ignore[misc]
        self.tenant = self.options.get("tenant") or f"authzbench-{self.model}"
        self.base = f"/v1/tenants/{self.tenant}"
        self.http = Transport(ep["url"], ep.get("preshared_key") or "", self.timeout, pool=self.write_workers + 1)
        try:
            self.http.post("/v1/tenants/list", {"page_size": 1})
        except BackendUnavailable as e:
            self.close()
            raise BackendUnavailable(str(e).replace("lost the connection to", "cannot reach")) from None
        except UserError:
            self.close()
            raise
        if self._tenant_exists():
            self.schema_version = self._post("/schemas/list", {"page_size": 1}).get("head") or ""

    def close(self) -> None:
        if self.http is not None:
            self.http.close()
            self.http = None

    def _post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        assert self.http is not None, "permify: not connected"
        return self.http.post(self.base + path, body)

    def server_info(self) -> ServerInfo:
        ep = self.endpoint
        version = ep.get("permify_version") or "unknown"
        ds_version = (ep.get("datastore_version") or "").split(" ")[0]
        notes = [CLIENT_NOTE,
                 f"measured phases use consistency={self.mode} (snap tokens); correctness tests use fully_consistent",
                 f"lookups: LookupEntity, every page fetched ({self.page_size} results a page)",
                 "social model: public content and profiles are the boolean attribute is_public "
                 "(SpiceDB and OpenFGA: the wildcard user:*)"]
        if not ep.get("datastore_dsn"):
            notes.append("footprint unknown (no datastore_dsn in the endpoint): reported as 0")
        return ServerInfo("Permify", version, f"Permify {version} on PostgreSQL {ds_version}".strip(), notes=notes)

    # schema and data ---------------------------------------------------------------------------
    def _tenant_exists(self) -> bool:
        assert self.http is not None
        token = ""
        while True:
            resp = self.http.post("/v1/tenants/list", {"page_size": 100, "continuous_token": token})
            if any(t.get("id") == self.tenant for t in resp.get("tenants") or []):
                return True
            token = resp.get("continuous_token") or ""
            if not token or not resp.get("tenants"):
                return False

    def create_schema(self) -> None:
        assert self.http is not None
        if not self._tenant_exists():
            self.http.post("/v1/tenants/create", {"id": self.tenant, "name": self.tenant})
        self.schema_version = self._post("/schemas/write", {"schema": schema_text(self.model)})["schema_version"]
        self._delete_mark()

    def _bodies(self, ds: Dataset, n: int) -> Iterator[tuple[int, dict[str, Any]]]:
        """(rows, data/write body) as plain dicts, at most n tuples and attributes each."""
        defs = relation_defs(ds.model)
        for name in ds.authz_relations():  # metadata relations (group_org) are not tuples
            d = defs[name]
            for df in ds.iter_batches(name, n):
                pairs = zip(df["object"].tolist(), df["subject"].tolist(), strict=True)
                if d.wildcard:
                    body = {"attributes": [attribute_json(d, o) for o, _ in pairs]}
                else:
                    body = {"tuples": [tuple_json(d, o, s) for o, s in pairs]}
                yield len(df), {"metadata": {"schema_version": self.schema_version}, **body}

    def _write_body(self, body: dict[str, Any]) -> None:
        self.token = self._post("/data/write", body).get("snap_token") or self.token

    def load(self, ds: Dataset, progress: Progress = no_progress) -> LoadStats:
        """data/write requests of write_batch tuples, write_workers of them in flight (each one transaction)."""
        return load_concurrently("permify: data/write", self._bodies(ds, self.write_batch), self._write_body,
                                 self.write_batch, self.write_workers, progress)

    def build(self) -> BuildStats:
        """One write after the load: Permify's head snapshot is the snapshot its latest write transaction
        started with, so right after concurrent data/writes it can miss a load transaction still in flight
        when that one began (lookups came back 2-3 results short on tiny). A delete matching nothing, run
        alone, starts a transaction that sees every committed load batch."""
        import time

        t0 = time.perf_counter()
        self.token = self._post("/data/delete", {"tuple_filter": {"entity": {"type": BARRIER[0], "ids": [BARRIER[1]]}},
                                                 "attribute_filter": {}}).get("snap_token") or self.token
        return BuildStats("a snapshot barrier: one write after the concurrent load", time.perf_counter() - t0)

    def loaded_hash(self) -> str | None:
        if self.http is None or not self._tenant_exists():
            return None
        try:
            bundle = self._post("/bundle/read", {"name": MARK_BUNDLE}).get("bundle") or {}
        except PermifyError:
            return None  # no such bundle
        args = bundle.get("arguments") or []
        return args[0] if args else None

    def mark_loaded(self, dataset_hash: str) -> None:
        # A bundle must hold an operation: one that writes nothing (its argument is never substituted).
        self._post("/bundle/write", {"bundles": [{"name": MARK_BUNDLE, "arguments": [dataset_hash],
                                                  "operations": [{"relationships_write": [],
                                                                  "relationships_delete": []}]}]})

    def _delete_mark(self) -> None:
        with contextlib.suppress(PermifyError):  # none written yet
            self._post("/bundle/delete", {"name": MARK_BUNDLE})

    def drop(self) -> None:
        """Delete the tenant (its schema, tuples, attributes and bundles go with it)."""
        assert self.http is not None
        if self._tenant_exists():
            self.http.post(f"/v1/tenants/{self.tenant}", None, method="DELETE")
        self.token = ""

    # operations ----------------------------------------------------------------------------------
    def _target(self, perm: str) -> tuple[str, str]:
        try:
            return PERMISSION_TARGETS[self.model][perm]
        except KeyError:
            raise UserError(f"permify: unknown permission {perm!r} for the {self.model} model") from None

    def _metadata(self, mode: str | None = None) -> dict[str, Any]:
        token = self.token if (mode or self.mode) == "at_least_as_fresh" else ""
        return {"snap_token": token, "schema_version": self.schema_version, "depth": DEPTH}

    def check(self, user: int, perm: str, resource: int, mode: str | None = None) -> bool:
        obj_type, permission = self._target(perm)
        resp = self._post("/permissions/check", {"metadata": self._metadata(mode),
                                                 "entity": {"type": obj_type, "id": str(resource)},
                                                 "permission": permission, "subject": {"type": "user", "id": str(user)}})
        return resp.get("can") == "CHECK_RESULT_ALLOWED"

    def lookup_resources(self, user: int, perm: str) -> Iterable[int]:
        """Every page, as the server sent them (copies across pages are the runner's to count)."""
        obj_type, permission = self._target(perm)
        body = {"metadata": self._metadata(), "entity_type": obj_type, "permission": permission,
                "subject": {"type": "user", "id": str(user)}, "page_size": self.page_size, "continuous_token": ""}
        out: list[int] = []
        while True:
            resp = self._post("/permissions/lookup-entity", body)
            ids = resp.get("entity_ids") or []
            out += [int(i) for i in ids]
            token = resp.get("continuous_token") or ""
            if not ids or not token:
                return out
            body["continuous_token"] = token

    def _relation(self, rel: Rel) -> RelationDef:
        try:
            return relation_defs(self.model)[rel.relation]
        except KeyError:
            raise UserError(f"permify: unknown relation {rel.relation!r} for the {self.model} model") from None

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
            body = {"tuple_filter": {}, "attribute_filter": {"entity": entity, "attributes": [PUBLIC_ATTRIBUTE]}}
        else:
            t = tuple_json(d, rel.object, rel.subject)
            subject = {"type": t["subject"]["type"], "ids": [t["subject"]["id"]],
                       "relation": t["subject"].get("relation", "")}
            body = {"tuple_filter": {"entity": entity, "relation": t["relation"], "subject": subject},
                    "attribute_filter": {}}
        self.token = self._post("/data/delete", body).get("snap_token") or self.token
        self.rows_touched += 1

    def baseline_roundtrip(self) -> None:
        """tenants/list of one tenant: authenticated, one indexed read of the tenants table."""
        assert self.http is not None
        self.http.post("/v1/tenants/list", {"page_size": 1})

    def footprint(self) -> int:
        """Bytes of Permify's tables in its PostgreSQL database (0 when that is not reachable from here)."""
        return schema_bytes(self.endpoint.get("datastore_dsn"), self.endpoint.get("datastore_password"))
