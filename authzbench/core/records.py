"""The schema of results/<run-id>/records.jsonl: one frozen dataclass per record kind, written through
`encode` and read through `decode`, both checked against the dataclass.

A line is a JSON object: "type" names the kind, "v" the schema version, the rest are the dataclass's
fields. A field with a default of None is optional: left out of the line while None (older runs never wrote
them, and readers ask for them with .get). A field without a default is always written, None included.
Runs recorded before the schema had a version carry no "v": they are version 1, and every kind below
accepts what they contain (tests/unit/test_records.py decodes every committed run).

`decode` refuses an unknown kind, a missing required field and an unknown field, each naming the kind and the
field, and a version newer than SCHEMA_VERSION: a run written by a newer authzbench is not guessed at. Values
are not type-checked: a driver's number arriving as another numeric type must not cost a run its report.

Adding a field: give it a default of None (old lines still decode). Renaming or removing one, or making a
new field required: bump SCHEMA_VERSION and teach `decode` the older versions.
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass
from typing import Any, ClassVar

from authzbench.core.errors import UserError

SCHEMA_VERSION = 1


class RecordError(UserError):
    """A line of records.jsonl that does not match its kind's schema (or a newer schema)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Record:
    KIND: ClassVar[str] = ""
    ts: float | None = None  # wall time the store wrote it (RunStore.append stamps it)


KINDS: dict[str, type[Record]] = {}


def register(name: str):
    """Registers a record dataclass under its "type" name."""

    def register(cls: type[Record]) -> type[Record]:
        cls.KIND = name
        KINDS[name] = cls
        return cls

    return register


_FROZEN = dataclass(frozen=True, slots=True, kw_only=True)

# measurement: written by measure/runner.py for every phase ----------------------------------------------


@register("phase_start")
@_FROZEN
class PhaseStart(Record):
    """A phase as it was run: workloads/spec.py PhaseSpec's fields (the optional ones came later)."""
    phase: str
    backend: str
    scenario: str
    mode: str
    concurrency: int
    iterations: int
    budget_s: float | None
    repeat: int
    stages: list
    warmup: int | None = None
    timeout_s: float | None = None
    max_seconds: float | None = None
    min_ops: int | None = None
    start_rate: float | None = None
    write_share: float | None = None
    scratch_user: int | None = None
    scratch_relation: str | None = None
    n_resources: int | None = None
    interval_s: float | None = None
    max_examples: int | None = None
    write_kind: str | None = None
    write_targets: dict | None = None
    visibility_bound_s: float | None = None
    consistency: str | None = None
    input_offset: int | None = None
    attempt: int | None = None
    churn_rate: float | None = None
    churn_writers: int | None = None


@register("interval")
@_FROZEN
class Interval(Record):
    """One worker's counts of one op kind over one interval (measure/worker.py), its latencies a histogram."""
    phase: str
    backend: str
    scenario: str
    worker: int
    kind: str
    hist: str
    ops: int
    errors: dict
    timeouts: int
    mismatches: int
    examples: list
    results: int
    duplicates: int
    checked: int
    late: int
    extra: dict | None = None
    host: str | None = None  # the load host, with --workers-on
    # the open loop's service time (from the send) beside hist's latency from the intended start: their
    # difference is the time an op waited for its worker (None: a closed loop, where the two are one)
    service_hist: str | None = None
    # the interval's longest answered op (µs) and the seconds from the phase's measured origin to its start
    # (None: not recorded, before issue 70, or a kind not timed through OpCounters.add)
    longest_us: int | None = None
    longest_at_s: float | None = None


@register("phase_end")
@_FROZEN
class PhaseEnd(Record):
    phase: str
    backend: str
    scenario: str
    status: str
    reason: str
    wall_s: float
    scheduled: int | None
    dropped: int
    warmup_ops: int
    ops: int
    stopped_workers: int | None = None
    hung_workers: int | None = None
    # seconds from this phase's phase_start record to its measured window's origin (None: not recorded)
    window_start_s: float | None = None


@register("phase_skipped")
@_FROZEN
class PhaseSkipped(Record):
    phase: str
    backend: str
    scenario: str
    concurrency: int
    repeat: int
    reason: str


