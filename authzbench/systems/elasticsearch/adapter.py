"""Elasticsearch over elasticsearch-py: one document per resource with its ACL denormalized as the expanded
user sets `managers` (manage) and `viewers` (view-only: view minus manage; elasticsearch.json says why), plus
the user, group and org documents the write path needs. Natively a real Elasticsearch 7.17.29 OSS node; under
compose Elasticsearch 9.2.1 with TLS and basic auth.

- check  = ONE filtered search: ids [r] + term managers u (view: managers or viewers), size 0,
  terminate_after 1, no request cache;
- lookup = a point-in-time stream: open a PIT, pages of `lookup_page` ids sorted by `id` continued with
  search_after until a short page, close the PIT; every id, never capped at index.max_result_window;
- load   = bulk requests (bulk_threads in flight) into indices with refresh disabled and no replicas; build()
  restores both and refreshes (its time is reported apart).
- write / delete = the relationship arrays, then exactly the (resource, user) pairs the edge can affect,
  recomputed from the documents (as the mongo backend does), each document rewritten only when it
  changed, with optimistic concurrency (if_seq_no; no scripts: the OSS jars have no painless). Then the
  touched indices are refreshed, so the change is visible to the next search when write() returns
  (refresh=wait_for would wait up to refresh_interval, 1 s, per write).

Client: elasticsearch 9.5.1 (pyproject) talks to both servers. It sends `compatible-with=9` media types;
7.17 accepts them for every call used here (checked against the native node: info, bulk, mget, index,
search with PIT, count, settings, stats), and the test suite runs this module against 7.17.

This module is the adapter (connection, schema, reads, writes); its bulk load (documents, bulk requests,
build()) is a mixin beside it, elasticsearch_load.py, named for the backend as scylla's parts are.
"""

from __future__ import annotations

import contextlib
import json
import re
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from authzbench.backends import closure_maintenance as maintenance
from authzbench.backends.base import Backend, BackendOptions, ServerInfo
from authzbench.backends.document_layout import ACL_FIELDS, SOURCE
from authzbench.backends.locks import EXPIRE_S, spin_lock
from authzbench.core.errors import BackendUnavailable, UserError
from authzbench.schema.model import PERMISSIONS, REBAC_RELATIONS, Relationship
from authzbench.schema.model_rules import Reach, walk
from authzbench.systems.elasticsearch.load import BulkLoad

SCHEMA_FILE = Path(__file__).resolve().parent / "elasticsearch.json"
INDICES = ("resources", "users", "groups", "orgs", "meta")
NATIVE_LABEL = "Elasticsearch {v} OSS (native node from Maven Central jars)"
CONFLICT_RETRIES = 20  # a concurrent writer rewrote the document between our read and write: read again


def _perm_query(perm: str, user: int) -> dict[str, Any]:
    """manage: u in managers; view: u in managers or in viewers (view-only users)."""
    if perm not in PERMISSIONS:
        raise UserError(f"unknown permission {perm!r}; valid: {', '.join(PERMISSIONS)}")
    if perm == "manage":
        return {"term": {"managers": user}}
    return {"bool": {"should": [{"term": {"managers": user}}, {"term": {"viewers": user}}]}}


@dataclass(frozen=True)
class ElasticsearchOptions(BackendOptions):
    bulk_docs: int | None = None  # documents per bulk request (None: ElasticsearchBackend.bulk_docs)
    bulk_threads: int | None = None  # bulk requests in flight (None: ElasticsearchBackend.bulk_threads)
    lookup_page: int | None = None  # ids per page of a lookup stream (None: ElasticsearchBackend.lookup_page)
    elasticsearch_heap: str | None = None  # native provisioner: the node's JVM heap, default 1g


