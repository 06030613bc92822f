"""The Cassandra / ScyllaDB adapter's writes (scylla.py): the source tables, then exactly the permission
pairs the changed relationship can affect, by closure_maintenance over the storage calls here. A mixin of
ScyllaBackend: it uses the adapter's session and prepared statements."""

from __future__ import annotations

import contextlib
import uuid
from typing import Any

from authzbench.backends import closure_maintenance as maintenance
from authzbench.backends.locks import EXPIRE_S, spin_lock
from authzbench.core.errors import UserError
from authzbench.schema.model import REBAC_RELATIONS, Relationship
from authzbench.schema.model_rules import ACL_ROLE, Reach, walk
from authzbench.systems.scylla.tables import REVERSE, SOURCE_TABLE, _short

RECOMPUTE_CHUNK = 256  # permission-row batches a write sends before it counts them as progress (~25k rows)



class ScyllaWrites:
    """write() and delete(), and the closure_maintenance.Store calls they make."""

    def write(self, rel: Relationship) -> None:
        self._apply(rel, insert=True)

    def delete(self, rel: Relationship) -> None:
        self._apply(rel, insert=False)

    def _apply(self, rel: Relationship, *, insert: bool) -> None:
        """The source tables, then exactly the affected permission pairs (closure_maintenance)."""
        if rel.relation not in REBAC_RELATIONS:
            raise UserError(f"unknown relation {rel.relation!r}; valid: {', '.join(REBAC_RELATIONS)}")
        self._walk = _Walk(self)  # graph walks memoized for this write only
        maintenance.apply(self, rel, insert=insert)

    def group_lock(self) -> contextlib.AbstractContextManager:
        """A lightweight transaction (Paxos) on a lock row (locks.py) that expires by TTL if its writer
        died."""
        token = uuid.uuid4().hex
        take = self.prep(f"INSERT INTO {{ks}}.meta (key, value) VALUES ('group_write_lock', ?) IF NOT EXISTS "
                         f"USING TTL {int(EXPIRE_S)}")
        give = self.prep("DELETE FROM {ks}.meta WHERE key = 'group_write_lock' IF value = ?")
        return spin_lock(lambda: bool(self.session.execute(take, (token,)).one()[0]),
                         lambda: self.session.execute(give, (token,)), "scylla")

    # closure_maintenance.Store: the storage calls -------------------------------------------------
    keeps_closures = False  # a user's closure is computed from the source tables when a pair needs it

    def write_edge(self, rel: Relationship, *, insert: bool) -> None:
        o, s = int(rel.object), int(rel.subject)
        table = SOURCE_TABLE[REBAC_RELATIONS[rel.relation].object_type]
        stmts: list[tuple[str, tuple]] = [(
            f"INSERT INTO {{ks}}.{table} (object, relation, subject) VALUES (?, ?, ?)" if insert else
            f"DELETE FROM {{ks}}.{table} WHERE object = ? AND relation = ? AND subject = ?",
            (o, _short(rel.relation), s))]
        if rel.relation in REVERSE:
            stmts.append(
                ("INSERT INTO {ks}.rel_by_subject (relation, subject, object) VALUES (?, ?, ?)"
                 if insert
                 else "DELETE FROM {ks}.rel_by_subject WHERE relation = ? AND subject = ? AND object = ?",
                 (rel.relation, s, o)))
        self.rows_touched += len(stmts)
        self._execute_all(stmts)
        self._walk = _Walk(self)  # what was walked before a delete may include the deleted edge

    def find_resources(self, rc: Reach) -> set[int]:
        """The resources of a Reach (model_rules.reach), from the source tables."""
        w = self._walk
        if rc.empty:
            return set()
        return {
            "resource": lambda r: {r}, "org_resources": lambda org: w.objects("resource_org", org),
            "granted_via_ancestors": lambda g: w.resources_via(w.ancestors(g))}[rc.resources](rc.resource_arg)

    def find_users(self, rc: Reach) -> set[int]:
        """The users of a Reach, from the source tables."""
        w = self._walk
        if rc.empty:
            return set()
        return {"user": lambda u: {u}, "membership": w.membership,
                "org_admins": lambda org: w.subjects("rel_org", org, "admin")}[rc.users](rc.user_arg)

    def parents(self, groups: list[int]) -> list[int]:
        return [p for g in groups for p in self._walk.parents(g)]

    def user_states(self, users: set[int], closure: maintenance.Closure, *, refresh: bool
                    ) -> dict[int, maintenance.UserState]:
        """Each user's closure from the direct groups, and the orgs the user administers (reads issued
        concurrently)."""
        us = sorted(users)
        got = iter(
            self._execute_all(
                [("SELECT object FROM {ks}.rel_by_subject WHERE relation = ? AND subject = ?", (rel, u))
                 for u in us
                 for rel in ("group_member", "group_manager", "org_admin")]))
        out = {}
        for u in us:
            direct = [row[0] for row in next(got)] + [row[0] for row in next(got)]
            out[u] = maintenance.UserState(closure(direct), {row[0] for row in next(got)})
        return out

    def rewrite_pairs(self, resources: set[int], users: dict[int, maintenance.UserState]) -> None:
        """Each resource's ACL and permission rows (reads issued concurrently); only the rows that differ
        are written to the three permission rows of a pair."""
        rs = sorted(resources)
        reads = [("SELECT relation, subject FROM {ks}.rel_resource WHERE object = ?", (r,)) for r in rs]
        reads += [("SELECT user, manage FROM {ks}.perm_by_resource WHERE resource = ?", (r,)) for r in rs]
        got = list(self._execute_all(reads))
        stmts: list[tuple[str, tuple, tuple]] = []
        for r, acl_rows, perm_rows in zip(rs, got[:len(rs)], got[len(rs):], strict=True):
            acl: dict[str, set[int]] = {}
            for rel, sub in acl_rows:  # rel_resource keeps the relation without its "resource_" prefix
                acl.setdefault(ACL_ROLE["resource_" + rel], set()).add(sub)
            current = dict(perm_rows)
            for u, old, new in maintenance.changes(acl, lambda u, cur=current: maintenance.stored_state(
                    u in cur and bool(cur[u]), u in cur and not cur[u]), users):
                stmts += _pair_statements(r, u, old, new)
        self._execute_batched(stmts)

    def finish(self) -> None:
        pass

    def _execute_batched(self, stmts: list[tuple[str, tuple, tuple]]) -> None:
        """Permission-row statements grouped by partition into unlogged batches of <= batch_rows (one
        mutation per partition per batch, as the load writes them): a hierarchy change under a hot parent
        sets ~10^5-10^6 rows (single-row inserts: ~2k rows/s, batched load: ~45k rows/s, see load()).
        rows_touched (one per statement: each writes or deletes one row) advances as each group of
        RECOMPUTE_CHUNK batches completes: the runner reads it as the write's progress."""
        from cassandra.concurrent import execute_concurrent
        from cassandra.query import BatchStatement, BatchType

        parts: dict[tuple, list[tuple[str, tuple]]] = {}
        for q, p, partition in stmts:
            parts.setdefault(partition, []).append((q, p))
        batches: list[tuple[Any, int]] = []
        for rows in parts.values():
            for i in range(0, len(rows), self.batch_rows):
                batch = BatchStatement(batch_type=BatchType.UNLOGGED)
                for q, p in rows[i:i + self.batch_rows]:
                    batch.add(self.prep(q), p)
                batches.append((batch, len(rows[i:i + self.batch_rows])))
        for i in range(0, len(batches), RECOMPUTE_CHUNK):
            chunk = batches[i:i + RECOMPUTE_CHUNK]
            execute_concurrent(
                self.session, [(b, None) for b, _ in chunk], concurrency=32, raise_on_first_error=True)
            self.rows_touched += sum(n for _, n in chunk)

    def _execute_all(self, stmts: list[tuple[str, tuple]]) -> list[list[tuple]]:
        """Run statements concurrently (at most 32 in flight); rows of each, in order. Raises the first
        error."""
        from cassandra.concurrent import execute_concurrent

        if not stmts:
            return []
        results = execute_concurrent(self.session, [(self.prep(q), p) for q, p in stmts], concurrency=32,
                                     raise_on_first_error=True)
        return [list(r.result_or_exc) for r in results]


