"""The mongo adapter's bulk load (mongo.py): the documents built from the expansion chunk by chunk,
written by unordered insert_many, and build() making the indexes after the load (on FerretDB, GIN
expression indexes in its PostgreSQL). A mixin of MongoBackend: it uses the adapter's database, its
FerretDB flag and its PostgreSQL connection (_pg)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from authzbench.backends import document_layout as layout
from authzbench.backends.base import BuildStats, LoadStats, Progress, load_concurrently, no_progress
from authzbench.backends.document_layout import sorted_csr
from authzbench.backends.expansion import Expansion
from authzbench.schema.dataset import Dataset
from authzbench.systems.mongo.grants import _grant_docs

SCHEMA_FILE = Path(__file__).resolve().parent / "mongo.json"
COLLECTIONS = ("resources", "users", "groups", "orgs", "meta", "grants")


class BulkLoad:
    """load() and build()."""

    def load(self, ds: Dataset, progress: Progress = no_progress) -> LoadStats:
        t0 = time.perf_counter()
        expansion = Expansion(ds)  # the closure is expanded chunk by chunk as documents go out
        expansion.user_groups()  # the users' closures: expansion time, not insert time
        progress(0)  # a set-up heartbeat: the load bound judges its time and the machine's memory here too
        closure_s, expanded = [time.perf_counter() - t0], [0]
        n = ds.entities
        docs_total = n["resource"] + 3 * n["user"] + n["group"] + n["organization"]  # users + 2 grants each
        per_doc = ds.total_relationships / max(docs_total, 1)  # the bar counts relationships
        t1 = time.perf_counter()
        sent = load_concurrently("mongo: insert_many", _batches(_all_docs(ds, expansion, closure_s, expanded),
                                                                self.batch_docs),
                                 lambda cb: self.db[cb[0]].insert_many(cb[1], ordered=False), self.batch_docs,
                                 self.insert_workers, _in_relationships(progress, per_doc))
        written, batch_seconds = sent.rows, sent.batch_seconds
        insert_s = time.perf_counter() - t1  # the chunks' expansion runs beside the inserts in flight: inside it
        return LoadStats(rows=written, batch_rows=self.batch_docs, batch_seconds=batch_seconds, documents=written,
                         notes={"closure_seconds": closure_s[0], "insert_seconds": insert_s,
                                "rates": {"documents_per_s": ["documents", "insert_seconds"],
                                          "relationships_per_s": ["relationships", "insert_seconds"]},
                                "expanded_entries": expanded[0],
                                "group_membership_pairs": expansion.membership_pairs,
                                "method": f"closure in numpy chunk by chunk ({closure_s[0]:.2f} s), then unordered "
                                          f"insert_many of {self.batch_docs} documents (resources, users, per-user "
                                          f"grants), {self.insert_workers} in flight (batch times overlap); "
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


def _batches(colls: list[tuple[str, Iterator[dict[str, Any]]]], n: int) -> Iterator[tuple[int, tuple[str, list]]]:
    """(documents, (collection, batch)) for load_concurrently, the collections one after another."""
    for coll, docs in colls:
        for batch in _chunks(docs, n):
            yield len(batch), (coll, batch)


def _in_relationships(progress: Progress, per_doc: float) -> Progress:
    """The load's progress in relationships (the bar's unit) from documents written."""
    left = [0.0]

    def advance(docs: int) -> None:
        left[0] += docs * per_doc
        if int(left[0]) > 0:
            progress(int(left[0]))
            left[0] -= int(left[0])
    return advance


def _grouped(keys: np.ndarray, values: np.ndarray, n_keys: int) -> Callable[[int], list[int]]:
    """Values grouped by key as Python lists: a lookup i -> [values of i], sorted."""
    bounds, vals = sorted_csr(keys, values, n_keys)
    flat = vals.tolist()  # one conversion; slicing a list per document is cheap
    return lambda i: flat[bounds[i]:bounds[i + 1]]


def _all_docs(ds: Dataset, expansion: Expansion, closure_s: list[float], expanded: list[int]
              ) -> list[tuple[str, Iterator[dict[str, Any]]]]:
    return [*layout.documents(ds, expansion, _grouped, lambda i, fields: {"_id": i, **{f: get(i) for f, get in
                                                                                      fields.items()}},
                              closure_s, expanded, view_only=False),
            ("grants", _grant_docs(expansion, closure_s))]
