"""MongoDB over pymongo: resource documents with embedded ACLs, users with their group closure
(schema/mongo.json). Natively it runs against FerretDB 1.24 on PostgreSQL (the only MongoDB-wire
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
affect (see `_affected`) from the documents, and write only the pairs whose state changed.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from authzbench.backends.base import Backend, BuildStats, LoadStats, Progress, ServerInfo, no_progress
from authzbench.backends.document_layout import ACL_FIELDS, SOURCE
from authzbench.closure import csr, group_membership, permission_keys
from authzbench.dataset import Dataset
from authzbench.errors import BackendUnavailable, UserError
from authzbench.model import PERMISSIONS, REBAC_RELATIONS, Relationship

SCHEMA_FILE = Path(__file__).resolve().parents[2] / "schema" / "mongo.json"
FERRETDB_LABEL = "FerretDB 1.24 (MongoDB wire protocol) — not MongoDB performance"
COLLECTIONS = ("resources", "users", "groups", "orgs", "meta", "grants")


def grant_id(user: int, perm: str) -> int:
    """_id of a user's grants document for one permission (an int: FerretDB pushes _id equality down)."""
    return user * 2 + (perm == "manage")


def grant_updates(changes: Iterable[tuple[int, str, int, bool]]) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """What the write path must apply to `grants` for changed (user, perm, resource, granted) pairs:
    exactly the pairs it adds to (granted=True) or removes from (False) `managers` / `viewers`.
    One update per (user, perm): $addToSet with $each (upsert: a user's first grant creates the
    document) or $pullAll. For `self._bulk(self.grants, grant_updates(...))` in _recompute_pairs."""
    adds: dict[int, list[int]] = {}
    rms: dict[int, list[int]] = {}
    for user, perm, resource, granted in changes:
        (adds if granted else rms).setdefault(grant_id(user, perm), []).append(resource)
    ops = [({"_id": g}, {"$addToSet": {"resources": {"$each": rs}}}) for g, rs in adds.items()]
    return ops + [({"_id": g}, {"$pullAll": {"resources": rs}}) for g, rs in rms.items()]


def _check_perm(perm: str) -> None:
    if perm not in PERMISSIONS:
        raise UserError(f"unknown permission {perm!r}; valid: {', '.join(PERMISSIONS)}")


