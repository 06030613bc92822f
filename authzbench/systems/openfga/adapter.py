"""OpenFGA over its HTTP API (openfga-sdk's sync client), on a PostgreSQL datastore.

The model is rebac.fga or social.fga (OpenFGA's modeling language), turned into the JSON authorization model
by `dsl_to_model` below (openfga-sdk ships no DSL parser; our files use a small subset: direct types, `or`,
`and`, `but not`, `X from Y`, parentheses). Tuples map 1:1 from the dataset's relation catalog
(model.RelationDef), as for SpiceDB: group_child is group:PARENT#member@group:CHILD#membership, the social
wildcard is user:*, object ids are the dataset's decimal ids. OpenFGA reserves the relation name `self`: the
social model's `self` is `identity` here (RENAMES).

One store per model (`authzbench-rebac`, `authzbench-social`); the loaded dataset's hash is an
assertion of the store's authorization model (assertions are metadata: they never change an answer), so
a new model or store reads as "nothing loaded".

Lookups use ListObjects with the server's result cap and deadline lifted (the native and compose servers
run with --listObjects-max-results 0 --listObjects-deadline 0): one response that is either complete or
an error. StreamedListObjects is not used because the SDK's stream reader logs and swallows a broken
connection and drops `error` lines, which would turn a dying server into a silently short list. A server
that still caps (an external one with OpenFGA's defaults, 1,000 results / 3 s) fails the lookup loudly
when a result reaches the cap or the deadline.

External servers (`--provision external`, AUTHZBENCH_OPENFGA_URL):
    http://PRESHARED_KEY@host:port        (https:// for TLS)
    optional: ?max_results=0&deadline_s=0  (the server's --listObjects-max-results / --listObjects-deadline;
              OpenFGA's defaults 1000 / 3 are assumed when absent), &max_tuples_per_write=100,
              &datastore_dsn=postgresql://user@host:port/db&datastore_version=15.4 (footprint/report)
"""

from __future__ import annotations

import contextlib
import json
import re
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar
from urllib.parse import parse_qs, unquote, urlparse

from authzbench.backends.base import (
    Backend,
    BackendOptions,
    Load,
    Progress,
    ServerInfo,
    load_concurrently,
    no_progress,
)
from authzbench.backends.common import permission_target
from authzbench.backends.pgsize import schema_bytes
from authzbench.backends.zanzibar import relationship_batches
from authzbench.core.errors import BackendUnavailable, UserError
from authzbench.schema.dataset import Dataset
from authzbench.schema.model import RelationDef, relation_defs
from authzbench.schema.model import Relationship as Rel

SCHEMA_DIR = Path(__file__).resolve().parent
RENAMES = {"self": "identity"}  # .zed relation -> OpenFGA relation (`self` is reserved there)
CONSISTENCY = {"minimize_latency": "MINIMIZE_LATENCY", "fully_consistent": "HIGHER_CONSISTENCY"}
HASH_OBJECT = re.compile(r"^[a-z]+:authzbench-dataset-([0-9a-f]{64})$")
DEFAULT_MAX_RESULTS, DEFAULT_DEADLINE_S = 1000, 3.0  # OpenFGA's own defaults (pkg/server/config)


# The modeling language -> JSON authorization model ------------------------------------------------
_TOKEN = re.compile(r"\s*(\(|\)|\[[^\]]*\]|but not\b|[\w][\w#:*-]*)")
_OPS = {"or": "union", "and": "intersection", "but not": "difference"}


def _tokens(expr: str) -> list[str]:
    out, pos, expr = [], 0, expr.strip()
    while pos < len(expr):
        m = _TOKEN.match(expr, pos)
        if not m:
            raise ValueError(f"cannot parse {expr[pos:]!r}")
        out.append(m.group(1))
        pos = m.end()
    return out


