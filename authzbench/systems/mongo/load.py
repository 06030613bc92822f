"""The mongo adapter's bulk load (mongo.py): the documents built from the expansion chunk by chunk,
written by unordered insert_many, and build() making the indexes after the load (on FerretDB, GIN
expression indexes in its PostgreSQL). A mixin of MongoBackend: it uses the adapter's database, its
FerretDB flag and its PostgreSQL connection (_pg)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from authzbench.backends import document_layout as layout
from authzbench.backends.base import (
    Batch,
    Batches,
    Build,
    BuildStats,
    Load,
    LoadStats,
    Progress,
    Step,
    no_progress,
)
from authzbench.backends.document_layout import sorted_csr
from authzbench.backends.expansion import Expansion
from authzbench.schema.dataset import Dataset
from authzbench.systems.mongo.grants import _grant_docs

SCHEMA_FILE = Path(__file__).resolve().parent / "mongo.json"
COLLECTIONS = ("resources", "users", "groups", "orgs", "meta", "grants")


class BulkLoad:
    """load() and build()."""

    def load(self, ds: Dataset, progress: Progress = no_progress) -> Load:
        expansion = yield Step("closure_seconds", lambda: layout.expanded_users(ds))
        progress(0)  # a set-up heartbeat: the load bound judges its time and the machine's memory here too
        expanded = [0]
        n = ds.entities
        docs_total = n["resource"] + 3 * n["user"] + n["group"] + n["organization"]  # users + 2 grants each
        per_doc = ds.total_relationships / max(docs_total, 1)  # the bar counts relationships
        # insert_seconds: the chunks' expansion runs beside the inserts in flight: inside it
        written = yield Batches(
            "mongo: insert_many",
            _batches(_all_docs(ds, expansion, expanded), self.batch_docs, self._insert, per_doc),
            self.insert_workers, name="insert_seconds")
        return LoadStats(
            rows=written, batch_rows=self.batch_docs, documents=written,
            notes={"expanded_entries": expanded[0], "group_membership_pairs": expansion.membership_pairs,
                   "method": f"closure in numpy chunk by chunk, then unordered "
                   f"insert_many of {self.batch_docs} documents (resources, users, per-user grants), "
                   f"{self.insert_workers} in flight (batch times overlap); indexes built after the load"})

    def _insert(self, coll: str, docs: list[dict[str, Any]]) -> None:
        self.db[coll].insert_many(docs, ordered=False)

    def build(self) -> Build:
        """Indexes after the load (one sort per index instead of per-insert maintenance). On FerretDB:
        GIN expression indexes in its PostgreSQL, the only kind its `@>` filters can use."""
        spec = json.loads(SCHEMA_FILE.read_text())["collections"]
        fields = {c: [next(iter(ix["key"])) for ix in spec[c]["indexes"]] for c in COLLECTIONS}
        if self.ferretdb and self.endpoint.get("pg_dsn"):
            made = yield Step("", lambda: self._ferretdb_gin(fields))
            what = f"{made} GIN (jsonb_path_ops) expression indexes in FerretDB's PostgreSQL + ANALYZE"
        else:
            made = yield Step("", lambda: self._mongo_indexes(fields))
            what = f"{made} createIndexes (multikey where arrays)"
        return BuildStats(what=what, notes={"indexes": fields})

    def _mongo_indexes(self, fields: dict[str, list[str]]) -> int:
        from pymongo import ASCENDING, IndexModel

        made = 0
        for c, fs in fields.items():
            if fs:
                self.db[c].create_indexes([IndexModel([(f, ASCENDING)]) for f in fs])
                made += len(fs)
        return made

    def _tables(self, conn) -> dict[str, str]:
        """Collection -> PostgreSQL table, from FerretDB's own metadata table in the database's schema."""
        rows = conn.execute(
            f"SELECT _jsonb->>'_id', _jsonb->>'table' FROM \"{self.db.name}\".\"_ferretdb_database_metadata\""
        ).fetchall()
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


# documents from the dataset ------------------------------------------------------------------------

def _chunks(docs: Iterator[Step | dict[str, Any]], n: int) -> Iterator[Step | list[dict[str, Any]]]:
    """Lists of n documents, each Step among them passed on as it comes."""
    batch: list[dict[str, Any]] = []
    for d in docs:
        if isinstance(d, Step):
            yield d
            continue
        batch.append(d)
        if len(batch) == n:
            yield batch
            batch = []
    if batch:
        yield batch


def _batches(colls: list[tuple[str, Iterator[Any]]], n: int, insert: Callable[[str, list], None],
             per_doc: float) -> Iterator[Step | Batch]:
    """The insert_many batches of every collection, one collection after another; each moves the progress on
    by its documents in relationships (the bar's unit)."""
    for coll, docs in colls:
        for batch in _chunks(docs, n):
            yield batch if isinstance(batch, Step) else Batch(len(batch), partial(insert, coll, batch),
                                                             advance=len(batch) * per_doc)


def _grouped(keys: np.ndarray, values: np.ndarray, n_keys: int) -> Callable[[int], list[int]]:
    """Values grouped by key as Python lists: a lookup i -> [values of i], sorted."""
    bounds, vals = sorted_csr(keys, values, n_keys)
    flat = vals.tolist()  # one conversion; slicing a list per document is cheap
    return lambda i: flat[bounds[i]:bounds[i + 1]]


def _all_docs(ds: Dataset, expansion: Expansion, expanded: list[int]) -> list[tuple[str, Iterator[Any]]]:
    return [*layout.documents(ds, expansion, _grouped, lambda i, fields: {"_id": i, **{f: get(i) for f, get in
                                                                                      fields.items()}},
                              expanded, view_only=False),
            ("grants", _grant_docs(expansion))]
