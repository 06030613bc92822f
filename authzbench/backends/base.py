"""The backend interface (YCSB-sized): every system implements these few methods and nothing else.

Backends receive plain ints and return plain values. They never time themselves (the runner times
every call), never retry, and never see the oracle. Two exceptions are allowed, each bounded and named
where it happens:

- optimistic-concurrency retries inside one write: Elasticsearch's read-modify-write of a document
  re-reads and re-applies its edit when another writer changed the document in between (a 409 on
  if_seq_no; `elasticsearch.CONFLICT_RETRIES` attempts, then an error). The runner times the whole
  write, retries included: that is the cost of the write under contention.
- readiness polling in `build`: a backend may wait until what `load` wrote is visible to reads
  (ClickHouse probes the expanded table up to `PROBE_ROUNDS` times, SpiceDB waits until minimize_latency
  reads see the import), so measured phases never read a half-built state. The wait is a Step: timed by
  the caller.

`load` and `build` yield what they do, and the run layer (`run/loading.py`) sends and times it: Batches of
Batch (rows and the request that sends them) or Stream, and named Steps; each yield is handed back its
result. They return raw counts (`LoadStats`, `BuildStats`: rows, documents, notes), never a duration or a
rate: the run layer adds every batch's and step's seconds, the report derives every rate from rows and
seconds.
"""

from __future__ import annotations

import dataclasses
import typing
from abc import ABC, abstractmethod
from collections.abc import Callable, Generator, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from functools import partial
from typing import Any, ClassVar

from authzbench.core.errors import UserError
from authzbench.schema.dataset import Dataset
from authzbench.schema.model import Relationship

Progress = Callable[[int], None]  # called with the number of rows just written


def no_progress(_rows: int) -> None:
    return None


CONSISTENCY = ("minimize_latency", "fully_consistent", "at_least_as_fresh")


@dataclass(frozen=True)
class BackendOptions:
    """Tuning knobs every backend accepts. A backend with knobs of its own subclasses this (a dataclass
    with defaults) and names it in `Backend.Options`; `parse_options` rejects any other key."""

    backend_name: str = ""  # the registry name this instance serves (set by the harness)
    model: str = "rebac"  # the authorization model of the loaded dataset
    dataset_path: str | None = None  # the dataset directory (the in-process reference loads it)
    timeout_s: float | None = None  # per-op limit the driver enforces; None: the backend's default
    # What reads must see. SpiceDB chooses per request; the other backends always read their latest
    # committed state, so every value means "fully consistent" for them (correctness tests pass
    # fully_consistent to every backend).
    consistency: str | None = None
    ingest: str | None = None  # which load path `load` takes: None = the default, else an ingest variant's
    url: str | None = None  # --provision external: the server's DSN/URL (else AUTHZBENCH_<NAME>_URL)

    def __post_init__(self) -> None:
        if self.consistency is not None and self.consistency not in CONSISTENCY:
            raise UserError(f"option consistency={self.consistency!r}; valid: {', '.join(CONSISTENCY)}")

    def get(self, key: str, default: Any = None) -> Any:
        """dict-style read, for code written against the old options dict: an undeclared key is an
        error (a typo in the code), a declared key left at None gives `default`."""
        value = getattr(self, key)
        return default if value is None else value


def option_names(options_cls: type[BackendOptions]) -> frozenset[str]:
    return frozenset(f.name for f in dataclasses.fields(options_cls))


def _coerce(key: str, value: Any, hint: Any) -> Any:
    """Values from the command line arrive as strings: turn them into the declared type."""
    kinds = [t for t in typing.get_args(hint) or (hint,) if t is not type(None)]
    if value is None or any(
        isinstance(value, t) and not (t is int and isinstance(value, bool)) for t in kinds):
        return value
    for t in kinds:
        try:
            if (t is bool
                and isinstance(value, str)
                and value.lower() in ("1", "true", "yes", "0", "false", "no")):
                return value.lower() in ("1", "true", "yes")
            if t in (int, float) and not isinstance(value, bool):
                return t(value)
        except (TypeError, ValueError):
            continue
    names = "/".join(getattr(t, "__name__", str(t)) for t in kinds)
    raise UserError(f"option {key}={value!r}: expected {names}")