class MongoBackend(Backend):
    name: ClassVar[str] = "mongo"
    batch_docs: ClassVar[int] = 2000  # documents per unordered insert_many (pymongo splits at 48 MB anyway)
    lookup_batch: ClassVar[int] = 10000  # ids per cursor batch: the heaviest baseline user's lookup in 1-2 batches

    @classmethod
    def endpoint_from_url(cls, url: str) -> dict[str, Any]:
        return {"url": url, "engine": "mongodb"}

    # lifecycle ---------------------------------------------------------------------------------
    def connect(self) -> None:
        from pymongo import MongoClient
        from pymongo.errors import ConfigurationError, InvalidURI, PyMongoError

        url = self.endpoint.get("url") or ""
        self.query_mode = self.options.get("query", "expanded")
        if self.query_mode not in ("expanded", "acl"):
            raise UserError(f"mongo: unknown query mode {self.query_mode!r}; valid: expanded, acl")
        timeout = self.options.get("timeout_s")
        kwargs: dict[str, Any] = {"serverSelectionTimeoutMS": 3000, "connectTimeoutMS": 3000, "appname": "authzbench"}
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
        self.lookup_mode = self.options.get("lookup", "grants")
        if self.lookup_mode not in ("grants", "documents"):
            raise UserError(f"mongo: unknown lookup mode {self.lookup_mode!r}; valid: grants, documents")

    def close(self) -> None:
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
            return ServerInfo("FerretDB", fv, FERRETDB_LABEL, comparable=False, notes=notes)
        major_minor = ".".join(v.split(".")[:2])
        return ServerInfo("MongoDB", v, f"MongoDB {major_minor}")

    # schema and data ---------------------------------------------------------------------------
    def create_schema(self) -> None:
        existing = set(self.db.list_collection_names())
        for c in COLLECTIONS:
            if c not in existing:
                self.db.create_collection(c)

    def load(self, ds: Dataset, progress: Progress = no_progress) -> LoadStats:
        t0 = time.perf_counter()
        members = group_membership(ds)
        keys = permission_keys(ds, members)
        closure_s = time.perf_counter() - t0
        n = ds.entities
        docs_total = n["resource"] + 3 * n["user"] + n["group"] + n["organization"]  # users + 2 grants each
        per_doc = ds.total_relationships / max(docs_total, 1)  # the bar counts relationships
        batch_seconds: list[float] = []
        reported = 0.0
        written = 0
        t1 = time.perf_counter()
        for coll, docs in (("orgs", _org_docs(ds)), ("groups", _group_docs(ds)),
                           ("users", _user_docs(ds, members)), ("resources", _resource_docs(ds, keys)),
                           ("grants", _grant_docs(ds, keys))):
            for batch in _chunks(docs, self.batch_docs):
                tb = time.perf_counter()
                self.db[coll].insert_many(batch, ordered=False)
                batch_seconds.append(time.perf_counter() - tb)
                written += len(batch)
                reported += len(batch) * per_doc
                if int(reported) > 0:
                    progress(int(reported))
                    reported -= int(reported)
        insert_s = time.perf_counter() - t1
        expanded = len(keys["view"]) + len(keys["manage"])
        return LoadStats(rows=written, batch_rows=self.batch_docs, batch_seconds=batch_seconds, documents=written,
                         notes={"closure_seconds": round(closure_s, 3), "insert_seconds": round(insert_s, 3),
                                "documents_per_s": round(written / insert_s) if insert_s else None,
                                "relationships_per_s": round(ds.total_relationships / insert_s) if insert_s else None,
                                "expanded_entries": expanded, "group_membership_pairs": len(members),
                                "method": f"closure in numpy ({closure_s:.2f} s), then unordered insert_many of "
                                          f"{self.batch_docs} documents (resources, users, per-user grants); "
                                          "indexes built after the load"})

    def build(self) -> BuildStats:
        """Indexes after the load (one sort per index instead of per-insert maintenance). On FerretDB:
        GIN expression indexes in its PostgreSQL, the only kind its `@>` filters can use."""
        spec = json.loads(SCHEMA_FILE.read_text())["collections"]
        fields = {c: [next(iter(ix["key"])) for ix in spec[c]["indexes"]] for c in COLLECTIONS}
        t0 = time.perf_counter()
        if self.ferretdb and self.endpoint.get("pg_dsn"):
            made = self._ferretdb_gin(fields)
            what = f"{made} GIN (jsonb_path_ops) expression indexes in FerretDB's PostgreSQL + ANALYZE"
        else:
            from pymongo import ASCENDING, IndexModel

            made = 0
            for c, fs in fields.items():
                if fs:
                    self.db[c].create_indexes([IndexModel([(f, ASCENDING)]) for f in fs])
                    made += len(fs)
            what = f"{made} createIndexes (multikey where arrays)"
        return BuildStats(what=what, seconds=time.perf_counter() - t0, notes={"indexes": fields})

    def _pg(self):
        import psycopg

        try:
            return psycopg.connect(self.endpoint["pg_dsn"], password=self.endpoint.get("pg_password"),
                                   autocommit=True, connect_timeout=10)
        except psycopg.Error as e:
            raise BackendUnavailable(f"mongo: cannot reach FerretDB's PostgreSQL at {self.endpoint['pg_dsn']}: "
                                     f"{str(e).splitlines()[0]:.200}") from None

    def _tables(self, conn) -> dict[str, str]:
        """Collection -> PostgreSQL table, from FerretDB's own metadata table in the database's schema."""
        rows = conn.execute(f'SELECT _jsonb->>\'_id\', _jsonb->>\'table\' FROM "{self.db.name}"."_ferretdb_database_'
                            f'metadata"').fetchall()
        return {c: t for c, t in rows}

    def _ferretdb_gin(self, fields: dict[str, list[str]]) -> int:
        made = 0
        with self._pg() as conn:
            tables = self._tables(conn)
            for c in COLLECTIONS:
                table = f'"{self.db.name}"."{tables[c]}"'
                for f in ["_id", *fields[c]]:
                    conn.execute(f'CREATE INDEX IF NOT EXISTS "{tables[c]}_{f}_gin" ON {table} '
                                 f"USING gin ((_jsonb -> '{f}') jsonb_path_ops)")
                    made += 1
                conn.execute(f"ANALYZE {table}")
        return made

    def loaded_hash(self) -> str | None:
        doc = self.db["meta"].find_one({"_id": "dataset"})
        return doc.get("hash") if doc else None

    def mark_loaded(self, dataset_hash: str) -> None:
        self.db["meta"].replace_one({"_id": "dataset"}, {"_id": "dataset", "hash": dataset_hash}, upsert=True)

    # operations ----------------------------------------------------------------------------------
    def check(self, user: int, perm: str, resource: int) -> bool:
        _check_perm(perm)
        if self.query_mode == "acl":
            ors = self._acl_or(user, perm)
            return bool(ors) and self.res.find_one({"_id": resource, "$or": ors}, {"_id": 1}) is not None
        field = "managers" if perm == "manage" else "viewers"
        return self.res.find_one({"_id": resource, field: user}, {"_id": 1}) is not None

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
    def write(self, rel: Relationship) -> None:
        self._apply(rel, insert=True)

    def delete(self, rel: Relationship) -> None:
        self._apply(rel, insert=False)

    def _apply(self, rel: Relationship, *, insert: bool) -> None:
        """1. the relationship arrays; 2. for group edges, the closure of the users the edge reaches;
        3. the expanded managers/viewers of the affected (resource, user) pairs, read back from the
        documents after the change. The affected resources are found while the edge is present (after
        an insert, before a delete), so they cover the state before and after."""
        if rel.relation not in SOURCE:
            raise UserError(f"unknown relation {rel.relation!r}; valid: {', '.join(REBAC_RELATIONS)}")
        o, s = int(rel.object), int(rel.subject)
        if not insert:
            res_filters = self._affected_resources(rel.relation, o)
        op = "$addToSet" if insert else "$pull"
        for coll, id_side, field, val_side in SOURCE[rel.relation]:
            ends = {"object": o, "subject": s}
            # upsert on insert: an id seen for the first time (e.g. the runner's scratch users) gets a document
            self.db[coll].update_one({"_id": ends[id_side]}, {op: {field: ends[val_side]}}, upsert=insert)
        if insert:
            res_filters = self._affected_resources(rel.relation, o)
        user_filter = self._affected_users(rel.relation, o, s)
        if user_filter is None or not res_filters:
            return
        if rel.relation in ("group_member", "group_manager", "group_child"):
            users = self._recompute_closures(user_filter)
        else:
            users = {d["_id"]: d for d in self.users.find(user_filter, {"groups": 1, "admin_orgs": 1})}
            if "_id" in user_filter and not users:
                users = {user_filter["_id"]: {"_id": user_filter["_id"]}}  # a user with no document: no groups
        if users:
            self._recompute_pairs(res_filters, users)

    def _affected_resources(self, relation: str, o: int) -> list[dict[str, Any]]:
        """Filters selecting the resources whose permissions the edge can change:
        - resource_* (r, x): r itself;
        - org_admin (org, u): the resources of org;
        - group_member / group_manager (g, u), group_child (g, child): resources granted through g or
          any ancestor of g (walked through `parents` with a seen-set, so a cycle terminates);
        - org_member, group_org: none (no permission reads them)."""
        if relation.startswith("resource_"):
            return [{"_id": o}]
        if relation == "org_admin":
            return [{"orgs": o}]
        if relation in ("group_member", "group_manager", "group_child"):
            return [{f: g} for g in sorted(self._ancestors(o)) for f in ("manager_groups", "viewer_groups")]
        return []

    def _affected_users(self, relation: str, o: int, s: int) -> dict[str, Any] | None:
        """Filter selecting the users whose permissions the edge can change (the same set before and after
        the change, so it may be read at any point):
        - resource_*_user (r, u), org_admin (org, u), group_member/manager (g, u): u;
        - resource_*_group (r, g), group_child (parent, g): membership(g) = users whose closure holds g
          (descendants of g do not depend on an edge *into* g, even on a cycle);
        - resource_org (r, org): admins of org."""
        if relation in ("resource_manager_user", "resource_viewer_user", "org_admin", "group_member", "group_manager"):
            return {"_id": s}
        if relation in ("resource_manager_group", "resource_viewer_group", "group_child"):
            return {"groups": s}
        if relation == "resource_org":
            return {"admin_orgs": s}
        return None

    def _walk(self, start: Iterable[int], field: str) -> set[int]:
        """Groups reachable from `start` through `field` (parents or children), including start."""
        seen = set(start)
        frontier = list(seen)
        while frontier:
            nxt: list[int] = []
            for g in frontier:
                doc = self.groups.find_one({"_id": g}, {field: 1}) or {}
                nxt += [x for x in doc.get(field, ()) if x not in seen]
            seen.update(nxt)
            frontier = list(dict.fromkeys(nxt))
        return seen

    def _ancestors(self, g: int) -> set[int]:
        return self._walk([g], "parents")

    def _recompute_closures(self, user_filter: dict[str, Any]) -> dict[int, dict[str, Any]]:
        """groups = ancestors of (member_of ∪ manager_of), for each selected user; written only if changed."""
        out: dict[int, dict[str, Any]] = {}
        ops: list[tuple[dict[str, Any], dict[str, Any]]] = []
        parents_memo: dict[int, set[int]] = {}
        for d in self.users.find(user_filter, {"member_of": 1, "manager_of": 1, "groups": 1, "admin_orgs": 1}):
            direct = set(d.get("member_of", ())) | set(d.get("manager_of", ()))
            closure: set[int] = set()
            for g in direct:
                if g not in parents_memo:
                    parents_memo[g] = self._ancestors(g)
                closure |= parents_memo[g]
            groups = sorted(closure)
            if groups != sorted(d.get("groups", ())):
                ops.append(({"_id": d["_id"]}, {"$set": {"groups": groups}}))
            out[d["_id"]] = {**d, "groups": groups}
        self._bulk(self.users, ops)
        return out

    def _recompute_pairs(self, res_filters: list[dict[str, Any]], users: dict[int, dict[str, Any]]) -> None:
        """New manage/view state of every affected (resource, user) pair from the ACL arrays and the users'
        closures; only differing pairs are written ($addToSet / $pullAll on managers and viewers)."""
        proj = {f: 1 for f in (*ACL_FIELDS, "managers", "viewers")}
        resources: dict[int, dict[str, Any]] = {}
        for f in res_filters:
            for d in self.res.find(f, proj):
                resources[d["_id"]] = d
        ops: list[tuple[dict[str, Any], dict[str, Any]]] = []
        for r, d in resources.items():
            acl = {f: set(d.get(f, ())) for f in ACL_FIELDS}
            managers, viewers = set(d.get("managers", ())), set(d.get("viewers", ()))
            add_m, add_v, rm_m, rm_v = [], [], [], []
            for u, ud in users.items():
                groups, admin = set(ud.get("groups", ())), set(ud.get("admin_orgs", ()))
                manage = u in acl["manager_users"] or bool(groups & acl["manager_groups"]) or bool(admin & acl["orgs"])
                view = manage or u in acl["viewer_users"] or bool(groups & acl["viewer_groups"])
                for want, have, add, rm in ((manage, u in managers, add_m, rm_m), (view, u in viewers, add_v, rm_v)):
                    if want and not have:
                        add.append(u)
                    elif have and not want:
                        rm.append(u)
            adds = {f: {"$each": v} for f, v in (("managers", add_m), ("viewers", add_v)) if v}
            rms = {f: v for f, v in (("managers", rm_m), ("viewers", rm_v)) if v}
            if adds:
                ops.append(({"_id": r}, {"$addToSet": adds}))
            if rms:  # a second update: one update cannot both add to and pull from the same array
                ops.append(({"_id": r}, {"$pullAll": rms}))
        self._bulk(self.res, ops)

    def _bulk(self, coll, ops: list[tuple[dict[str, Any], dict[str, Any]]]) -> None:
        """One unordered bulk_write on MongoDB. FerretDB 1.24 stalls on multi-statement update commands (20
        statements took 0.18 s, 60 never returned, and the server stayed stuck after), so there each
        update is its own command (~2 ms each)."""
        if not ops:
            return
        if not self.ferretdb:
            from pymongo import UpdateOne

            coll.bulk_write([UpdateOne(f, u) for f, u in ops], ordered=False)
            return
        for flt, update in ops:
            coll.update_one(flt, update)

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