def _pair_statements(r: int, u: int, old: str | None, new: str | None) -> list[tuple[str, tuple, tuple]]:
    """The permission rows of one (resource, user) pair that differ between states `old` and `new` (None,
    view or manage), each with the partition it writes (perm_by_resource: the resource; perm_by_user: user
    and permission). A pair gaining view writes 2 rows, not 3: a manage row it never had is not deleted
    (each such delete was a tombstone for nothing, a third of a hierarchy change's rows)."""
    out: list[tuple[str, tuple, tuple]] = []
    if new is None:
        out.append(("DELETE FROM {ks}.perm_by_resource WHERE resource = ? AND user = ?", (r, u), ("r", r)))
    else:
        out.append(("INSERT INTO {ks}.perm_by_resource (resource, user, manage) VALUES (?, ?, ?)",
                    (r, u, new == "manage"), ("r", r)))
    for perm, held_old, held_new in (("view", old is not None, new is not None),
                                     ("manage", old == "manage", new == "manage")):
        if held_old == held_new:
            continue
        out.append(
            (f"INSERT INTO {{ks}}.perm_by_user (user, perm, resource) VALUES (?, '{perm}', ?)"
             if held_new
             else f"DELETE FROM {{ks}}.perm_by_user WHERE user = ? AND perm = '{perm}' AND resource = ?",
             (u, r), ("u", u, perm)))
    return out

class _Walk:
    """Graph walks over the source tables for one write, memoized for that write only: nothing is
    cached across calls, because other processes write too."""

    def __init__(self, b: Any):  # the adapter (scylla.ScyllaBackend)
        self.b = b
        self._parents: dict[int, set[int]] = {}

    def objects(self, relation: str, subject: int) -> set[int]:
        return {r[0] for r in self.b._rows(
            "SELECT object FROM {ks}.rel_by_subject WHERE relation = ? AND subject = ?", relation, subject)}

    def subjects(self, table: str, obj: int, relation: str) -> set[int]:
        return {r[0] for r in self.b._rows(
            f"SELECT subject FROM {{ks}}.{table} WHERE object = ? AND relation = ?", obj, relation)}

    def parents(self, g: int) -> set[int]:
        """The groups right above g."""
        if g not in self._parents:
            self._parents[g] = self.objects("group_child", g)
        return self._parents[g]

    def ancestors(self, g: int) -> set[int]:
        """g and every group that has g below it."""
        return walk([g], lambda frontier: [p for x in frontier for p in self.parents(x)])

    def membership(self, g: int) -> set[int]:
        """Direct members and managers of g and of every group below it."""
        users: set[int] = set()

        def children(frontier: list[int]) -> list[int]:
            kids = []
            for x in frontier:
                for rel, sub in self.b._rows(
                    "SELECT relation, subject FROM {ks}.rel_group WHERE object = ?", x):
                    if rel in ("member", "manager"):
                        users.add(sub)
                    elif rel == "child":
                        kids.append(sub)
            return kids

        walk([g], children)
        return users

    def resources_via(self, groups: set[int]) -> set[int]:
        out: set[int] = set()
        for g in groups:
            out |= self.objects("resource_manager_group", g) | self.objects("resource_viewer_group", g)
        return out
