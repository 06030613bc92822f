"""MongoDB over pymongo: resource documents with embedded ACLs, users with their group closure
(mongo.json). Natively it runs against FerretDB 1.24 on PostgreSQL (the only MongoDB-wire
server obtainable here), which is labeled as such and never compared as MongoDB.

Reads (the default, options["query"] = "expanded"): each resource also embeds the expanded user sets
`managers` / `viewers`, so
- check  = ONE query: find_one({_id: r, viewers: u}) (both filters indexed);
- lookup = ONE read by _id: the user's `grants` document of that permission (every resource id in one
  array). find({viewers: u}) is a multikey index scan on MongoDB, but FerretDB 1.24 evaluates it over
  the whole collection (15 s per heavy lookup at baseline-v1, every lookup phase cut at 60 s);
  options["lookup"] = "documents" restores it.
options["query"] = "acl" answers from the ACL arrays instead (the textbook document model): read the
user's closure first, then find_one({_id: r, $or: [...]}) / find({$or: [...]}): two queries per op, and
on FerretDB the $or lookup is a full collection scan (it pushes down only top-level equality).
Measured on baseline (see the class constants): the expanded form is what makes lookups indexed on
FerretDB, and saves the user read on every check.

Writes update the relationship arrays, then recompute exactly the (resource, user) pairs the edge can
affect (model_rules.reach) from the documents, and write only the pairs whose state changed.

This module is the adapter (connection, schema, reads, writes); its parts sit beside it, named for the
backend as scylla's are: mongo_load.py (the bulk load and the index build) and mongo_grants.py (the
`grants` documents: their ids, their load, their write updates).
"""

from __future__ import annotations

import contextlib
import functools
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, ClassVar

from authzbench.backends import closure_maintenance as maintenance
from authzbench.backends.base import Backend, BackendOptions, ServerInfo
from authzbench.backends.document_layout import ACL_FIELDS, SOURCE
from authzbench.backends.locks import EXPIRE_S, spin_lock
from authzbench.core.errors import BackendUnavailable, UserError
from authzbench.schema.model import PERMISSIONS, REBAC_RELATIONS, Relationship
from authzbench.schema.model_rules import Reach, holds, walk
from authzbench.systems.mongo.grants import grant_id, grant_updates
from authzbench.systems.mongo.load import COLLECTIONS, BulkLoad

FERRETDB_LABEL = "FerretDB 1.24 (MongoDB wire protocol) — not MongoDB performance"
FERRETDB_IN_FLIGHT = 4  # single-update commands in flight on FerretDB (see MongoBackend._bulk)
MONGO_BULK = 1000  # updates per bulk_write on MongoDB (pymongo splits at its message size limit anyway)


def _heartbeat_timeout_is_a_timeout(fn: Callable) -> Callable:
    """pymongo cancels every op in flight (_OperationCancelled) when its monitor's heartbeat times out
    (monitor.py resets the pool with interrupt_connections only on a NetworkTimeout): the server stopped
    answering, so that op ended by a timeout, as its neighbours did by timeoutMS (seen 1 of ~10 ops
    under SIGSTOP), not by an error of its own."""
    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        from pymongo.errors import AutoReconnect

        try:
            return fn(*args, **kwargs)
        except AutoReconnect as e:
            if type(e).__name__ != "_OperationCancelled":
                raise
            raise TimeoutError("mongo: op cancelled by pymongo after the server's heartbeat timed out") from e
    return wrapper


def _check_perm(perm: str) -> None:
    if perm not in PERMISSIONS:
        raise UserError(f"unknown permission {perm!r}; valid: {', '.join(PERMISSIONS)}")


@dataclass(frozen=True)
class MongoOptions(BackendOptions):
    query: str = "expanded"  # "expanded": the precomputed user sets; "acl": the ACL arrays (module docstring)
    # "grants": one read of the user's grants document; "documents": find({viewers: u})
    lookup: str = "grants"

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.query not in ("expanded", "acl"):
            raise UserError(f"mongo: unknown query mode {self.query!r}; valid: expanded, acl")