# documents from the dataset ------------------------------------------------------------------------

def _chunks(docs: Iterator[dict[str, Any]], n: int) -> Iterator[list[dict[str, Any]]]:
    batch: list[dict[str, Any]] = []
    for d in docs:
        batch.append(d)
        if len(batch) == n:
            yield batch
            batch = []
    if batch:
        yield batch


def _by(ds: Dataset, relation: str, key: str, n_keys: int) -> Callable[[int], list[int]]:
    """Values of `relation` grouped by its `key` column ("object" or "subject"), sorted: a lookup i -> list."""
    df = ds.table(relation)
    other = "subject" if key == "object" else "object"
    return _grouped(df[key].to_numpy(np.int64), df[other].to_numpy(np.int64), n_keys)


def _grouped(keys: np.ndarray, values: np.ndarray, n_keys: int) -> Callable[[int], list[int]]:
    order = np.lexsort((values, keys))
    indptr, vals = csr(keys[order], values[order], n_keys)
    flat = vals.tolist()  # one conversion; slicing a list per document is cheap
    bounds = indptr.tolist()
    return lambda i: flat[bounds[i]:bounds[i + 1]]


def _org_docs(ds: Dataset) -> Iterator[dict[str, Any]]:
    n = ds.entities["organization"]
    admins, members = _by(ds, "org_admin", "object", n), _by(ds, "org_member", "object", n)
    for o in range(n):
        yield {"_id": o, "admins": admins(o), "members": members(o)}