def _direct_types(token: str) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for t in (x.strip() for x in token[1:-1].split(",")):
        if t.endswith(":*"):
            out.append({"type": t[:-2], "wildcard": {}})
        elif "#" in t:
            out.append({"type": t.split("#")[0], "relation": t.split("#")[1]})
        else:
            out.append({"type": t})
    return out


def _rewrite(tokens: list[str], direct: list[dict[str, Any]]) -> dict[str, Any]:
    """One relation's definition: terms joined by one kind of operator; mixing needs parentheses."""
    pos = 0

    def term() -> dict[str, Any]:
        nonlocal pos
        t = tokens[pos]
        pos += 1
        if t == "(":
            node = expr()
            pos += 1  # ")"
            return node
        if t.startswith("["):
            direct.extend(_direct_types(t))
            return {"this": {}}
        if pos < len(tokens) and tokens[pos] == "from":
            pos += 2
            return {"tupleToUserset": {"tupleset": {"object": "", "relation": tokens[pos - 1]},
                                       "computedUserset": {"object": "", "relation": t}}}
        return {"computedUserset": {"object": "", "relation": t}}

    def expr() -> dict[str, Any]:
        nonlocal pos
        nodes, ops = [term()], set()
        while pos < len(tokens) and tokens[pos] in _OPS:
            ops.add(tokens[pos])
            pos += 1
            nodes.append(term())
        if len(nodes) == 1:
            return nodes[0]
        if len(ops) > 1 or (ops == {"but not"} and len(nodes) > 2):
            raise ValueError(f"mixed operators need parentheses: {' '.join(tokens)}")
        op = _OPS[ops.pop()]
        if op == "difference":
            return {"difference": {"base": nodes[0], "subtract": nodes[1]}}
        return {op: {"child": nodes}}

    node = expr()
    if pos != len(tokens):
        raise ValueError(f"unexpected {tokens[pos]!r} in {' '.join(tokens)}")
    return node


def dsl_to_model(text: str) -> dict[str, Any]:
    """The JSON authorization model (schema 1.1) of a .fga file in the subset described above."""
    types: list[dict[str, Any]] = []
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#") or line in ("model", "relations") or line.startswith("schema "):
            continue
        if line.startswith("type "):
            types.append({"type": line.split()[1], "relations": {}, "metadata": None})
        elif line.startswith("define "):
            name, _, body = line[len("define "):].partition(":")
            direct: list[dict[str, Any]] = []
            t = types[-1]
            t["relations"][name.strip()] = _rewrite(_tokens(body), direct)
            meta = t["metadata"] or {"relations": {}}
            meta["relations"][name.strip()] = {"directly_related_user_types": direct}
            t["metadata"] = meta
        else:
            raise ValueError(f"unsupported line in the model: {line!r}")
    return {"schema_version": "1.1", "type_definitions": types, "conditions": {}}


def model_json(model: str) -> dict[str, Any]:
    return dsl_to_model((SCHEMA_DIR / f"{'social' if model == 'social' else 'rebac'}.fga").read_text())


def tuple_key(d: RelationDef, obj: int | str, sub: int | str) -> dict[str, str]:
    user = f"{d.subject_type}:*" if d.wildcard else f"{d.subject_type}:{sub}"
    if d.subject_relation:
        user += f"#{RENAMES.get(d.subject_relation, d.subject_relation)}"
    return {"user": user, "relation": RENAMES.get(d.relation, d.relation), "object": f"{d.object_type}:{obj}"}


@dataclass(frozen=True)
class OpenFGAOptions(BackendOptions):
    write_batch: int | None = None  # tuples per Write request while loading (None: write_batch)
    write_workers: int | None = None  # Write requests in flight while loading (None: write_workers)
    store: str | None = None  # the store's name (None: authzbench-<model>)