class MongoBackend(BulkLoad, Backend):
    Options = MongoOptions
    name: ClassVar[str] = "mongo"
    worker_modules = ("pymongo",)
    counts_rows = True
    batch_docs: ClassVar[int] = 2000  # documents per unordered insert_many (pymongo splits at 48 MB anyway)
    # insert_many calls in flight while loading. FerretDB 1.24 at baseline, alternating in one session: 1 in
    # flight 18.8-20.3 s, 2 12.5-12.8 s, 3 12.4-12.8 s: the client builds and encodes while the server
    # inserts.
    insert_workers: ClassVar[int] = 2
    # ids per cursor batch: the heaviest baseline user's lookup in 1-2 batches
    lookup_batch: ClassVar[int] = 10000

    @classmethod
    def endpoint_from_url(cls, url: str) -> dict[str, Any]:
        return {"url": url, "engine": "mongodb"}

    @classmethod
    def endpoint_from_compose(cls, c: Any) -> dict[str, Any]:
        return {"url": f"mongodb://127.0.0.1:{c.port('mongo', 27017)}/", "engine": "mongodb"}

    # lifecycle ---------------------------------------------------------------------------------
    def connect(self) -> None:
        from pymongo import MongoClient
        from pymongo.errors import ConfigurationError, InvalidURI, PyMongoError

        url = self.endpoint.get("url") or ""
        self.query_mode = self.options.get("query", "expanded")
        if self.query_mode not in ("expanded", "acl"):
            raise UserError(f"mongo: unknown query mode {self.query_mode!r}; valid: expanded, acl")
        timeout = self.options.get("timeout_s")
        kwargs: dict[str, Any] = {
            "serverSelectionTimeoutMS": 3000, "connectTimeoutMS": 3000, "appname": "authzbench"}
        if timeout:
            kwargs["timeoutMS"] = int(float(timeout) * 1000)  # client-side operation timeout (CSOT)
        try:
            self.client = MongoClient(url, **kwargs)
        except (InvalidURI, ConfigurationError, ValueError) as e:
            raise UserError(f"mongo: invalid URL {url!r}: {e}") from None
        try:
            self.build_info = self.client.admin.command("buildInfo")
        except PyMongoError as e:
            self.client.close()
            msg = str(e).split(", Timeout:")[0].split("\n")[0]
            raise BackendUnavailable(f"mongo: cannot reach a MongoDB server at {url}: {type(e).__name__}: "
                                     f"{msg:.200}") from None
        self.ferretdb = "ferretdbVersion" in self.build_info or self.endpoint.get("engine") == "ferretdb"
        self.db = self.client[self.endpoint.get("database", "authzbench")]
        self.res, self.users, self.groups, self.orgs = (self.db[c] for c in COLLECTIONS[:4])
        self.grants = self.db["grants"]
        self._pool = None  # FerretDB's update threads, made on the first multi-document write
        self.lookup_mode = self.options.get("lookup", "grants")
        if self.lookup_mode not in ("grants", "documents"):
            raise UserError(f"mongo: unknown lookup mode {self.lookup_mode!r}; valid: grants, documents")

    def close(self) -> None:
        if getattr(self, "_pool", None) is not None:
            self._pool.shutdown(cancel_futures=True)
            self._pool = None
        if getattr(self, "client", None) is not None:
            self.client.close()
            self.client = None

    def server_info(self) -> ServerInfo:
        v = str(self.build_info.get("version", "unknown"))
        if self.ferretdb:
            fv = str(self.build_info.get("ferretdbVersion", self.endpoint.get("ferretdb_version", "unknown")))
            notes = [f"reports MongoDB {v} compatibility", "query pushdown: top-level equality only; GIN "
                     "expression indexes made by the backend in FerretDB's PostgreSQL"]
            if self.endpoint.get("pg_version"):
                notes.append(f"storage: PostgreSQL {str(self.endpoint['pg_version']).split()[0]}")
            return ServerInfo("FerretDB", fv, FERRETDB_LABEL, stands_in_for="MongoDB", notes=notes)
        major_minor = ".".join(v.split(".")[:2])
        return ServerInfo("MongoDB", v, f"MongoDB {major_minor}")

    # schema and data ---------------------------------------------------------------------------
    def create_schema(self) -> None:
        existing = set(self.db.list_collection_names())
        for c in COLLECTIONS:
            if c not in existing:
                self.db.create_collection(c)

    def _pg(self):
        import psycopg

        try:
            return psycopg.connect(self.endpoint["pg_dsn"], password=self.endpoint.get("pg_password"),
                                   autocommit=True, connect_timeout=10)
        except psycopg.Error as e:
            raise BackendUnavailable(
                f"mongo: cannot reach FerretDB's PostgreSQL at {self.endpoint['pg_dsn']}: "
                f"{str(e).splitlines()[0]:.200}") from None

    def loaded_hash(self) -> str | None:
        doc = self.db["meta"].find_one({"_id": "dataset"})
        return doc.get("hash") if doc else None

    def mark_loaded(self, dataset_hash: str) -> None:
        self.db["meta"].replace_one({"_id": "dataset"}, {"_id": "dataset", "hash": dataset_hash}, upsert=True)

    # operations ----------------------------------------------------------------------------------
    @_heartbeat_timeout_is_a_timeout
    def check(self, user: int, perm: str, resource: int) -> bool:
        _check_perm(perm)
        if self.query_mode == "acl":
            ors = self._acl_or(user, perm)
            return bool(ors) and self.res.find_one({"_id": resource, "$or": ors}, {"_id": 1}) is not None
        field = "managers" if perm == "manage" else "viewers"
        return self.res.find_one({"_id": resource, field: user}, {"_id": 1}) is not None

    @_heartbeat_timeout_is_a_timeout
    def lookup_resources(self, user: int, perm: str) -> Iterable[int]:
        _check_perm(perm)
        if self.query_mode == "acl":
            ors = self._acl_or(user, perm)
            if not ors:
                return []
            flt: dict[str, Any] = {"$or": ors}
        elif self.lookup_mode == "grants":
            doc = self.grants.find_one({"_id": grant_id(user, perm)}, {"resources": 1})
            return doc["resources"] if doc else []
        else:
            flt = {"managers" if perm == "manage" else "viewers": user}
        return [d["_id"] for d in self.res.find(flt, {"_id": 1}, batch_size=self.lookup_batch)]

    def _acl_or(self, user: int, perm: str) -> list[dict[str, Any]]:
        """The ACL-array form of a permission for one user (one read of the user's closure)."""
        u = self.users.find_one({"_id": user}, {"groups": 1, "admin_orgs": 1}) or {}
        ors: list[dict[str, Any]] = [{"manager_users": user}]
        if u.get("admin_orgs"):
            ors.append({"orgs": {"$in": u["admin_orgs"]}})
        if u.get("groups"):
            ors.append({"manager_groups": {"$in": u["groups"]}})
        if perm == "view":
            ors.append({"viewer_users": user})
            if u.get("groups"):
                ors.append({"viewer_groups": {"$in": u["groups"]}})
        return ors

    def baseline_roundtrip(self) -> None:
        self.client.admin.command("ping")

    # writes --------------------------------------------------------------------------------------
    @_heartbeat_timeout_is_a_timeout
    def write(self, rel: Relationship) -> None:
        self._apply(rel, insert=True)

    @_heartbeat_timeout_is_a_timeout
    def delete(self, rel: Relationship) -> None:
        self._apply(rel, insert=False)

    def _apply(self, rel: Relationship, *, insert: bool) -> None:
        """The edge, then what it changes (closure_maintenance): the relationship arrays; for group edges,
        the closure of the users the edge reaches; the expanded managers/viewers of the pairs the edge can
        change (model_rules.reach), read back from the documents after the change. The resources are found
        while the edge is present (after an insert, before a delete), so they cover the state before and
        after."""
        if rel.relation not in SOURCE:
            raise UserError(f"unknown relation {rel.relation!r}; valid: {', '.join(REBAC_RELATIONS)}")
        maintenance.apply(self, rel, insert=insert)

    def group_lock(self) -> contextlib.AbstractContextManager:
        """A lock document (locks.py): one insert wins; one left by a writer that died is taken over."""
        from pymongo.errors import DuplicateKeyError

        meta, lock = self.db["meta"], {"_id": "group_write_lock"}

        def take() -> bool:
            try:
                meta.insert_one({**lock, "at": time.time()})
                return True
            except DuplicateKeyError:
                held = meta.find_one(lock) or {}
                if time.time() - float(held.get("at", time.time())) > EXPIRE_S:
                    meta.delete_one({**lock, "at": held["at"]})
                return False

        return spin_lock(take, lambda: meta.delete_one(lock), "mongo")

    # closure_maintenance.Store: the storage calls -------------------------------------------------
    keeps_closures = True

    def write_edge(self, rel: Relationship, *, insert: bool) -> None:
        o, s = int(rel.object), int(rel.subject)
        op = "$addToSet" if insert else "$pull"
        for coll, id_side, field, val_side in SOURCE[rel.relation]:
            ends = {"object": o, "subject": s}
            # upsert on insert: an id seen for the first time (e.g. the runner's scratch users) gets a
            # document
            self.db[coll].update_one({"_id": ends[id_side]}, {op: {field: ends[val_side]}}, upsert=insert)
            self.rows_touched += 1

    def find_resources(self, rc: Reach) -> list[dict[str, Any]]:
        """Filters selecting the resources of a Reach (a group's ancestors walked through `parents`)."""
        if rc.resources == "resource":
            return [{"_id": rc.resource_arg}]
        if rc.resources == "org_resources":
            return [{"orgs": rc.resource_arg}]
        if rc.resources == "granted_via_ancestors":
            return [{f: g} for g in sorted(walk([rc.resource_arg], self.parents))
                    for f in ("manager_groups", "viewer_groups")]
        return []

    def find_users(self, rc: Reach) -> dict[str, Any] | None:
        """Filter selecting the users of a Reach: membership(g) = users whose closure holds g."""
        field = {"user": "_id", "membership": "groups", "org_admins": "admin_orgs"}.get(rc.users)
        return {field: rc.user_arg} if field else None

    def parents(self, groups: list[int]) -> list[int]:
        """The groups right above `groups` (one read of `parents` per group)."""
        return [p
                for x in groups
                for p in (self.groups.find_one({"_id": x}, {"parents": 1}) or {}).get("parents", ())]

    def user_states(self, users: dict[str, Any], closure: maintenance.Closure, *, refresh: bool
                    ) -> dict[int, maintenance.UserState]:
        """refresh: groups = closure(member_of ∪ manager_of) per selected user, written only if changed;
        otherwise the stored closures (a user with no document: no groups)."""
        if not refresh:
            docs = {d["_id"]: d for d in self.users.find(users, {"groups": 1, "admin_orgs": 1})}
            if "_id" in users and not docs:
                docs = {users["_id"]: {"_id": users["_id"]}}
        else:
            docs, ops = {}, []
            for d in self.users.find(users, {"member_of": 1, "manager_of": 1, "groups": 1, "admin_orgs": 1}):
                groups = closure([*d.get("member_of", ()), *d.get("manager_of", ())])
                if groups != sorted(d.get("groups", ())):
                    ops.append(({"_id": d["_id"]}, {"$set": {"groups": groups}}))
                docs[d["_id"]] = {**d, "groups": groups}
            self._bulk(self.users, ops)
        return {
            u: maintenance.UserState(d.get("groups", ()), d.get("admin_orgs", ())) for u, d in docs.items()}

    def rewrite_pairs(self, resources: list[dict[str, Any]], users: dict[int, maintenance.UserState]) -> None:
        """Only differing pairs are written to the resource documents ($addToSet / $pullAll) and to the
        users' grants documents."""
        proj = {f: 1 for f in (*ACL_FIELDS, "managers", "viewers")}
        docs: dict[int, dict[str, Any]] = {}
        for f in resources:
            for d in self.res.find(f, proj):
                docs[d["_id"]] = d
        ops: list[tuple[dict[str, Any], dict[str, Any]]] = []
        # (user, perm, resource, granted): the grants documents
        changes: list[tuple[int, str, int, bool]] = []
        fields = {"manage": "managers", "view": "viewers"}
        for r, d in docs.items():
            have = {p: set(d.get(f, ())) for p, f in fields.items()}
            changed = maintenance.changes({f: set(d.get(f, ())) for f in ACL_FIELDS}, lambda u, have=have: (
                maintenance.stored_state(u in have["manage"] and u in have["view"], u in have["view"],
                                         u in have["manage"])), users)
            add: dict[str, list[int]] = {"manage": [], "view": []}
            rm: dict[str, list[int]] = {"manage": [], "view": []}
            for u, _old, new in changed:
                for perm in ("manage", "view"):
                    if holds(new, perm) != (u in have[perm]):
                        (add if holds(new, perm) else rm)[perm].append(u)
            changes += [(u, p, r, True) for p, us in add.items() for u in us]
            changes += [(u, p, r, False) for p, us in rm.items() for u in us]
            adds = {fields[p]: {"$each": v} for p, v in add.items() if v}
            rms = {fields[p]: v for p, v in rm.items() if v}
            if adds:
                ops.append(({"_id": r}, {"$addToSet": adds}))
            if rms:  # a second update: one update cannot both add to and pull from the same array
                ops.append(({"_id": r}, {"$pullAll": rms}))
        self._bulk(self.res, ops)
        # a user's first grant makes the document
        self._bulk(self.grants, grant_updates(changes), upsert=True)

    def finish(self) -> None:
        pass

    def _bulk(self, coll, ops: list[tuple[dict[str, Any], dict[str, Any]]], upsert: bool = False) -> None:
        """Unordered bulk_write on MongoDB. On FerretDB 1.24 a bulk of 50 or more updates never returns and
        takes the whole server down (49 updates: 0.087 s; /work/shared/REFERENCE-RERUN.md), so there every
        update is its own single-statement command, FERRETDB_IN_FLIGHT at a time: bulks of 40 were no faster
        than one update a command (15.4 vs 15.9 ms per update at baseline, 1,000-element arrays), 4 in
        flight were (9.8 ms). rows_touched advances as updates complete (the runner reads it as progress)."""
        if not ops:
            return
        if not self.ferretdb:
            from pymongo import UpdateOne

            for i in range(0, len(ops), MONGO_BULK):
                coll.bulk_write(
                    [UpdateOne(f, u, upsert=upsert) for f, u in ops[i : i + MONGO_BULK]], ordered=False)
                self.rows_touched += len(ops[i:i + MONGO_BULK])
            return
        if len(ops) == 1:
            coll.update_one(*ops[0], upsert=upsert)
            self.rows_touched += 1
            return
        if self._pool is None:
            from concurrent.futures import ThreadPoolExecutor

            self._pool = ThreadPoolExecutor(FERRETDB_IN_FLIGHT, thread_name_prefix="ferretdb-update")
        # One document's updates stay in one task, in order: FerretDB applies an update as read-modify-write,
        # and two of them on one document at once could lose one.
        by_doc: dict[str, list[tuple[dict[str, Any], dict[str, Any]]]] = {}
        for f, u in ops:
            by_doc.setdefault(repr(f), []).append((f, u))

        def apply(doc_ops: list[tuple[dict[str, Any], dict[str, Any]]]) -> int:
            for f, u in doc_ops:
                coll.update_one(f, u, upsert=upsert)  # each bounded by the client's timeoutMS
            return len(doc_ops)

        futures = [self._pool.submit(apply, doc_ops) for doc_ops in by_doc.values()]
        try:
            for fut in futures:
                self.rows_touched += fut.result()
        finally:
            for fut in futures:
                fut.cancel()  # after an error, the updates not yet sent are not sent

    # footprint and drop ----------------------------------------------------------------------------
    def footprint(self) -> int:
        """Bytes on disk: on FerretDB, its PostgreSQL tables and indexes of this database (dbStats there is
        an estimate); on MongoDB, dbStats storageSize + indexSize."""
        if self.ferretdb and self.endpoint.get("pg_dsn"):
            with self._pg() as conn:
                row = conn.execute("SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c "
                                   "JOIN pg_namespace n ON n.oid = c.relnamespace "
                                   "WHERE n.nspname = %s AND c.relkind = 'r'", (self.db.name,)).fetchone()
                return int(row[0]) if row else 0
        st = self.db.command("dbStats")
        return int(st.get("storageSize", 0)) + int(st.get("indexSize", 0))

    def drop(self) -> None:
        self.client.drop_database(self.db.name)