def parse_options(options_cls: type[BackendOptions], given: Mapping[str, Any] | BackendOptions | None,
                  owner: str = "") -> BackendOptions:
    """The one place an options dict becomes a backend's typed options: unknown keys and values of the
    wrong type are one-line UserErrors naming the valid keys."""
    if isinstance(given, options_cls):
        return given
    given = dict(given or {}) if not isinstance(given, BackendOptions) else dataclasses.asdict(given)
    valid = option_names(options_cls)
    unknown = sorted(set(given) - valid)
    if unknown:
        raise UserError(f"{owner or options_cls.__name__}: unknown option{'s' * (len(unknown) > 1)} "
                        f"{', '.join(unknown)}; valid: {', '.join(sorted(valid))}")
    hints = typing.get_type_hints(options_cls)
    return options_cls(**{k: _coerce(k, v, hints[k]) for k, v in given.items()})


@dataclass
class LoadStats:
    """What `load` did. The backend counts rows; the run layer adds each batch's time and each step's seconds
    (to `notes`, under the step's name)."""

    rows: int  # relationships (or rows) written
    batch_rows: int  # nominal batch size
    batch_seconds: list[float] = field(default_factory=list)  # client-observed time of each batch (run layer)
    documents: int | None = None  # for document stores: documents written
    notes: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Batch:
    """One request of a load: the rows it writes and the call that sends them. The run layer sends it and
    times it (its batch time, client-observed), then moves the progress on by `advance` relationships (`rows`
    when None: a document store's bar counts relationships, not documents)."""

    rows: int
    send: Callable[[], Any]
    advance: float | None = None


@dataclass(frozen=True)
class Stream:
    """One client-streaming request (SpiceDB's import): the run layer passes `send` its messages, taken from
    `parts` ((rows, message) each), and times each message from the one before it (the stream's start): what
    the client waits per message, encoding and flow control. `send` returns when the server answers; that
    wait (its commit) is added to notes[`answer`] and ends the last message's time."""

    rows: int
    parts: Iterable[tuple[int, Any]]
    send: Callable[[Iterator[Any]], Any]
    answer: str = ""


@dataclass(frozen=True)
class Step:
    """A named piece of a load or a build that is not a batch (a closure, an index build, a wait until reads
    see the load): the run layer runs it, times it and adds its seconds to notes[name] (to each of them when
    a tuple; to nothing but the total when ""), and hands its result back to the generator that yielded it."""

    name: str | tuple[str, ...]
    run: Callable[[], Any]


@dataclass(frozen=True)
class Batches:
    """Batches (or Streams) sent `workers` at a time, a few more built ahead (`ahead`, None: as many as in
    flight) so a lazily encoded dataset never sits in memory whole. `who` names backend and request
    ("openfga: Write") in the one error line a failed batch is; `why` words its exception. Steps among the
    items (a closure chunk computed as its rows go out) run between batches, in order. With `name`, the
    stream's wall seconds go to notes[name], its steps' seconds left out when `steps_apart`. The generator
    that yields it is handed back the rows sent."""

    who: str
    items: Iterable[Batch | Stream | Step]
    workers: int = 1
    name: str = ""
    steps_apart: bool = False
    ahead: int | None = None
    why: Callable[[Exception], str] = str


# What `load` and `build` return: a generator of Steps and Batches (each handed back its result) whose return
# value is the LoadStats / BuildStats the run layer completes with what it measured; or that value at once.
Load = Generator[Step | Batches, Any, "LoadStats"]
Build = Generator[Step, Any, "BuildStats | None"]


def load_concurrently(who: str, batches: Iterable[tuple[int, Any]], send: Callable[[Any], Any], batch: int,
                      workers: int, why: Callable[[Exception], str] = str) -> Load:
    """Every (rows, request) of `batches` sent with `send`, `workers` requests in flight (the run layer sends
    and times them, progress in order). Each request's client-observed seconds are its batch time (they
    overlap)."""
    rows = yield Batches(who, (Batch(n, partial(send, body)) for n, body in batches), workers, why=why)
    request = who.split(": ", 1)[-1]
    return LoadStats(rows=rows, batch_rows=batch,
                     notes={"method": f"{request}, {batch} tuples a request, {workers} requests in flight "
                                      "(batch times overlap)", "batch": batch, "workers": workers})


