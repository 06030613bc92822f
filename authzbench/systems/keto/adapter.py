"""Ory Keto over its REST APIs (plain HTTP through urllib3), on a PostgreSQL datastore.

The model is namespaces.keto.ts beside this file (the Ory Permission Language), loaded by the server at
start: Keto takes its model from its config, not through the API, so `create_schema` only checks that the
server serves the model's namespaces. Tuples map 1:1 from the dataset's relation catalog (TUPLES): a user is
a plain subject id, a group, organization or child group a subject set with an empty relation, which the
model follows with `traverse`. Object ids are the dataset's decimal ids. Only the rebac model: Keto has no
wildcard subject, which the social model's public visibility needs.

Keto has no reverse lookup (its read API offers check, expand and list relation tuples; none lists the
objects a subject may reach), so `lookup_resources` raises LookupUnsupported: the runner counts it as a
failed op with that name, and no answer is made up by checking every resource.

Keto reads its datastore directly: every check sees the latest committed tuples (no snapshot tokens: the
API's snaptoken fields are "not implemented yet"; no answer cache), so it has one consistency mode and any
`consistency` option reads the same. Its APIs have no authentication (Ory's deployments put a gateway in
front): the native server listens on loopback only.

Why not ory-keto-client (PyPI, the generated client): its 25.4.0 passes `ca_cert_data` to urllib3's pool
keys, which urllib3 2.0.x lacks, so its first request fails with a TypeError wherever permify (urllib3<2.1)
is installed beside it, as in the `all` extra; its older releases target older servers' APIs. The REST calls
used here are few and documented (check, list, PATCH and DELETE of relation tuples, version, health).

External servers (`--provision external`, AUTHZBENCH_KETO_URL):
    http://host:4466?write_url=http://host:4467      (the read API's URL, the write API's as a parameter)
    optional: &datastore_dsn=postgresql://user@host:port/db&datastore_version=15.4 (footprint/report)
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, ClassVar
from urllib.parse import parse_qs, urlencode, urlparse

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
from authzbench.schema.model import Relationship as Rel

# dataset relation -> (namespace, relation, subject namespace: "" = a plain subject id)
TUPLES: dict[str, tuple[str, str, str]] = {
    "org_admin": ("Organization", "admin", ""),
    "org_member": ("Organization", "member", ""),
    "group_member": ("Group", "member", ""),
    "group_manager": ("Group", "manager", ""),
    "group_child": ("Group", "child", "Group"),  # parent#child@Group:CHILD: the child's membership counts
    "resource_org": ("Resource", "org", "Organization"),
    "resource_manager_user": ("Resource", "manager_user", ""),
    "resource_manager_group": ("Resource", "manager_group", "Group"),
    "resource_viewer_user": ("Resource", "viewer_user", ""),
    "resource_viewer_group": ("Resource", "viewer_group", "Group"),
}
NAMESPACES = ("Organization", "Group", "Resource")  # the ones holding tuples (User holds none)
OBJECT_NAMESPACE = {"resource": "Resource"}  # a permission's object type -> its namespace
# The loaded dataset's hash, kept as one tuple no check can reach (no resource names this organization).
MARK_NAMESPACE, MARK_RELATION, MARK_SUBJECT = "Organization", "member", "authzbench-loaded"
MARK_OBJECT = re.compile(r"^authzbench-dataset-([0-9a-f]{64})$")
TUPLES_PATH = "/admin/relation-tuples"
JSON = {"Content-Type": "application/json"}


class LookupUnsupported(UserError):
    """Keto has no API that lists the objects a subject may reach."""


class KetoError(Exception):
    """An error status from Keto, with its body (the server's reason)."""

    def __init__(self, status: int, body: bytes) -> None:
        super().__init__(f"{status} {body[:200].decode(errors='replace')}")
        self.status, self.body = status, body


def tuple_json(relation: str, obj: int | str, sub: int | str) -> dict[str, Any]:
    """One relation tuple as Keto's REST API takes it."""
    try:
        namespace, rel, sub_ns = TUPLES[relation]
    except KeyError:
        raise UserError(f"keto: unknown relation {relation!r} for the rebac model") from None
    t: dict[str, Any] = {"namespace": namespace, "object": str(obj), "relation": rel}
    if sub_ns:
        t["subject_set"] = {"namespace": sub_ns, "object": str(sub), "relation": ""}
    else:
        t["subject_id"] = str(sub)
    return t


def query_params(t: dict[str, Any]) -> dict[str, str]:
    """A tuple as a delete's query parameters (its subject set's fields as subject_set.namespace, ...)."""
    out = {k: v for k, v in t.items() if k != "subject_set"}
    out.update({f"subject_set.{k}": v for k, v in t.get("subject_set", {}).items()})
    return out


@dataclass(frozen=True)
class KetoOptions(BackendOptions):
    write_batch: int | None = None  # tuples per PATCH while loading (None: write_batch)
    write_workers: int | None = None  # PATCH requests in flight while loading (None: write_workers)


class KetoBackend(Backend):
    name: ClassVar[str] = "keto"
    worker_modules = ("urllib3",)
    Options = KetoOptions
    counts_rows = True
    # Each PATCH is one transaction: one INSERT per tuple, after one multi-row INSERT ... ON CONFLICT DO
    # NOTHING of its strings' UUID mappings, in tuple order. Two such transactions inserting the same new
    # string deadlock: baseline with 4 PATCHes in flight failed with "deadlock detected (SQLSTATE 40P01)";
    # a retry would hide the failure the runner must count. A mapping already committed takes no lock, so
    # the tuples that name a string first go one PATCH at a time, and the rest write_workers at once.
    write_batch: ClassVar[int] = 1_000
    write_workers: ClassVar[int] = 4

    def __init__(self, endpoint: dict[str, Any], options: dict[str, Any] | None = None) -> None:
        super().__init__(endpoint, options)
        self.read: Any = None
        self.write_api: Any = None
        self.version = ""

    @classmethod
    def endpoint_from_url(cls, url: str) -> dict[str, Any]:
        """http://host:4466?write_url=http://host:4467 (the read API; the write API's URL as a parameter)."""
        u = urlparse(url)
        q = {k: v[0] for k, v in parse_qs(u.query).items()}
        if u.scheme not in ("http", "https") or not u.hostname or "write_url" not in q:
            raise UserError("keto URL must look like http://host:4466?write_url=http://host:4467")
        return {"read_url": f"{u.scheme}://{u.hostname}:{u.port or 4466}", "write_url": q["write_url"],
                "datastore_dsn": q.get("datastore_dsn"), "datastore_version": q.get("datastore_version", ""),
                "keto_version": q.get("version", "")}

    @classmethod
    def endpoint_from_compose(cls, c: Any) -> dict[str, Any]:
        db = c.environment("keto-db")
        return {"read_url": f"http://127.0.0.1:{c.port('keto', 4466)}",
                "write_url": f"http://127.0.0.1:{c.port('keto', 4467)}",
                "keto_version": c.env["KETO_VERSION"], "datastore_version": c.env["POSTGRES_VERSION"],
                "datastore_dsn": f"postgresql://postgres:{db['POSTGRES_PASSWORD']}@127.0.0.1:"
                                 f"{c.port('keto-db', 5432)}/{db['POSTGRES_DB']}"}

    # lifecycle ---------------------------------------------------------------------------------
    def connect(self) -> None:
        import urllib3

        if self.options.get("model", "rebac") != "rebac":
            raise UserError("keto: only the rebac model (Keto has no wildcard subject for the social model)")
        self.timeout = float(self.options.get("timeout_s") or 60.0)
        cls = type(self)
        self.write_batch = int(self.options.get("write_batch") or cls.write_batch)  # type: ignore[misc]
        self.write_workers = int(self.options.get("write_workers") or cls.write_workers)  # type: ignore[misc]
        # No retries: the runner counts every failure, a hidden retry would hide one and inflate latency.
        # One kept-alive connection per load worker on the write side.
        self.read = urllib3.connection_from_url(self.endpoint["read_url"], retries=False,
                                                timeout=self.timeout)
        self.write_api = urllib3.connection_from_url(self.endpoint["write_url"], retries=False,
                                                     timeout=self.timeout, maxsize=self.write_workers)
        try:
            self.version = self._ready()
        except Exception as e:
            self.close()
            raise self._connect_error(e) from None

    def _ready(self) -> str:
        """Both APIs ready (the write port opens beside the read port the recipe awaits); the version."""
        for pool in (self.read, self.write_api):
            self._call(pool, "GET", "/health/ready")
        return str(self._call(self.read, "GET", "/version").get("version") or "unknown")

    def _connect_error(self, e: Exception) -> Exception:
        url = f"{self.endpoint['read_url']} (write {self.endpoint['write_url']})"
        if isinstance(e, KetoError):
            return BackendUnavailable(f"keto: Ory Keto at {url} answered {_why(e)}")
        if isinstance(e, BackendUnavailable):  # _call's line, from its "lost the connection" on
            return BackendUnavailable(f"keto: cannot reach Ory Keto at {url}: {str(e).split(': ', 2)[-1]}")
        return BackendUnavailable(f"keto: cannot reach Ory Keto at {url}: {type(e).__name__}: "
                                  f"{(str(e).splitlines() or [''])[0][:200]}")

    def close(self) -> None:
        for pool in (self.read, self.write_api):
            if pool is not None:
                pool.close()
        self.read = self.write_api = None

    def server_info(self) -> ServerInfo:
        ep = self.endpoint
        version = self.version or ep.get("keto_version") or "unknown"
        ds_version = (ep.get("datastore_version") or "").split(" ")[0]
        notes = ["reads: every check reads the latest committed tuples (no snapshot tokens: Keto's snaptoken "
                 "fields are not implemented; no answer cache), whatever consistency is asked",
                 "lookups: not offered (Keto has no reverse lookup API); each one is a failed op, "
                 "LookupUnsupported",
                 "model: namespaces.keto.ts (Ory Permission Language), read depth 64"]
        if not ep.get("datastore_dsn"):
            notes.append("footprint unknown (no datastore_dsn in the endpoint): reported as 0")
        label = f"Ory Keto {version} on PostgreSQL {ds_version}".strip()
        return ServerInfo("Ory Keto", version, label, notes=notes, consistency="latest committed")

    # HTTP ----------------------------------------------------------------------------------------
    def _call(self, pool: Any, method: str, url: str, body: Any = None) -> Any:
        """One request; its JSON answer ({} for none). An error status raises KetoError; a dead server
        BackendUnavailable; a timeout urllib3's own (counted as a timeout)."""
        import urllib3

        data = None if body is None else json.dumps(body).encode()
        try:
            resp = pool.urlopen(method, url, body=data, headers=JSON if data else None)
        except urllib3.exceptions.NewConnectionError as e:  # a ConnectTimeoutError subclass, not a timeout
            raise BackendUnavailable(f"keto: lost the connection to Ory Keto at {pool.host}:{pool.port}: "
                                     f"{type(e).__name__} (connection refused)") from None
        except urllib3.exceptions.TimeoutError:
            raise
        except (urllib3.exceptions.HTTPError, OSError) as e:
            cause = e.__context__ or e
            raise BackendUnavailable(f"keto: lost the connection to Ory Keto at {pool.host}:{pool.port}: "
                                     f"{type(e).__name__} ({type(cause).__name__})") from None
        if resp.status >= 300:
            raise KetoError(resp.status, resp.data)
        return json.loads(resp.data) if resp.data else {}

    # schema and data ---------------------------------------------------------------------------
    def create_schema(self) -> None:
        """Nothing to send (the server loads the model from its config): check that it serves the model."""
        served = {n["name"] for n in self._call(self.read, "GET", "/namespaces").get("namespaces") or []}
        missing = sorted(set(NAMESPACES) - served)
        if missing:
            raise UserError(f"keto: the server serves no namespace {', '.join(missing)}: start it with "
                            "authzbench/systems/keto/namespaces.keto.ts as its namespaces location")

    def _tuples(self, ds: Dataset) -> Iterator[tuple[int, dict[str, Any]]]:
        """(position, tuple) of every relationship, in the dataset's order."""
        k = 0
        for d, objs, subs in relationship_batches(ds, self.write_batch):
            for o, s in zip(objs, subs, strict=True):
                yield k, tuple_json(d.name, o, s)
                k += 1

    def _first_namers(self, ds: Dataset) -> set[int]:
        """Positions of the tuples that name a string no earlier tuple names: a few per new id."""
        seen: set[str] = set()
        first: set[int] = set()
        for k, t in self._tuples(ds):
            names = {t["object"], t.get("subject_id") or t["subject_set"]["object"]} - seen
            if names:
                first.add(k)
                seen |= names
        return first

    def _batches(self, ds: Dataset, keep: Callable[[int], bool]) -> Iterator[tuple[int, list[dict]]]:
        """(tuples, PATCH body) of the tuples `keep` picks: every tuple of a batch inserted in one
        transaction."""
        body: list[dict[str, Any]] = []
        for k, t in self._tuples(ds):
            if keep(k):
                body.append({"action": "insert", "relation_tuple": t})
            if len(body) == self.write_batch:
                yield len(body), body
                body = []
        if body:
            yield len(body), body

    def _patch(self, body: list[dict[str, Any]]) -> None:
        self._call(self.write_api, "PATCH", TUPLES_PATH, body)

    def load(self, ds: Dataset, progress: Progress = no_progress) -> Load:
        """The tuples that name a new string first, one PATCH at a time; the rest write_workers at once."""
        first = self._first_namers(ds)
        who = f"keto: PATCH {TUPLES_PATH}"
        rows = yield from load_concurrently(f"{who} (first use of a string)",
                                            self._batches(ds, first.__contains__), self._patch,
                                            self.write_batch, 1, why=_why)
        rest = yield from load_concurrently(who, self._batches(ds, lambda k: k not in first), self._patch,
                                            self.write_batch, self.write_workers, why=_why)
        rest.rows += rows.rows
        rest.notes.update(first_use_tuples=rows.rows, first_use_workers=1)
        return rest

    def _marks(self) -> list[str]:
        q = urlencode({"namespace": MARK_NAMESPACE, "relation": MARK_RELATION, "subject_id": MARK_SUBJECT})
        got = self._call(self.read, "GET", f"/relation-tuples?{q}")
        return [t["object"] for t in got.get("relation_tuples") or []]

    def loaded_hash(self) -> str | None:
        for obj in self._marks():
            m = MARK_OBJECT.match(obj)
            if m:
                return m.group(1)
        return None

    def mark_loaded(self, dataset_hash: str) -> None:
        self._delete({"namespace": MARK_NAMESPACE, "relation": MARK_RELATION, "subject_id": MARK_SUBJECT})
        mark = {"namespace": MARK_NAMESPACE, "object": f"authzbench-dataset-{dataset_hash}",
                "relation": MARK_RELATION, "subject_id": MARK_SUBJECT}
        self._patch([{"action": "insert", "relation_tuple": mark}])

    def _delete(self, params: dict[str, str]) -> None:
        """Every tuple matching the query (Keto deletes by query)."""
        self._call(self.write_api, "DELETE", f"{TUPLES_PATH}?{urlencode(params)}")

    def drop(self) -> None:
        """Every tuple of every namespace deleted (the mark first), so the next load starts empty."""
        self._delete({"namespace": MARK_NAMESPACE, "relation": MARK_RELATION, "subject_id": MARK_SUBJECT})
        for ns in NAMESPACES:
            self._delete({"namespace": ns})

    # operations ----------------------------------------------------------------------------------
    def check(self, user: int, perm: str, resource: int) -> bool:
        """GET /relation-tuples/check/openapi: 200 and {"allowed": ...} either way (/check: 403 for no)."""
        obj_type, relation = permission_target("keto", "rebac", perm)
        url = (f"/relation-tuples/check/openapi?namespace={OBJECT_NAMESPACE[obj_type]}&object={resource}"
               f"&relation={relation}&subject_id={user}")
        return bool(self._call(self.read, "GET", url)["allowed"])

    def lookup_resources(self, user: int, perm: str) -> Iterable[int]:
        permission_target("keto", "rebac", perm)  # an unknown permission is still named as such
        raise LookupUnsupported("keto: Ory Keto has no reverse lookup (its read API offers check, expand and "
                                "list relation tuples: none lists the objects a subject may reach)")

    def write(self, rel: Rel) -> None:
        """Keto keeps no unique key on tuples: an insert of a present tuple adds a copy, and a delete removes
        every copy, so a write then a delete leaves the set as TOUCH and delete-if-present would."""
        t = tuple_json(rel.relation, rel.object, rel.subject)
        self._patch([{"action": "insert", "relation_tuple": t}])
        self.rows_touched += 1  # one tuple; Keto computes permissions at read time

    def delete(self, rel: Rel) -> None:
        self._delete(query_params(tuple_json(rel.relation, rel.object, rel.subject)))
        self.rows_touched += 1

    def baseline_roundtrip(self) -> None:
        """GET /version on the read API: no datastore read."""
        self._call(self.read, "GET", "/version")

    def footprint(self) -> int:
        """Bytes of Keto's tables in its PostgreSQL database (0 when that is not reachable from here)."""
        return schema_bytes(self.endpoint.get("datastore_dsn"), self.endpoint.get("datastore_password"))


def _why(e: Exception) -> str:
    """One line: the server's reason when it sent one."""
    body = getattr(e, "body", None)
    if body:
        try:
            err = json.loads(body).get("error", {})
            return f"{getattr(e, 'status', '')} {err.get('reason') or err.get('message', '')}"[:300]
        except (ValueError, AttributeError):
            pass
    return f"{type(e).__name__}: {(str(e).splitlines() or [''])[0][:200]}"