class ElasticsearchBackend(BulkLoad, Backend):
    Options = ElasticsearchOptions
    name: ClassVar[str] = "elasticsearch"
    worker_modules = ("elasticsearch",)
    counts_rows = True
    # bulk requests: 3 in flight x 250 documents (~170 KB per request on baseline). Baseline on a freshly
    # started node (cold JIT), load + build, on the shared 2-core machine: 3x250 31-44k rels/s, 2x250
    # 25-40k, 3x500 24-35k, 2x500 17-38k, 4x1000 31k; the node's CPU is the limit. options: bulk_docs,
    # bulk_threads.
    bulk_docs: ClassVar[int] = 250
    bulk_threads: ClassVar[int] = 3
    lookup_page: ClassVar[int] = 10000  # ids per page of a lookup stream (options: lookup_page)

    @classmethod
    def endpoint_from_url(cls, url: str) -> dict[str, Any]:
        """https://[user:password@]host:port[/?ca_certs=/path/ca.crt]; the user, password and CA file may
        also come from AUTHZBENCH_ELASTICSEARCH_USERNAME / _PASSWORD / _CA_CERTS (keeps the password out of
        argv)."""
        import os
        from urllib.parse import parse_qs, unquote, urlsplit, urlunsplit

        u = urlsplit(url)
        host = u.hostname or ""
        netloc = f"[{host}]" if ":" in host else host
        if u.port:
            netloc += f":{u.port}"
        ep: dict[str, Any] = {"url": urlunsplit((u.scheme, netloc, u.path.rstrip("/"), "", ""))}
        q = {k: v[-1] for k, v in parse_qs(u.query).items()}
        user = unquote(u.username) if u.username else os.environ.get("AUTHZBENCH_ELASTICSEARCH_USERNAME")
        password = unquote(u.password) if u.password else os.environ.get("AUTHZBENCH_ELASTICSEARCH_PASSWORD")
        ca = q.get("ca_certs") or os.environ.get("AUTHZBENCH_ELASTICSEARCH_CA_CERTS")
        if password and not user:
            user = "elastic"  # the built-in superuser whose password ELASTIC_PASSWORD sets
        if user:
            ep["username"] = user
        if password:
            ep["password"] = password
        if ca:
            ep["ca_certs"] = ca
        if q.get("index_prefix"):
            ep["index_prefix"] = q["index_prefix"]
        return ep

    @classmethod
    def endpoint_from_compose(cls, c: Any) -> dict[str, Any]:
        """TLS + basic auth: the CA exists only inside the node's certs volume, copied out once it is up.
        Plain HTTP where the file turns security off (the OSS node of --local-images has none)."""
        env = c.environment("elasticsearch")
        if str(env.get("xpack.security.enabled")).lower() == "false":
            return {"url": f"http://127.0.0.1:{c.port('elasticsearch', 9200)}"}
        return {"url": f"https://127.0.0.1:{c.port('elasticsearch', 9200)}", "username": "elastic",
                "password": c.environment("elasticsearch")["ELASTIC_PASSWORD"],
                "ca_certs": c.copy_from("elasticsearch", "/usr/share/elasticsearch/config/certs/ca/ca.crt")}

    # lifecycle ---------------------------------------------------------------------------------
    def connect(self) -> None:
        from elasticsearch import (
            ApiError,
            AuthenticationException,
            AuthorizationException,
            Elasticsearch,
            TransportError,
            UnsupportedProductError,
        )

        ep = self.endpoint
        url = str(ep.get("url") or "")
        if not re.match(r"^https?://[^/]+", url):
            raise UserError(f"elasticsearch: invalid URL {self._mask(url)!r} (expected http(s)://host:port)")
        prefix = str(ep.get("index_prefix", "authzbench"))
        if not re.fullmatch(r"[a-z][a-z0-9_]{0,63}", prefix):
            raise UserError(f"elasticsearch: invalid index prefix {prefix!r} (lowercase letters, digits, _)")
        self.ix = {n: f"{prefix}_{n}" for n in INDICES}
        self.timeout = float(self.options.get("timeout_s") or 60)
        self.bulk_docs = int(self.options.get("bulk_docs") or type(self).bulk_docs)
        self.bulk_threads = int(self.options.get("bulk_threads") or type(self).bulk_threads)
        self.lookup_page = int(self.options.get("lookup_page") or type(self).lookup_page)
        kwargs: dict[str, Any] = {
            "request_timeout": self.timeout, "max_retries": 0, "retry_on_timeout": False}
        if ep.get("username") or ep.get("password"):
            kwargs["basic_auth"] = (str(ep.get("username") or "elastic"), str(ep.get("password") or ""))
        if ep.get("ca_certs"):
            if not Path(ep["ca_certs"]).is_file():
                raise UserError(f"elasticsearch: CA file {ep['ca_certs']} not found")
            kwargs["ca_certs"] = str(ep["ca_certs"])
        try:
            self.es = Elasticsearch(url, **kwargs)
        except ValueError as e:
            raise UserError(
                f"elasticsearch: invalid endpoint {self._mask(url)!r}: {self._mask(str(e))}") from None
        try:
            self.root = self.es.info()
        except (AuthenticationException, AuthorizationException) as e:
            self.close()
            raise UserError(f"elasticsearch: {url} rejected the credentials of user "
                            f"{ep.get('username') or '(none)'!r} (HTTP {e.meta.status})") from None
        except UnsupportedProductError as e:
            self.close()
            raise BackendUnavailable(
                f"elasticsearch: {url} is not Elasticsearch: {self._mask(str(e))[:200]}") from None
        except (TransportError, ApiError) as e:
            self.close()
            msg = self._mask(" ".join(str(getattr(e, "message", None) or e).split()))  # str() drops the cause
            raise BackendUnavailable(
                f"elasticsearch: cannot reach {url}: {type(e).__name__}: {msg:.200}") from None

    def _mask(self, text: str) -> str:
        """Never show a credential: the password, and user:password@ in any URL."""
        text = re.sub(r"//[^/@\s]+:[^/@\s]*@", "//***@", text)
        pw = str(self.endpoint.get("password") or "")
        return text.replace(pw, "***") if pw else text

    def close(self) -> None:
        if getattr(self, "es", None) is not None:
            self.es.close()
            self.es = None

    def server_info(self) -> ServerInfo:
        v = self.root["version"]
        number, flavor = str(v["number"]), str(v.get("build_flavor", ""))
        notes = [f"Lucene {v.get('lucene_version', '?')}", f"build flavor {flavor or '?'}"]
        if self.endpoint.get("distribution") == "maven-jars":
            return ServerInfo("Elasticsearch", number, NATIVE_LABEL.format(v=number),
                              notes=[*notes, "modules transport-netty4, mapper-extras, reindex, parent-join; "
                                     "no security (loopback only)"])
        return ServerInfo("Elasticsearch", number, f"Elasticsearch {number}", notes=notes)

    # schema and data ---------------------------------------------------------------------------
    def create_schema(self) -> None:
        spec = json.loads(SCHEMA_FILE.read_text())["indices"]
        for n in INDICES:
            if not self.es.indices.exists(index=self.ix[n]):
                self.es.indices.create(
                    index=self.ix[n], settings=spec[n]["settings"], mappings=spec[n]["mappings"])

    def loaded_hash(self) -> str | None:
        from elasticsearch import NotFoundError

        try:
            return self.es.get(index=self.ix["meta"], id="dataset")["_source"].get("hash")
        except NotFoundError:  # no index or no document: nothing complete is loaded
            return None

    def mark_loaded(self, dataset_hash: str) -> None:
        self.es.index(index=self.ix["meta"], id="dataset", document={"hash": dataset_hash}, refresh=True)

    # operations ----------------------------------------------------------------------------------
    def check(self, user: int, perm: str, resource: int) -> bool:
        q = _perm_query(perm, int(user))
        # request_cache off: a size-0 search is otherwise answered from the shard request cache when
        # the sampler repeats an input, which would measure the cache, not the check.
        r = self.es.search(index=self.ix["resources"], size=0, terminate_after=1, track_total_hits=True,
                           request_cache=False, filter_path="hits.total",
                           query={"bool": {"filter": [{"ids": {"values": [str(int(resource))]}},
                                                      q]}})
        return r["hits"]["total"]["value"] > 0

    def lookup_resources(self, user: int, perm: str) -> Iterable[int]:
        return self._stream_ids(self.ix["resources"], _perm_query(perm, int(user)))

    def _stream_ids(self, index: str, query: dict[str, Any]) -> list[int]:
        """Every matching id: pages sorted by `id` in a point-in-time (one consistent view however many
        pages), continued with search_after. Only `sort` comes back (no _source, no stored fields)."""
        pit = self.es.open_point_in_time(index=index, keep_alive="1m")["id"]
        out: list[int] = []
        try:
            after: list[Any] | None = None
            while True:
                body: dict[str, Any] = {"size": self.lookup_page, "query": {"bool": {"filter": [query]}},
                                        "sort": [{"id": "asc"}], "_source": False, "stored_fields": "_none_",
                                        "track_total_hits": False, "pit": {"id": pit, "keep_alive": "1m"}}
                if after is not None:
                    body["search_after"] = after
                r = self.es.search(body=body, filter_path="pit_id,hits.hits.sort")
                pit = r.get("pit_id", pit)
                hits = r.get("hits", {}).get("hits", [])
                out += [h["sort"][0] for h in hits]
                if len(hits) < self.lookup_page:
                    return out
                after = hits[-1]["sort"]  # [id, _shard_doc]: the PIT adds the tiebreaker
        finally:
            self.es.options(ignore_status=404).close_point_in_time(id=pit)

    def baseline_roundtrip(self) -> None:
        self.es.info()

    # writes --------------------------------------------------------------------------------------
    def write(self, rel: Relationship) -> None:
        self._apply(rel, insert=True)

    def delete(self, rel: Relationship) -> None:
        self._apply(rel, insert=False)

    def _apply(self, rel: Relationship, *, insert: bool) -> None:
        """The edge, then what it changes (closure_maintenance): the relationship arrays; for group edges,
        the closure of the users the edge reaches; managers/viewers of the affected (resource, user) pairs,
        recomputed from the documents after the change; a refresh of what was touched. Documents are read
        by realtime GET/mget (they see this write's own changes); the searches only read fields no earlier
        step of the same write changed, and every earlier write was refreshed before it returned."""
        if rel.relation not in SOURCE:
            raise UserError(f"unknown relation {rel.relation!r}; valid: {', '.join(REBAC_RELATIONS)}")
        self._touched: set[str] = set()
        maintenance.apply(self, rel, insert=insert)

    def group_lock(self) -> contextlib.AbstractContextManager:
        """A lock document (locks.py): create fails while it exists; one left by a writer that died is
        taken over. Optimistic concurrency guards one document, not the set a group write rewrites."""
        from elasticsearch import ConflictError, NotFoundError

        lock = {"index": self.ix["meta"], "id": "group_write_lock"}

        def take() -> bool:
            try:
                self.es.create(**lock, document={"at": time.time()})
                return True
            except ConflictError:
                with contextlib.suppress(NotFoundError, ConflictError):  # released or taken over meanwhile
                    held = self.es.get(**lock)
                    if time.time() - float(held["_source"].get("at", time.time())) > EXPIRE_S:
                        self.es.delete(
                            **lock, if_seq_no=held["_seq_no"], if_primary_term=held["_primary_term"])
                return False

        return spin_lock(take, lambda: self.es.options(ignore_status=404).delete(**lock), "elasticsearch")

    # closure_maintenance.Store: the storage calls -------------------------------------------------
    keeps_closures = True

    def write_edge(self, rel: Relationship, *, insert: bool) -> None:
        o, s = int(rel.object), int(rel.subject)
        for index, id_side, field, val_side in SOURCE[rel.relation]:
            ends = {"object": o, "subject": s}
            doc_id, value = ends[id_side], ends[val_side]

            def edit(
                _id: int, src: dict[str, Any] | None, field: str = field, value: int = value) -> dict | None:
                cur = list((src or {}).get(field, ()))
                if insert:
                    return (None
                            if src is not None and value in cur
                            else {**(src or {}), field: sorted({*cur, value})})
                return ({**src, field: [x for x in cur if x != value]}
                        if src is not None and value in cur
                        else None)

            # a missing document on insert is created (e.g. the runner's scratch users): upsert semantics
            if self._modify(index, [doc_id], edit, create=insert):
                self._touched.add(index)

    def find_resources(self, rc: Reach) -> list[int]:
        """The resources of a Reach (model_rules), by search; a group's ancestors by realtime reads."""
        if rc.resources == "resource":
            return [rc.resource_arg]
        if rc.resources == "org_resources":
            return self._search_ids("resources", {"term": {"orgs": rc.resource_arg}})
        if rc.resources == "granted_via_ancestors":
            anc = sorted(walk([rc.resource_arg], self.parents))
            return self._search_ids("resources", {"bool": {"should": [
                {"terms": {"manager_groups": anc}}, {"terms": {"viewer_groups": anc}}]}})
        return []

    def find_users(self, rc: Reach) -> set[int] | None:
        """The users of a Reach: membership(g) = users whose closure holds g."""
        if rc.users == "user":
            return {rc.user_arg}
        field = {"membership": "groups", "org_admins": "admin_orgs"}.get(rc.users)
        return set(self._search_ids("users", {"term": {field: rc.user_arg}})) if field else None

    def parents(self, groups: list[int]) -> list[int]:
        """The groups right above `groups`, by realtime reads of `parents`."""
        return [p for d in self._mget("groups", groups).values() for p in d.get("parents", ())]

    def user_states(self, users: set[int], closure: maintenance.Closure, *, refresh: bool
                    ) -> dict[int, maintenance.UserState]:
        """refresh: groups = closure(member_of ∪ manager_of) per user, rewritten only where it changed;
        otherwise the stored closures."""
        if not refresh:
            docs = self._mget("users", sorted(users))
        else:
            docs = {}

            def edit(u: int, src: dict[str, Any] | None) -> dict | None:
                d = src or {}
                groups = closure([*d.get("member_of", ()), *d.get("manager_of", ())])
                docs[u] = {**d, "groups": groups}
                return None if groups == sorted(d.get("groups", ())) else {**d, "groups": groups}

            if self._modify("users", sorted(users), edit, create=False):
                self._touched.add("users")
        return {u: maintenance.UserState(set(d.get("groups", ())), set(d.get("admin_orgs", ())))
                for u, d in docs.items()}

    def rewrite_pairs(self, resources: list[int], users: dict[int, maintenance.UserState]) -> None:
        """Each resource document's managers / viewers (view-only) after the pairs' changes; a document is
        rewritten only if one of its pairs changed."""
        def edit(_r: int, src: dict[str, Any] | None) -> dict | None:
            if src is None:
                return None  # a resource with no document has no relationships: nothing to derive
            managers, viewers = set(src.get("managers", ())), set(src.get("viewers", ()))
            changed = maintenance.changes({f: set(src.get(f, ())) for f in ACL_FIELDS},
                           lambda u: maintenance.stored_state(u in managers and u not in viewers,
                                                              u in viewers and u not in managers,
                                                              u in managers and u in viewers), users)
            if not changed:
                return None
            for u, _old, new in changed:
                (managers.add if new == "manage" else managers.discard)(u)
                (viewers.add if new == "view" else viewers.discard)(u)  # viewers: view-only
            return {**src, "managers": sorted(managers), "viewers": sorted(viewers)}

        if self._modify("resources", resources, edit, create=False):
            self._touched.add("resources")

    def finish(self) -> None:
        if self._touched:
            self.es.indices.refresh(index=[self.ix[t] for t in sorted(self._touched)])

    def _search_ids(self, name: str, query: dict[str, Any]) -> list[int]:
        return self._stream_ids(self.ix[name], query)

    def _mget(self, name: str, ids: list[int]) -> dict[int, dict[str, Any]]:
        """Realtime reads by id; a missing document reads as {} (a user in no relationship)."""
        out: dict[int, dict[str, Any]] = {}
        for i in range(0, len(ids), 1000):
            r = self.es.mget(index=self.ix[name], ids=[str(x) for x in ids[i:i + 1000]])
            out.update({int(d["_id"]): (d["_source"] if d.get("found") else {}) for d in r["docs"]})
        return out

    def _modify(self, name: str, ids: list[int], edit: Callable[[int, dict[str, Any] | None], dict | None],
                *, create: bool = True) -> int:
        """Read-modify-write of documents by id with optimistic concurrency: edit(id, source or None) returns
        the new source, or None to leave the document alone. A document rewritten by someone else between
        the read and the write (409) is read and edited again. Returns how many documents were written."""
        index, pending, written = self.ix[name], list(dict.fromkeys(ids)), 0
        for _ in range(CONFLICT_RETRIES):
            if not pending:
                return written
            ops: list[dict[str, Any]] = []
            for i in range(0, len(pending), 1000):
                r = self.es.mget(index=index, ids=[str(x) for x in pending[i:i + 1000]])
                for d in r["docs"]:
                    src = d["_source"] if d.get("found") else None
                    new = edit(int(d["_id"]), src)
                    if new is None or (src is None and not create):
                        continue
                    new["id"] = int(d["_id"])
                    if src is None:
                        ops += [{"create": {"_index": index, "_id": d["_id"]}}, new]
                    else:
                        ops += [{"index": {"_index": index, "_id": d["_id"], "if_seq_no": d["_seq_no"],
                                           "if_primary_term": d["_primary_term"]}}, new]
            if not ops:
                return written
            items = self.es.bulk(operations=ops)["items"]
            pending = []
            for it in items:
                (_op, res), = it.items()
                if res["status"] in (200, 201):
                    written += 1
                    self.rows_touched += 1  # documents rewritten
                elif res["status"] == 409:
                    pending.append(int(res["_id"]))
                else:
                    raise BackendUnavailable(f"elasticsearch: write to {index}/{res['_id']} failed: "
                                             f"{json.dumps(res.get('error'))[:300]}")
        raise BackendUnavailable(f"elasticsearch: {len(pending)} documents of {index} kept changing under "
                                 f"{CONFLICT_RETRIES} read-modify-write attempts")

    # footprint and drop ----------------------------------------------------------------------------
    def footprint(self) -> int:
        """Bytes on disk of this backend's indices (store size of every shard copy)."""
        st = self.es.indices.stats(index=list(self.ix.values()), metric="store")
        return int(st["_all"]["total"]["store"]["size_in_bytes"])

    def drop(self) -> None:
        # explicit names: wildcard deletes are refused where action.destructive_requires_name is set (8.x+)
        self.es.indices.delete(index=list(self.ix.values()), ignore_unavailable=True)