@register("monitor")
@_FROZEN
class Monitor(Record):
    """One sample of the server's CPU and memory (metrics.py ResourceMonitor) during a phase or a load."""
    backend: str
    phase: str
    cpu_percent: float
    rss_bytes: int
    processes: int
    pss_bytes: int | None = None
    client_cpu_percent: float | None = None
    foreign_cpu_percent: float | None = None
    steal_percent: float | None = None
    t: float | None = None


@register("disturbance")
@_FROZEN
class Disturbance(Record):
    phase: str
    backend: str
    attempt: int
    threshold: float
    disturbed: bool
    rerun: bool
    foreign_cpu: float
    foreign_cpu_max: float
    steal: float
    samples: int


@register("restored")
@_FROZEN
class Restored(Record):
    """The check after a writing phase that the dataset is as loaded (restore.py)."""
    backend: str
    phase: str
    checked: int
    mismatches: int
    examples: list
    scratch_checked: int | None = None
    scratch_left: int | None = None
    scratch_cleaned: int | None = None
    scratch_still_left: int | None = None
    error: str | None = None
    # how the heaviest user was covered: "lookup", "checks" (restore.heavy_restore) or ""
    heavy: str | None = None


@register("host_lost")
@_FROZEN
class HostLost(Record):
    phase: str
    host: str
    reason: str


@register("clock")
@_FROZEN
class Clock(Record):
    """The load hosts' clock offsets at a distributed phase's start (measure/distributed.py)."""
    phase: str
    t0_wall: float
    warn_ms: float
    hosts: list


# the run: written by orchestrate.py, loading.py, speed.py ------------------------------------------------


@register("server")
@_FROZEN
class Server(Record):
    backend: str
    mode: str
    info: dict
    notes: list
    concurrency_model: str
    endpoint: dict | None = None


@register("ingest")
@_FROZEN
class Ingest(Record):
    backend: str
    variant: str | None
    relationships: int
    acl_relationships: int
    rows: int
    documents: int | None
    batch_rows: int
    batch_seconds: list
    load_seconds: float
    build: dict | None
    build_seconds: float
    footprint_bytes: int
    notes: dict
    server: dict | None = None
    dataset_hash: str | None = None
    start_seconds: float | None = None


@register("ingest_skipped")
@_FROZEN
class IngestSkipped(Record):
    backend: str
    dataset_hash: str
    previous: dict | None = None  # the load this one reuses (loading.py _prior_load)


@register("ingest_bounded")
@_FROZEN
class IngestBounded(Record):
    """A load stopped at --max-load-minutes or the machine's memory floor, with its figures (loading.py
    LoadBound)."""
    backend: str
    variant: str | None
    dataset_hash: str
    loaded: int
    relationships: int
    seconds: float
    rels_per_s: float
    projected_seconds: float
    bound_seconds: float
    memory_left_bytes: int | None = None  # set when the machine's memory floor stopped it, not the time bound


@register("speed_index")
@_FROZEN
class SpeedIndex(Record):
    """The machine-speed index before a visit (speed.py); only `error` when it could not be measured."""
    backend: str
    visit: int
    cpu_s: float | None = None
    rtt_p50_us: float | None = None
    cpu_score: float | None = None
    rtt_score: float | None = None
    index: float | None = None
    seconds: float | None = None
    error: str | None = None


@register("step")
@_FROZEN
class Step(Record):
    backend: str | None
    step: str
    t0: float
    seconds: float


@register("eta")
@_FROZEN
class Eta(Record):
    done: int
    total: int
    elapsed_s: float
    left_s: float
    overhead_s: float | None = None
    rate: float | None = None  # older runs' estimate


@register("oracle")
@_FROZEN
class Oracle(Record):
    seconds: float


@register("distribution")
@_FROZEN
class Distribution(Record):
    rows: list
    anchors: dict


@register("backend_error")
@_FROZEN
class BackendError(Record):
    backend: str
    stage: str
    message: str
    traceback: str | None = None


@register("load_hosts")
@_FROZEN
class LoadHosts(Record):
    scheduler: str
    hosts: dict
    driver_mismatches: list


# the other commands: loadtest.py, tools/crosscheck.py ----------------------------------------------------


@register("loadtest")
@_FROZEN
class Loadtest(Record):
    backend: str
    label: str
    variant: str
    plan: dict
    dataset_hash: str
    scheduled: int
    iterations: int
    dropped: int
    errors: int
    mismatches: int
    allowed: int
    wall_s: float
    max_busy_vus: int
    error_types: dict
    duration_hist: str
    from_intended_hist: str
    # answers compared with the oracle (recorded since the shared timing, issue 46)
    checked: int | None = None
    examples: list | None = None  # the first wrong answers, with their arguments