class OpenFGABackend(Backend):
    name: ClassVar[str] = "openfga"
    worker_modules = ("openfga_sdk.sync", "openfga_sdk.client.models.check_request", "urllib3")
    Options = OpenFGAOptions
    counts_rows = True
    consistency_modes = ("minimize_latency", "fully_consistent")
    # Tuples per Write request and requests in flight while loading (options["write_batch"] /
    # options["write_workers"] override). Swept on baseline (401,577 tuples, native v1.22.1, `prepare
    # --reload`), seconds per load: 1000 x 8: 40.1 / 45.1; 1000 x 12: 55.3; 1000 x 16: 64.7; 2000 x 8: 53.5;
    # 500 x 8: 61.5; 500 x 16: 60.5; 5000 x 4: 64.7; 200 x 16: 91.2; 1000 x 4: 113.9 / 106.3; 10000 x 8:
    # a request timed out at 60 s. Each Write is one datastore transaction: 4 in flight leave the server
    # waiting on commits, past 8 they queue on the two cores, and big requests serialize the load.
    write_batch: ClassVar[int] = 1_000
    write_workers: ClassVar[int] = 8

    def __init__(self, endpoint: dict[str, Any], options: dict[str, Any] | None = None) -> None:
        super().__init__(endpoint, options)
        self.client: Any = None
        self.store_id: str | None = None
        self.model_id: str | None = None

    @classmethod
    def endpoint_from_url(cls, url: str) -> dict[str, Any]:
        """http://PRESHARED_KEY@host:port?max_results=0&deadline_s=0 (https:// for TLS)."""
        u = urlparse(url)
        q = {k: v[0] for k, v in parse_qs(u.query).items()}
        if u.scheme not in ("http", "https") or not u.hostname:
            raise UserError("openfga URL must look like http://PRESHARED_KEY@host:port (https:// for TLS)")
        try:
            limits = {"max_results": int(q.get("max_results", DEFAULT_MAX_RESULTS)),
                      "deadline_s": float(q.get("deadline_s", DEFAULT_DEADLINE_S)),
                      "max_tuples_per_write": int(q.get("max_tuples_per_write", 100))}
        except ValueError:
            raise UserError(
                "openfga URL: max_results, deadline_s and max_tuples_per_write must be numbers") from None
        return {
            "url": f"{u.scheme}://{u.hostname}:{u.port or 8080}", "preshared_key": unquote(u.username or ""),
            **limits, "datastore_dsn": q.get("datastore_dsn"),
            "datastore_version": q.get("datastore_version", ""), "openfga_version": q.get("version", "")}

    @classmethod
    def endpoint_from_compose(cls, c: Any) -> dict[str, Any]:
        fga, db = c.environment("openfga"), c.environment("openfga-db")
        return {"url": f"http://127.0.0.1:{c.port('openfga', 8080)}",
                "preshared_key": fga["OPENFGA_AUTHN_PRESHARED_KEYS"],
                "max_results": int(fga["OPENFGA_LIST_OBJECTS_MAX_RESULTS"]),
                "deadline_s": 0 if fga["OPENFGA_LIST_OBJECTS_DEADLINE"] in ("0", "0s") else 3.0,
                "max_tuples_per_write": int(fga["OPENFGA_MAX_TUPLES_PER_WRITE"]),
                "openfga_version": c.env["OPENFGA_VERSION"], "datastore_version": c.env["POSTGRES_VERSION"],
                "datastore_dsn": f"postgresql://postgres:{db['POSTGRES_PASSWORD']}@127.0.0.1:"
                                 f"{c.port('openfga-db', 5432)}/{db['POSTGRES_DB']}"}

    # lifecycle ---------------------------------------------------------------------------------
    def connect(self) -> None:
        from openfga_sdk.client.configuration import ClientConfiguration
        from openfga_sdk.credentials import CredentialConfiguration, Credentials
        from openfga_sdk.sync import OpenFgaClient

        ep = self.endpoint
        self.model = self.options.get("model", "rebac")
        self.mode = self.options.get("consistency") or "minimize_latency"
        if self.mode not in CONSISTENCY:
            raise UserError(f"openfga: --consistency {self.mode!r}; valid: {', '.join(CONSISTENCY)}")
        self.timeout = float(self.options.get("timeout_s") or 60.0)
        self.write_batch = min(int(self.options.get("write_batch") or type(self).write_batch),  # type: ignore[misc]
                               int(ep.get("max_tuples_per_write") or 100))
        self.write_workers = int(self.options.get("write_workers") or type(self).write_workers)  # type: ignore[misc]
        self.store_name = self.options.get("store") or f"authzbench-{self.model}"
        creds = (Credentials(
                     method="api_token", configuration=CredentialConfiguration(api_token=ep["preshared_key"]))
                 if ep.get("preshared_key")
                 else None)
        # No retries: the runner counts every failure, a hidden retry would hide one and inflate latency.
        from openfga_sdk.configuration import RetryParams

        cfg = ClientConfiguration(api_url=ep["url"], credentials=creds, retry_params=RetryParams(max_retry=0),
                                  timeout_millisec=int(self.timeout * 1000))
        self.client = OpenFgaClient(cfg)
        try:
            self._find_store()
        except Exception as e:
            self.close()
            raise self._connect_error(e) from None

    def _connect_error(self, e: Exception) -> Exception:
        from openfga_sdk.exceptions import ApiException

        url = self.endpoint["url"]
        if isinstance(e, ApiException) and e.status in (401, 403):
            return UserError(f"openfga: OpenFGA at {url} rejected the preshared key")
        if isinstance(e, ApiException):
            return BackendUnavailable(f"openfga: OpenFGA at {url} answered {e.status} {e.reason}")
        return BackendUnavailable(f"openfga: cannot reach OpenFGA at {url}: {type(e).__name__}: "
                                  f"{(str(e).splitlines() or [''])[0][:200]}")

    def _find_store(self) -> None:
        """The store named store_name and its latest model, or None (before create_schema)."""
        stores = self.client.list_stores({"name": self.store_name}).stores or []
        self.store_id = stores[0].id if stores else None
        self.model_id = None
        self.client.set_store_id(self.store_id)
        if self.store_id:
            models = self.client.read_authorization_models({"page_size": 1}).authorization_models or []
            self.model_id = models[0].id if models else None
        self.client.set_authorization_model_id(self.model_id)

    def close(self) -> None:
        if self.client is not None:
            self.client.close()
            self.client = None

    def server_info(self) -> ServerInfo:
        ep = self.endpoint
        version = ep.get("openfga_version") or "unknown"
        ds_version = (ep.get("datastore_version") or "").split(" ")[0]
        notes = [f"measured phases use consistency={self.mode}; correctness tests use fully_consistent",
                 "version as the server logged it at start (OpenFGA's API does not report one)"
                 if ep.get("openfga_version") else "version unknown: OpenFGA's API does not report one",
                 "lookups: ListObjects with the result cap and deadline lifted (complete or an error)"]
        if not ep.get("datastore_dsn"):
            notes.append("footprint unknown (no datastore_dsn in the endpoint): reported as 0")
        label = f"OpenFGA {version} on PostgreSQL {ds_version}".strip()
        return ServerInfo("OpenFGA", version, label, notes=notes, consistency=self.mode)

    # schema and data ---------------------------------------------------------------------------
    def create_schema(self) -> None:
        from openfga_sdk.models.create_store_request import CreateStoreRequest

        if not self.store_id:
            self.store_id = self.client.create_store(CreateStoreRequest(name=self.store_name)).id
            self.client.set_store_id(self.store_id)
        self.model_id = self.client.write_authorization_model(model_json(self.model)).authorization_model_id
        self.client.set_authorization_model_id(self.model_id)

    def _batches(self, ds: Dataset, n: int) -> Iterator[tuple[int, dict[str, Any]]]:
        """(tuples, Write request body) as plain dicts: the SDK's typed models cost more client CPU per
        tuple than the server spends writing it."""
        for d, objs, subs in relationship_batches(ds, n):
            key = tuple_key(d, "{o}", "{s}")
            user, rel, obj = key["user"], key["relation"], key["object"]
            keys = [{"user": user.format(s=s), "relation": rel, "object": obj.format(o=o)}
                    for o, s in zip(objs, subs, strict=True)]
            yield len(keys), {"writes": {"tuple_keys": keys, "on_duplicate": "error"},
                              "authorization_model_id": self.model_id}

    def _post_write(self, body: dict[str, Any]) -> None:
        self.client.execute_api_request(
            operation_name="Write", method="POST", path="/stores/{store_id}/write",
            path_params={"store_id": self.store_id}, body=body)

    def load(self, ds: Dataset, progress: Progress = no_progress) -> Load:
        """Write requests of write_batch tuples, write_workers of them in flight (each one transaction)."""
        return load_concurrently("openfga: Write", self._batches(ds, self.write_batch), self._post_write,
                                 self.write_batch, self.write_workers, why=_why)

    def _hash_assertion(self, dataset_hash: str) -> Any:
        """An assertion naming the dataset: on the first relation that takes plain users."""
        from openfga_sdk.client.models.assertion import ClientAssertion

        for t in model_json(self.model)["type_definitions"]:
            for rel, meta in ((t["metadata"] or {}).get("relations") or {}).items():
                if {"type": "user"} in meta["directly_related_user_types"]:
                    return ClientAssertion(
                        user="user:authzbench", relation=rel,
                        object=f"{t['type']}:authzbench-dataset-{dataset_hash}", expectation=False)
        raise AssertionError("no relation of the model takes users")

    def loaded_hash(self) -> str | None:
        if not (self.store_id and self.model_id):
            return None
        for a in self.client.read_assertions().assertions or []:
            m = HASH_OBJECT.match(a.tuple_key.object)
            if m:
                return m.group(1)
        return None

    def mark_loaded(self, dataset_hash: str) -> None:
        self.client.write_assertions([self._hash_assertion(dataset_hash)])

    def drop(self) -> None:
        """Delete every store of this name (their tuples go with them), so the next load starts empty.
        OpenFGA's DeleteStore is a soft delete: PostgreSQL keeps the rows (footprint says so)."""
        for s in self.client.list_stores({"name": self.store_name}).stores or []:
            self.client.set_store_id(s.id)
            self.client.delete_store()
        self.store_id = self.model_id = None
        self.client.set_store_id(None)
        self.client.set_authorization_model_id(None)

    # operations ----------------------------------------------------------------------------------
    @contextlib.contextmanager
    def _transport_errors(self) -> Iterator[None]:
        """A dead or unreachable server: one line naming it, not urllib3's nested reprs."""
        import urllib3

        try:
            yield
        except (urllib3.exceptions.HTTPError, OSError) as e:
            cause = e.__context__ or e
            raise BackendUnavailable(f"openfga: lost the connection to OpenFGA at {self.endpoint['url']}: "
                                     f"{type(e).__name__} ({type(cause).__name__})") from None

    def _options(self, mode: str | None = None) -> dict[str, Any]:
        return {"consistency": CONSISTENCY[mode or self.mode]}

    def check_message(self, user: int, perm: str, resource: int, mode: str | None = None) -> dict[str, Any]:
        """check()'s request as OpenFGA's CheckRequest in protobuf JSON (OpenFGA's protos name their JSON
        fields in snake_case): the body the SDK POSTs to /stores/{store}/check (the HTTP API is the gRPC API's
        gateway), with the store named; what `authzbench crosscheck` hands to ghz for
        openfga.v1.OpenFGAService/Check."""
        obj_type, relation = permission_target("openfga", self.model, perm)
        return {
            "store_id": self.store_id, "authorization_model_id": self.model_id,
            "tuple_key": {"user": f"user:{user}", "relation": relation, "object": f"{obj_type}:{resource}"},
            **self._options(mode)}

    def check(self, user: int, perm: str, resource: int, mode: str | None = None) -> bool:
        from openfga_sdk.client.models.check_request import ClientCheckRequest

        obj_type, relation = permission_target("openfga", self.model, perm)
        with self._transport_errors():
            resp = self.client.check(ClientCheckRequest(user=f"user:{user}", relation=relation,
                                                        object=f"{obj_type}:{resource}"), self._options(mode))
        return bool(resp.allowed)

    def lookup_resources(self, user: int, perm: str) -> Iterable[int]:
        """Every object, or an error: a result list that reaches the server's cap, or an answer that
        took the server's deadline, may be cut short by the server, and is refused."""
        from openfga_sdk.client.models.list_objects_request import ClientListObjectsRequest

        obj_type, relation = permission_target("openfga", self.model, perm)
        t0 = time.perf_counter()
        with self._transport_errors():
            objects = (self.client.list_objects(
                           ClientListObjectsRequest(user=f"user:{user}", relation=relation, type=obj_type),
                           self._options()).objects
                       or [])
        cap, deadline = (
            int(self.endpoint.get("max_results") or 0), float(self.endpoint.get("deadline_s") or 0))
        if cap and len(objects) >= cap:
            raise BackendUnavailable(
                f"openfga: ListObjects returned {len(objects)} objects, the server's cap "
                "(--listObjects-max-results): the list may be incomplete")
        if deadline and time.perf_counter() - t0 >= 0.9 * deadline:
            raise BackendUnavailable(f"openfga: ListObjects took the server's {deadline:g} s deadline "
                                     "(--listObjects-deadline): the list may be incomplete")
        cut = len(obj_type) + 1
        return [int(o[cut:]) for o in objects]

    def _update(self, rel: Rel, write: bool) -> None:
        from openfga_sdk.client.models.tuple import ClientTuple
        from openfga_sdk.client.models.write_conflict_opts import (
            ClientWriteRequestOnDuplicateWrites,
            ClientWriteRequestOnMissingDeletes,
            ConflictOptions,
        )

        try:
            d = relation_defs(self.model)[rel.relation]
        except KeyError:
            raise UserError(
                f"openfga: unknown relation {rel.relation!r} for the {self.model} model") from None
        t = ClientTuple(**tuple_key(d, rel.object, rel.subject))
        # TOUCH / delete-if-present semantics, as the other backends' write and delete.
        conflict = ConflictOptions(on_duplicate_writes=ClientWriteRequestOnDuplicateWrites.IGNORE,
                                   on_missing_deletes=ClientWriteRequestOnMissingDeletes.IGNORE)
        with self._transport_errors():
            if write:
                self.client.write_tuples([t], {"conflict": conflict})
            else:
                self.client.delete_tuples([t], {"conflict": conflict})
        self.rows_touched += 1  # one tuple; OpenFGA computes permissions at read time

    def write(self, rel: Rel) -> None:
        self._update(rel, True)

    def delete(self, rel: Rel) -> None:
        self._update(rel, False)

    def baseline_roundtrip(self) -> None:
        """GetStore: authenticated, one primary-key read of the stores table."""
        self.client.get_store()

    def footprint(self) -> int:
        """Bytes of OpenFGA's tables in its PostgreSQL database (0 when that is not reachable from here)."""
        return schema_bytes(self.endpoint.get("datastore_dsn"), self.endpoint.get("datastore_password"))


def _why(e: Exception) -> str:
    """One line: the server's message when it sent one."""
    body = getattr(e, "body", None)
    if body:
        try:
            return f"{getattr(e, 'status', '')} {json.loads(body).get('message', '')}"[:300]
        except (ValueError, AttributeError):
            pass
    return f"{type(e).__name__}: {(str(e).splitlines() or [''])[0][:200]}"