def _group_docs(ds: Dataset) -> Iterator[dict[str, Any]]:
    n = ds.entities["group"]
    org, members = _by(ds, "group_org", "object", n), _by(ds, "group_member", "object", n)
    managers = _by(ds, "group_manager", "object", n)
    children, parents = _by(ds, "group_child", "object", n), _by(ds, "group_child", "subject", n)
    for g in range(n):
        yield {"_id": g, "org": org(g), "members": members(g), "managers": managers(g), "children": children(g),
               "parents": parents(g)}


def _user_docs(ds: Dataset, membership) -> Iterator[dict[str, Any]]:
    n = ds.entities["user"]
    member_of, manager_of = _by(ds, "group_member", "subject", n), _by(ds, "group_manager", "subject", n)
    admin_orgs, member_orgs = _by(ds, "org_admin", "subject", n), _by(ds, "org_member", "subject", n)
    groups = _grouped(membership["user"].to_numpy(np.int64), membership["group"].to_numpy(np.int64), n)
    for u in range(n):
        yield {"_id": u, "member_of": member_of(u), "manager_of": manager_of(u), "groups": groups(u),
               "admin_orgs": admin_orgs(u), "member_orgs": member_orgs(u)}


def _resource_docs(ds: Dataset, keys: dict[str, np.ndarray]) -> Iterator[dict[str, Any]]:
    n = ds.entities["resource"]
    acl = {f: _by(ds, rel, "object", n) for f, rel in (
        ("orgs", "resource_org"), ("manager_users", "resource_manager_user"),
        ("manager_groups", "resource_manager_group"), ("viewer_users", "resource_viewer_user"),
        ("viewer_groups", "resource_viewer_group"))}
    managers = _grouped(keys["manage"] % n, keys["manage"] // n, n)
    viewers = _grouped(keys["view"] % n, keys["view"] // n, n)
    for r in range(n):
        yield {"_id": r, **{f: get(r) for f, get in acl.items()}, "managers": managers(r), "viewers": viewers(r)}


def _grant_docs(ds: Dataset, keys: dict[str, np.ndarray]) -> Iterator[dict[str, Any]]:
    """One document per (user, permission) holding it on anything: {_id: grant_id, resources: [...]}.
    The heaviest xl-v1 user has 16,000 (~180 KB of BSON), far under the 16 MB document limit."""
    n_res, n_users = ds.entities["resource"], ds.entities["user"]
    for perm in PERMISSIONS:
        k = keys[perm]
        by_user = _grouped(k // n_res, k % n_res, n_users)
        for u in np.unique(k // n_res).tolist():
            yield {"_id": grant_id(u, perm), "resources": by_user(u)}