@dataclass
class BuildStats:
    """A post-ingest build: MV refresh, closure build, index build. `seconds` is the total of its Steps, set
    by the run layer."""

    what: str  # e.g. "REFRESH MATERIALIZED VIEW group_closure"
    seconds: float = 0.0
    rows: int | None = None
    notes: dict[str, Any] = field(default_factory=dict)


@dataclass
class ServerInfo:
    engine: str  # e.g. "PostgreSQL"
    version: str  # as the server reports it
    label: str  # e.g. "Cassandra 5.0.9 (CQL, standing in for ScyllaDB)"
    comparable: bool = True  # False: not a networked server (embedded chdb, the oracle): ranked apart
    # The product the backend is named for, where another one stands in for it (Cassandra for ScyllaDB,
    # FerretDB for MongoDB): its figures are the stand-in's, never that product's.
    stands_in_for: str = ""
    notes: list[str] = field(default_factory=list)
    # The read consistency the measured phases use when a phase names none (engines with modes), so a
    # report can name it instead of "session".
    consistency: str = ""


class Backend(ABC):
    name: ClassVar[str]
    # The backend's typed options (a BackendOptions subclass when it has knobs of its own). The models a
    # backend implements are declared in its registry entry, readable before its driver is imported.
    Options: ClassVar[type[BackendOptions]] = BackendOptions
    # "process": each worker opens its own connection in its own process (the default, no GIL cap);
    # "thread": the engine lives in-process (chdb) or cannot be opened twice.
    concurrency: ClassVar[str] = "process"
    # Modules a worker imports to connect (drivers imported inside connect()): imported once into the
    # forkserver the workers fork from, not by each of them (see pools.preload_worker_modules).
    worker_modules: ClassVar[tuple[str, ...]] = ()
    # Other ingest paths measured beside the default one on every load: label -> options. Each reloads
    # the same dataset through that path (and is reported as its own row); the default path loads last,
    # so reads always run on what it loaded.
    ingest_variants: ClassVar[dict[str, dict[str, Any]]] = {}
    # Write amplification: a backend whose write paths add what each write/delete wrote (rows, documents,
    # permission entries) to `rows_touched` sets counts_rows; the runner reads the difference around each
    # write. A backend that does not count shows "n/a", never 0.
    counts_rows: ClassVar[bool] = False
    # Read consistency modes (option "consistency") the write scenarios measure one by one, stale allows
    # included; empty: the backend has one (the one it promises).
    consistency_modes: ClassVar[tuple[str, ...]] = ()
    rows_touched: int = 0

    def __init__(
        self, endpoint: dict[str, Any], options: Mapping[str, Any] | BackendOptions | None = None) -> None:
        # endpoint: connection settings from the provisioner (dsn, url, host, port, credentials...)
        # options: tuning knobs as a plain dict (pickled to worker processes as is), parsed here into the
        # backend's Options dataclass; an unknown key is a UserError.
        self.endpoint = endpoint
        self.options = parse_options(
            type(self).Options, options, getattr(type(self), "name", type(self).__name__))

    @classmethod
    def endpoint_from_url(cls, url: str) -> dict[str, Any]:
        """Endpoint for `--provision external` from AUTHZBENCH_<NAME>_URL (a DSN or URL)."""
        return {"url": url}

    @classmethod
    def endpoint_from_compose(cls, compose: Any) -> dict[str, Any]:
        """Endpoint for `--provision compose`, read from the interpolated compose file
        (`provision.compose.ComposeFile`: ports, environment, command flags of this backend's services)."""
        raise UserError(f"{cls.name}: no compose endpoint (define endpoint_from_compose)")

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
    def load(self, ds: Dataset, progress: Progress = no_progress) -> Load | LoadStats:
        """The bulk ingest as Steps and Batches for the run layer to send and time (`Load`); `progress` is for
        what a step reports as it goes (a heartbeat, rows streamed to a helper): batches advance it
        themselves."""

    def build(self) -> Build | BuildStats | None:
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
        """A trivial round trip (SELECT 1) on the same connection: the reference a check's p50 is divided by
        (not a floor: postgres and Cassandra checks ran faster than theirs in 20261129-201802)."""

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
