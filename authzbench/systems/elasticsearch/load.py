"""The Elasticsearch adapter's bulk load (elasticsearch.py): the documents built as JSON text from the
expansion chunk by chunk, cut into bulk requests the run layer sends (bulk_threads in flight) into indices
with refresh disabled and no replicas, and build() restoring both. A mixin of ElasticsearchBackend: it uses
the adapter's client, index names and bulk options."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from functools import partial
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
from authzbench.core.errors import BackendUnavailable
from authzbench.schema.dataset import Dataset

# Bytes per bulk request: xl's heaviest 250 resource documents are 49.8 MB (groups that expand to ~25k
# users), and three such requests in flight passed the node's indexing-pressure limit (10% of its 1 GB
# heap, 107 MB): it answered 429. Baseline's requests are ~170 KB, under the cap.
BULK_MAX_BYTES = 8 * 2**20
BULK_429_TRIES = 6  # 0.5 + 1 + 2 + 4 + 8 s of backoff before a rejected request fails the load


class BulkLoad:
    """load() and build()."""

    def load(self, ds: Dataset, progress: Progress = no_progress) -> Load:
        expansion = yield Step("closure_seconds", lambda: layout.expanded_users(ds))
        progress(0)  # a set-up heartbeat: the load bound judges its time and the machine's memory here too
        data = [self.ix[n] for n in ("resources", "users", "groups", "orgs")]
        # Bulk-load settings: no refresh (no searchable segment per second mid-load), no replica (the
        # node would index every document twice). build() restores what was there before.
        got = self.es.indices.get_settings(
            index=data, name=["index.refresh_interval", "index.number_of_replicas"])
        self._restore = {i: {"refresh_interval": got.get(i, {})
                             .get("settings", {})
                             .get("index", {})
                             .get("refresh_interval"),
                             "number_of_replicas": got.get(i, {})
                             .get("settings", {})
                             .get("index", {})
                             .get("number_of_replicas", "0")}
                         for i in data}
        self.es.indices.put_settings(
            index=data, settings={"index": {"refresh_interval": "-1", "number_of_replicas": 0}})
        n = ds.entities
        docs_total = n["resource"] + n["user"] + n["group"] + n["organization"]
        per_doc = ds.total_relationships / max(docs_total, 1)  # the progress bar counts relationships
        expanded, self._retried = [0], []
        sources = [(self.ix[c], docs) for c, docs in _all_docs(ds, expansion, expanded)]
        batches = (Batch(k, partial(self._bulk, lines), advance=k * per_doc) if k else lines
                   for k, lines in _requests(sources, self.bulk_docs, BULK_MAX_BYTES))
        # ingest_seconds: the chunks' expansion is not ingest
        written = yield Batches("elasticsearch: bulk", batches, self.bulk_threads, name="ingest_seconds",
                                steps_apart=True)
        self._load_notes = {"expanded_entries": expanded[0], "rejected_requests_retried": len(self._retried),
                            "group_membership_pairs": expansion.membership_pairs,
                            "method": f"closure in numpy chunk by chunk of resources, "
                                      f"bulk requests: {self.bulk_threads} in flight x {self.bulk_docs} "
                                      "documents, refresh_interval -1, 0 replicas; refresh in build()"}
        return LoadStats(
            rows=written, batch_rows=self.bulk_docs, documents=written, notes=dict(self._load_notes))

    def _bulk(self, lines: list[bytes]) -> None:
        """One bulk request; one the node rejects with 429 (its indexing pressure is full) is sent again after
        a backoff, as ES asks (the batch's time includes it); a document it refuses fails the load."""
        from elasticsearch import ApiError

        for attempt in range(BULK_429_TRIES):
            try:
                resp = self.es.bulk(operations=lines)
            except ApiError as e:
                if e.meta.status != 429 or attempt == BULK_429_TRIES - 1:
                    raise
                self._retried.append(attempt)  # list.append is atomic across the load's threads
                time.sleep(0.5 * 2**attempt)
                continue
            failed = [item for item in resp["items"] if next(iter(item.values())).get("status", 500) >= 300]
            if failed:
                raise BackendUnavailable(f"bulk item failed: {json.dumps(failed[0])[:300]}")
            return

    def build(self) -> Build:
        """Restore the pre-load refresh interval and replicas, then one refresh makes the load searchable."""
        restore = getattr(self, "_restore", None) or {}
        yield Step("settings_seconds",
                   lambda: [self.es.indices.put_settings(index=index, settings={"index": s})
                            for index, s in restore.items()])
        yield Step("refresh_seconds", lambda: self.es.indices.refresh(index=list(self.ix.values())))
        return BuildStats(what="refresh after a load with refresh_interval -1 (settings restored)",
                          notes={**(getattr(self, "_load_notes", None) or {})})


def _requests(sources: list[tuple[str, Iterator[Any]]], n: int, max_bytes: int) -> Iterator[tuple[int, Any]]:
    """(documents, NDJSON lines) of bulk requests of at most n documents and max_bytes, the indices one after
    another; a Step among the documents comes out as (0, step), in its place."""
    lines: list[bytes] = []
    size = 0
    for index, docs in sources:
        for doc in docs:
            if isinstance(doc, Step):
                yield 0, doc
                continue
            i, text = doc
            head, body = b'{"index":{"_index":"%s","_id":"%d"}}' % (index.encode(), i), text.encode()
            if lines and (size + len(head) + len(body) + 2 > max_bytes or len(lines) == 2 * n):
                yield len(lines) // 2, lines
                lines, size = [], 0
            lines += [head, body]
            size += len(head) + len(body) + 2
    if lines:
        yield len(lines) // 2, lines


# documents from the dataset ------------------------------------------------------------------------
# Built as JSON text from numpy-grouped id strings (sent in the bulk body as is):
# baseline's 32,000 resource documents hold 4.3M expanded entries, and json.dumps of dicts of int lists
# plus building those lists cost ~3.6 s of the client's CPU, on the 2 cores the node indexes with.

def _joined(keys: np.ndarray, values: np.ndarray, n_keys: int, names: np.ndarray) -> Callable[[int], str]:
    """Values grouped by key, ascending, as comma-joined text: a lookup i -> "3,11,12". names[v] is str(v)."""
    bounds, vals = sorted_csr(keys, values, n_keys)
    flat = names[vals].tolist() if len(vals) else []
    return lambda i: ",".join(flat[bounds[i]:bounds[i + 1]])


def _id_names(ds: Dataset, expansion: Expansion) -> np.ndarray:
    """str(v) for every id the documents hold, made once (a chunk's lookup reuses them). The expansion's
    counts cover ids a relation uses past the generated ones."""
    top = max(*ds.entities.values(), expansion.n_users, expansion.n_resources, expansion.n_groups,
              expansion.n_orgs)
    return np.array([str(v) for v in range(top + 1)], dtype=object)


def _text(i: int, fields: dict[str, Callable[[int], str]]) -> str:
    return "{" + f'"id":{i},' + ",".join(f'"{f}":[{get(i)}]' for f, get in fields.items()) + "}"


def _all_docs(ds: Dataset, expansion: Expansion, expanded: list[int]) -> list[tuple[str, Iterator[Any]]]:
    names = _id_names(ds, expansion)
    return layout.documents(ds, expansion, lambda k, v, n: _joined(k, v, n, names),
                            lambda i, fields: (i, _text(i, fields)), expanded, view_only=True)