@register("crosscheck")
@_FROZEN
class Crosscheck(Record):
    side: str
    tool: str
    load: list
    backend: str
    scenario: str
    concurrency: int
    round: int
    phase: str
    ops: int
    errors: int
    seconds: float
    throughput: float
    p50_ms: float
    p95_ms: float
    hist: str
    command: str | None = None  # the other tool's command line (theirs only)
    warmup: int | None = None  # warm-up ops before the measured window, the same number given to either side
    client_cpu_ms: float | None = None  # CPU per measured op of the side's client, its warm-up included
    server_cpu_ms: float | None = None  # ... and of the server's processes (native deployments only)


@register("crosscheck_server")
@_FROZEN
class CrosscheckServer(Record):
    backend: str
    label: str
    mode: str
    consistency: str
    tool: str
    tool_version: str
    client: str
    info: dict
    # the engine's tier settings (provision/tiers.py) as its deployment recorded them
    settings: dict | None = None


@register("crosscheck_breakdown")
@_FROZEN
class CrosscheckBreakdown(Record):
    backend: str
    scenario: str
    adapter_p50_ms: float
    driver_p50_ms: float
    calls: int
    # OpenFGA: our own gRPC call of the request ghz sends (systems/openfga/grpc.py)
    grpc_p50_ms: float | None = None
    # the bare driver call alone in a tight loop (tools/crosscheck_client.floor)
    floor_p50_ms: float | None = None
    floor_cpu_ms: float | None = None  # ... and this process's CPU per call in that loop
    runner_us: float | None = None  # the runner's own µs per op around a no-op check (tools/runner_cost)


# encoding and decoding -----------------------------------------------------------------------------------

_RESERVED = ("type", "v")


def _optional(f: dataclasses.Field) -> bool:
    return f.default is None


def as_dict(record: Record) -> dict[str, Any]:
    """The record as readers see it: "type" first, then its fields; optional fields only when set, `ts`
    last."""
    out: dict[str, Any] = {"type": record.KIND}
    for f in dataclasses.fields(record):
        value = getattr(record, f.name)
        if f.name != "ts" and not (value is None and _optional(f)):
            out[f.name] = value
    if record.ts is not None:
        out["ts"] = record.ts
    return out


def encode(record: Record) -> dict[str, Any]:
    """The line to write: as_dict plus the schema version."""
    if type(record) is not KINDS.get(record.KIND):
        raise TypeError(f"{type(record).__name__} is not a registered record kind")
    return {**as_dict(record), "v": SCHEMA_VERSION}


@functools.cache
def _fields(cls: type[Record]) -> dict[str, dataclasses.Field]:
    """A kind's fields by name, looked up once a kind, not once a line (a bench run reads ~15,000 lines)."""
    return {f.name: f for f in dataclasses.fields(cls)}


def decode(raw: dict[str, Any]) -> Record:
    """A line's record, checked against its kind's dataclass; RecordError names what does not fit."""
    version = raw.get("v", 1)  # runs recorded before the schema had a version
    if not isinstance(version, int) or isinstance(version, bool) or version > SCHEMA_VERSION:
        raise RecordError(f"records schema version {version!r} is newer than this authzbench reads "
                          f"(up to {SCHEMA_VERSION}): read this run with the authzbench that wrote it")
    name = raw.get("type")
    cls = KINDS.get(name) if isinstance(name, str) else None
    if cls is None:
        raise RecordError(f"unknown record type {name!r}")
    fields = _fields(cls)
    if unknown := sorted(set(raw) - set(fields) - set(_RESERVED)):
        raise RecordError(f"{name} record: unknown field {unknown[0]!r}")
    if missing := [n for n, f in fields.items() if n not in raw and not _optional(f)]:
        raise RecordError(f"{name} record: missing field {missing[0]!r}")
    return cls(**{k: v for k, v in raw.items() if k not in _RESERVED})


def validated(raw: dict[str, Any]) -> dict[str, Any]:
    """The line as written, less its schema version, once it decodes (what RunStore.records yields)."""
    decode(raw)
    return {k: v for k, v in raw.items() if k != "v"}
