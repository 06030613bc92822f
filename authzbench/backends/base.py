"""The backend interface (YCSB-sized): every system implements these few methods and nothing else.

Backends receive plain ints and return plain values. They never time themselves (the runner times
every call), never retry, and never see the oracle. Two exceptions are allowed, each bounded and named
where it happens:

- optimistic-concurrency retries inside one write: Elasticsearch's read-modify-write of a document
  re-reads and re-applies its edit when another writer changed the document in between (a 409 on
  if_seq_no; `elasticsearch.CONFLICT_RETRIES` attempts, then an error). The runner times the whole
  write, retries included: that is the cost of the write under contention.
- readiness polling in `build`: a backend may wait until what `load` wrote is visible to reads
  (ClickHouse probes the expanded table for `PROBE_WAIT_S`, SpiceDB waits until minimize_latency reads
  see the import), so measured phases never read a half-built state. `build` is timed by the caller.

`load` and `build` report raw counts and durations (`LoadStats.notes`, `BuildStats.notes`: seconds and
rows of each step, never rates); the report derives every rate (`report.data.ingest_rates`).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, ClassVar

from authzbench.dataset import Dataset
from authzbench.model import Relationship

Progress = Callable[[int], None]  # called with the number of rows just written


def no_progress(_rows: int) -> None:
    return None


@dataclass
class LoadStats:
    """What `load` did. The runner adds wall time; backends report batch-level detail."""

    rows: int  # relationships (or rows) written
    batch_rows: int  # nominal batch size
    batch_seconds: list[float] = field(default_factory=list)  # client-observed time of each batch
    documents: int | None = None  # for document stores: documents written
    notes: dict[str, Any] = field(default_factory=dict)


@dataclass
class BuildStats:
    """A post-ingest build step: MV refresh, closure build, index build."""

    what: str  # e.g. "REFRESH MATERIALIZED VIEW group_closure"
    seconds: float
    rows: int | None = None
    notes: dict[str, Any] = field(default_factory=dict)


@dataclass
class ServerInfo:
    engine: str  # e.g. "PostgreSQL"
    version: str  # as the server reports it
    label: str  # e.g. "Cassandra 5.0.9 (CQL, standing in for ScyllaDB)"
    comparable: bool = True  # False: figures must be shown apart (FerretDB, embedded chdb)
    notes: list[str] = field(default_factory=list)


class Backend(ABC):
    name: ClassVar[str]
    models: ClassVar[frozenset[str]] = frozenset({"rebac"})
    # "process": each worker opens its own connection in its own process (the default, no GIL cap);
    # "thread": the engine lives in-process (chdb) or cannot be opened twice.
    concurrency: ClassVar[str] = "process"
    # Other ingest paths measured beside the default one on every load: label -> options. Each reloads
    # the same dataset through that path (and is reported as its own row); the default path loads last,
    # so reads always run on what it loaded.
    ingest_variants: ClassVar[dict[str, dict[str, Any]]] = {}

    def __init__(self, endpoint: dict[str, Any], options: dict[str, Any] | None = None) -> None:
        # endpoint: connection settings from the provisioner (dsn, url, host, port, credentials...)
        # options: tuning knobs (batch sizes, consistency, timeouts: options["timeout_s"])
        self.endpoint = endpoint
        self.options = options or {}

    @classmethod
    def endpoint_from_url(cls, url: str) -> dict[str, Any]:
        """Endpoint for `--provision external` from AUTHZBENCH_<NAME>_URL (a DSN or URL)."""
        return {"url": url}

    # lifecycle ---------------------------------------------------------------------------------
    @abstractmethod
    def connect(self) -> None:
        """Open connections; raise UserError/BackendUnavailable with one clear line on failure."""

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release connections."""

    @abstractmethod
    def server_info(self) -> ServerInfo: ...

    # schema and data ---------------------------------------------------------------------------
    @abstractmethod
    def create_schema(self) -> None: ...

    @abstractmethod
    def load(self, ds: Dataset, progress: Progress = no_progress) -> LoadStats: ...

    def build(self) -> BuildStats | None:
        return None

    def loaded_hash(self) -> str | None:
        """Dataset content hash recorded by a previous complete load, so `prepare` can skip reloads."""
        return None

    def mark_loaded(self, dataset_hash: str) -> None:  # noqa: B027 - optional hook
        """Record that `dataset_hash` is fully loaded (and built)."""

    # operations ----------------------------------------------------------------------------------
    @abstractmethod
    def check(self, user: int, perm: str, resource: int) -> bool: ...

    @abstractmethod
    def lookup_resources(self, user: int, perm: str) -> Iterable[int]: ...

    @abstractmethod
    def write(self, rel: Relationship) -> None: ...

    @abstractmethod
    def delete(self, rel: Relationship) -> None: ...

    def baseline_roundtrip(self) -> None:  # noqa: B027 - optional hook
        """A trivial round trip (SELECT 1) on the same connection, the floor for check latency."""

    @abstractmethod
    def footprint(self) -> int:
        """Bytes on disk used by this backend's data."""

    @abstractmethod
    def drop(self) -> None: ...

    # context manager: `with backend:` connects and always closes
    def __enter__(self) -> Backend:
        self.connect()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
