"""Edges read from someone else's graph -> the suite's dataset (Parquet + manifest + COMPLETE).

Everything is read and checked in memory before a byte is written, so a refused import leaves nothing on
disk. The checks, in this order (the first problem found is refused, naming the file, row and reason):
  1. malformed rows and relations the model does not have (what the reader yields, row by row);
  2. references to ids the source declares elsewhere (a user missing from users.csv, an org missing from
     organizations.csv);
  3. ownership: every group has exactly one group_org row and every resource one resource_org row;
  4. the group hierarchy (group_child) is acyclic.
With `drop_unmapped` each problem drops its edge instead and is counted per reason in the manifest.

String ids are interned per entity type into 0..n-1: in natural order (numbers by value) so a graph whose ids
are already 0..n-1 keeps them; anonymized, in the order of a keyed hash of each id, so neither the ids nor
their order survive. Only a plain import keeps the id map (source_ids.json): the anonymized dataset holds
nothing of the source's identifiers (the manifest names the source files by their base names and sha256).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import numpy as np

from authzbench.core.errors import UserError
from authzbench.imports.edges import Edge
from authzbench.schema.dataset import Dataset
from authzbench.schema.model import RelationDef, relation_defs

PROFILE = "imported"  # Dataset.profile of every imported graph: no generator profile made it
ID_MAP = "source_ids.json"
_MALFORMED = "!malformed"
_DECLARE = "@"  # relation "@user": the id is declared (users.csv) even if no edge names it
# Each group and resource belongs to exactly one organization (shared/DESIGN.md's model).
_OWNER = {"group": "group_org", "resource": "resource_org"}
REASONS = ("malformed", "unmapped", "undeclared", "no owner", "two owners", "cycle")


def declare(entity_type: str, ident: str, where: str) -> Edge:
    """An Edge a reader yields for an id its source lists on its own (a users.csv row): it makes the id
    exist and every reference to an undeclared id of that type a dangling one."""
    return Edge(_DECLARE + entity_type, ident, "", where)


def malformed(where: str, reason: str) -> Edge:
    """An Edge a reader yields for a row it cannot read: refused (or dropped) with the reason."""
    return Edge(_MALFORMED, reason, "", where)


class _Problems:
    """Raise the first problem as a UserError, or (drop) count it per reason."""

    def __init__(self, drop: bool):
        self.drop = drop
        self.dropped: Counter[str] = Counter()

    def __call__(self, reason: str, where: str, message: str) -> None:
        if not self.drop:
            raise UserError(f"{where}: {message} (--drop-unmapped drops such rows and counts them)")
        self.dropped[reason] += 1


class _NoParams:
    """An imported graph has no generator parameters (the manifest's params is {})."""

    seed = 0

    def as_dict(self) -> dict:
        return {}


def write_graph(edges: Iterable[Edge], out: Path, origin: dict, *, drop_unmapped: bool, anonymize: bool,
                model: str = "rebac") -> Dataset:
    """Check every edge, intern the ids and write the dataset at `out` (origin goes into the manifest)."""
    from authzbench.generator import _write_atomically

    defs = relation_defs(model)
    types = sorted({d.object_type for d in defs.values()} | {d.subject_type for d in defs.values()})
    problems = _Problems(drop_unmapped)
    rows, declared = _collect(edges, defs, types, problems)
    rows = _check_declared(rows, declared, defs, problems)
    rows = _check_owners(rows, defs, problems)
    rows = _check_acyclic(rows, problems)
    ids, key_id = _intern(rows, declared, defs, types, anonymize)
    tables, duplicates = _tables(rows, ids, defs)
    manifest_origin = {**origin, "anonymized": anonymize, "dropped": dict(problems.dropped),
                       "duplicates_merged": duplicates}
    if key_id:
        manifest_origin["anonymize_key_id"] = key_id
    extra = {} if anonymize else {ID_MAP: _id_map_bytes(ids)}

    def emit_all(emit) -> None:
        for rel in defs:
            objs, subs = tables.get(rel, (np.zeros(0, np.int32), np.zeros(0, np.int32)))
            emit(rel, objs, subs)

    entities = {t: len(ids[t]) for t in types}
    return _write_atomically(out, PROFILE, model, _NoParams(), entities, emit_all,
                             extra={"origin": manifest_origin}, extra_files=extra)


def _collect(edges: Iterable[Edge], defs: dict[str, RelationDef], types: list[str],
             problems: _Problems) -> tuple[dict[str, list[Edge]], dict[str, dict[str, str]]]:
    """Step 1: the model's edges per relation and the declared ids per type (id -> where declared)."""
    rows: dict[str, list[Edge]] = defaultdict(list)
    declared: dict[str, dict[str, str]] = defaultdict(dict)
    for e in edges:
        if e.relation == _MALFORMED:
            problems("malformed", e.where, e.obj)
        elif e.relation.startswith(_DECLARE):
            kind = e.relation[len(_DECLARE):]
            if kind not in types:
                problems("unmapped", e.where,
                         f"entity type {kind!r} is not in the model ({', '.join(types)})")
            elif not e.obj:
                problems("malformed", e.where, f"empty {kind} id")
            else:
                declared[kind].setdefault(e.obj, e.where)
        elif e.relation not in defs:
            problems("unmapped", e.where,
                     f"relation {e.relation!r} has no relation in the model "
                     f"(its relations: {', '.join(defs)})")
        elif not e.obj or not e.subj:
            problems("malformed", e.where, "empty " + ("object" if not e.obj else "subject") + " id")
        else:
            rows[e.relation].append(e)
    return rows, declared


def _check_declared(rows: dict[str, list[Edge]], declared: dict[str, dict[str, str]],
                    defs: dict[str, RelationDef], problems: _Problems) -> dict[str, list[Edge]]:
    """Step 2: when the source lists a type's ids on their own, every edge names listed ids only."""
    def refuse(e: Edge, t: str, i: str) -> None:
        problems("undeclared", e.where, f"{t} {i!r} is not in {_file_of(next(iter(declared[t].values())))}")

    return _naming_known(rows, defs, declared, refuse)


def _naming_known(rows: dict[str, list[Edge]], defs: dict[str, RelationDef], known: dict[str, Any],
                  refuse: Callable[[Edge, str, str], None]) -> dict[str, list[Edge]]:
    """The edges whose object and subject are known ids wherever `known` lists the type's ids; `refuse`
    gets (edge, type, id) for the first unknown one of every other edge (it raises, or counts a drop)."""
    kept: dict[str, list[Edge]] = {}
    for rel, edges in rows.items():
        d = defs[rel]
        keep = []
        for e in edges:
            bad = next(((t, i) for t, i in ((d.object_type, e.obj), (d.subject_type, e.subj))
                        if t in known and i not in known[t]), None)
            if bad is None:
                keep.append(e)
            else:
                refuse(e, *bad)
        kept[rel] = keep
    return kept


def _check_owners(rows: dict[str, list[Edge]], defs: dict[str, RelationDef],
                  problems: _Problems) -> dict[str, list[Edge]]:
    """Step 3: one owner row per group / resource, and no edge naming a group or resource without one."""
    owner_of: dict[str, dict[str, Edge]] = {}
    for kind, rel in _OWNER.items():
        if rel not in defs:
            continue
        first: dict[str, Edge] = {}
        keep = []
        for e in rows.get(rel, []):
            prior = first.get(e.obj)
            if prior is None:
                first[e.obj] = e
                keep.append(e)
            elif prior.subj != e.subj:
                problems("two owners", e.where, f"{kind} {e.obj!r} already belongs to organization "
                         f"{prior.subj!r} ({prior.where}), not also to {e.subj!r}")
        rows[rel] = keep
        owner_of[kind] = first
    def refuse(e: Edge, t: str, i: str) -> None:
        problems("no owner", e.where, f"{t} {i!r} has no {_OWNER[t]} row (no organization)")

    return _naming_known(rows, defs, owner_of, refuse)


def _check_acyclic(rows: dict[str, list[Edge]], problems: _Problems) -> dict[str, list[Edge]]:
    """Step 4: a depth-first walk of group_child (parent -> child); an edge back into the walk's path closes
    a cycle. Iterative: a 10,000-deep chain must not hit Python's recursion limit."""
    edges = rows.get("group_child", [])
    children: dict[str, list[int]] = defaultdict(list)
    for i, e in enumerate(edges):
        children[e.obj].append(i)
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    dropped: set[int] = set()
    for root in list(children):
        if root in state:
            continue
        state[root] = 1
        path, stack = [root], [iter(children[root])]
        while stack:
            i = next(stack[-1], None)
            if i is None:
                state[path.pop()] = 2
                stack.pop()
                continue
            child = edges[i].subj
            if state.get(child) == 1:
                loop = path[path.index(child):] + [child]
                problems("cycle", edges[i].where, "the group hierarchy has a cycle: " + " -> ".join(loop))
                dropped.add(i)
            elif child not in state:
                state[child] = 1
                path.append(child)
                stack.append(iter(children.get(child, [])))
    rows["group_child"] = [e for i, e in enumerate(edges) if i not in dropped]
    return rows


def _natural(ident: str) -> tuple:
    return (0, int(ident), "") if ident.isdigit() else (1, 0, ident)


def _intern(rows: dict[str, list[Edge]], declared: dict[str, dict[str, str]], defs: dict[str, RelationDef],
            types: list[str], anonymize: bool) -> tuple[dict[str, list[str]], str | None]:
    """Each type's ids in index order, and (anonymized) the fingerprint of the key that ordered them."""
    seen: dict[str, set[str]] = {t: set(declared.get(t, {})) for t in types}
    for rel, edges in rows.items():
        d = defs[rel]
        seen[d.object_type].update(e.obj for e in edges)
        seen[d.subject_type].update(e.subj for e in edges)
    if not anonymize:
        return {t: sorted(s, key=_natural) for t, s in seen.items()}, None
    key = anonymize_key()
    digest = {t: {i: hmac.new(key, f"{t}:{i}".encode(), hashlib.sha256).digest() for i in s}
              for t, s in seen.items()}
    return ({t: sorted(s, key=digest[t].__getitem__) for t, s in seen.items()},
            hashlib.sha256(b"authzbench-key-id:" + key).hexdigest()[:16])


def anonymize_key() -> bytes:
    """The key of the anonymizing hash: $AUTHZBENCH_ANONYMIZE_KEY, else one made once per machine
    (~/.cache/authzbench/anonymize.key). A keyed hash, because an unkeyed one of ids like "17" is undone by
    hashing every small number; one key, so the same id gets the same position in every import."""
    if env := os.environ.get("AUTHZBENCH_ANONYMIZE_KEY"):
        return env.encode()
    path = Path.home() / ".cache" / "authzbench" / "anonymize.key"
    if not path.is_file():
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as fh:
            fh.write(secrets.token_hex(32) + "\n")
    return path.read_text().strip().encode()


def _tables(rows: dict[str, list[Edge]], ids: dict[str, list[str]],
            defs: dict[str, RelationDef]) -> tuple[dict[str, tuple[np.ndarray, np.ndarray]], int]:
    """Each relation's (objects, subjects) int32 arrays, unique and sorted; and how many repeats were
    merged."""
    index = {t: {s: i for i, s in enumerate(v)} for t, v in ids.items()}
    out, merged = {}, 0
    for rel, edges in rows.items():
        d = defs[rel]
        n_sub = max(len(ids[d.subject_type]), 1)
        o = np.fromiter((index[d.object_type][e.obj] for e in edges), np.int64, len(edges))
        s = np.fromiter((index[d.subject_type][e.subj] for e in edges), np.int64, len(edges))
        key = np.unique(o * n_sub + s)
        merged += len(edges) - len(key)
        out[rel] = ((key // n_sub).astype(np.int32), (key % n_sub).astype(np.int32))
    return out, merged


def _id_map_bytes(ids: dict[str, list[str]]) -> bytes:
    return (json.dumps(ids, separators=(",", ":"), sort_keys=True) + "\n").encode()


def source_ids(ds: Dataset) -> dict[str, list[str]] | None:
    """The source's id of each interned id per type, or None (anonymized or generated)."""
    p = ds.path / ID_MAP
    return json.loads(p.read_text()) if p.is_file() else None


def _file_of(where: str) -> str:
    return where.rsplit(":", 1)[0]


def file_digest(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()
