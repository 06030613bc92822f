"""The Elasticsearch adapter's bulk load (elasticsearch.py): the documents built as JSON text from the
expansion chunk by chunk, streamed to parallel_bulk into indices with refresh disabled and no replicas, and
build() restoring both. A mixin of ElasticsearchBackend: it uses the adapter's client, index names and
bulk options."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from authzbench.backends import document_layout as layout
from authzbench.backends.base import BuildStats, LoadStats, Progress, no_progress
from authzbench.backends.document_layout import sorted_csr
from authzbench.backends.expansion import Expansion
from authzbench.core.errors import BackendUnavailable
from authzbench.schema.dataset import Dataset

# Bytes per bulk request: xl's heaviest 250 resource documents are 49.8 MB (groups that expand to ~25k
# users), and three such requests in flight passed the node's indexing-pressure limit (10% of its 1 GB
# heap, 107 MB): it answered 429. Baseline's requests are ~170 KB, under the cap.
BULK_MAX_BYTES = 8 * 2**20
BULK_429_TRIES = 6  # 0.5 + 1 + 2 + 4 + 8 s of backoff before a rejected request fails the load


class _TimedBulk:
    """The client as parallel_bulk sees it, timing each bulk request (the client-observed batch time) and
    retrying one the node rejects with 429 (its indexing pressure is full), with backoff, as ES asks."""

    def __init__(self, es: Any, seconds: list[float]) -> None:
        self._es, self._seconds = es, seconds
        self.retries = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._es, name)

    def bulk(self, *args: Any, **kwargs: Any) -> Any:
        from elasticsearch import ApiError

        for attempt in range(BULK_429_TRIES):
            t0 = time.perf_counter()
            try:
                return self._es.bulk(*args, **kwargs)
            except ApiError as e:
                if e.meta.status != 429 or attempt == BULK_429_TRIES - 1:
                    raise
                self.retries += 1
            finally:
                self._seconds.append(time.perf_counter() - t0)  # list.append is atomic across the pool's threads
            time.sleep(0.5 * 2**attempt)
        raise AssertionError("unreachable")


class BulkLoad:
    """load() and build()."""

    def load(self, ds: Dataset, progress: Progress = no_progress) -> LoadStats:
        from elasticsearch.helpers import parallel_bulk

        t0 = time.perf_counter()
        expansion = Expansion(ds)  # the closure is expanded chunk by chunk as documents go out
        expansion.user_groups()  # the users' closures: expansion time, not insert time
        progress(0)  # a set-up heartbeat: the load bound judges its time and the machine's memory here too
        closure_s = [time.perf_counter() - t0]
        index_s = closure_s[0]
        data = [self.ix[n] for n in ("resources", "users", "groups", "orgs")]
        # Bulk-load settings: no refresh (no searchable segment per second mid-load), no replica (the
        # node would index every document twice). build() restores what was there before.
        got = self.es.indices.get_settings(index=data, name=["index.refresh_interval", "index.number_of_replicas"])
        self._restore = {i: {"refresh_interval": got.get(i, {}).get("settings", {}).get("index", {}).get(
            "refresh_interval"), "number_of_replicas": got.get(i, {}).get("settings", {}).get("index", {}).get(
            "number_of_replicas", "0")} for i in data}
        self.es.indices.put_settings(index=data, settings={"index": {"refresh_interval": "-1", "number_of_replicas": 0}})
        n = ds.entities
        docs_total = n["resource"] + n["user"] + n["group"] + n["organization"]
        per_doc = ds.total_relationships / max(docs_total, 1)  # the progress bar counts relationships
        batch_seconds: list[float] = []
        written, reported, expanded = 0, 0.0, [0]
        t1 = time.perf_counter()
        actions = _actions([(self.ix[c], docs) for c, docs in _all_docs(ds, expansion, closure_s, expanded)])
        client = _TimedBulk(self.es, batch_seconds)
        for ok, item in parallel_bulk(client, actions, thread_count=self.bulk_threads, chunk_size=self.bulk_docs,
                                      max_chunk_bytes=BULK_MAX_BYTES, queue_size=4):
            if not ok:
                raise BackendUnavailable(f"elasticsearch: bulk item failed: {json.dumps(item)[:300]}")
            written += 1
            reported += per_doc
            if reported >= 1000:
                progress(int(reported))
                reported -= int(reported)
        progress(int(reported))
        ingest_s = time.perf_counter() - t1 - (closure_s[0] - index_s)  # the chunks' expansion is not ingest
        self._load_notes = {"closure_seconds": closure_s[0], "ingest_seconds": ingest_s,
                            "rates": {"documents_per_s": ["documents", "ingest_seconds"],
                                      "relationships_per_s": ["relationships", "ingest_seconds"],
                                      "acl_relationships_per_s": ["acl_relationships", "ingest_seconds"]},
                            "expanded_entries": expanded[0], "rejected_requests_retried": client.retries,
                            "group_membership_pairs": expansion.membership_pairs,
                            "method": f"closure in numpy chunk by chunk of resources ({closure_s[0]:.2f} s), "
                                      f"streamed to parallel_bulk: {self.bulk_threads} threads x {self.bulk_docs} "
                                      "documents, refresh_interval -1, 0 replicas; refresh in build()"}
        return LoadStats(rows=written, batch_rows=self.bulk_docs, batch_seconds=batch_seconds, documents=written,
                         notes=dict(self._load_notes))

    def build(self) -> BuildStats:
        """Restore the pre-load refresh interval and replicas, then one refresh makes the load searchable."""
        restore = getattr(self, "_restore", None) or {}
        t0 = time.perf_counter()
        for index, s in restore.items():
            self.es.indices.put_settings(index=index, settings={"index": s})
        settings_s = time.perf_counter() - t0
        t1 = time.perf_counter()
        self.es.indices.refresh(index=list(self.ix.values()))
        refresh_s = time.perf_counter() - t1
        return BuildStats(what="refresh after a load with refresh_interval -1 (settings restored)",
                          seconds=time.perf_counter() - t0,
                          notes={"refresh_seconds": refresh_s, "settings_seconds": settings_s,
                                 **(getattr(self, "_load_notes", None) or {})})


# documents from the dataset ------------------------------------------------------------------------
# Built as JSON text from numpy-grouped id strings (parallel_bulk passes a str source through as is):
# baseline's 32,000 resource documents hold 4.3M expanded entries, and json.dumps of dicts of int lists
# plus building those lists cost ~3.6 s of the client's CPU, on the 2 cores the node indexes with.

def _actions(sources: list[tuple[str, Iterator[tuple[int, str]]]]) -> Iterator[dict[str, Any]]:
    """parallel_bulk actions: `_id` is the int as a string, `_source` the document's JSON text."""
    for index, docs in sources:
        for i, doc in docs:
            yield {"_index": index, "_id": str(i), "_source": doc}


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


def _all_docs(ds: Dataset, expansion: Expansion, closure_s: list[float], expanded: list[int]
              ) -> list[tuple[str, Iterator[tuple[int, str]]]]:
    names = _id_names(ds, expansion)
    return layout.documents(ds, expansion, lambda k, v, n: _joined(k, v, n, names),
                            lambda i, fields: (i, _text(i, fields)), closure_s, expanded, view_only=True)
